"""The product family: matrix products, timed by batch/m/k/n; the op model's product form (FLOPs at a
shape-dependent rate), the datasheet model's waves of tiles at the tensor peak. One kernel per operand layout
(N plain, T transposed: a view of the other layout)."""

from __future__ import annotations

import math
from collections.abc import Callable

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.profilers.devicemodel.kernels.registry import (
    GEMM,
    Kernel,
    Pricer,
    Runner,
    Shape,
    declare,
    register_family,
    shape,
)
from attn_cost.profilers.devicemodel.tunables import Tunables

PRODUCT = "product"
MATMUL_LAYOUTS = ("NN", "NT", "TN")
"""Operand layouts of the calibrated products: N plain, T transposed (a view of the other layout)."""


def window_rows(at: Shape) -> tuple[int, int]:
    """Rows and columns of one window of a product's B operand as stored ((n, k) transposed, else (k, n)): with
    the `window` layout the batch's B matrices are overlapping windows of one (batch + rows − 1) × cols buffer,
    window i starting at row i, as a banded kernel reads a padded K or V (sliding-window's `as_strided`)."""
    k, n = at.get("k"), at.get("n")
    return (n, k) if at.kernel.endswith("T") else (k, n)


def _features(op) -> dict:
    return {"batch": op.attrs["batch"], "m": op.attrs["m"], "k": op.attrs["k"], "n": op.attrs["n"]}


def _price(model: Pricer, kernel: str, f: dict, dtype: str, backward: bool) -> list:
    return [model.product(f, dtype)]


def _runner(kernel: Kernel, at: Shape, rand: Callable, dt, device: str) -> Runner:
    """A product on its layout's operands; accumulated into C in place (baddbmm) or over windows where its
    layout says so."""
    import torch

    bt, m, k, n = (at.get(x) for x in ("batch", "m", "k", "n"))
    lead = (bt,) if bt > 1 else ()
    accumulate = at.get("accumulate", 0)
    ta, tb = kernel.layout[0] == "T", kernel.layout[1] == "T"
    if at.get("window", 0):
        return _window_product(at, rand, ta, tb)

    def make_product() -> list:
        a = rand(*lead, k, m) if ta else rand(*lead, m, k)
        b = rand(*lead, n, k) if tb else rand(*lead, k, n)
        return [a, b, rand(*lead, m, n)] if accumulate else [a, b]

    def product(box: list):
        a, b = box[0], box[1]
        a, b = (a.transpose(-1, -2) if ta else a), (b.transpose(-1, -2) if tb else b)
        if accumulate:  # C += A·B in place, through 3-d views, as the TaylorShift reference writes it
            c = box[2].view(-1, m, n)
            return torch.baddbmm(c, a.reshape(-1, m, k), b.reshape(-1, k, n), out=c)
        return a @ b

    return Runner(product, make_product)


def _window_product(at: Shape, rand: Callable, ta: bool, tb: bool) -> Runner:
    """A product whose B matrices are overlapping windows of one buffer (`window_rows`), read through their
    strides as the banded reference does (`references.sliding_window._band_bmm`: one bmm over the windows)."""
    import torch

    bt, m, k, n = (at.get(x) for x in ("batch", "m", "k", "n"))
    r, c = window_rows(at)

    def make() -> list:
        a = rand(bt, k, m) if ta else rand(bt, m, k)
        return [a, rand(bt + r - 1, c), a.new_empty(bt, m, n)]

    def run(box: list):
        a, buf, out = box
        windows = buf.reshape(bt + r - 1, c).as_strided((bt, r, c), (c, c, 1))
        a3 = a.reshape(bt, *a.shape[-2:])
        return torch.bmm(a3.transpose(-1, -2) if ta else a3, windows.transpose(-1, -2) if tb else windows, out=out)

    return Runner(run, make)


def square_sides(llc: int, elem: int) -> list[int]:
    """N of N×N products whose N×N operand runs from an eighth of the cache to twice it, every 2^⅛."""
    lo, hi = math.sqrt(llc / 8 / elem), math.sqrt(2 * llc / elem)
    return sorted({int(lo * 2 ** (j / 8)) for j in range(int(8 * math.log2(hi / lo)) + 1)})


def _grid(kernels: list[Kernel], llc: int, elem: int, tune: Tunables) -> list[Shape]:
    """Each layout with one dimension small (a head dim, 1) and the other two anywhere; QKᵀ and PV where the N×N
    matrix leaves the cache; batched products of one row."""
    shapes: list[Shape] = []
    small, large, flop_cap = tune.product_small, tune.product_large, tune.product_max_flops
    for kernel in kernels:
        seen: set[tuple[int, int, int]] = set()
        for pos in range(3):
            for s in small:
                for x in large:
                    for y in large:
                        m, k, n = mkn = ((s, x, y), (x, s, y), (x, y, s))[pos]
                        if mkn not in seen and 2 * m * k * n <= flop_cap and m * k + k * n + m * n <= 2**26:
                            seen.add(mkn)
                            shapes.append(shape(kernel.name, batch=1, m=m, k=k, n=n))
    for side in square_sides(llc, elem) if tune.square_d else []:
        for d in tune.square_d:
            shapes.append(shape("matmul-NT", batch=1, m=side, k=d, n=side))
            shapes.append(shape("matmul-NN", batch=1, m=side, k=side, n=d))
    for batch in tune.batched_products:
        for k in tune.batched_k:
            shapes.append(shape("matmul-NN", batch=batch, m=1, k=k, n=k))
    return shapes


def _held_out(kernels: list[Kernel], top: int, tune: Tunables, rng) -> list[Shape]:
    """d = 24 and 48 products off the grid: QKᵀ, PV and the linear kernels' state products."""
    out: list[Shape] = []
    for d in (24, 48):
        for n in tune.held_out_lengths:
            out += [
                shape("matmul-NT", batch=1, m=n, k=d, n=n),
                shape("matmul-NN", batch=1, m=n, k=n, n=d),
                shape("matmul-TN", batch=1, m=d * d, k=n, n=d + 1),
                shape("matmul-NN", batch=1, m=n, k=d * d, n=d + 1),
            ]
    return out


def _product(g: Graph, at: Shape) -> Tensor:
    bt, m, k, n = (at.get(x) for x in ("batch", "m", "k", "n"))
    lead = (bt,) if bt > 1 else ()
    layout = at.kernel.removeprefix("matmul-")
    a = g.input("A", *lead, k, m).T if layout[0] == "T" else g.input("A", *lead, m, k)
    if at.get("window", 0):
        r, c = window_rows(at)
        raw = Tensor("Bw", (*lead, r, c), g.input("B", bt + r - 1, c).storage)
        b = raw.T if layout[1] == "T" else raw
    else:
        b = g.input("B", *lead, n, k).T if layout[1] == "T" else g.input("B", *lead, k, n)
    into = g.input("C", *lead, m, n) if at.get("accumulate", 0) else None
    out = g.matmul("C", a, b, into=into)
    if at.get("window", 0):
        g.ops[-1].attrs["read_once"] = (b,)
    return out


register_family(name=PRODUCT, dims=("batch", "m", "k", "n"), form=GEMM, flop_bound=True, runner=_runner,
                price=_price, grid=_grid, held_out=_held_out, grads=2,
                stand_ins=tuple(f"matmul-{lay}" for lay in MATMUL_LAYOUTS))(_features)  # fmt: skip

declare(*(Kernel(f"matmul-{lay}", "matmul", PRODUCT, _product, kinds=("linear",) if lay == "NT" else ())
          for lay in MATMUL_LAYOUTS))  # fmt: skip
