"""Wall-clock time of one call: warm-up, repeated runs, median and spread.

CUDA runs are timed with events (the device clock) after a synchronisation; CPU runs with
perf_counter at the thread count the caller fixed. Two variants are timed in alternation, so
that drift (clock boost, a busy neighbour) hits both alike. The first calls are never timed.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import torch
from attn_cost.profilers.cases import Case


class OutOfMemoryError(Exception):
    """The device ran out of memory: a result to record, not a crash."""


@dataclass
class TimeStats:
    """Seconds per call over the timed runs."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    runs: int
    warmup: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def median_se(self) -> float:
        """Standard error of the median, from the spread (normal approximation, σ ≈ IQR/1.349)."""
        return 1.2533 * (self.iqr / 1.349) / max(1, self.runs) ** 0.5

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_times(cls, times: list[float], warmup: int) -> TimeStats:
        qs = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else [times[0]] * 3
        return cls(statistics.median(times), qs[0], qs[2], min(times), max(times), len(times), warmup)


def _timer(device: str):
    if device == "cuda":

        def once(case: Case, inputs: list) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            case.run(list(inputs))
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1000

        return once

    def once(case: Case, inputs: list) -> float:
        t0 = time.perf_counter()
        case.run(list(inputs))
        return time.perf_counter() - t0

    return once


def time_cases(cases: list[Case], repeats: int = 7, warmup: int = 2) -> list[TimeStats]:
    """Time several cases in alternation; raises OutOfMemoryError if any of them does not fit."""
    once = _timer(cases[0].device)
    times: list[list[float]] = [[] for _ in cases]
    try:
        with torch.no_grad():
            inputs = [c.make_inputs() for c in cases]
            for _ in range(warmup):
                for c, x in zip(cases, inputs, strict=True):
                    c.run(list(x))
            for _ in range(repeats):
                for i, (c, x) in enumerate(zip(cases, inputs, strict=True)):
                    times[i].append(once(c, x))
    except (torch.cuda.OutOfMemoryError, MemoryError) as e:
        raise OutOfMemoryError(str(e).splitlines()[0] if str(e) else "out of memory") from None
    except RuntimeError as e:
        if "out of memory" in str(e).lower() or "can't allocate memory" in str(e).lower():
            raise OutOfMemoryError(str(e).splitlines()[0]) from None
        raise
    return [TimeStats.from_times(t, warmup) for t in times]
