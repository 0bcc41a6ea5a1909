"""Peak memory of one call: a live-tensor tracer on CPU, the CUDA caching allocator on GPU.

The tracer is a TorchDispatchMode that sees every tensor an aten op returns. It tracks storages
(views share one), notices a storage is gone when its last tensor dies, and records the largest
total of live bytes at the moment each op's outputs exist: the quantity the engine's liveness walk
models (inputs until their last use, intermediates, outputs; scratch inside a kernel is not seen).
"""

from __future__ import annotations

import gc

import torch
from attn_cost.profilers.measure.cases import Case
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveTensorTracer(TorchDispatchMode):
    """Counts live storage bytes as ops run; `peak` is the maximum seen."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.current = 0
        self.peak = 0
        self.peak_op = ""

    def track(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        key = storage._cdata
        if key not in self.live:
            self.live[key] = (StorageWeakRef(storage), storage.nbytes())
            self.current += storage.nbytes()
            if self.current > self.peak:
                self.peak = self.current

    def _sweep(self) -> None:
        for key in [k for k, (ref, _) in self.live.items() if ref.expired()]:
            self.current -= self.live.pop(key)[1]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._sweep()
        kwargs = kwargs or {}
        existing = {t.untyped_storage()._cdata for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        out = func(*args, **kwargs)
        before = self.peak
        for t in tree_flatten(out)[0]:
            # a view or an in-place result of an argument is no allocation (e.g. W.t() of a weight)
            if isinstance(t, torch.Tensor) and t.untyped_storage()._cdata not in existing:
                self.track(t)
        if self.peak > before:
            self.peak_op = str(func)
        return out


def traced_peak(case: Case) -> tuple[int, str]:
    """Peak live bytes of one call of `case` and the aten op at which it was reached.

    Runs the case once untraced first, so that parameters exist before the measurement.
    """
    with torch.no_grad():
        case.run(case.make_inputs())
        gc.collect()
        tracer = LiveTensorTracer()
        inputs = case.make_inputs()
        for t in inputs:
            tracer.track(t)
        del t  # the loop variable would keep the last input alive
        with tracer:
            out = case.run(inputs)
        del out
    return tracer.peak, tracer.peak_op


def traced_training_peak(case: Case) -> tuple[int, str]:
    """Peak live bytes of one training step of `case`: its forward, then `backward(dO)` with dO = 1, the inputs
    made leaves that require gradients (the floating-point ones: a bool mask has none; the weights stay frozen), and
    the aten op at which it was reached.

    The tracer sees the backward pass's ops as it sees the forward's (autograd dispatches them through the mode):
    the saved tensors, the gradients and the temporaries of each backward formula. The caller holds the inputs,
    the output and dO throughout, as a training step's caller does."""
    with torch.no_grad():
        case.run(case.make_inputs())
    gc.collect()
    inputs = [t.requires_grad_(t.is_floating_point()) for t in case.make_inputs()]
    tracer = LiveTensorTracer()
    for t in inputs:
        tracer.track(t)
    del t
    with tracer:
        out = case.run(list(inputs))
        out.backward(torch.ones_like(out))
    del out
    return tracer.peak, tracer.peak_op


def cuda_peak(case: Case) -> dict[str, int]:
    """Peak bytes of one call on CUDA, inputs included, above what was held before the inputs existed
    (parameters, constants and library workspaces made by a warm-up call excluded).

    `requested`: the exact sizes the call asked for (`memory_stats()["requested_bytes.all.peak"]` minus the
    current requested bytes before it: no allocator rounding, no history) — what the engine models.
    `allocated`: the caching allocator's blocks (`max_memory_allocated`), with its rounding (512 B, and a
    large block not split when less than 1 MiB would remain), measured after emptying the cache so that what
    ran before does not change it. Where a PyTorch has no requested-bytes statistics, both are `allocated`."""
    with torch.no_grad():
        case.run(case.make_inputs())
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base_requested = torch.cuda.memory_stats().get("requested_bytes.all.current")
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        inputs = case.make_inputs()
        out = case.run(inputs)
        torch.cuda.synchronize()
        peak_requested = torch.cuda.memory_stats().get("requested_bytes.all.peak")
        allocated = torch.cuda.max_memory_allocated() - base
        del out, inputs
    requested = allocated
    if base_requested is not None and peak_requested is not None:  # exact
        requested = peak_requested - base_requested
    return {"requested": requested, "allocated": allocated}
