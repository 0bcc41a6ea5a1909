"""Device models: a variant's time (and memory) on a device, behind one interface (`device.DeviceModel`).

Vocabulary, one word per concept:
- a *device* is what `--device NAME` names, answered by a *device model* (`device.DeviceModel`);
- a device model is of one *kind* (`device.KINDS`), one folder each, with the same inner shape: `model.py` (the
  `DeviceModel`), `fit.py` (offline: imported by the workflow, benchmarks and tests, never by a prediction) and
  `data.py` (its files):
  - `measured/`: a *device profile* fitted to whole-variant measurements (`ProfileDevice`), and the *measured
    device* it makes with the device's op calibration (`MeasuredDevice`);
  - `calibrated/`: an *op calibration* (`OpModel`, its per-kernel *forms* in `forms.py`) fitted to op
    microbenchmarks timed on a device one owns (`fit.py`: the grid `calibrate` times), as `CalibratedDevice`;
  - `datasheet/`: a GPU's *datasheet* row priced by `GpuModel`, its efficiencies fitted offline on published
    tables (`fit.py`);
- `kinds.py` is the registry of kinds (`name → kind → load`): `kinds.resolve` is the one rule from a name to its
  device model, which every command and the workflow use;
- a *kernel* is what a device runs for an engine op, a member of a *kernel family* (`kernels/`: one registry, one
  module per family, saying how its ops are featured, timed, fitted and priced); `opcalls.py` turns a variant's op
  list into *kernel calls*;
- the *machine* is where a measurement runs ("cuda", "cpu", and its fingerprint: `profilers.measure.machine`).

Layer: imports `costmodel`, `store` and `measure`. Pricing (opcalls, kernels, every kind's model and data) is numpy
only at import, scipy inside the functions that fit or find a root: `crossover` loads no scipy, `predict` and
`crossover --device` no torch.
"""
