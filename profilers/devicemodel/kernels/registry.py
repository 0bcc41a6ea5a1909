"""The registry of kernel families and kernels, in the style of `torch.utils.flop_counter`'s registry of FLOP
formulas: a family registers once, with a decorator, how its ops are featured, timed, fitted, priced from a
datasheet and gridded for the calibration; a kernel (a family member) is one `Kernel` declaration. Every device
model reads the families from here: no module outside `kernels/` asks a kernel which family it is by name.

The declarations live beside this module, one per family (`streaming`, `products`, `attention`, `chunk`); the
package (`kernels/__init__.py`) imports them in the calibration grid's order. No torch at import: the runners
import it when the calibration calls them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.profilers.devicemodel.tunables import Tunables

GEMM, STREAMING = "product", "streaming"
"""The op model's two fitted forms (`calibrated.forms`): FLOPs at a shape-dependent rate (`Gemm`), or bytes per row
width (`Streaming`)."""
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


@dataclass
class Runner:
    """PyTorch code of one kernel at one shape: `run(inputs)` and `make()` of fresh inputs. `restore`, for a
    kernel that writes its input in place: what `run` does first to put back that input's pristine values (a
    copy), timed alone so that its cost is taken off (`calibrated.fit.Calibrator`)."""

    run: Callable[[list], object]
    make: Callable[[], list]
    extra: dict = field(default_factory=dict)
    restore: Callable[[list], object] | None = None


RunnerFactory = Callable[["Kernel", Shape, Callable, Any, str], Runner]
"""(kernel, shape, rand(*sizes, positive=), torch dtype, device) -> its Runner; torch imported inside."""


@dataclass(frozen=True)
class Kernel:
    """One kernel: the engine op it is, its family, how it is built and run. One declaration (`declare`)."""

    name: str
    kind: str
    """The engine op kind (`opkinds.KINDS`) it runs; `kinds` adds others it runs too (a projection)."""
    family: str
    build: Callable[[Graph, Shape], Tensor] | None = None
    """Writes the kernel's engine op at a shape onto a graph and returns its output (None: never calibrated)."""
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
    runner: RunnerFactory | None = None
    """Its own PyTorch runner where its family's does not fit (a fill makes no inputs; a mask holds its own)."""

    @property
    def inplace(self) -> bool:
        return self.name.endswith("!")

    @property
    def base(self) -> str:
        return self.name.rstrip("!")

    @property
    def layout(self) -> str:
        """A product's layout (NN, NT, TN); empty for other kernels."""
        return self.name.removeprefix("matmul-") if self.name.startswith("matmul-") else ""


class Pricer(Protocol):
    """What a family's datasheet price calls on the datasheet model (`datasheet.model.GpuModel`): its roofline
    of each kind of kernel. A Protocol, so that the registry never imports a device model."""

    def product(self, f: dict, dtype: str) -> np.ndarray: ...
    def attention(self, f: dict, dtype: str, causal: bool, backward: bool = False) -> np.ndarray: ...
    def chunk(self, f: dict, dtype: str, backward: bool = False) -> list[np.ndarray]: ...
    def streaming(self, f: dict, kernel: str = "") -> np.ndarray: ...


Price = Callable[[Pricer, str, dict, str, bool], list[np.ndarray]]
"""(datasheet model, kernel name, features, dtype, backward) -> device seconds of the kernel's calls in one pass:
one array for a kernel that launches as one, one per kernel for a family priced as several (`separate`)."""
Grid = Callable[[list[Kernel], int, int, Tunables], list[Shape]]
"""(its grid kernels, last-level cache bytes, bytes per element, tunables) -> the shapes the calibration times."""
HeldOut = Callable[[list[Kernel], int, Tunables, Any], list[Shape]]
"""(its grid kernels, the grid's top element count, tunables, a random.Random) -> shapes off the grid."""


def _no_grid(kernels: list[Kernel], llc: int, elem: int, tune: Tunables) -> list[Shape]:
    return []


def _none_held_out(kernels: list[Kernel], top: int, tune: Tunables, rng: Any) -> list[Shape]:
    return []


@dataclass(frozen=True)
class Family:
    """A kernel family: everything a device model needs to know of its kernels, declared once."""

    name: str
    features: Callable[[Any], dict]
    """An engine op of the family -> its dims as the op model and the datasheet model read them (sympy)."""
    dims: tuple[str, ...]
    """The names of those dims (`features`' keys): what a calibration shape of the family is sized by."""
    form: str = STREAMING
    """The op model's fitted form (`GEMM` or `STREAMING`)."""
    flop_bound: bool = False
    """Bound by its FLOPs, not its bytes: the op model's sanity check of bandwidths leaves it out."""
    runner: RunnerFactory | None = None
    """Its PyTorch runner on the calibration device (None: not timed)."""
    price: Price | None = None
    """Its datasheet price (None: no device model prices it yet; its ops are refused in one line, `kernel_of`)."""
    unpriced: str = ""
    """What its ops are called in that one line (a family without a price)."""
    grid: Grid = _no_grid
    held_out: HeldOut = _none_held_out
    own_backward: bool = False
    """The datasheet prices its backward with `price(..., backward=True)`, not as the op's backward factor times
    its forward."""
    separate: bool = False
    """Priced as its several kernels (`price` gives one array each), each its own launch, forward and backward."""
    grads: int = 1
    """Kernels its backward launches per forward kernel (a product's two gradient products)."""
    triton: bool = False
    """Its kernels are Triton kernels: the host launches each at the datasheet host's `triton_s`."""
    stand_ins: tuple[str, ...] = ()
    """The kernels that price one of its kernels a calibration did not time, after its twins (with a warning,
    `calibrated.data.pricing`): another layout of a product, SDPA; copy for every family."""


FAMILIES: dict[str, Family] = {}
"""Every family by name, in registration order (the calibration grid's order)."""
KERNELS: dict[str, Kernel] = {}
"""Every kernel by name, in declaration order (the grid's order)."""


def register_family(**declared: Any) -> Callable[[Callable[[Any], dict]], Family]:
    """Registers a family, decorating its `features` function: `@register_family(name=..., dims=..., ...)`."""

    def wrap(features: Callable[[Any], dict]) -> Family:
        family = Family(features=features, **declared)
        if family.name in FAMILIES:
            raise ValueError(f"kernel family {family.name} is declared twice")
        FAMILIES[family.name] = family
        return family

    return wrap


def declare(*kernels: Kernel) -> None:
    """Registers kernels of registered families: one declaration each."""
    for kernel in kernels:
        if kernel.family not in FAMILIES:
            raise ValueError(f"kernel {kernel.name}: no family {kernel.family} is registered")
        if kernel.name in KERNELS:
            raise ValueError(f"kernel {kernel.name} is declared twice")
        KERNELS[kernel.name] = kernel


def members(family: str) -> list[Kernel]:
    """The kernels of one family that the grid times, in declaration order."""
    return [k for k in KERNELS.values() if k.family == family and k.grid]


def priced_families() -> tuple[str, ...]:
    """The families a datasheet prices, in registration order: the parts a datasheet splits a time into."""
    return tuple(name for name, f in FAMILIES.items() if f.price is not None)


def twins(name: str) -> list[str]:
    """The kernels that may price an op named `name`: itself, then its in-place or out-of-place twin (the same
    kind and axis). Never a kernel of another kind: an op none of them prices is not priced by accident."""
    base = name.rstrip("!")
    return [k for k in dict.fromkeys((name, base, base + "!")) if k in KERNELS]


def declared(name: str) -> Kernel | None:
    """The declaration that prices a kernel `kernel_of` names: its own or its twin's (`twins`); None for one none
    declares."""
    found = twins(name)
    return KERNELS[found[0]] if found else None


UNDECLARED_PRODUCT, UNDECLARED = "product", "elementwise"
"""The families of a kernel none declares: a product of another layout (TT), or anything else (its bytes)."""


def family_of(name: str) -> Family:
    """The family of a kernel `kernel_of` names: its declaration's or its twin's (`twins`); a product of a layout
    none declares (TT) is a product, any other undeclared kernel streams its bytes (as the op model prices it)."""
    found = declared(name)
    if found:
        return FAMILIES[found.family]
    return FAMILIES[UNDECLARED_PRODUCT if name.startswith("matmul-") else UNDECLARED]


def runnable(name: str) -> bool:
    """Whether the calibration has PyTorch code for an op: a declared kernel of a timed family."""
    return name in KERNELS and (KERNELS[name].runner or FAMILIES[KERNELS[name].family].runner) is not None


def refuse_unpriced(kernel: str, label: str) -> None:
    """One line for an op whose family no device model prices yet."""
    family = family_of(kernel)
    if family.price is None:
        raise UserError(f"{label}: {family.unpriced} are not priced on a device yet (their costs are: leave "
                        "--device out)")  # fmt: skip


def torch_fn(name: str) -> Callable:
    """A torch function by dotted name, imported when first called (no torch at import of the registry)."""

    def call(*args, **kwargs):
        module, _, attr = name.rpartition(".")
        return getattr(importlib.import_module(module), attr)(*args, **kwargs)

    return call


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
