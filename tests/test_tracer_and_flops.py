"""Measurements equal the model: peak memory byte for byte, FLOPs exactly as PyTorch counts them."""

from __future__ import annotations

import pytest
from attn_cost.costmodel.variants import all_variants, derive
from attn_cost.profilers.measure.cases import build_case
from attn_cost.profilers.measure.flops import GRID, counted, derived
from attn_cost.profilers.measure.memory import traced_peak
from attn_cost.profilers.measure.sizes import Sizes

CASES = [(v.name, scope) for v in all_variants() for scope in v.scopes]
TRACE_SIZES = [Sizes(N=13, d=4, h=2, b=2, L=3, D=2), Sizes(N=40, d=8, L=5, D=2), Sizes(N=64, d=16, h=1, b=1, L=16, D=3)]


@pytest.mark.parametrize(("variant", "scope"), CASES)
def test_traced_peak_equals_the_liveness_walk(variant: str, scope: str) -> None:
    for sizes in TRACE_SIZES:  # linear-chunked (C = 64): N = 13 and 40 padded to one chunk, N = 64 whole
        peak, op = traced_peak(build_case(variant, scope, sizes))
        modelled, step = derive(variant, scope).peak("fp32").at(sizes.symbols())
        assert peak == modelled, f"{sizes}: traced {peak} at {op}, modelled {modelled} at step {step.op.label}"


def test_traced_peak_follows_the_dtype() -> None:
    sizes = TRACE_SIZES[1]
    for variant in ("softmax", "taylorshift-direct", "linear"):
        peak, _ = traced_peak(build_case(variant, "core", sizes, "bf16"))
        assert peak == derive(variant).peak("bf16").at(sizes.symbols())[0]


@pytest.mark.parametrize(("variant", "scope"), [(v, s) for v, s in CASES if s in ("core", "layer", "decode")])
def test_flop_counter_mode_agrees_with_the_matmul_convention(variant: str, scope: str) -> None:
    for sizes in GRID:
        assert counted(build_case(variant, scope, sizes)) == derived(variant, scope, sizes), sizes


AUTOGRAD_SAFE = [
    "softmax",
    "softmax-fused",
    "softmax-fused-causal",
    "linear",
    "latte",
    "optimized-attention",
    "efficient-attention",
    "super-attention",
]


@pytest.mark.parametrize("variant", AUTOGRAD_SAFE)
def test_training_flops_agree_with_autograd(variant: str) -> None:
    """Forward + backward under FlopCounterMode: products get two backward products, SDPA five."""
    scope = "core" if "core" in next(v for v in all_variants() if v.name == variant).scopes else "layer"
    for sizes in (Sizes(N=7, d=4, h=3, b=2, L=5), Sizes(N=16, d=8)):
        for sc in {scope, "layer"}:
            case = build_case(variant, sc, sizes)
            assert counted(case, training=True) == derived(variant, sc, sizes, "training")
