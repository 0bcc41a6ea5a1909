"""The fused attention family (SDPA), timed by batch/m/k/n (queries, head dim, keys); the op model's product form,
the datasheet model's query blocks in waves at its backend's ceiling, its backward priced as its own kernels."""

from __future__ import annotations

from collections.abc import Callable

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.profilers.devicemodel.kernels.registry import (
    GEMM,
    KERNELS,
    Kernel,
    Pricer,
    Runner,
    Shape,
    declare,
    register_family,
    shape,
)
from attn_cost.profilers.devicemodel.tunables import Tunables

ATTENTION = "attention"


def _features(op) -> dict:
    a = op.attrs
    return {"batch": a["batch"], "m": a["nq"], "k": a["dqk"], "n": a["nk"]}


def _price(model: Pricer, kernel: str, f: dict, dtype: str, backward: bool) -> list:
    return [model.attention(f, dtype, KERNELS[kernel].causal, backward)]


def _runner(kernel: Kernel, at: Shape, rand: Callable, dt, device: str) -> Runner:
    import torch

    n, d = at.get("m"), at.get("k")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return Runner(lambda box: sdpa(box[0], box[1], box[2], is_causal=kernel.causal),
                  lambda: [rand(1, n, d) for _ in range(3)])


def _grid(kernels: list[Kernel], llc: int, elem: int, tune: Tunables) -> list[Shape]:
    return [shape(k.name, batch=1, m=n, k=d, n=n) for n in tune.sdpa_lengths for d in tune.sdpa_d for k in kernels]


def _attention(g: Graph, at: Shape) -> Tensor:
    n, d = at.get("m"), at.get("k")
    q, k, v = (g.input(x, 1, n, d) for x in "QKV")
    return g.fused_attention("Y", q, k, v, causal=KERNELS[at.kernel].causal)


register_family(name=ATTENTION, dims=("batch", "m", "k", "n"), form=GEMM, flop_bound=True, runner=_runner,
                price=_price, grid=_grid, own_backward=True,
                stand_ins=("sdpa",))(_features)  # fmt: skip

declare(
    Kernel("sdpa", "fused_attention", ATTENTION, _attention),
    Kernel("sdpa-causal", "fused_attention", ATTENTION, _attention, causal=True),
)
