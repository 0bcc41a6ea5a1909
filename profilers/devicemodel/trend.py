"""Timings off their neighbours' trend along N: what calibration and validation take again (a disturbance only
slows a timing down)."""

from __future__ import annotations

import math

import numpy as np
from attn_cost.profilers.devicemodel.tunables import DEFAULT
from scipy.stats import theilslopes


def off_trend(n: list[float], seconds: list[float], factor: float = DEFAULT.spike) -> list[int]:
    """Indices of the timings of a series (sorted by n, no n twice) that their neighbours do not explain: more
    than `factor` slower than the robust (Theil–Sen) line through up to `Tunables.trend_reach` timings on each side, in
    log time over log n. A disturbance slows a timing down, often over two or three lengths timed in the same
    slow spell, which a robust line sees through; a real change of speed along N spans more lengths than that."""

    if len(n) < 3:
        return []
    ln, lt = np.log(np.asarray(n, dtype=float)), np.log(np.asarray(seconds, dtype=float))
    out = []
    for i in range(len(n)):
        reach = DEFAULT.trend_reach
        near = [j for j in range(max(0, i - reach), min(len(n), i + reach + 1)) if j != i]
        slope, intercept, _, _ = theilslopes(lt[near], ln[near], method="joint")
        if lt[i] - (intercept + slope * ln[i]) > math.log(factor):
            out.append(i)
    return out


def spikes(series: dict) -> list:
    """What `off_trend` finds in several series, each a list of (n, seconds, item) along N (any order): the
    items of the timings to take again, series by series."""
    out = []
    for key in sorted(series):
        pts = sorted(series[key], key=lambda p: p[0])
        out += [pts[i][2] for i in off_trend([p[0] for p in pts], [p[1] for p in pts])]
    return out


