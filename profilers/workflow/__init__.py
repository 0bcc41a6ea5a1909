"""The workflows: what a command or a campaign does with the packages below, each step written once.

Opening a measurer (the device, its threads, its result store, the SDPA backend), profiling pairs, calibrating the
op model and validating a device (fit and check, or the refit from records alone) are functions here that return
results and say what they do through a callback; `cli/` parses the command line and renders what they return, and
`campaign` runs the same functions in its order and within its time budget.

Layer: above `store`, `measure`, `devicemodel` and `report`, below `campaign` and `cli`; nothing else in `profilers`
imports it. torch is imported inside the functions that run kernels, so that `cli/` can import this package at the
top of its modules and the analytic commands stay light.
"""
