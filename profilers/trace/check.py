"""Checking a traced variant against the real code: FlopCounterMode's FLOPs and the live-tensor tracer's peak at
concrete sizes (`check-flops --trace`)."""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING, Any

import torch
from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import BY_NAME
from attn_cost.costmodel.variants import derive
from attn_cost.profilers.measure.flops import CPU_SDPA
from attn_cost.profilers.measure.memory import LiveTensorTracer
from attn_cost.profilers.trace.load import (
    CORE_DIMS,
    LAYER_DIMS,
    first_line,
    parse_example,
    sizes_for,
    sizes_text,
    user_code,
    user_line,
)
from torch.utils.flop_counter import FlopCounterMode

if TYPE_CHECKING:
    from attn_cost.profilers.trace.register import Traced


CHECK_FLOPS = 10**12


"""The most FLOPs (matmul convention) one run of `--check` may cost: the real code runs three times, on a CPU."""


def checked(t: Traced, text: str) -> dict[str, Any]:
    """--check N=..,b=..: the formulas and the real code (FlopCounterMode, the live-tensor tracer) at those sizes,
    refused before anything runs where the formulas say the code would need more than half this machine's memory
    or more than CHECK_FLOPS."""

    sizes = sizes_for(t.kind, parse_example(text, "--check"), t.example, t.width, "--check", t.recording.fixed)
    dv = derive(t.name, t.kind)
    at = {BY_NAME[k]: v for k, v in sizes.items()}
    flops, peak = int(dv.flops(MATMUL).xreplace(at)), int(dv.peak("fp32").expr.xreplace(at))
    memory = _memory_bytes() // 2
    if peak > memory or flops > CHECK_FLOPS:
        given = sizes_text(sizes, t.kind)
        raise UserError(
            f"--check {given}: by its formulas the code would hold {peak:,} bytes and run {flops:,} "
            f"FLOPs, and --check runs it for real (at most half this machine's memory, {memory:,} bytes, and "
            f"{CHECK_FLOPS:,} FLOPs): choose smaller sizes"
        )
    real = measure(t, sizes)
    return {
        "sizes": {k: v for k, v in sizes.items() if t.kind == "core" or k in LAYER_DIMS},
        "flops_formula": flops,
        "flops_flopcountermode": real["flops"],
        "peak_bytes_formula": peak,
        "peak_bytes_live_tracer": real["peak_bytes"],
    }


def _memory_bytes() -> int:
    """This machine's physical memory (4 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def measure(t: Traced, sizes: dict[str, int]) -> dict[str, int]:
    """Run the real module at concrete sizes: FlopCounterMode's FLOPs (the CPU SDPA kernel mapped to
    PyTorch's own sdpa_flop_count) and the live-tensor tracer's peak, the caller holding the inputs."""


    gen = torch.Generator().manual_seed(1)
    if t.kind == "core":
        shape = tuple(sizes.get(k, t.example[k]) for k in CORE_DIMS)
        inputs = [torch.randn(*shape, generator=gen) for _ in range(3)]
    else:
        assert t.width is not None, "a layer is traced at its embedding width"
        inputs = [torch.randn(sizes["b"], sizes["N"], t.width, generator=gen)]
    try:
        with user_code(f"{t.path}:{t.name}"), torch.no_grad():
            t.module(*[x.clone() for x in inputs])
            gc.collect()
            tracer = LiveTensorTracer()
            for x in inputs:
                tracer.track(x)
            with tracer:
                out = t.module(*inputs)
            del out
            with FlopCounterMode(display=False, custom_mapping=CPU_SDPA) as mode:
                t.module(*inputs)
    except UserError:
        raise
    except Exception as e:
        shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
        holds = f" (its formulas hold for: {'; '.join(t.conditions)})" if t.conditions else ""
        raise UserError(f"{user_line(e) or f'{t.path}:{t.name}: '}raised an error when run at the --check sizes "
                        f"{shown}{holds}: {type(e).__name__}: {first_line(e)}") from None
    return {"flops": int(mode.get_total_flops()), "peak_bytes": int(tracer.peak)}
