"""PyTorch's own FLOP count of every reference implementation, against the engine's `matmul` convention.

torch.utils.flop_counter.FlopCounterMode counts matrix products (mm, bmm, addmm, baddbmm, SDPA).
PyTorch registers its SDPA formula for the CUDA kernels only; the CPU flash kernel is mapped here to
the same PyTorch functions (sdpa_flop_count and its backward), so both devices count alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product

import torch
from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.variants import all_variants, derive
from attn_cost.profilers.measure.cases import Case, build_case
from attn_cost.profilers.measure.references import REFERENCES, stand_in
from attn_cost.profilers.measure.sizes import Sizes
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

aten = torch.ops.aten


def _cpu_sdpa(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_sdpa_backward(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


CPU_SDPA = {
    aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward,
}

GRID = [Sizes(N=n, d=dd, h=hh, b=bb, L=5) for n, dd, hh, bb in product((7, 16), (4, 8), (1, 3), (1, 2))]
"""Sizes every variant is counted at: odd and even N, several d, heads and batches."""


def counted(case: Case, training: bool = False) -> int:
    """FLOPs FlopCounterMode reports for one call (forward, or forward and backward)."""
    inputs = case.make_inputs()
    if training:
        case.run([t.clone() for t in inputs])  # make the parameters, then make them trainable
        made = case.params.cache.values() if case.params is not None else ()
        for t in [*inputs, *made]:
            t.requires_grad_(t.is_floating_point())  # a bool mask has no gradient
    with FlopCounterMode(display=False, custom_mapping=CPU_SDPA) as mode:
        if training:
            case.run(list(inputs)).sum().backward()
        else:
            with torch.no_grad():
                case.run(inputs)
    return mode.get_total_flops()


def derived(variant: str, scope: str, sizes: Sizes, mode: str = "inference") -> int:
    """The engine's `matmul` count at the same sizes."""
    return int(derive(variant, scope, mode).flops(MATMUL).xreplace(sizes.symbols()))


@dataclass
class FlopCheck:
    variant: str
    scope: str
    sizes: Sizes
    derived: int
    counted: int
    formulas: str = ""
    """The variant whose formulas were counted: the variant, or the one whose code ran in its place
    (`references.stand_in`: linear-chunked's PyTorch form for linear-chunked-fused without its kernels)."""
    form: str = ""
    """What was counted where it is not the variant's reference: "pytorch chunked form" (`Reference.chunked`)."""

    @property
    def ok(self) -> bool:
        return self.derived == self.counted


def check_flops(
    variants: list[str] | None = None, scopes: tuple[str, ...] = ("core", "layer", "decode"), grid: list[Sizes] = GRID
) -> list[FlopCheck]:
    """Every (variant, scope, size) of the grid, counted both ways."""

    names = variants or [v.name for v in all_variants() if v.name in REFERENCES]  # traced or plugin: no reference
    out = []
    for name in names:
        available = next(v for v in all_variants() if v.name == name).scopes
        for scope in (s for s in scopes if s in available):
            for sizes in grid:
                case = build_case(name, scope, sizes)
                model = stand_in(name, sizes, case.device, scope)
                out.append(FlopCheck(name, scope, sizes, derived(model, scope, sizes), counted(case), model))
        if "core" in scopes and REFERENCES[name].chunked is not None:
            out += [chunked_check(name, replace(sizes, C=CHUNKED_GRID_CHUNK)) for sizes in grid]
    return out


CHUNKED_GRID_CHUNK = 4
"""The chunk a chunked form is counted at over the grid: several chunks, and a ragged last one at N = 7."""


def chunked_check(name: str, sizes: Sizes) -> FlopCheck:
    """FlopCounterMode on the variant's chunked form in PyTorch (`Reference.chunked`) against its own op list."""
    form = REFERENCES[name].chunked
    assert form is not None
    inputs = build_case(name, "core", sizes).make_inputs()
    with FlopCounterMode(display=False) as mode, torch.no_grad():
        form(inputs, sizes.chunk)
    return FlopCheck(name, "core", sizes, derived(name, "core", sizes), mode.get_total_flops(), name,
                     "pytorch chunked form")  # fmt: skip
