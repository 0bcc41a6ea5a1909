"""Measure variants and find their measured transition points, reusing every stored measurement."""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from attn_cost.costmodel.crossover import Setting, crossover
from attn_cost.profilers.measure import sdpa, standing
from attn_cost.profilers.measure.cases import build_case
from attn_cost.profilers.measure.gpu_timing import CudaTimes, precision_settings, release
from attn_cost.profilers.measure.memory import cuda_peak, traced_peak
from attn_cost.profilers.measure.references import implementation_of
from attn_cost.profilers.measure.search import (
    Probe,
    Transition,
    crossing_of,
    find_transition,
    place,
    replicate_interval,
    replicates_disagree,
    scan_probes,
    tie_of,
    trend_breaks,
)
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.measure.timing import (
    DisturbedError,
    OutOfMemoryError,
    Seen,
    TimeStats,
    cuda_clocks,
    time_cases,
)
from attn_cost.profilers.store.store import ResultStore, record_key

Notify = Callable[[str], None]


@dataclass
class Measurer:
    """Times and peak memory of reference implementations on one device, through the store."""

    device: str
    store: ResultStore
    scope: str = "core"
    dtype: str = "fp32"
    repeats: int = 7
    warmup: int = 2
    notify: Notify = lambda message: None
    sdpa_backend: str | None = None
    """SDPA kernel forced for softmax-fused (None: PyTorch's choice); see profilers/measure/sdpa.py."""
    measured: int = 0
    """Measurements actually run and stored (not found in the store)."""
    reused: int = 0
    """Timings found in the store instead of measured."""
    seen: Seen = field(default_factory=Seen)
    """What the disturbance detector saw over every timed run of this measurer."""

    def key(self, kind: str, variant: str, sizes: Sizes) -> str:
        """The store key of a measurement of `variant` at `sizes` on this device (its SDPA backend included)."""
        key = record_key(kind, variant, self.scope, self.dtype, sizes.as_dict(), self.store.device)
        impl = implementation_of(variant, sizes, self.device, self.scope)  # two implementations never mix
        return key + sdpa.key_suffix(variant, self.sdpa_backend) + (f"|impl={impl.key}" if impl else "")

    def time(
        self,
        variants: list[str],
        sizes: Sizes,
        repeats: int | None = None,
        *,
        fresh: bool = False,
        replicate: int | None = None,
    ) -> list[TimeStats | None]:
        """Seconds per call of each variant (None: out of memory), timed in alternation and stored. On CUDA the
        seconds are the device time (graph replay) and each record keeps the eager time, the host's launch cost, the
        timing method and the L2 policy beside it (`gpu_timing.CudaTimes.record_fields`).
        `fresh`: time them again even if stored (the new timings replace the stored ones).
        `replicate`: the k-th repetition of this timing, stored under its own key (see `_speed_transition`)."""
        suffix = "" if replicate is None else f"|replicate={replicate}"
        keys = [self.key("time", v, sizes) + suffix for v in variants]
        stored = [None if fresh else self.store.get(k) for k in keys]
        runs = repeats or self.repeats
        if all(r is not None and (r["status"] == "oom" or r["time"]["runs"] >= runs) for r in stored):
            self.reused += len(variants)
            return [_stats(r) for r in stored]
        stats, status = self._timed(variants, sizes, runs)
        extra = {"clocks": cuda_clocks(), **_precision()} if self.device == "cuda" else {}
        if replicate is not None:
            extra["replicate"] = replicate
        for key, v, s, st in zip(keys, variants, stats, status, strict=True):
            fields = s.record_fields() if isinstance(s, CudaTimes) else {}  # eager, host, method, l2
            self._record("time", key, v, sizes, {"time": s.as_json() if s else None, "status": st, **extra, **fields})
        self.measured += len(variants)
        return stats

    def time_again(self, variant: str, sizes: Sizes) -> None:
        """Time a stored timing again and keep the faster of the two: a disturbance only slows a timing down,
        and some slow spells of a shared machine show on none of the detector's clocks. The kept record counts
        the times it was taken again (`retimed`), so that a rerun does not take a confirmed timing again."""
        key = self.key("time", variant, sizes)
        old = self.store.get(key)
        (new,) = self.time([variant], sizes, fresh=True)
        slower = old is not None and old["status"] == "ok" and (new is None or new.median > old["time"]["median"])
        kept = old if slower else self.store.get(key)
        if kept is not None:
            fields = {k: v for k, v in kept.items() if k not in ("schema", "device", "at")}
            self.store.add({**fields, "retimed": (old or {}).get("retimed", 0) + 1})

    def _timed(self, variants: list[str], sizes: Sizes, runs: int) -> tuple[list[TimeStats | None], list[str]]:
        self.notify(f"timing {' vs '.join(variants)} at N = {sizes.N:,}")
        cases = [
            sdpa.bind(build_case(v, self.scope, sizes, self.dtype, self.device), self.sdpa_backend) for v in variants
        ]
        together: list[TimeStats | None] | None = None
        with contextlib.suppress(OutOfMemoryError):  # retried below, once the failed attempt's tensors are gone
            together = time_cases(cases, runs, self.warmup, seen=self.seen)
        if together is not None:
            stats, status = together, ["ok"] * len(variants)
        else:
            _release(self.device)
            stats, status = self._time_one_by_one(cases, runs)
        del cases
        gc.collect()
        return stats, status

    def _time_one_by_one(self, cases, runs: int) -> tuple[list[TimeStats | None], list[str]]:
        """After the cases did not fit together: each alone (one that fits alone is `ok`, not `oom`)."""
        stats, status = [], []
        for c in cases:
            alone = None
            with contextlib.suppress(OutOfMemoryError):
                alone = time_cases([c], runs, self.warmup, seen=self.seen)[0]
            _release(self.device)
            stats.append(alone)
            status.append("ok" if alone is not None else "oom")
        return stats, status

    def memory(self, variant: str, sizes: Sizes) -> int | None:
        """Peak bytes of one call (None: out of memory)."""
        key = self.key("memory", variant, sizes)
        rec = self.store.get(key)
        if rec is not None:
            self.reused += 1
            return rec["memory"]["peak_bytes"] if rec["status"] == "ok" else None
        self.notify(f"peak memory of {variant} at N = {sizes.N:,}")
        case = sdpa.bind(build_case(variant, self.scope, sizes, self.dtype, self.device), self.sdpa_backend)
        extra: dict = {}
        try:
            if self.device == "cuda":
                peaks = cuda_peak(case)
                memory = {"peak_bytes": peaks["requested"], "method": "cuda-requested-bytes", "peak_op": None,
                          "allocated_peak_bytes": peaks["allocated"]}  # fmt: skip
                extra = _precision()
            else:
                (peak, op) = traced_peak(case)
                memory = {"peak_bytes": peak, "method": "tracer", "peak_op": op}
            status = "ok"
        except (MemoryError, RuntimeError) as e:
            if "memory" not in str(e).lower() and not isinstance(e, MemoryError):
                raise
            memory, status = None, "oom"
        del case
        _release(self.device)
        self._record("memory", key, variant, sizes, {"memory": memory, "status": status, **extra})
        self.measured += 1
        return memory["peak_bytes"] if memory else None

    def _record(self, kind: str, key: str, variant: str, sizes: Sizes, values: dict) -> None:
        self.store.add(
            {
                "kind": kind,
                "key": key,
                "variant": variant,
                "scope": self.scope,
                "dtype": self.dtype,
                "sizes": sizes.as_dict(),
                **sdpa.record_fields(variant, self.sdpa_backend, self.device, self.dtype, sizes.d),
                **_implementation(variant, sizes, self.device, self.scope),
                **values,
            }
        )


def _release(device: str) -> None:
    """Garbage-collect, and on CUDA empty the caching allocator: the next attempt starts from free memory."""
    gc.collect()
    if device == "cuda":
        release()


def _implementation(variant: str, sizes: Sizes, device: str, scope: str) -> dict:
    """What a measurement records about the implementation that ran, where more than one can."""
    impl = implementation_of(variant, sizes, device, scope)
    return impl.record() if impl is not None else {}


def _precision() -> dict:

    return {"precision": precision_settings()}


def _stats(record: dict) -> TimeStats | None:
    return TimeStats(**record["time"]) if record["status"] == "ok" and record["time"] else None


@dataclass
class PairProfile:
    """Analytic and measured transition points of one pair at one size."""

    a: str
    b: str
    sizes: Sizes
    analytic_n0: int | None
    analytic_n1: int | None
    speed: Transition | None
    memory: Transition | None
    seconds: float

    def as_json(self) -> dict:
        def pick(t: Transition | None, what: str):
            return getattr(t, what) if t is not None and t.verdict == "found" else None

        return {
            "a": self.a,
            "b": self.b,
            "d": self.sizes.d,
            "heads": self.sizes.h,
            "batch": self.sizes.b,
            "analytic_n0": self.analytic_n0,
            "analytic_n1": self.analytic_n1,
            "measured_n0": _round(pick(self.speed, "measured")),
            "measured_n1": _round(pick(self.memory, "measured")),
            "n0_uncertainty": _round(pick(self.speed, "uncertainty")),
            "n1_uncertainty": _round(pick(self.memory, "uncertainty")),
            "n0_verdict": self.speed.verdict if self.speed else None,
            "n0_note": self.speed.note if self.speed else None,
            "n0_replicates": [round(x, 1) for x in self.speed.replicates] if self.speed else [],
            "n0_bracket": list(self.speed.bracket) if self.speed and self.speed.bracket else None,
            "n0_lengths": list(self.speed.lengths) if self.speed else [],
            "n0_earlier": self.speed.earlier if self.speed else None,
            "n0_tie": list(self.speed.tie) if self.speed and self.speed.tie else None,
            "n0_regret": round(self.speed.regret, 4) if self.speed and self.speed.regret is not None else None,
            "n0_range": list(self.speed.n0_range) if self.speed and self.speed.n0_range else None,
            "n1_verdict": self.memory.verdict if self.memory else None,
            "lengths_timed": len(self.speed.probes) if self.speed else 0,
            "lengths_traced": len(self.memory.probes) if self.memory else 0,
            "speed": self.speed.as_json() if self.speed else None,
            "memory": self.memory.as_json() if self.memory else None,
            "seconds": round(self.seconds, 2),
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def profile_pair(
    a: str,
    b: str,
    sizes: Sizes,
    measurer: Measurer,
    setting: Setting,
    *,
    costs: tuple[str, ...] = ("time", "memory"),
    max_lengths: int = 15,
    n_max: int = 16384,
    reach: int | None = None,
    rel_tol: float = 0.02,
    replicates: int = 4,
    scan: bool = False,
) -> PairProfile:
    """Measure where B overtakes A in time (N0) and in peak memory (N1), starting from the prediction.

    `sizes` gives every size but N, which is what the search varies (its N is ignored). A found
    speed crossover is checked (`_speed_transition`) and re-timed `replicates` times. `scan`: the speed
    search first times one length per octave up to n_max and bisects the last sign change (`validate`,
    which judges the whole range), instead of bracketing from the prediction. `reach`: the longest length the
    speed search may time (a campaign's plan: longer calls cost more than the unit has), below n_max, which still
    bounds the memory search; a search that ends at it says so."""
    t0 = time.perf_counter()
    dims = replace(sizes, N=1).symbols()
    n0 = crossover(a, b, "flops", dims, setting, exact=False).n
    n1 = crossover(a, b, "memory", dims, setting, exact=False).n

    def at(n: int) -> Sizes:
        return replace(sizes, N=n)

    grain = length_grain(measurer.device)

    def speed(n: int, fresh: bool = False) -> Probe:
        ta, tb = measurer.time([a, b], at(n), fresh=fresh)
        probe = _time_probe(n, ta, tb)
        if probe.marginal:  # too close to call: time both again with more runs
            ta, tb = measurer.time([a, b], at(n), repeats=3 * measurer.repeats)
            probe = _time_probe(n, ta, tb)
        return probe

    def memory(n: int) -> Probe:
        ma, mb = measurer.memory(a, at(n)), measurer.memory(b, at(n))
        return Probe(n, None if ma is None else float(ma), None if mb is None else float(mb))

    speed_t = memory_t = None
    if "time" in costs:
        top = min(n_max, reach or n_max)
        speed_t = _speed_transition(
            speed, measurer, a, b, at, n0 or 256, top, max_lengths, rel_tol, replicates, grain, scan
        )
        speed_t = against_earlier(measurer, a, b, sizes, speed_t)
        if top < n_max and speed_t.verdict == "a-cheaper-throughout" and speed_t.note is None:
            speed_t = replace(speed_t, note=f"A cheaper at every length timed, up to N = {top:,}: longer calls are "
                              "beyond this run's reach (planned by their predicted time)")  # fmt: skip
    if "memory" in costs:
        memory_t = find_transition(
            memory, n1 or 256, n_min=2, n_max=n_max, max_probes=4 * max_lengths, rel_tol=0, exact=True
        )
    return PairProfile(a, b, sizes, n0, n1, speed_t, memory_t, time.perf_counter() - t0)


_EARLIER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Per result store (this process), the first speed transition found of each unit: what a later measurement of the
same unit through the same store is compared with (a campaign's profile step, then a validation)."""


def against_earlier(measurer: Measurer, a: str, b: str, sizes: Sizes, t: Transition) -> Transition:
    """The transition, or where an earlier measurement of this unit through the same store (in this process)
    reached another verdict or a crossing outside this one's interval (`standing.agree`), the transition with
    `earlier` set (the earlier verdict, crossing and interval, and a note saying what changed): a unit never changes
    verdict on re-measurement without saying so (`standing.judge` then says it does not stand)."""
    backend = measurer.sdpa_backend
    unit = (a, b, measurer.scope, measurer.dtype, backend, tuple(sorted(replace(sizes, N=1).as_dict().items())))
    first = _EARLIER.setdefault(measurer.store, {}).setdefault(unit, t)
    if first is t or standing.agree(_row(first), _row(t)):
        return t
    note = f"measured earlier through the same store: {standing.said(_row(first))}, this time {standing.said(_row(t))}"
    row = _row(first)
    earlier = {"verdict": first.verdict, "measured": first.measured, "uncertainty": first.uncertainty,
               "tie": row["n0_tie"], "n0_range": row["n0_range"], "note": note}  # fmt: skip
    return replace(t, earlier=earlier)


def _row(t: Transition) -> dict:
    return {"n0_verdict": t.verdict, "measured_n0": t.measured, "n0_uncertainty": t.uncertainty,
            "n0_tie": list(t.tie) if t.tie else None, "n0_range": list(t.n0_range) if t.n0_range else None}  # fmt: skip


class Stored:
    """The records of a store by key (replicates included) and the lengths each variant was measured at: what a
    pair's transitions are read from without timing anything (`stored_pair`)."""

    def __init__(self, store: ResultStore) -> None:
        self.by_key = store.every()
        self.lengths: dict[tuple, set[int]] = {}
        for rec in self.by_key.values():
            s = rec.get("sizes", {})
            where = (rec["kind"], rec["variant"], rec["scope"], rec["dtype"], s.get("d"))
            self.lengths.setdefault(where, set()).add(int(s.get("N", 0)))

    def at(self, measurer: Measurer, kind: str, variant: str, d: int) -> set[int]:
        return self.lengths.get((kind, variant, measurer.scope, measurer.dtype, d), set())


def stored_pair(a: str, b: str, sizes: Sizes, measurer: Measurer, setting: Setting, stored: Stored,
                replicates: int = 4) -> PairProfile | None:  # fmt: skip
    """A pair's transition points as its stored records show them, timing nothing (`validate --records`).

    Speed: over every length where both variants have a stored timing, the last change from A cheaper to B cheaper
    (as `search.scan_probes` judges a scan), placed between its two lengths; the replicates are the re-timings stored
    at lengths around that bracket (up to `replicates`), judged by the replicate rule (`replicated`); a verdict of B
    or A cheaper throughout holds over the lengths timed, which its note gives. Memory: the same over the traced
    lengths, to adjacent integers. None where neither cost has a stored measurement of both variants."""

    def at(n: int) -> Sizes:
        return replace(sizes, N=n)

    def timing(variant: str, n: int, replicate: int | None = None) -> tuple[bool, TimeStats | None]:
        key = measurer.key("time", variant, at(n)) + ("" if replicate is None else f"|replicate={replicate}")
        rec = stored.by_key.get(key)
        return rec is not None, None if rec is None else _stats(rec)

    def probe(n: int, replicate: int | None = None) -> Probe | None:
        (has_a, ta), (has_b, tb) = timing(a, n, replicate), timing(b, n, replicate)
        return _time_probe(n, ta, tb) if has_a and has_b else None

    t0 = time.perf_counter()
    dims = replace(sizes, N=1).symbols()
    n0 = crossover(a, b, "flops", dims, setting, exact=False).n
    n1 = crossover(a, b, "memory", dims, setting, exact=False).n
    both = stored.at(measurer, "time", a, sizes.d) & stored.at(measurer, "time", b, sizes.d)
    probes = [p for p in (probe(n) for n in sorted(both)) if p is not None]
    speed_t = _stored_speed(probes, probe, sorted(both), replicates, a, b) if probes else None
    traced = sorted(stored.at(measurer, "memory", a, sizes.d) & stored.at(measurer, "memory", b, sizes.d))
    peaks = []
    for n in traced:
        ka, kb = (measurer.key("memory", v, at(n)) for v in (a, b))
        ra, rb = stored.by_key.get(ka), stored.by_key.get(kb)
        if ra is not None and rb is not None:
            peaks.append(Probe(n, *(r["memory"]["peak_bytes"] if r["status"] == "ok" else None for r in (ra, rb))))
    memory_t = _stored_scan(peaks, exact=True) if peaks else None
    if speed_t is None and memory_t is None:
        return None
    return PairProfile(a, b, sizes, n0, n1, speed_t, memory_t, time.perf_counter() - t0)


def _stored_scan(probes: list[Probe], exact: bool) -> Transition:
    """`search.scan_probes` over measured probes: the bracket of the last sign change placed, or the verdict, with the
    lengths it holds over."""
    by_n = {p.n: p for p in probes}
    found = scan_probes(by_n.__getitem__, sorted(by_n))
    if isinstance(found, str):
        span = f"over the lengths timed, N = {probes[0].n:,} to {probes[-1].n:,}"
        return Transition(found, probes=probes, note=span if found.endswith("throughout") else None)
    lo, hi = found
    return place(probes, by_n[lo], by_n[hi], exact)


def _stored_speed(probes: list[Probe], probe: Callable, candidates: list[int], replicates: int, a: str, b: str
                  ) -> Transition:  # fmt: skip
    """The stored speed transition; a found one judged by its stored replicates: those at lengths within a quarter of
    the bracket's ends (the replicates re-time a tenth beyond them)."""
    t = _stored_scan(probes, exact=False)
    if t.verdict != "found":
        return t
    if _memory_limit(t):
        return _as_memory_limit(t, a, b)
    lo, hi = t.bracket or (0, 0)
    runs: list[list[Probe]] = []
    lengths: set[int] = set()
    for k in range(1, replicates + 1):
        window = (n for n in candidates if lo - lo / 4 <= n <= hi + hi / 4)
        near = [p for p in (probe(n, k) for n in window) if p is not None]
        if not near:
            break
        runs.append(near)
        lengths |= {p.n for p in near}
    return replicated(t, sorted(lengths), runs)


def _time_probe(n: int, ta: TimeStats | None, tb: TimeStats | None) -> Probe:
    timed = [s for s in (ta, tb) if s is not None]
    runs, discarded = min((s.runs for s in timed), default=0), max((s.discarded for s in timed), default=0)
    if ta is None or tb is None:
        return Probe(n, ta.median if ta else None, tb.median if tb else None, runs=runs, discarded=discarded)
    noise = math.hypot(ta.median_se, tb.median_se) / ta.median
    return Probe(n, ta.median, tb.median, noise, ta.median_se, tb.median_se, runs, discarded)


def _speed_transition(
    speed: Callable[..., Probe],
    measurer: Measurer,
    a: str,
    b: str,
    at: Callable[[int], Sizes],
    start: int,
    n_max: int,
    max_lengths: int,
    rel_tol: float,
    replicates: int,
    grain: int,
    scan: bool = False,
) -> Transition:
    """Search, check the trend, re-time the bracket in alternation; never a crossover from disturbed timings.

    1. Bracket and bisect (stored timings reused). 2. Each variant's time must not fall as N grows
    beyond its noise: the lengths that break the trend are timed again (replacing the stored timings)
    and the search repeated. 3. The bracket and two lengths 10 % outside it are re-timed `replicates`
    times, alternating; if their crossings mostly lie outside those lengths (or they do not cross), the
    bracket was wrong: its ends are timed again and the search repeated. At most three
    searches; after that the crossover is `inconsistent`. 4. Each replicate gives a crossing (a line
    through its relative differences); `replicated` applies the replicate rule (`search.replicates_disagree`:
    `unsteady` where the crossings disagree) and reports their median with a prediction interval for one
    more run, which covers the drift between runs, not only the noise within one. Where the replicates disagree,
    or cross outside the re-timed lengths, but every length timed says A and B are within the noise over a stretch
    between where A is faster and where B is, the verdict is a tie (`tied`): an answer, not a search to repeat.
    A device that stays disturbed ends the search with verdict `disturbed` and what was seen."""
    trend_tol = TREND_TOL.get(measurer.device, 0.02)
    try:
        suspects: list[int] = []
        for _ in range(3):
            for n in suspects:
                speed(n, fresh=True)
            t = _on_grid(speed, start, n_max, max_lengths, rel_tol, grain, scan)
            suspects = trend_breaks(t.probes, tol=trend_tol)
            if suspects:
                continue
            if t.verdict == "found" and _memory_limit(t):
                return _as_memory_limit(t, a, b)
            if t.verdict != "found" or replicates < 1:
                return t
            lo, hi = t.bracket
            lengths = sorted({snap(max(2, round(lo / 1.1)), grain), lo, hi, snap(min(n_max, round(hi * 1.1)), grain)})
            runs = [
                [_time_probe(n, *measurer.time([a, b], at(n), replicate=k)) for n in lengths]
                for k in range(1, replicates + 1)
            ]
            again = [c for c in map(crossing_of, runs) if c is not None]
            if 2 * len(again) < replicates or not lengths[0] <= statistics.median(again) <= lengths[-1]:
                tie = tied(t, lengths, runs)
                if tie is not None:  # the re-timed lengths cannot tell A and B apart: the answer
                    return tie
                suspects = [lo, hi]  # the re-timed lengths cross elsewhere (or not at all): the bracket was wrong
                continue
            return replicated(t, lengths, runs)
        return replace(t, verdict="inconsistent", measured=None, uncertainty=None, note=(
            f"{a} and {b} timed again at N = {', '.join(f'{n:,}' for n in suspects)} still disagree with the "
            "other lengths: the device is not steady enough to place the crossover"
        ))  # fmt: skip
    except DisturbedError as e:
        return Transition("disturbed", note=str(e), seen=e.seen)


def replicated(t: Transition, lengths: list[int], runs: list[list[Probe]]) -> Transition:
    """A found search with its replicates' runs at `lengths`: `found` at the median of the crossings (with a
    prediction interval for one more run, never narrower than half the bracket) where they agree by the replicate
    rule, else a tie where the timings show one (`tied`), else `unsteady` with the crossings in its note."""
    crossings = _crossings(t, runs)
    why = replicates_disagree(crossings, runs)
    if why is not None:
        return tied(t, lengths, runs) or replace(
            t, verdict="unsteady", measured=None, uncertainty=None, replicates=crossings, lengths=lengths,
            note=f"replicates disagree: {why}",
        )  # fmt: skip
    lo, hi = t.bracket or (0, 0)
    centre, half = replicate_interval(crossings, floor=max(t.uncertainty or 0.0, (hi - lo) / 2))
    return replace(t, measured=centre, uncertainty=half, replicates=crossings, lengths=lengths)


def tied(t: Transition, lengths: list[int], runs: list[list[Probe]]) -> Transition | None:
    """The one place a measured tie is called: a found search whose replicates (`runs` at `lengths`) gave no crossing
    to report, as a tie where its timings and its replicates' together show one (`search.tie_of`: a quiet machine,
    A faster, then neither beyond the noise over a stretch, then B); None where they do not. A tie reports no
    crossing: its stretch, its regret and the N0 range they imply."""
    tie = tie_of([*t.probes, *(p for run in runs for p in run)])
    if tie is None:
        return None
    crossings = _crossings(t, runs)
    shown = ", ".join(f"{c:,.0f}" for c in crossings) or "none"
    lo, hi = tie.stretch
    where = f"at N = {lo:,}" if lo == hi else f"from N = {lo:,} to {hi:,}"
    note = (
        f"either is as fast {where} (neither faster beyond the noise; they differ there by at most {tie.regret:.1%}, "
        f"the regret), so N0 lies between {tie.n0_range[0]:,} and {tie.n0_range[1]:,}; the replicates' crossings: "
        f"{shown}"
    )
    return replace(t, verdict="tie", measured=None, uncertainty=None, replicates=crossings, lengths=lengths,
                   tie=tie.stretch, regret=tie.regret, n0_range=tie.n0_range, note=note)  # fmt: skip


def _crossings(t: Transition, runs: list[list[Probe]]) -> list[float]:
    """The search's crossing and each replicate's that crossed."""
    return [c for c in [t.measured, *map(crossing_of, runs)] if c is not None]


GRAIN = {"cuda": 8}
"""On CUDA only multiples of 8 tokens are probed: rows of 16 bytes in bf16 and fp32, the alignment cuBLAS and
the softmax kernels are chosen for (a length off it can be slower than a longer one)."""
TREND_TOL = {"cuda": 0.05}
"""How much faster a longer length may time before the trend check calls it a bad timing: on a GPU the
kernel chosen changes with the shape, so time is not monotonic in N to within a few per cent."""


def length_grain(device: str) -> int:
    """The multiple every probed length is: the device's grain (the formulas hold at every N, a padded length
    included, so no variant asks for more)."""
    return GRAIN.get(device, 1)


def snap(n: int, grain: int) -> int:
    """n rounded to the nearest multiple of `grain` (at least one grain)."""
    return max(grain, grain * round(n / grain)) if grain > 1 else n


def _on_grid(speed, start: int, n_max: int, max_lengths: int, rel_tol: float, grain: int, scan: bool) -> Transition:
    """find_transition over multiples of `grain` (lengths and the transition in tokens); with `scan`, the whole
    range first (`search.scan_lengths`): the last sign change decides, as the op model's `last_crossing` does."""
    if grain == 1:
        return find_transition(speed, start, n_min=2, n_max=n_max, max_probes=max_lengths, rel_tol=rel_tol, scan=scan)
    t = find_transition(
        lambda m: replace(speed(m * grain), n=m), max(1, round(start / grain)), n_min=1,
        n_max=max(1, n_max // grain), max_probes=max_lengths, rel_tol=rel_tol, scan=scan,
    )  # fmt: skip
    return replace(
        t,
        measured=None if t.measured is None else t.measured * grain,
        uncertainty=None if t.uncertainty is None else t.uncertainty * grain,
        bracket=None if t.bracket is None else (t.bracket[0] * grain, t.bracket[1] * grain),
        probes=[replace(p, n=p.n * grain) for p in t.probes],
    )


def _memory_limit(t: Transition) -> bool:
    """Whether a found crossing is where A ran out of memory while B still ran: a limit, not a speed crossover."""
    hi = next((p for p in t.probes if p.n == t.bracket[1]), None)
    return hi is not None and hi.a is None and hi.b is not None


def _as_memory_limit(t: Transition, a: str, b: str) -> Transition:
    lo, hi = t.bracket
    note = (
        f"{a} runs out of memory between N = {lo:,} and {hi:,} while {b} still runs: a memory limit, not a "
        f"speed crossover ({b} was not faster below it)"
    )
    return replace(t, verdict="memory-limit", measured=None, uncertainty=None, note=note)
