"""A campaign: everything a user runs on their GPU, in one command, and the same on a Slurm cluster through submitit
(`slurm`). `run` holds its steps as data (`STEPS`) and the one runner that runs them; `steps` what each step does
to a unit; `plan` what a campaign measures; `state` the run's state and checkpoints; `planning` the units' costs.

Layer: the top of `profilers`; imports every other package of it.
"""
