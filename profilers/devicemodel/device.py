"""What every device model shares: sizes keyed for it (`row_dims`), where two variants' predicted times cross
(`last_crossing`, bracketing on a log grid and brentq) and the predicted crossover with its interval
(`Prediction`, `tie_interval`). numpy at import; scipy where a crossing is found."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from attn_cost.costmodel.symbols import BY_NAME, DEFAULTS, MEASURED_DEPTH

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


def ceil_n(x: float | None) -> int | None:
    """The first whole N at or above a crossing (None stays None)."""
    return None if x is None else math.ceil(x - 1e-9)


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
