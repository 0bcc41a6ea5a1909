"""A campaign: everything a user runs on their GPU, in one command (`run`: profile, calibrate, validate, export,
report), and the same on a Slurm cluster through submitit (`slurm`).

Layer: the top of `profilers`; imports every other package of it.
"""
