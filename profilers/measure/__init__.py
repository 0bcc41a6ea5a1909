"""Running a variant on a device: runnable cases and PyTorch reference implementations, timing (CPU and CUDA),
peak memory, the fused-attention backend, PyTorch's FLOP count, the device fingerprint, and the search for a
measured transition point (`profile`: `Measurer`, `profile_pair`).

Layer: imports `costmodel` and `store`. torch is imported by the modules that run kernels; `device` and `sizes`
stay torch-free at import, since the analytic path reads device names and sizes.
"""
