"""Predictions of the op model: a variant's time at concrete sizes, and where two variants' predicted times
cross, with a bootstrap interval (numpy and scipy only: `crossover --device` uses it without torch)."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting
from attn_cost.costmodel.crossover import DeviceColumns, TransitionRow
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import BY_NAME, DEFAULTS, MEASURED_DEPTH
from attn_cost.profilers.devicemodel.opcalls import kernel_calls
from attn_cost.profilers.devicemodel.opmodel import BOOTSTRAP, OpModel, load_opmodel, opmodel_for, pricing

GRID = 240
"""Lengths (log-spaced from 2 to n_max) a predicted crossing is bracketed on and a tie interval is read at."""
TIE_Z = 1.96
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
    return float(brentq(lambda x: float(np.asarray(f(np.array([x])))[0]), xs[i], xs[i + 1], xtol=1e-3))


@dataclass
class Prediction:
    """A predicted transition point with its bootstrap interval (integers: the first N with B <= A), the tie
    interval around it and what it extrapolated."""

    n0: int | None
    low: int | None
    high: int | None
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


def _ceil(x: float | None) -> int | None:
    return None if x is None else math.ceil(x - 1e-9)


def predict_n0(
    model: OpModel,
    a: str,
    b: str,
    dims: dict,
    scope: str = "core",
    dtype: str = "fp32",
    *,
    n_max: int = 65536,
    replicates: int = BOOTSTRAP,
    seed: int = 0,
    counting: Counting = DEFAULT_COUNTING,
) -> Prediction:
    """Where B's predicted time falls to A's, with a bootstrap interval over the calibration (the variants built
    as `counting` has them: keys of their own length, the projections' biases)."""
    ca, cb = kernel_calls(a, scope, dtype, dims, counting), kernel_calls(b, scope, dtype, dims, counting)
    used = {name for calls in (ca, cb) for k in calls.kernels for name in pricing(k)}
    lines = {line for calls in (ca, cb) for line in calls.lines}

    xs = np.geomspace(2.0, float(n_max), GRID)

    def crossing(m: OpModel) -> tuple[float | None, np.ndarray]:
        """The crossing and ln(tB/tA) on the grid, from one evaluation of both curves."""
        ta, tb = m.time(ca, xs), m.time(cb, xs)
        x = last_crossing(lambda n: m.time(ca, n) - m.time(cb, n), 2.0, float(n_max), ys=ta - tb)
        return x, np.log(tb / ta)

    n0, ratio = crossing(model)
    rng = np.random.default_rng(seed)
    drawn = [crossing(model.resample(rng, used, lines)) for _ in range(replicates)]
    boots = [x for x, _ in drawn]
    vals = np.array([math.inf if x is None else x for x in boots])
    tie = regret = None
    if replicates > 1:  # the ratio's spread: both variants drawn from the same replicate, shared kernels together
        r = np.stack([y for _, y in drawn])
        sigma = (np.percentile(r, 84.13, axis=0) - np.percentile(r, 15.87, axis=0)) / 2
        tie = tie_interval(xs, ratio, sigma, n0)
        if tie is not None:
            inside = (xs >= tie[0]) & (xs <= tie[1])
            regret = float(np.max(np.abs(np.expm1(ratio[inside]))))
    # Order statistics, not interpolation: interpolating between two infinite replicates gives NaN.
    low: float | None
    high: float | None
    if replicates:
        low = float(np.percentile(vals, 2.5, method="lower"))
        high = float(np.percentile(vals, 97.5, method="higher"))
    else:
        low = high = n0

    def finite(x: float | None) -> int | None:
        return _ceil(x) if x is not None and math.isfinite(x) else None

    extrapolated = tuple(dict.fromkeys(model.extrapolated(ca, xs) + model.extrapolated(cb, xs)))
    return Prediction(_ceil(n0), finite(low), finite(high), replicates, tie, regret, extrapolated)


def predicted_seconds(
    model: OpModel, variant: str, sizes: dict[str, int], scope: str = "core", dtype: str = "fp32"
) -> float:
    """Predicted seconds of one call of a variant at concrete sizes (keyed by name: N, d, h, b, L, ...); a size
    not given (GQA's h_kv, a window w) takes its default (`row_dims`), as the measurement did."""
    calls = kernel_calls(variant, scope, dtype, row_dims(sizes))
    return float(model.time(calls, np.array([float(sizes["N"])]))[0])


def row_dims(sizes: dict[str, int]) -> dict:
    """Sizes keyed by name (a crossover row's, a validation row's: heads and batch spelt out or not) keyed by
    symbol, the missing ones defaulting as `Sizes` does (L to d, r to 4, D to the measured depth)."""

    values: dict[str, int | None] = {
        "h": sizes.get("heads", sizes.get("h", 1)),
        "b": sizes.get("batch", sizes.get("b", 1)),
    }
    values.update({k: v for k, v in sizes.items() if k in BY_NAME and k not in ("N", "h", "b") and isinstance(v, int)})
    values.setdefault("L", values.get("d"))
    values.setdefault("r", 4)
    values.setdefault("D", MEASURED_DEPTH)
    out = {BY_NAME[k]: v for k, v in values.items() if v is not None}
    return {**DEFAULTS, **out}


def add_predicted_columns(
    rows: list[TransitionRow], name: str, *, required: bool = True, n_max: int = 65536, replicates: int = BOOTSTRAP
) -> None:
    """Give crossover rows the op model's predicted_n0 and its bootstrap interval (None where the model does not
    apply: training mode, another dtype, a size it is not given), beside a profile's columns where they have
    them. `replicates=0`: the point estimate alone, its interval collapsed onto it (a fraction of a second a row
    instead of seconds). Without a model (`required=False`) the rows keep their device and get None."""
    model = load_opmodel(name) if required else opmodel_for(name)
    for row in rows:
        prediction = Prediction(None, None, None, 0)
        if model is not None:
            s = row.setting
            if s.mode == "inference" and s.dtype == model.dtype:
                with contextlib.suppress(UserError):  # a size the model is not given: no prediction
                    prediction = predict_n0(
                        model, row.a, row.b, row_dims(row.sizes), s.scope, model.dtype, n_max=n_max,
                        replicates=replicates, counting=s.counting,
                    )  # fmt: skip
        device = model.slug if model is not None else row.device.device if row.device is not None else name
        profile = row.device.profile if row.device is not None else None
        predicted = prediction.as_json() if model is not None and prediction.n0 is not None else None
        row.device = DeviceColumns(device, profile, prediction.n0, prediction.low, prediction.high, predicted=predicted)


def predicted_curve(
    model: OpModel, variant: str, sizes: dict[str, int], ns: list[int], scope: str = "core", dtype: str = "fp32"
) -> list[float]:
    """Predicted seconds of one call of a variant at every N of `ns` (other sizes keyed by name)."""

    dims = {BY_NAME[k]: v for k, v in sizes.items() if k in BY_NAME and k != "N"}
    return [float(t) for t in model.time(kernel_calls(variant, scope, dtype, dims), np.array(ns, dtype=float))]
