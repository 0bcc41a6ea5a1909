"""The kernels the op model calibrates and prices: one declaration each.

A `Kernel` says which engine op it is (kind, axis, in place, product layout), its family (how the
calibration grid sizes it), how to build its engine op at a shape (so the op model sees exactly the
features a variant's op has), how torch runs it and what operands it needs. The calibration grid,
the PyTorch code timed, the fit's model family, `kernel_of` (engine op -> kernel) and the chain's op
kinds are all read from `KERNELS`; adding a kernel is one declaration. At import every op kind the
engine can emit (`conventions.KINDS`) is checked to have a kernel, as `conventions.py` checks its rules.

No torch at import: the op model prices variants on the analytic path (`crossover --device`). The
runners import torch when the calibration calls them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from attn_cost.costmodel.derive import Derived
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.opkinds import KINDS

ELEMENTWISE, ROWWISE, PRODUCT, ATTENTION, CHUNKED = "elementwise", "rowwise", "product", "attention", "chunk"
FAMILIES = (ELEMENTWISE, ROWWISE, PRODUCT, ATTENTION, CHUNKED)
"""Kernel families, one vocabulary for every device model (`family_of`): how the calibration sizes a kernel and
how each model prices it.
- elementwise: maps and binary ops, timed at one row width (their time does not depend on it);
- rowwise: reductions, scans and maps along rows or columns, timed at several widths;
  both streaming kernels: the op model prices them by their bytes, the datasheet model at the GPU's bandwidth;
- product: matrix products, timed by batch/m/k/n; the op model's product form, the datasheet model's waves of
  tiles at the tensor peak;
- attention: fused attention (SDPA), timed by batch/m/k/n; the op model's product form, the datasheet model's
  FlashAttention-2 query blocks in waves;
- chunk: the fused chunk kernels of linear attention, timed at their exact shapes only; priced by their bytes
  (the op model's streaming form, the datasheet model's bandwidth) until a model of their tiles.
A family is declared here with its kernels; the op list reads its features in `opcalls.op_features`, the datasheet
model prices it in `gpumodel.GpuModel.kernel_seconds` (by its bytes unless told otherwise)."""
PRODUCT_FORM = (PRODUCT, ATTENTION)
"""The families the op model fits in its product form (FLOPs at a shape-dependent rate, `opfit.Gemm`); the others
by their bytes per row width (`opfit.Streaming`)."""
MATMUL_LAYOUTS = ("NN", "NT", "TN")
"""Operand layouts of the calibrated products: N plain, T transposed (a view of the other layout)."""
BINARY = ("add", "sub", "mul", "div", "maximum")
"""Element-wise kinds with two operands, whose layout (`opmodel.operand_layout`) the grid's same-shape operands
do not show."""
LAYOUT = ("bcast", "xview", "zview", "accumulate", "window")
"""Features of an op's operand layout, present only where it differs from the grid's plain operands."""
LOOP_STEP, CALL, SEQUENCE = "loop-step", "call", "op-sequence"
"""What `calibrate` times beside the kernels: costs of running ops at all, not ops. One iteration of a loop
(slicing the token, writing its row); calling a variant at all (Python frames, taking its inputs, the timer);
chains of different ops, timed whole against the same ops alone. The op model keeps them as named fields
(`opfit.Overheads`), not as kernels."""
OVERHEADS = (LOOP_STEP, CALL, SEQUENCE)
CHUNK = "linear-chunk"
"""The fused chunk kernels of causal linear attention (one engine op, `linear_chunk`: flash-linear-attention's
chunk_fwd_h and chunk_fwd_o). Timed only at the variants' shapes (`calibrate --d`): the kernels where
flash-linear-attention runs (CUDA), the PyTorch chunk form in their place elsewhere
(`references.linear.chunk_kernel`); a calibration without them prices the op as a copy of its bytes, with a warning."""
MAX_SQUARED_WIDTH = 64
"""Widest row the grid times for a kernel whose output is w² wide."""
RANK = 4
"""Tensors are timed with the rank of the variants' cores, (b, h, N, ·) with b = h = 1: PyTorch's dispatch of a
4-d product or map costs more than a 2-d one, and the variants pay the 4-d price."""


@dataclass(frozen=True)
class Shape:
    """One calibration point: a kernel and its integer shape (rows/cols or batch/m/k/n, and any layout)."""

    kernel: str
    dims: tuple[tuple[str, int], ...]

    def get(self, key: str, default: int | None = None) -> int:
        """A dimension of the shape; `default` where it has none (an operand layout, a chain's kinds)."""
        dims = dict(self.dims)
        return dims[key] if default is None else dims.get(key, default)


def shape(kernel: str, **dims: int) -> Shape:
    """A Shape with its dims in a canonical order."""
    return Shape(kernel, tuple(sorted(dims.items())))


def operand_shape(at: Shape) -> tuple[int, int]:
    """Rows and columns of a binary op's second operand: the first's, or a column, a row or a single value
    where it is broadcast (`opmodel.operand_layout`)."""
    rows, cols, bcast = at.get("rows"), at.get("cols"), at.get("bcast", 0)
    return (1 if bcast in (2, 3) else rows), (1 if bcast in (1, 3) else cols)


@dataclass(frozen=True)
class Kernel:
    """One calibrated kernel: the engine op it is, how the grid sizes it, how it is built and run."""

    name: str
    kind: str
    """The engine op kind (`conventions.KINDS`) it runs; `kinds` adds others it runs too (a projection)."""
    family: str
    build: Callable[[Graph, Shape], Tensor]
    """Writes the kernel's engine op at a shape onto a graph and returns its output."""
    torch: Callable | None = None
    """The PyTorch code on the operands, as the reference implementations run it: f(x) or f(x, z)."""
    kinds: tuple[str, ...] = ()
    positive: bool = False
    """Operands drawn positive (rand + 0.5): a division, a cumulative sum or a row sum must stay away from 0."""
    ones: bool = False
    """The second operand is ones: repeated in-place products must not drift into denormals."""
    squared: bool = False
    """The output is w² wide (an outer product): the grid times rows of at most MAX_SQUARED_WIDTH."""
    causal: bool = False
    grid: bool = True
    """Timed on the grid; False: timed only at the variants' exact shapes, its grid model its twin's (`twins`)."""
    launches: int = 1
    """Kernels its PyTorch code launches (an element-wise chain such as poly2's four), as `torch` reads."""
    passes: float = 1.0
    """The bytes its PyTorch code moves as a multiple of the engine's traffic of the op (one read and one write):
    a chain's every kernel reads and writes the whole tensor (poly2: x·x, ·0.5, +x, +1: 9 passes for 2). The
    datasheet model prices a streaming kernel's bytes and launches by them; the op model times the code itself."""

    @property
    def inplace(self) -> bool:
        return self.name.endswith("!")

    @property
    def base(self) -> str:
        return self.name.rstrip("!")

    @property
    def layout(self) -> str:
        """A product's layout (NN, NT, TN); empty for other kernels."""
        return self.name.removeprefix("matmul-") if self.family == PRODUCT else ""


def _x(g: Graph, at: Shape) -> Tensor:
    return g.input("X", at.get("rows"), at.get("cols"))


def _map(kind: str, axis: int = -1) -> Callable[[Graph, Shape], Tensor]:
    def build(g: Graph, at: Shape) -> Tensor:
        inplace = at.kernel.endswith("!")
        return g.map(kind, "Y", _x(g, at), inplace=inplace, **({"axis": axis} if axis != -1 else {}))

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


def window_rows(at: Shape) -> tuple[int, int]:
    """Rows and columns of one window of a product's B operand as stored ((n, k) transposed, else (k, n)): with
    the `window` layout the batch's B matrices are overlapping windows of one (batch + rows − 1) × cols buffer,
    window i starting at row i, as a banded kernel reads a padded K or V (sliding-window's `as_strided`)."""
    k, n = at.get("k"), at.get("n")
    return (n, k) if at.kernel.endswith("T") else (k, n)


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


def _attention(g: Graph, at: Shape) -> Tensor:
    n, d = at.get("m"), at.get("k")
    q, k, v = (g.input(x, 1, n, d) for x in "QKV")
    return g.fused_attention("Y", q, k, v, causal=at.kernel == "sdpa-causal")


def _chunk(g: Graph, at: Shape) -> Tensor:
    """The fused chunk kernels of linear attention on (batch, N = m, d = k) inputs in chunks of C = n tokens."""
    q, k, v = (g.input(x, at.get("batch"), at.get("m"), at.get("k")) for x in "QKV")
    return g.linear_chunk("Y", q, k, v, chunk=at.get("n"))


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


def _torch(name: str) -> Callable:
    """A torch function by dotted name, imported when first called (no torch at import of this module)."""

    def call(*args, **kwargs):

        module, _, attr = name.rpartition(".")
        return getattr(importlib.import_module(module), attr)(*args, **kwargs)

    return call


_REF = "attn_cost.profilers.measure.references"


def _normalize_rows(x):
    return x.div_(x.sum(-1, keepdim=True).mul_(1.0))


def _poly2(x):
    return (x * x).mul_(0.5).add_(x).add_(1)


def _augment(x):
    """[c·1, x/N] as the efficient TaylorShift reference builds it."""
    out = x.new_empty(*x.shape[:-1], x.shape[-1] + 1)
    out[..., :1].fill_(0.5)
    _torch("torch.mul")(x, 0.5, out=out[..., 1:])
    return out


def _layernorm(x):
    return _torch("torch.nn.functional.layer_norm")(x, (x.shape[-1],))


DECLARED = (
    # element-wise: one row width
    Kernel("copy", "copy", ELEMENTWISE, lambda g, at: g.copy("Y", _x(g, at)), lambda x: x.clone()),
    Kernel("store", "copy", ELEMENTWISE, _store, lambda x, z: z.copy_(x)),
    Kernel("fill", "fill", ELEMENTWISE, lambda g, at: g.zeros("Y", at.get("rows"), at.get("cols"))),
    Kernel("scale!", "scale", ELEMENTWISE, _map("scale"), lambda x: x.mul_(1.0)),
    Kernel("poly2", "poly2", ELEMENTWISE, _map("poly2"), _poly2, launches=4, passes=9 / 2),
    Kernel("elu1", "elu1", ELEMENTWISE, _map("elu1"), _torch(f"{_REF}.elu1"), launches=2, passes=4 / 2),
    Kernel("exp!", "exp", ELEMENTWISE, _map("exp"), lambda x: x.exp_()),
    Kernel("gelu", "gelu", ELEMENTWISE, _map("gelu"), _torch("torch.nn.functional.gelu")),
    Kernel("add", "add", ELEMENTWISE, _binary("add"), lambda x, z: x + z),
    Kernel("add!", "add", ELEMENTWISE, _binary("add"), lambda x, z: x.add_(z)),
    Kernel("sub", "sub", ELEMENTWISE, _binary("sub"), lambda x, z: x - z),
    Kernel("div", "div", ELEMENTWISE, _binary("div"), lambda x, z: x / z, positive=True, ones=True),
    Kernel("div!", "div", ELEMENTWISE, _binary("div"), lambda x, z: x.div_(z), positive=True, ones=True),
    Kernel("mul!", "mul", ELEMENTWISE, _binary("mul"), lambda x, z: x.mul_(z), positive=True, ones=True),
    Kernel("maximum", "maximum", ELEMENTWISE, _binary("maximum"), _torch("torch.maximum")),
    # row-wise: several row widths
    Kernel("softmax", "softmax", ROWWISE, _map("softmax"), lambda x: x.softmax(-1)),
    Kernel("softmax-axis2", "softmax", ROWWISE, _map("softmax", axis=-2), lambda x: x.softmax(-2)),
    Kernel("l2normalize", "l2normalize", ROWWISE, _map("l2normalize"), lambda x: _torch(f"{_REF}.l2normalize")(x, 1.0),
           launches=4, passes=3 / 2),  # the norms (a read), their reciprocal and gain (a row), x · norm (2)
    Kernel("normalize_rows!", "normalize_rows", ROWWISE, _map("normalize_rows"), _normalize_rows, positive=True,
           launches=3, passes=3 / 2),  # the row sums (a read), their gain (a row), the division in place (2)
    Kernel("layernorm", "layernorm", ROWWISE, _map("layernorm"), _layernorm),
    Kernel("sum-axis2", "sum", ROWWISE, _reduce("sum", -2), lambda x: x.sum(-2, keepdim=True)),
    Kernel("max-axis2", "max", ROWWISE, _reduce("max", -2), lambda x: x.amax(-2, keepdim=True)),
    Kernel("cumsum!", "cumsum", ROWWISE, _map("cumsum"), lambda x: x.cumsum_(-2), positive=True),
    Kernel("outer", "outer", ROWWISE, _outer, _torch(f"{_REF}.outer"), squared=True),
    Kernel("augment", "augment", ROWWISE, lambda g, at: g.augment("Y", _x(g, at)), _augment),
    Kernel("mask!", "mask", ROWWISE, _map("mask")),
    Kernel("sum", "sum", ROWWISE, _reduce("sum", -1), lambda x: x.sum(-1, keepdim=True)),
    Kernel("max", "max", ROWWISE, _reduce("max", -1), lambda x: x.amax(-1, keepdim=True)),
    Kernel("norm", "norm", ROWWISE, _reduce("norm", -1), lambda x: x.norm(dim=-1, keepdim=True)),
    Kernel("pointwise", "pointwise", ELEMENTWISE, _map("pointwise"), lambda x: x.sigmoid()),
    Kernel("compare", "compare", ELEMENTWISE, _compare, lambda x, z: x > z),
    # twins the variants run that the grid does not time (priced by the twin's grid model, timed at exact shapes)
    Kernel("sub!", "sub", ELEMENTWISE, _binary("sub"), lambda x, z: x.sub_(z), grid=False),
    Kernel("mul", "mul", ELEMENTWISE, _binary("mul"), lambda x, z: x * z, positive=True, ones=True, grid=False),
    Kernel("cumsum", "cumsum", ROWWISE, _map("cumsum"), lambda x: x.cumsum(-2), positive=True, grid=False),
    # products and attention
    *(Kernel(f"matmul-{lay}", "matmul", PRODUCT, _product, kinds=("linear",) if lay == "NT" else ())
      for lay in MATMUL_LAYOUTS),
    Kernel("sdpa", "fused_attention", ATTENTION, _attention),
    Kernel("sdpa-causal", "fused_attention", ATTENTION, _attention, causal=True),
    Kernel(CHUNK, "linear_chunk", CHUNKED, _chunk, causal=True, grid=False),
)  # fmt: skip

KERNELS: dict[str, Kernel] = {k.name: k for k in DECLARED}
"""Every kernel by name, in declaration order (the grid's order)."""


def family(name: str) -> list[str]:
    """The kernels of one family that the grid times, in declaration order."""
    return [k.name for k in DECLARED if k.family == name and k.grid]


def declared(name: str) -> Kernel | None:
    """The declaration that prices a kernel `kernel_of` names: its own or its twin's (`twins`); None for one none
    declares."""
    found = twins(name)
    return KERNELS[found[0]] if found else None


def family_of(name: str) -> str:
    """The family of a kernel `kernel_of` names: its declaration's or its twin's (`twins`); a product of a layout
    none declares (TT) is a product, any other undeclared kernel streams its bytes (as the op model prices it)."""
    declared = twins(name)
    if declared:
        return KERNELS[declared[0]].family
    return PRODUCT if name.startswith("matmul-") else ELEMENTWISE


def runnable(name: str) -> bool:
    """Whether the calibration has PyTorch code for an op: a declared kernel."""
    return name in KERNELS


def twins(name: str) -> list[str]:
    """The kernels that may price an op named `name`: itself, then its in-place or out-of-place twin (the same
    kind and axis). Never a kernel of another kind: an op none of them prices is not priced by accident."""
    base = name.rstrip("!")
    return [k for k in dict.fromkeys((name, base, base + "!")) if k in KERNELS]


NOT_PRICED = ("chunk_matmul", "tri_solve")
"""Op kinds of the gated and delta-rule chunk kernels (retention, gla, deltanet, gated-deltanet, mamba2) that no
device model prices yet: `kernel_of` refuses them, and a `linear_chunk` with a gate, the delta rule or states or
scores from other ops, in one line, rather than price them as another kernel."""


def _check_coverage() -> None:
    """Every op kind the engine can emit has a kernel (as `conventions.py` checks its rules), or is refused by
    `kernel_of` (`NOT_PRICED`)."""

    covered = {k.kind for k in DECLARED} | {kind for k in DECLARED for kind in k.kinds}
    missing = sorted(set(KINDS) - covered - set(NOT_PRICED))
    if missing:
        raise AssertionError(f"op kinds without a kernel in profilers/devicemodel/kernels.py: {', '.join(missing)}")


_check_coverage()


def kernel_of(op) -> str:
    """The kernel that runs an engine op: its kind, product layout or reduction axis, '!' when in place. An op no
    device model prices yet (`NOT_PRICED`) is refused in one line."""
    plain_chunk = op.kind != "linear_chunk" or (op.attrs.get("gate", "none") == "none" and not op.attrs.get("delta")
                                                 and op.attrs.get("makes_states", True)
                                                 and not op.attrs.get("scores_in"))  # fmt: skip
    if op.kind in NOT_PRICED or not plain_chunk:
        raise UserError(f"{op.label}: the gated and delta-rule chunk kernels are not priced on a device yet (their "
                        "costs are: leave --device out)")  # fmt: skip
    if op.kind in ("matmul", "linear"):
        if op.kind == "linear":
            return "matmul-NT"
        a, b = op.inputs[0], op.inputs[1]
        layout = ("T" if a.transposed else "N") + ("T" if b.transposed else "N")
        return f"matmul-{layout}"  # TT has no kernel: refused by calibrate, priced with a named warning
    if op.kind == "fused_attention":
        return "sdpa-causal" if op.attrs.get("causal") else "sdpa"
    if op.kind == "linear_chunk":
        return CHUNK
    if op.kind == "copy":
        return "store" if op.attrs.get("overwrite") else "copy"
    axis = op.attrs.get("axis")
    rank = len(op.inputs[0].shape) if op.inputs else 0
    suffix = "-axis2" if axis is not None and axis % rank == rank - 2 else ""
    return f"{op.kind}{suffix}{'!' if op.inplace else ''}"


@dataclass
class Runner:
    """PyTorch code of one kernel at one shape: `run(inputs)` and `make()` of fresh inputs. `restore`, for a
    kernel that writes its input in place: what `run` does first to put back that input's pristine values (a
    copy), timed alone so that its cost is taken off (`calibrate.Calibrator`)."""

    run: Callable[[list], object]
    make: Callable[[], list]
    extra: dict = field(default_factory=dict)
    restore: Callable[[list], object] | None = None


def fresh_inputs(runner: Runner) -> Runner:
    """The runner of an in-place kernel with its input restored before every call: the inputs get a pristine
    copy of the first (last in the box), copied back into it before each call. Without it a kernel timed 200
    times in a row on one tensor is timed on what it made of it: `exp_` on +inf after five calls, `cumsum_` on
    overflow, neither the values a variant gives it."""

    def make() -> list:
        box = runner.make()
        return [*box, box[0].clone()]

    def restore(box: list) -> object:
        return box[0].copy_(box[-1])

    def run(box: list) -> object:
        restore(box)
        return runner.run(box[:-1])

    return Runner(run, make, runner.extra, restore)


def build_runner(at: Shape, dtype: str, device: str, parts: Callable[[Shape], list[Shape]] | None = None) -> Runner:
    """(run, make) of the kernel at a shape, as the reference implementations run it; `parts` gives the ops an
    op-sequence chains (`calibrate.sequence_parts`)."""
    import torch
    from attn_cost.profilers.measure.cases import DTYPES

    dt = DTYPES[dtype]
    gen = torch.Generator(device="cpu").manual_seed(0)

    def rand(*s: int, positive: bool = False) -> torch.Tensor:
        """A tensor of shape (1, 1, *s) unless s has its own batch: the rank the variants' cores run at."""
        s = (1,) * (RANK - len(s)) + s
        x = torch.rand(*s, generator=gen) + 0.5 if positive else torch.randn(*s, generator=gen)
        return x.to(device=device, dtype=dt)

    if at.kernel in OVERHEADS:
        return _overhead_runner(at, rand, dtype, device, parts)
    runner = _kernel_runner(at, rand, dt, device)
    return fresh_inputs(runner) if KERNELS[at.kernel].inplace else runner


def _kernel_runner(at: Shape, rand: Callable, dt, device: str) -> Runner:
    """(run, make) of a declared kernel at a shape, its inputs made once (`build_runner` restores them)."""
    import torch

    kernel = KERNELS[at.kernel]
    if kernel.family == PRODUCT:
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
    if kernel.name == CHUNK:
        from attn_cost.profilers.measure.references.linear import chunk_implementation, chunk_kernel

        bt, n, d, c = (at.get(x) for x in ("batch", "m", "k", "n"))
        run_chunk = chunk_kernel(c, device)
        if chunk_implementation(c, device).token_major:  # fla's [B, T, H, K] storage, as the variant hands it over
            return Runner(lambda box: run_chunk(*box), lambda: [rand(n, bt, d).transpose(1, 2) for _ in range(3)])
        return Runner(lambda box: run_chunk(*box), lambda: [rand(bt, n, d) for _ in range(3)])
    if kernel.family == ATTENTION:
        n, d = at.get("m"), at.get("k")
        sdpa = torch.nn.functional.scaled_dot_product_attention
        return Runner(lambda box: sdpa(*box, is_causal=kernel.causal), lambda: [rand(1, n, d) for _ in range(3)])
    rows, cols = at.get("rows"), at.get("cols")
    lead = (1,) * (RANK - 2)
    if kernel.name == "fill":
        return Runner(lambda box: torch.zeros(*lead, rows, cols, dtype=dt, device=device), lambda: [])
    if kernel.kind == "mask":
        mask = torch.ones(rows, cols, dtype=torch.bool, device=device).triu_(1)
        return Runner(lambda box: box[0].masked_fill_(mask, float("-inf")), lambda: [rand(rows, cols)])
    if kernel.torch is None:
        raise RuntimeError(f"kernel {kernel.name} has no PyTorch code")
    if _takes_two(kernel):
        zr, zc = operand_shape(at) if kernel.base in BINARY else (rows, cols)
        xv, zv = at.get("xview", 0), at.get("zview", 0)  # sliced on every call, as variants do

        def pair() -> list:
            z = torch.ones(*lead, zr, zc + zv, dtype=dt, device=device) if kernel.ones else rand(zr, zc + zv)
            return [rand(rows, cols + xv, positive=kernel.positive), z]

        def run_pair(box: list):
            x, z = box
            return kernel.torch(x[..., xv:] if xv else x, z[..., zv:] if zv else z)

        return Runner(run_pair, pair)
    return Runner(lambda box: kernel.torch(box[0]), lambda: [rand(rows, cols, positive=kernel.positive)])


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


def _overhead_runner(at: Shape, rand: Callable, dtype: str, device: str, parts: Callable | None) -> Runner:
    """PyTorch code of what `calibrate` times beside the kernels (`OVERHEADS`)."""
    from attn_cost.profilers.measure import references as ref

    if at.kernel == LOOP_STEP:
        its = at.get("iterations")

        def loop(box: list) -> None:
            (x,) = box
            for t in range(its):
                x[:, :, t], x[:, :, t], x[:, :, t]

        return Runner(loop, lambda: [rand(its, 1)])
    if at.kernel == SEQUENCE:
        runners = [build_runner(part, dtype, device, parts) for part in (parts or (lambda s: []))(at)]

        def chain(box: list) -> None:
            for runner, inputs in zip(runners, ref.take(box), strict=True):
                runner.run(inputs)

        return Runner(chain, lambda: [r.make() for r in runners])
    rows, cols = at.get("rows"), at.get("cols")

    def call(box: list):
        q, k, v = ref.take(box)
        del q, k
        return v

    return Runner(call, lambda: [rand(1, 1, rows, cols) for _ in range(3)])


def _takes_two(kernel: Kernel) -> bool:
    return kernel.base in BINARY or kernel.name in ("outer", "store", "compare")


def engine_features(at: Shape, dtype: str) -> tuple[str, dict[str, float]]:
    """The kernel's engine op at a shape, built with the DSL the variants use, and its features as the op model
    reads them (`opmodel.op_features`); a kernel whose op maps to another kernel is a declaration error."""
    from attn_cost.profilers.devicemodel.calibrated.data import op_features

    kernel = KERNELS[at.kernel]
    g = Graph(f"calibrate {at.kernel}")
    g.output(kernel.build(g, at))
    derived = Derived(g)
    op = derived.ops[0] if kernel.name == "store" else derived.ops[-1]
    name, feats = op_features(derived, op, dtype)
    if name != at.kernel:
        raise RuntimeError(f"kernel {at.kernel} builds an op of kernel {name}: fix its declaration")
    return name, {k: float(v) for k, v in feats.items() if k != "repeat"}
