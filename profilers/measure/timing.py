"""Wall-clock time of one call: warm-up, repeated runs, median and spread, disturbed runs thrown out.

CUDA runs go to `gpu_timing.py` (CUDA graphs and events around blocks of calls); CPU runs are timed with
perf_counter at the thread count the caller fixed, a call shorter than SETTLE_S straight after an untimed call of
its own. Two variants are timed in alternation, so that drift (clock boost, a busy neighbour) hits both alike. The
first calls are never timed.

Every timed call is watched by a `Detector`: around it, it reads the process's clocks (`Clocks`:
wall time, CPU time of the process, the scheduler's run-queue wait of every
thread from /proc/self/task/*/schedstat, the machine's steal time from /proc/stat). A call during
which a thread waited for a CPU, the process's threads together got much less CPU than wall time
(none of them was running: descheduled), or the hypervisor stole time, is *disturbed*: its round
is thrown away and timed again after a back-off.
A CUDA batch (timed by gpu_timing: graph replays, eager calls, the host's issue time) is watched as a whole:
run-queue wait and steal of the host over the batch (`watched_batch`). If too many rounds stay disturbed the batch
raises `DisturbedError`, which says what was seen; a disturbed time is never returned as good.
The clock source is injectable, so tests feed the detector disturbed samples.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.measure.cases import Case


class OutOfMemoryError(Exception):
    """The device ran out of memory: a result to record, not a crash."""


class DisturbedError(UserError):
    """The machine stayed busy with other work: no undisturbed timing could be taken.

    A UserError, so that a command that does not handle it still ends in one clear line."""

    def __init__(self, message: str, seen: dict) -> None:
        super().__init__(message)
        self.seen = seen


@dataclass
class TimeStats:
    """Seconds per call over the timed (undisturbed) runs."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    runs: int
    warmup: int
    discarded: int = 0
    """Runs thrown away because the machine was disturbed during them."""

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
    def from_times(cls, times: list[float], warmup: int, discarded: int = 0) -> TimeStats:
        qs = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else [times[0]] * 3
        return cls(statistics.median(times), qs[0], qs[2], min(times), max(times), len(times), warmup, discarded)


# -- the clocks and the detector ----------------------------------------------------------------

TICK_S = 1 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


@dataclass(frozen=True)
class Clocks:
    """One reading of the clocks a disturbance shows on (seconds; None where the OS does not say)."""

    wall: float
    process_cpu: float
    """CPU time of every thread of the process (time.process_time); not the timing thread's alone: a parallel
    kernel may hand its work to a worker thread while the timing thread sleeps at the barrier."""
    run_wait: float | None = None
    """Sum over the process's threads of the time they were runnable but waiting for a CPU."""
    steal: float | None = None
    """Time the hypervisor gave this machine's CPUs to others, summed over CPUs."""


def _run_wait() -> float | None:
    total = 0
    try:
        for task in Path("/proc/self/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue
    except OSError:
        return None
    return total * 1e-9


def _steal() -> float | None:
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) * TICK_S if fields[0] == "cpu" and len(fields) > 8 else None
    except (OSError, ValueError):
        return None


def read_clocks() -> Clocks:
    """The real clocks of this process and machine."""
    wait, steal = _run_wait(), _steal()
    return Clocks(time.perf_counter(), time.process_time(), wait, steal)


@dataclass
class Verdict:
    """What one timed call saw."""

    wall: float
    cpu: float
    """CPU time of all the process's threads during the call."""
    run_wait: float | None
    steal: float | None
    reasons: list[str] = field(default_factory=list)

    @property
    def disturbed(self) -> bool:
        return bool(self.reasons)


@dataclass
class Detector:
    """Decides from two clock readings whether a timed call was disturbed.

    Thresholds: threads of the process waited for a CPU for more than `max_wait` of the wall time
    (plus `slack_s`, the wake-up latency of idle worker threads); the process's threads together ran for
    less than `min_cpu` of the wall time (minus `slack_s`); or more than `max_steal` of one CPU was stolen
    (at least two clock ticks). `clock` is the source of readings (tests pass fed samples)."""

    clock: Callable[[], Clocks] = read_clocks
    max_wait: float = 0.10
    min_cpu: float = 0.60
    max_steal: float = 0.10
    slack_s: float = 2e-4
    retries: int = 3
    """Extra timed rounds allowed per timed round before giving up (3: up to 4× the rounds)."""
    backoff_s: float = 0.05
    """First pause after a disturbed round; doubles each time, capped at `max_backoff_s`."""
    max_backoff_s: float = 1.0
    sleep: Callable[[float], None] = time.sleep

    def judge(self, before: Clocks, after: Clocks) -> Verdict:
        wall = after.wall - before.wall
        cpu = after.process_cpu - before.process_cpu
        wait = None if after.run_wait is None or before.run_wait is None else after.run_wait - before.run_wait
        steal = None if after.steal is None or before.steal is None else after.steal - before.steal
        v = Verdict(wall, cpu, wait, steal)
        if wait is not None and wait > self.max_wait * wall + self.slack_s:
            v.reasons.append("run-queue wait")
        if cpu < self.min_cpu * wall - self.slack_s:
            v.reasons.append("CPU time below wall time")
        if steal is not None and steal >= 2 * TICK_S and steal > self.max_steal * wall:
            v.reasons.append("steal")
        return v


DEFAULT_DETECTOR = Detector()


@dataclass
class Seen:
    """What a batch of timed calls saw, for the line that says a device stayed disturbed."""

    calls: int = 0
    disturbed: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    wait: float = 0.0
    steal: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)

    def add(self, v: Verdict) -> None:
        self.calls += 1
        self.wall += v.wall
        self.cpu += v.cpu
        self.wait += v.run_wait or 0.0
        self.steal += v.steal or 0.0
        if v.disturbed:
            self.disturbed += 1
            for r in v.reasons:
                self.reasons[r] = self.reasons.get(r, 0) + 1

    def as_json(self) -> dict:
        wall = self.wall or 1.0
        return {
            "calls": self.calls,
            "disturbed": self.disturbed,
            "cpu_over_wall": round(self.cpu / wall, 3),
            "run_wait_over_wall": round(self.wait / wall, 3),
            "steal_over_wall": round(self.steal / wall, 3),
            "reasons": dict(self.reasons),
        }

    def summary(self) -> str:
        j = self.as_json()
        why = ", ".join(f"{r} in {n}" for r, n in self.reasons.items())
        return (
            f"{self.disturbed} of {self.calls} timed runs disturbed ({why}); over all runs the process got "
            f"{100 * j['cpu_over_wall']:.0f}% of wall time as CPU, threads waited for a CPU "
            f"{100 * j['run_wait_over_wall']:.0f}% of it, steal {100 * j['steal_over_wall']:.0f}%"
        )


# -- timing ---------------------------------------------------------------------------------------


SETTLE_S = 0.005
"""A call shorter than this (on CPU) follows an untimed call of the same case (`_timer`)."""


def _timer(detector: Detector | None):
    """Times one call. A short call is preceded by an untimed one of the same case, so that it does not pay
    for what came just before it (the detector's reads of /proc, the other case of a pair) with cold caches
    and branch predictors: 1 to 17 µs per call on the 2-core VM, up to a fifth of a small variant's time
    (`benchmarks/bench_settle.py`). Its ops are timed warm too, in tight loops (`calibrate`)."""

    def once(case: Case, inputs: list, settle: bool) -> tuple[float, Verdict | None]:
        before = detector.clock() if detector else None
        if settle:
            case.run(list(inputs))
        t0 = time.perf_counter()
        case.run(list(inputs))
        seconds = time.perf_counter() - t0
        verdict = detector.judge(before, detector.clock()) if detector and before else None
        return seconds, verdict

    return once


def cuda_clocks() -> dict:
    """SM clock and temperature of GPU 0 when NVML can say (recorded with CUDA timings)."""
    out: dict = {}
    for name, fn in (("sm_clock_mhz", "clock_rate"), ("temperature_c", "temperature")):
        try:
            out[name] = getattr(torch.cuda, fn)()
        except Exception:  # NVML missing or unsupported: nothing to record
            continue
    return out


def watched_batch(
    run: Callable[[], list[TimeStats]], detector: Detector | None, seen: Seen | None, device: str
) -> list[TimeStats]:
    """Run a whole timed batch (a harness that times many calls itself) under the detector's watch.

    Only the run-queue wait and steal over the whole batch are judged (a thread waiting on the GPU
    legitimately uses less CPU than wall time); a disturbed batch is run again after a back-off, at
    most `detector.retries` times, then DisturbedError."""
    if detector is None:
        return run()
    watch = replace(detector, min_cpu=0.0)
    seen = seen if seen is not None else Seen()
    backoff = detector.backoff_s
    for attempt in range(detector.retries + 1):
        before = detector.clock()
        stats = run()
        verdict = watch.judge(before, detector.clock())
        seen.add(verdict)
        if not verdict.disturbed:
            return [replace(s, discarded=s.discarded + attempt * s.runs) for s in stats]
        detector.sleep(backoff)
        backoff = min(detector.max_backoff_s, 2 * backoff)
    raise DisturbedError(f"the {device} host stayed disturbed: {seen.summary()}", seen.as_json())


def time_cases(
    cases: list[Case],
    repeats: int = 7,
    warmup: int = 2,
    *,
    detector: Detector | None = DEFAULT_DETECTOR,
    seen: Seen | None = None,
    settle_s: float = SETTLE_S,
    host_clock: bool = False,
    count_kernels: bool = True,
) -> list[TimeStats]:
    """Time several cases in alternation; raises OutOfMemoryError if any of them does not fit.

    On CPU, a case whose last warm-up call took less than `settle_s` has each timed call preceded by an
    untimed one (`_timer`); `settle_s=0` times every call straight after what came before it.

    With a `detector` (the default), a round (one call of every case) during which any call was
    disturbed is thrown away and timed again after a back-off; after `detector.retries × repeats`
    thrown-away rounds, DisturbedError. `seen` collects what the detector saw; `detector=None`, or
    ATTN_COST_DISTURBANCE=off with the default detector, times without watching (every run kept: for
    functional tests on a busy machine, never for numbers to trust).

    On CUDA the times are device times by graph replay, each a `gpu_timing.CudaTimes` that keeps the eager time,
    the host's issue time and the counted kernels beside it; or with `host_clock` host times around synchronised
    blocks (`gpu_timing.host_seconds`: for terms that launch little or nothing); `count_kernels` False spares the
    kernel count (the op calibration's one-kernel shapes). On the CPU every time is a host time."""
    if detector is DEFAULT_DETECTOR and os.environ.get("ATTN_COST_DISTURBANCE", "").lower() == "off":
        detector = None
    if cases[0].device == "cuda":  # CUDA events around blocks of calls, or the host clock: gpu_timing.py
        from attn_cost.profilers.measure.gpu_timing import time_cases_cuda

        return watched_batch(
            lambda: time_cases_cuda(cases, repeats, warmup, host_clock, count_kernels), detector, seen, "cuda"
        )
    once = _timer(detector)
    times: list[list[float]] = [[] for _ in cases]
    seen = seen if seen is not None else Seen()
    discarded = 0
    backoff = detector.backoff_s if detector else 0.0
    try:
        with torch.no_grad():
            inputs = [c.make_inputs() for c in cases]
            warm = [math.inf] * len(cases)
            for _ in range(warmup):
                for i, (c, x) in enumerate(zip(cases, inputs, strict=True)):
                    t0 = time.perf_counter()
                    c.run(list(x))
                    warm[i] = time.perf_counter() - t0
            settle = [w < settle_s for w in warm]
            while len(times[0]) < repeats:
                round_ = [once(c, x, s) for c, x, s in zip(cases, inputs, settle, strict=True)]
                verdicts = [v for _, v in round_ if v is not None]
                for v in verdicts:
                    seen.add(v)
                if any(v.disturbed for v in verdicts):
                    assert detector is not None  # verdicts come from the detector alone
                    discarded += 1
                    if discarded > detector.retries * repeats:
                        message = f"the {cases[0].device} stayed disturbed: {seen.summary()}"
                        raise DisturbedError(message, seen.as_json())
                    detector.sleep(backoff)
                    backoff = min(detector.max_backoff_s, 2 * backoff)
                    continue
                backoff = detector.backoff_s if detector else 0.0
                for i, (t, _) in enumerate(round_):
                    times[i].append(t)
    except (torch.cuda.OutOfMemoryError, MemoryError) as e:
        raise OutOfMemoryError(str(e).splitlines()[0] if str(e) else "out of memory") from None
    except RuntimeError as e:
        if "out of memory" in str(e).lower() or "can't allocate memory" in str(e).lower():
            raise OutOfMemoryError(str(e).splitlines()[0]) from None
        raise
    return [TimeStats.from_times(t, warmup, discarded) for t in times]
