"""One device model: a variant's time on a device as the sum of its kernel calls (`opcalls`: the engine's op list
as kernel calls, each declared in `kernels`).

The same kernel calls are priced by two parameterisations:
- the op model (`opmodel`, `opfit`, `oppredict`), fitted to op microbenchmarks timed on a device one owns
  (`calibrate`, `tunables`, `trend`);
- the datasheet model (`gpumodel`), from the figures of a GPU one does not own (`datasheet`, data/gpus.json,
  data/gpumodel.json).
Per-device corrections fitted to whole-variant measurements (`corrections`, fitted and checked by
`workflow.validating`) sit beside them.

Layer: imports `costmodel`, `store` and `measure`. Pricing (opcalls, opfit, opmodel, oppredict, datasheet,
gpumodel, corrections) is numpy only at import, scipy inside the functions that fit or find a root: `crossover`
loads no scipy, `predict` and `crossover --device` no torch.
"""
