"""Predictions of the op model: a variant's time at concrete sizes, and where two variants' predicted times
cross, with a bootstrap interval (numpy and scipy only: `crossover --device` uses it without torch)."""

from __future__ import annotations

import contextlib
import math

import numpy as np
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting
from attn_cost.costmodel.crossover import DeviceColumns, TransitionRow
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import BY_NAME
from attn_cost.profilers.devicemodel.device import GRID, Prediction, ceil_n, last_crossing, row_dims, tie_interval
from attn_cost.profilers.devicemodel.opcalls import kernel_calls
from attn_cost.profilers.devicemodel.opmodel import BOOTSTRAP, OpModel, load_opmodel, opmodel_for, pricing


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
        return ceil_n(x) if x is not None and math.isfinite(x) else None

    extrapolated = tuple(dict.fromkeys(model.extrapolated(ca, xs) + model.extrapolated(cb, xs)))
    return Prediction(ceil_n(n0), finite(low), finite(high), replicates, tie, regret, extrapolated)


def predicted_seconds(
    model: OpModel, variant: str, sizes: dict[str, int], scope: str = "core", dtype: str = "fp32"
) -> float:
    """Predicted seconds of one call of a variant at concrete sizes (keyed by name: N, d, h, b, L, ...); a size
    not given (GQA's h_kv, a window w) takes its default (`row_dims`), as the measurement did."""
    calls = kernel_calls(variant, scope, dtype, row_dims(sizes))
    return float(model.time(calls, np.array([float(sizes["N"])]))[0])


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
