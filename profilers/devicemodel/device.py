"""One interface for every kind of device model, and what they share: where two variants' predicted times cross.

A device is answered by one of three kinds of model, each in its own module, each a `DeviceModel`:
- a measured device's profile (`measured.ProfileDevice`): per-variant constants fitted to its own timings;
- an op calibration (`calibrated.model.CalibratedDevice`): the op model, its kernels timed alone, zero-shot;
- a GPU's datasheet (`datasheet.model.GpuModel`): its figures and efficiencies fitted on published measurements.
`kinds.resolve` finds the model a device name means (a measured device with an op calibration too is answered
by its profile for the variants it fitted, by the op model for the others: `kinds.MeasuredDevice`).

Every model answers, per variant and sizes (`dims` keyed by symbol: `row_dims`) at lengths N (arrays):
`seconds` (predicted time with its 95 % interval), `peak_bytes`, and where it prices kernels (the op and datasheet
models price the same `opcalls.kernel_calls`) `kernel_times`, the time of each kernel call; with its `name`, `kind`,
`label` (what tables call its column) and `answered_by` (one sentence for captions and JSON). `crossing` finds
where B's predicted time falls to A's (N0) with its interval from any model's curves (`DeviceModel.draws`): exactly
where they are polynomials (a profile), else by bracketing on a log grid and brentq. numpy at import; scipy
where a crossing is found.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

import numpy as np
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting, N_kv
from attn_cost.costmodel.crossover import (
    Poly,
    Setting,
    at_sizes,
    compare,
    cost_branches,
    evaluate,
    first_integer_from,
)
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import BY_NAME, MEASURED_DEPTH, N, with_defaults
from attn_cost.costmodel.variants import derive_counted

MEASURED, CALIBRATED, DATASHEET = "measured", "calibrated", "datasheet"
KINDS = {
    MEASURED: "a measured device (a device profile)",
    CALIBRATED: "a calibrated device (an op calibration, no device profile)",
    DATASHEET: "a datasheet GPU",
}
"""The kinds of device, as `devices` lists them and errors name them."""
LABELS = {MEASURED: "profile", CALIBRATED: "op model", DATASHEET: "datasheet"}
"""What a table calls each kind's predictions (its column, its caption); JSON names the kind itself
(`predicted_by`, the keys of `answered_by`)."""
Curve = Callable[[np.ndarray], np.ndarray]
"""Predicted seconds of one call of a variant at every N of an array."""


@dataclass(frozen=True)
class Times:
    """Predicted seconds of one call at each N, with the 95 % interval around them."""

    seconds: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class KernelTime:
    """One kernel call of a variant as a model prices it: seconds of one call at each N (alone, not counting what
    the model adds around kernels: launches on a GPU, a call's and its loop steps' host time, the chain's share) and
    how many calls one call of the variant makes."""

    kernel: str
    """Its name in `kernels.KERNELS`."""
    family: str
    """Its family's name (`kernels.FAMILIES`)."""
    repeat: np.ndarray
    seconds: np.ndarray
    backward: bool = False
    """The gradient of the op (training), not its forward."""
    launches: int = 1
    """Kernels it launches (a product's gradient: two)."""


@dataclass
class Draws:
    """What a crossing is found on: the model's time of A and B as functions of N, and draws of the pair that span
    the 95 % interval of where they cross (bootstrap replicates of the model, or the edges of its error band)."""

    a: Curve | None = None
    b: Curve | None = None
    draws: Iterable[tuple[Curve, Curve]] = ()
    sampled: bool = False
    """The draws are a random sample of the model (bootstrap replicates): the interval is their 2.5-97.5 %
    range, and the tie interval is read from their spread."""
    exact: tuple[list[Poly], list[Poly]] | None = None
    """The two times as exact polynomials in N, where the model has them (a fitted profile): crossed exactly."""
    extrapolated: Callable[[np.ndarray], Sequence[str]] = field(default=lambda xs: ())
    """The ops the model priced without a timing of their own shape at these lengths (`Prediction.extrapolated`)."""


class DeviceModel(ABC):
    """How long a variant takes on one device and how much memory it holds: the answer every kind of device gives
    (see the module's docstring)."""

    kind: ClassVar[str]
    """MEASURED, CALIBRATED or DATASHEET."""
    n_max: ClassVar[int] = 65536
    """The longest N a crossing is looked for up to."""

    @property
    def label(self) -> str:
        """What a table calls its predictions (`LABELS`)."""
        return LABELS[self.kind]

    @property
    @abstractmethod
    def name(self) -> str:
        """The name it goes by (`attn-cost devices`)."""

    @property
    def slug(self) -> str:
        """The device's slug, as a crossover row's `device` names it (a profile's: its fingerprint's)."""
        return self.name

    @property
    @abstractmethod
    def dtype(self) -> str:
        """The element type it prices unless told another: what the device was measured in (bf16 for a GPU one
        does not own)."""

    @property
    def memory_bytes(self) -> int | None:
        """The device's memory, where the model knows it."""
        return None

    @property
    @abstractmethod
    def answered_by(self) -> str:
        """One sentence on what answers: "predicted from the GPU's datasheet figures ...", for captions and JSON."""

    def applies(self, variant: str, setting: Setting, cost: str = "time") -> str | None:
        """Why the model cannot answer for `variant` at `setting` (one line), None where it can. `cost`: "time" or
        "memory" (the curves `crossing` compares)."""
        return None

    def check(self, variant: str, setting: Setting, cost: str = "time") -> None:
        """`applies`, as a UserError."""
        why = self.applies(variant, setting, cost)
        if why is not None:
            raise UserError(why)

    def answering(self, variant: str, setting: Setting, cost: str = "time") -> DeviceModel:
        """The model that answers for `variant` at `setting`: this one (a measured device's: its profile or its op
        calibration); one line where none does."""
        self.check(variant, setting, cost)
        return self

    @abstractmethod
    def seconds(
        self, variant: str, dims: dict, ns: np.ndarray, setting: Setting, replicates: int | None = None
    ) -> Times:
        """Predicted seconds of one call at every N of `ns`, with the 95 % interval. `replicates`: bootstrap
        replicates where the model draws its interval (None: its own number; 0: the point estimate alone)."""

    def peak_bytes(self, variant: str, dims: dict, ns: np.ndarray, setting: Setting) -> np.ndarray:
        """Peak bytes of one call at every N: the engine's peak of the op list (`peak_bytes`), unless the model
        corrects it."""
        return np.array([float(peak_bytes(variant, dims, int(n), setting.scope, setting.dtype, setting.mode,
                                          setting.counting)) for n in np.atleast_1d(ns)])  # fmt: skip

    def kernel_times(self, variant: str, dims: dict, ns: np.ndarray, setting: Setting) -> list[KernelTime] | None:
        """The time of each kernel call, where the model prices kernels (None: it prices whole variants)."""
        return None

    @abstractmethod
    def draws(self, a: str, b: str, dims: dict, setting: Setting, replicates: int | None = None) -> Draws:
        """The curves `crossing` finds where B's time falls to A's on."""

    def memory_curves(self, variant: str, dims: dict, setting: Setting) -> list[Poly]:
        """Peak bytes as exact polynomial branches in N: the engine's, unless the model corrects them."""
        return at_sizes(cost_branches(variant, "memory", setting), dims, variant)


def crossing(
    model: DeviceModel,
    a: str,
    b: str,
    dims: dict,
    setting: Setting,
    *,
    cost: str = "time",
    n_max: int | None = None,
    replicates: int | None = None,
) -> Prediction:
    """Where B's predicted time (`cost="memory"`: peak memory) falls to A's on `model`, from the first N from which
    it stays so (the last crossing up to `n_max`, the model's own range by default), with the interval its draws
    give; a model that cannot answer for either variant is one line (`DeviceModel.applies`). Exact where the
    curves are polynomials (a profile's, and every peak memory); else bracketed on a log grid and found with brentq,
    the interval the 2.5-97.5 % range of the draws' crossings, and, where the draws are a bootstrap sample, the tie
    interval of the lengths where the model cannot tell the two apart."""
    for variant in (a, b):
        model.check(variant, setting, cost)
    if cost == "memory":
        return _exact(model.memory_curves(a, dims, setting), model.memory_curves(b, dims, setting))
    d = model.draws(a, b, dims, setting, replicates)
    if d.exact is not None:
        return _exact(*d.exact)
    assert d.a is not None and d.b is not None, "a model's draws give its curves or its polynomials"
    hi = float(n_max or model.n_max)
    xs = np.geomspace(2.0, hi, GRID)

    def one(fa: Curve, fb: Curve) -> tuple[int | None, np.ndarray]:
        """The crossing (a whole N: `settle`) and ln(tB/tA) on the grid, from one evaluation of both curves."""
        ta, tb = fa(xs), fb(xs)

        def gap(n: np.ndarray) -> np.ndarray:
            return fa(n) - fb(n)

        return settle(gap, last_crossing(gap, 2.0, hi, ys=ta - tb), 2.0), np.log(tb / ta)

    n0, ratio = one(d.a, d.b)
    drawn = [one(fa, fb) for fa, fb in d.draws]
    vals = np.array([math.inf if x is None else x for x, _ in drawn])
    tie = regret = None
    if d.sampled and len(drawn) > 1:  # the ratio's spread: both variants drawn from the same replicate
        r = np.stack([y for _, y in drawn])
        sigma = (np.percentile(r, 84.13, axis=0) - np.percentile(r, 15.87, axis=0)) / 2
        tie = tie_interval(xs, ratio, sigma, n0)
        if tie is not None:
            inside = (xs >= tie[0]) & (xs <= tie[1])
            regret = float(np.max(np.abs(np.expm1(ratio[inside]))))
    # Order statistics, not interpolation: interpolating between two infinite replicates gives NaN.
    low: float | None
    high: float | None
    if drawn:
        low = float(np.percentile(vals, 2.5, method="lower"))
        high = float(np.percentile(vals, 97.5, method="higher"))
    else:
        low = high = n0

    def finite(x: float | None) -> int | None:
        """A whole edge, None where it runs past the lengths searched: beyond n_max (a draw that never crosses)
        or down to the first length (B within the model's error of A from the start)."""
        return int(x) if x is not None and math.isfinite(x) and x > xs[0] else None

    replicates_drawn = len(drawn) if d.sampled else 0
    return Prediction(n0, finite(low), finite(high), replicates_drawn, tie, regret, tuple(d.extrapolated(xs)))


def settle(gap: Curve, x: float | None, lo: float) -> int | None:
    """The first whole N from which B is no slower than A (`gap` = tA − tB >= 0), from `x`, where the gap turns
    non-negative for good on the reals (`last_crossing`, `lo` where it never is negative): the curves evaluated at
    whole N, as `predict` evaluates them, so that A is faster at N0 − 1 and B no slower at N0. A root on the reals
    does not say that: where A's time steps (a tile, a wave) the times are equal just past a whole N, and its
    ceiling would be an N at which A is still faster."""
    if x is None:
        return None
    if x <= lo:
        return ceil_n(x)

    def holds(n: int) -> bool:
        return bool(np.asarray(gap(np.array([float(n)])), dtype=float)[0] >= 0)

    return first_integer_from(holds, x, lo)


def exact_crossing(pa: list[Poly], pb: list[Poly]) -> float | None:
    """Where B becomes no more expensive than A on two exact curves: the last real root where they cross, 1 where B
    is never dearer, None where B stays dearer."""
    result = compare(pa, pb)
    if result["verdict"] in ("crosses", "multiple"):
        return result.get("root")
    return 1.0 if result["verdict"] in ("always", "equal") else None


def _exact(pa: list[Poly], pb: list[Poly]) -> Prediction:
    """The first whole N from which B is no dearer on two exact curves (`compare`: the curves evaluated at whole N,
    exactly), as a prediction: no interval, the curves have none."""
    return Prediction(compare(pa, pb)["n"], None, None, 0)


def at_lengths(polys: list[Poly], ns: np.ndarray) -> np.ndarray:
    """Exact polynomial branches (their maximum) at every N of `ns`, as floats."""
    return np.array([float(evaluate(polys, Fraction(float(n)))) for n in np.atleast_1d(ns)])


def peak_bytes(
    variant: str,
    dims: dict,
    n: int,
    scope: str = "core",
    dtype: str = "fp32",
    mode: str = "inference",
    counting: Counting = DEFAULT_COUNTING,
) -> int:
    """Peak bytes of one call: the engine's peak of the op list at the dtype (in training, the larger of the
    forward walk and the backward walk, `Derived.backward_steps`), built as `counting` has it (N_kv, biases,
    dropout, a padding mask: `derive_counted`)."""

    sizes = {**dims, N: n, **({N_kv: counting.n_kv} if counting.n_kv is not None else {})}
    return int(derive_counted(variant, scope, mode, counting).peak(dtype).at(sizes)[0])


GRID = 240
"""Lengths (log-spaced from 2 to n_max) a predicted crossing is bracketed on and a tie interval is read at."""
Z95 = 1.96
"""The normal quantile of a 95 % interval."""
TIE_Z = Z95
"""A length is a tie where the predicted log time ratio is within this many of its bootstrap σ of 0 (the
model's 95 % error on the ratio, the same level as the N0 interval)."""


def last_crossing(f, lo: float, hi: float, grid: int = GRID, ys: np.ndarray | None = None) -> float | None:
    """Smallest x from which f(x) >= 0 on [lo, hi] (bracketing on a log grid, then brentq); `ys`: f on that
    grid, if already known.

    lo when f >= 0 throughout, None when f < 0 at hi (B is still dearer at the end of the range)."""
    from scipy.optimize import brentq  # scipy fits and finds roots, never loaded by `crossover` alone

    xs = np.geomspace(lo, hi, grid)
    ys = np.asarray(f(xs), dtype=float) if ys is None else ys
    if ys[-1] < 0:
        return None
    below = np.nonzero(ys < 0)[0]
    if not len(below):
        return lo
    i = int(below[-1])

    def at(x: float) -> float:
        return float(np.asarray(f(np.array([x])))[0])

    if at(xs[i + 1]) < 0 or at(xs[i]) >= 0:  # two equal curves: rounding that flips the sign from one call to the next
        return float(xs[i + 1])
    return float(brentq(at, xs[i], xs[i + 1], xtol=1e-3))


@dataclass
class Prediction:
    """A predicted transition point with its bootstrap interval (integers: the first N with B <= A), the tie
    interval around it and what it extrapolated."""

    n0: int | None
    low: int | None
    high: int | None
    """The interval's edges; None (with an n0) where an edge runs past the lengths searched (`OPEN_EDGE`)."""
    replicates: int
    tie: tuple[int, int] | None = None
    """Lengths where the predicted time ratio tB/tA is within the model's error of 1 (`TIE_Z` bootstrap σ of its
    log): the stretch around the predicted crossing (else the last such stretch) where the model cannot tell
    the two apart. None without replicates or where the ratio never comes that close."""
    regret: float | None = None
    """The most the two predicted times differ over the tie interval, |tB/tA − 1|: what choosing either one
    anywhere in it can cost, as the model sees it."""
    extrapolated: tuple[str, ...] = ()
    """The ops priced without a timing of their own shape: no exact-shape line at these sizes, or a row width
    beyond the calibrated widths of its class (`OpModel.extrapolated`)."""

    def as_json(self) -> dict:
        return {"predicted_n0": self.n0, "predicted_n0_low": self.low, "predicted_n0_high": self.high,
                "predicted_tie": list(self.tie) if self.tie else None, "predicted_regret": self.regret,
                "predicted_extrapolated": list(self.extrapolated)}  # fmt: skip


def tie_interval(xs: np.ndarray, ratio: np.ndarray, sigma: np.ndarray, n0: float | None) -> tuple[int, int] | None:
    """The lengths of `xs` where |ln tB/tA| (`ratio`) is within `TIE_Z` × `sigma` of 0, as one stretch: the one
    holding the predicted crossing `n0` (or next to it), else the last one. None where there is none."""
    tied = np.abs(ratio) <= TIE_Z * sigma
    if not tied.any():
        return None
    edges = np.flatnonzero(np.diff(np.concatenate([[0], tied.astype(int), [0]])))
    runs = [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    if n0 is not None:
        at = int(np.clip(np.searchsorted(xs, n0), 0, len(xs) - 1))
        near = [(a, b) for a, b in runs if a - 1 <= at <= b + 1]
        if near:
            a, b = near[-1]
            return math.floor(xs[a]), math.ceil(xs[b])
    a, b = runs[-1]
    return math.floor(xs[a]), math.ceil(xs[b])


def ceil_n(x: float | None) -> int | None:
    """The first whole N at or above a crossing (None stays None)."""
    return None if x is None else math.ceil(x - 1e-9)


def row_dims(sizes: dict[str, int]) -> dict:
    """Sizes keyed by name (a crossover row's, a validation row's: heads and batch spelt out or not) keyed by
    symbol, the missing ones defaulting as `Sizes` does (`symbols.with_defaults`: L and d_v to d, the others to
    their defaults; r to 4, D to the measured depth)."""

    values: dict[str, int | None] = {
        "h": sizes.get("heads", sizes.get("h", 1)),
        "b": sizes.get("batch", sizes.get("b", 1)),
    }
    values.update({k: v for k, v in sizes.items() if k in BY_NAME and k not in ("N", "h", "b") and isinstance(v, int)})
    values.setdefault("r", 4)
    values.setdefault("D", MEASURED_DEPTH)
    return with_defaults({BY_NAME[k]: v for k, v in values.items() if v is not None})


def measured_at(taken: dict[str, int], asked: dict) -> bool:
    """Whether a measurement taken at `taken` (sizes by name, as a record or a profile's unit keeps them; those it
    does not name at the defaults it was measured with: `row_dims`) was taken at every size of `asked` (keyed by
    symbol: d, h, b and each size the costs asked about depend on). A value measured at other sizes answers another
    question, whatever heading it would be shown under."""
    measured = row_dims({k: v for k, v in taken.items() if k != "N"})
    return all(measured.get(symbol) == value for symbol, value in asked.items())
