"""Predictions of the op model: a variant's time at concrete sizes, and where two variants' predicted times
cross, with a bootstrap interval (numpy and scipy only: `crossover --device` uses it without torch)."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
from attn_cost.costmodel.crossover import DeviceColumns, TransitionRow
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import BY_NAME, DEFAULTS, MEASURED_DEPTH
from attn_cost.profilers.devicemodel.opcalls import kernel_calls
from attn_cost.profilers.devicemodel.opmodel import BOOTSTRAP, OpModel, load_opmodel, opmodel_for, pricing
from scipy.optimize import brentq


def last_crossing(f, lo: float, hi: float, grid: int = 240) -> float | None:
    """Smallest x from which f(x) >= 0 on [lo, hi] (bracketing on a log grid, then brentq).

    lo when f >= 0 throughout, None when f < 0 at hi (B is still dearer at the end of the range)."""

    xs = np.geomspace(lo, hi, grid)
    ys = np.asarray(f(xs), dtype=float)
    if ys[-1] < 0:
        return None
    below = np.nonzero(ys < 0)[0]
    if not len(below):
        return lo
    i = int(below[-1])
    return float(brentq(lambda x: float(np.asarray(f(np.array([x])))[0]), xs[i], xs[i + 1], xtol=1e-3))


@dataclass
class Prediction:
    """A predicted transition point with its bootstrap interval (integers: the first N with B <= A)."""

    n0: int | None
    low: int | None
    high: int | None
    replicates: int

    def as_json(self) -> dict:
        return {"predicted_n0": self.n0, "predicted_n0_low": self.low, "predicted_n0_high": self.high}


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
) -> Prediction:
    """Where B's predicted time falls to A's, with a bootstrap interval over the calibration."""
    ca, cb = kernel_calls(a, scope, dtype, dims), kernel_calls(b, scope, dtype, dims)
    used = {name for calls in (ca, cb) for k in calls.kernels for name in pricing(k)}
    lines = {line for calls in (ca, cb) for line in calls.lines}

    def crossing(m: OpModel) -> float | None:
        return last_crossing(lambda n: m.time(ca, n) - m.time(cb, n), 2.0, float(n_max))

    n0 = crossing(model)
    rng = np.random.default_rng(seed)
    boots = [crossing(model.resample(rng, used, lines)) for _ in range(replicates)]
    vals = np.array([math.inf if x is None else x for x in boots])
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

    return Prediction(_ceil(n0), finite(low), finite(high), replicates)


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
                        replicates=replicates,
                    )  # fmt: skip
        device = model.slug if model is not None else row.device.device if row.device is not None else name
        profile = row.device.profile if row.device is not None else None
        row.device = DeviceColumns(device, profile, prediction.n0, prediction.low, prediction.high)


def predicted_curve(
    model: OpModel, variant: str, sizes: dict[str, int], ns: list[int], scope: str = "core", dtype: str = "fp32"
) -> list[float]:
    """Predicted seconds of one call of a variant at every N of `ns` (other sizes keyed by name)."""

    dims = {BY_NAME[k]: v for k, v in sizes.items() if k in BY_NAME and k != "N"}
    return [float(t) for t in model.time(kernel_calls(variant, scope, dtype, dims), np.array(ns, dtype=float))]
