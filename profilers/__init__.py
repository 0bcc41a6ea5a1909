"""Measure attention on a device, model a device, trace a user's code: the layer above `costmodel`.

Seven packages, each one job (each package's `__init__` says what it may import):

- `store`: the result store and attn-cost's own files (writing, schemas). torch-free.
- `measure`: running a variant on a device: cases, reference implementations, timing, memory, the fingerprint.
- `devicemodel`: one device model, two parameterisations of the same kernel calls: the op model calibrated on
  a device one owns, and the datasheet model of a GPU one does not own; per-device fitted corrections.
- `trace`: a variant from the user's own PyTorch code, mapped onto the engine's ops.
- `report`: the report's data and its HTML page.
- `workflow`: each step a command or a campaign runs, written once: opening a measurer, profiling, calibrating,
  validating; results returned, progress through a callback.
- `campaign`: everything a user runs on their GPU, in one command (and on a Slurm cluster): the workflows in order.

Imports sit at the top of each module; the one exception is the torch, plotly and scipy boundary: a torch-free
module (store, measure.machine, sizes and sdpa, devicemodel's pricing, report.gather) imports torch, plotly or a
module that imports them only inside the function that needs it, and devicemodel imports scipy only where it fits
or finds a root, so `crossover` loads none of them and `predict` no torch or plotly (docs/design.md,
"Architecture"; tests/test_layers.py checks it).

`data/` holds the shipped data (device profiles, op calibrations, measurements, GPU datasheets): `DATA`.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"
"""The shipped data (package data: pyproject.toml's package-data lists it)."""
