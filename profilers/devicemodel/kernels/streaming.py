"""The streaming families, priced by their bytes: element-wise kernels (maps and binary ops, timed at one row width:
their time does not depend on it) and row-wise kernels (reductions, scans and maps along rows or columns, timed at
several widths). The op model fits them in its streaming form, the datasheet model prices their bytes at the GPU's
bandwidth share of their layout, times the passes their PyTorch code makes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import sympy as sp
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.profilers.devicemodel.kernels.registry import (
    RANK,
    Kernel,
    Pricer,
    Runner,
    Shape,
    declare,
    declared,
    register_family,
    shape,
    torch_fn,
)
from attn_cost.profilers.devicemodel.tunables import Tunables

ELEMENTWISE, ROWWISE = "elementwise", "rowwise"
BINARY = ("add", "sub", "mul", "div", "maximum")
"""Element-wise kinds with two operands, whose layout (`opcalls.operand_layout`) the grid's same-shape operands
do not show."""
MAX_SQUARED_WIDTH = 64
"""Widest row the grid times for a kernel whose output is w² wide."""
ONE_WIDTH = 64
"""The row width an element-wise kernel is timed at."""


def numels(llc: int, tune: Tunables, elem: int) -> list[int]:
    """Element counts from launch-bound to ~8× the last-level cache: every 4×, then every 2^¼ where an
    out-of-place op's working set (2 × numel × elem bytes) runs from an eighth of the cache to twice it."""
    top = max(llc * tune.cache_multiple // (2 * elem), 1 << 18)
    if tune.quick:
        return [16**k for k in range(1, 8) if 16**k <= top]
    base = [4**k for k in range(3, 20) if 4**k <= top]
    lo, hi = llc / 8 / (2 * elem), 2 * llc / (2 * elem)
    dense = [int(lo * 2 ** (j / 4)) for j in range(int(4 * math.log2(hi / lo)) + 1)]
    return sorted(set(base + dense))


def operand_shape(at: Shape) -> tuple[int, int]:
    """Rows and columns of a binary op's second operand: the first's, or a column, a row or a single value
    where it is broadcast (`opcalls.operand_layout`)."""
    rows, cols, bcast = at.get("rows"), at.get("cols"), at.get("bcast", 0)
    return (1 if bcast in (2, 3) else rows), (1 if bcast in (1, 3) else cols)


def _rows_cols(op) -> dict:
    x = op.inputs[0] if op.inputs else op.output
    return {"rows": x.rows, "cols": x.shape[-1] if x.shape else sp.Integer(1)}


def _price(model: Pricer, kernel: str, f: dict, dtype: str, backward: bool) -> list:
    code = declared(kernel)
    return [model.streaming(f, kernel) * (code.passes if code else 1.0)]


def _takes_two(kernel: Kernel) -> bool:
    return kernel.base in BINARY or kernel.name in ("outer", "store", "compare")


def _runner(kernel: Kernel, at: Shape, rand: Callable, dt, device: str) -> Runner:
    """The kernel's PyTorch code on rows × cols operands (a binary op's second broadcast or sliced as its layout
    says, sliced on every call as variants do)."""
    import torch

    rows, cols = at.get("rows"), at.get("cols")
    lead = (1,) * (RANK - 2)
    if kernel.torch is None:
        raise RuntimeError(f"kernel {kernel.name} has no PyTorch code")
    code = kernel.torch
    if _takes_two(kernel):
        zr, zc = operand_shape(at) if kernel.base in BINARY else (rows, cols)
        xv, zv = at.get("xview", 0), at.get("zview", 0)

        def pair() -> list:
            z = torch.ones(*lead, zr, zc + zv, dtype=dt, device=device) if kernel.ones else rand(zr, zc + zv)
            return [rand(rows, cols + xv, positive=kernel.positive), z]

        def run_pair(box: list):
            x, z = box
            return code(x[..., xv:] if xv else x, z[..., zv:] if zv else z)

        return Runner(run_pair, pair)
    return Runner(lambda box: code(box[0]), lambda: [rand(rows, cols, positive=kernel.positive)])


def _elementwise_grid(kernels: list[Kernel], llc: int, elem: int, tune: Tunables) -> list[Shape]:
    sizes = numels(llc, tune, elem)
    return [shape(k.name, rows=max(1, n // ONE_WIDTH), cols=ONE_WIDTH) for k in kernels for n in sizes]


def _rowwise_grid(kernels: list[Kernel], llc: int, elem: int, tune: Tunables) -> list[Shape]:
    shapes = []
    for k in kernels:
        for w in tune.row_widths:
            if k.squared and w > MAX_SQUARED_WIDTH:  # an outer product's output is w² wide
                continue
            sizes = numels(llc, tune, elem * (w if k.squared else 1))
            shapes += [shape(k.name, rows=max(1, n // w), cols=w) for n in sizes if n >= w]
    return shapes


def _held_out(widths: tuple[int, ...] | None) -> Callable:
    """Shapes off the grid, log-uniform in its range, at one width (None) or widths drawn from `widths`."""

    def held_out(kernels: list[Kernel], top: int, tune: Tunables, rng) -> list[Shape]:
        out = []
        for k in kernels:
            for _ in range(tune.held_out_per_kernel):
                w = 48 if widths is None else rng.choice(widths)
                w = min(w, 48) if k.squared else w
                numel = int(2 ** rng.uniform(8, math.log2(top)))
                out.append(shape(k.name, rows=max(1, numel // (w * (w if k.squared else 1))), cols=w))
        return out

    return held_out


register_family(name=ELEMENTWISE, dims=("rows", "cols"), runner=_runner, price=_price, grid=_elementwise_grid,
                held_out=_held_out(None))(_rows_cols)  # fmt: skip
register_family(name=ROWWISE, dims=("rows", "cols"), runner=_runner, price=_price, grid=_rowwise_grid,
                held_out=_held_out((12, 24, 48, 200, 600)))(_rows_cols)  # fmt: skip


# -- the kernels ------------------------------------------------------------------------------------------------


def _x(g: Graph, at: Shape) -> Tensor:
    return g.input("X", at.get("rows"), at.get("cols"))


def _map(kind: str, axis: int = -1) -> Callable[[Graph, Shape], Tensor]:
    def build(g: Graph, at: Shape) -> Tensor:
        attrs: dict[str, Any] = {"axis": axis} if axis != -1 else {}
        return g.map(kind, "Y", _x(g, at), inplace=at.kernel.endswith("!"), **attrs)

    return build


def _reduce(kind: str, axis: int) -> Callable[[Graph, Shape], Tensor]:
    return lambda g, at: g.reduce(kind, "Y", _x(g, at), axis=axis)


def _binary(kind: str) -> Callable[[Graph, Shape], Tensor]:
    def build(g: Graph, at: Shape) -> Tensor:
        rows, cols = at.get("rows"), at.get("cols")
        zr, zc = operand_shape(at)
        x = g.input("X", rows, cols + 1).cols(1) if at.get("xview", 0) else g.input("X", rows, cols)
        z = g.input("Z", zr, zc + 1).cols(1) if at.get("zview", 0) else g.input("Z", zr, zc)
        return g.binary(kind, "Y", x, z, inplace=at.kernel.endswith("!"))

    return build


def _store(g: Graph, at: Shape) -> Tensor:
    target = g.input("T", at.get("rows"), at.get("cols"))
    g.store(target, _x(g, at))
    return target


def _compare(g: Graph, at: Shape) -> Tensor:
    """An element-wise comparison making a bool mask, as traced code builds causal and window masks."""
    x = _x(g, at)
    return g.traced("compare", "Y", x.shape, (x, g.input("Z", at.get("rows"), at.get("cols"))), dtype="bool")


def _outer(g: Graph, at: Shape) -> Tensor:
    return g.outer("Y", _x(g, at), g.input("Z", at.get("rows"), at.get("cols")))


def _fill_runner(kernel: Kernel, at: Shape, rand: Callable, dt, device: str) -> Runner:
    """A fill makes its output from nothing: no inputs."""
    import torch

    lead = (1,) * (RANK - 2)
    rows, cols = at.get("rows"), at.get("cols")
    return Runner(lambda box: torch.zeros(*lead, rows, cols, dtype=dt, device=device), lambda: [])


def _mask_runner(kernel: Kernel, at: Shape, rand: Callable, dt, device: str) -> Runner:
    """A causal mask written in place: the mask is made once, as a variant holds it."""
    import torch

    rows, cols = at.get("rows"), at.get("cols")
    mask = torch.ones(rows, cols, dtype=torch.bool, device=device).triu_(1)
    return Runner(lambda box: box[0].masked_fill_(mask, float("-inf")), lambda: [rand(rows, cols)])


_REF = "attn_cost.profilers.measure.references"


def _normalize_rows(x):
    return x.div_(x.sum(-1, keepdim=True).mul_(1.0))


def _poly2(x):
    return (x * x).mul_(0.5).add_(x).add_(1)


def _augment(x):
    """[c·1, x/N] as the efficient TaylorShift reference builds it."""
    out = x.new_empty(*x.shape[:-1], x.shape[-1] + 1)
    out[..., :1].fill_(0.5)
    torch_fn("torch.mul")(x, 0.5, out=out[..., 1:])
    return out


def _layernorm(x):
    return torch_fn("torch.nn.functional.layer_norm")(x, (x.shape[-1],))


declare(
    # element-wise: one row width
    Kernel("copy", "copy", ELEMENTWISE, lambda g, at: g.copy("Y", _x(g, at)), lambda x: x.clone()),
    Kernel("store", "copy", ELEMENTWISE, _store, lambda x, z: z.copy_(x)),
    Kernel("fill", "fill", ELEMENTWISE, lambda g, at: g.zeros("Y", at.get("rows"), at.get("cols")),
           runner=_fill_runner),
    Kernel("scale!", "scale", ELEMENTWISE, _map("scale"), lambda x: x.mul_(1.0)),
    Kernel("poly2", "poly2", ELEMENTWISE, _map("poly2"), _poly2, launches=4, passes=9 / 2),
    Kernel("elu1", "elu1", ELEMENTWISE, _map("elu1"), torch_fn(f"{_REF}.elu1"), launches=2, passes=4 / 2),
    Kernel("exp!", "exp", ELEMENTWISE, _map("exp"), lambda x: x.exp_()),
    Kernel("gelu", "gelu", ELEMENTWISE, _map("gelu"), torch_fn("torch.nn.functional.gelu")),
    Kernel("add", "add", ELEMENTWISE, _binary("add"), lambda x, z: x + z),
    Kernel("add!", "add", ELEMENTWISE, _binary("add"), lambda x, z: x.add_(z)),
    Kernel("sub", "sub", ELEMENTWISE, _binary("sub"), lambda x, z: x - z),
    Kernel("div", "div", ELEMENTWISE, _binary("div"), lambda x, z: x / z, positive=True, ones=True),
    Kernel("div!", "div", ELEMENTWISE, _binary("div"), lambda x, z: x.div_(z), positive=True, ones=True),
    Kernel("mul!", "mul", ELEMENTWISE, _binary("mul"), lambda x, z: x.mul_(z), positive=True, ones=True),
    Kernel("maximum", "maximum", ELEMENTWISE, _binary("maximum"), torch_fn("torch.maximum")),
    # row-wise: several row widths
    Kernel("softmax", "softmax", ROWWISE, _map("softmax"), lambda x: x.softmax(-1)),
    Kernel("softmax-axis2", "softmax", ROWWISE, _map("softmax", axis=-2), lambda x: x.softmax(-2)),
    Kernel("l2normalize", "l2normalize", ROWWISE, _map("l2normalize"),
           lambda x: torch_fn(f"{_REF}.l2normalize")(x, 1.0),
           launches=4, passes=3 / 2),  # the norms (a read), their reciprocal and gain (a row), x · norm (2)
    Kernel("normalize_rows!", "normalize_rows", ROWWISE, _map("normalize_rows"), _normalize_rows, positive=True,
           launches=3, passes=3 / 2),  # the row sums (a read), their gain (a row), the division in place (2)
    Kernel("layernorm", "layernorm", ROWWISE, _map("layernorm"), _layernorm),
    Kernel("sum-axis2", "sum", ROWWISE, _reduce("sum", -2), lambda x: x.sum(-2, keepdim=True)),
    Kernel("max-axis2", "max", ROWWISE, _reduce("max", -2), lambda x: x.amax(-2, keepdim=True)),
    Kernel("cumsum!", "cumsum", ROWWISE, _map("cumsum"), lambda x: x.cumsum_(-2), positive=True),
    Kernel("outer", "outer", ROWWISE, _outer, torch_fn(f"{_REF}.outer"), squared=True),
    Kernel("augment", "augment", ROWWISE, lambda g, at: g.augment("Y", _x(g, at)), _augment),
    Kernel("mask!", "mask", ROWWISE, _map("mask"), runner=_mask_runner),
    Kernel("sum", "sum", ROWWISE, _reduce("sum", -1), lambda x: x.sum(-1, keepdim=True)),
    Kernel("max", "max", ROWWISE, _reduce("max", -1), lambda x: x.amax(-1, keepdim=True)),
    Kernel("norm", "norm", ROWWISE, _reduce("norm", -1), lambda x: x.norm(dim=-1, keepdim=True)),
    Kernel("pointwise", "pointwise", ELEMENTWISE, _map("pointwise"), lambda x: x.sigmoid()),
    Kernel("compare", "compare", ELEMENTWISE, _compare, lambda x, z: x > z),
    # twins the variants run that the grid does not time (priced by the twin's grid model, timed at exact shapes)
    Kernel("sub!", "sub", ELEMENTWISE, _binary("sub"), lambda x, z: x.sub_(z), grid=False),
    Kernel("mul", "mul", ELEMENTWISE, _binary("mul"), lambda x, z: x * z, positive=True, ones=True, grid=False),
    Kernel("cumsum", "cumsum", ROWWISE, _map("cumsum"), lambda x: x.cumsum(-2), positive=True, grid=False),
)  # fmt: skip
