"""Measurements equal the model: peak memory byte for byte, FLOPs exactly as PyTorch counts them."""

from __future__ import annotations

import pytest
from attn_cost.costmodel.variants import all_variants, derive
from attn_cost.profilers.measure.cases import build_case
from attn_cost.profilers.measure.flops import GRID, counted, derived
from attn_cost.profilers.measure.memory import traced_peak, traced_training_peak
from attn_cost.profilers.measure.references import stand_in
from attn_cost.profilers.measure.sizes import Sizes

CASES = [(v.name, scope) for v in all_variants() for scope in v.scopes]
TRACE_SIZES = [Sizes(N=13, d=4, h=2, b=2, L=3, D=2), Sizes(N=40, d=8, L=5, D=2), Sizes(N=64, d=16, h=1, b=1, L=16, D=3)]


@pytest.mark.parametrize(("variant", "scope"), CASES)
def test_traced_peak_equals_the_liveness_walk(variant: str, scope: str) -> None:
    for sizes in TRACE_SIZES:  # linear-chunked (C = 64): N = 13 and 40 padded to one chunk, N = 64 whole
        peak, op = traced_peak(build_case(variant, scope, sizes))
        # what runs on this CPU: linear-chunked-fused's kernels cannot, linear-chunked's PyTorch form runs for them
        modelled, step = derive(stand_in(variant, sizes, "cpu", scope), scope).peak("fp32").at(sizes.symbols())
        assert peak == modelled, f"{sizes}: traced {peak} at {op}, modelled {modelled} at step {step.op.label}"


def test_traced_peak_follows_the_dtype() -> None:
    sizes = TRACE_SIZES[1]
    for variant in ("softmax", "taylorshift-direct", "linear"):
        peak, _ = traced_peak(build_case(variant, "core", sizes, "bf16"))
        assert peak == derive(variant).peak("bf16").at(sizes.symbols())[0]


@pytest.mark.parametrize(("variant", "scope"), [(v, s) for v, s in CASES if s in ("core", "layer", "decode")])
def test_flop_counter_mode_agrees_with_the_matmul_convention(variant: str, scope: str) -> None:
    for sizes in GRID:
        expected = derived(stand_in(variant, sizes, "cpu", scope), scope, sizes)
        assert counted(build_case(variant, scope, sizes)) == expected, sizes


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


TRAINING_SIZES = [Sizes(N=40, d=8, h=2, b=2), Sizes(N=24, d=16, h=3, b=1)]
TRAINING_CASES = [("softmax", "core"), ("softmax-causal", "core"), ("linear", "core"), ("linformer", "core"),
                  ("latte", "core"), ("softmax", "layer"), ("linear", "layer"), ("efficient-attention", "layer"),
                  ("softmax-fused", "layer")]  # fmt: skip


@pytest.mark.parametrize(("variant", "scope"), TRAINING_CASES)
def test_training_peak_equals_the_traced_forward_and_backward(variant: str, scope: str) -> None:
    """The engine's training peak (forward and backward walks) against the live bytes PyTorch holds through the
    forward and `backward()`. Fused attention's backward scratch is inside the kernel, where the tracer does not
    look: FlashAttention's D = rowsum(dO∘O) and fp32 dQ accumulator (flash-attention's mha_bwd, `softmax_d` and
    `dq_tmp`/`dq_accum`), b·h·N·4 + b·h·N·d·4 bytes, written here from the sizes, are added to what is traced."""
    for s in TRAINING_SIZES:
        peak, op = traced_training_peak(build_case(variant, scope, s))
        if variant.startswith("softmax-fused"):
            peak += s.b * s.h * s.N * 4 + s.b * s.h * s.N * s.d * 4
        modelled, step = derive(variant, scope, "training").peak("fp32").at(s.symbols())
        assert peak == modelled, f"{s}: traced {peak} at {op}, modelled {modelled} at {step.op.label}"


def test_training_peak_counts_the_backward_pass() -> None:
    """softmax's backward holds P, dP and dS (three N×N) at once; its forward at most S and P: from N large
    enough the traced training peak is above what the forward alone holds, and the engine says so."""
    s = Sizes(N=64, d=4, h=2, b=1)
    traced, op = traced_training_peak(build_case("softmax", "core", s))
    assert op == "aten._softmax_backward_data.default"
    assert traced >= 3 * s.b * s.h * s.N * s.N * 4
    _, step = derive("softmax", "core", "training").peak("fp32").at(s.symbols())
    assert step.backward and step.op.kind == "softmax"
