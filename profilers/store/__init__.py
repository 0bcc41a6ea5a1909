"""Measurements on disk and attn-cost's own files: the result store (`store`), how files are read and written
(`files`: `claim`, `write_atomic`) and the one schema mechanism for the JSON files attn-cost reads (`schema`).

Layer: the bottom of `profilers`; imports `costmodel` and the device slug (`measure.machine`, torch-free) only.
No torch.
"""
