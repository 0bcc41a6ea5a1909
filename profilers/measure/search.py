"""Find a measured transition point with few measurements: bracket from the prediction, then bisect.

`compare(n)` measures both variants at length n and says whether B is no more expensive than A.
Starting from the analytic prediction, the search doubles or halves n until the answer flips,
then bisects until the bracket is narrower than the tolerance. The crossing is placed by linear
interpolation of the relative difference between the two bracketing lengths; its uncertainty
combines half the bracket with the measurement noise carried through that interpolation.

The checks `profile._speed_transition` runs before it calls a measured crossover found live here
too: `trend_breaks` (a cost that falls as N grows), `crossing_of` (where a line through re-timed
relative differences crosses zero, scipy's linregress), `replicates_disagree` (the replicate rule
below) and `replicate_interval` (a Student-t prediction interval over the replicates' crossings,
scipy.stats.t: it covers the next run's value, drift between runs included, rather than only the
noise of the mean).

The replicate rule: a speed crossover is `found` only where its crossings agree: at least
REPLICATE_MIN of them (the search's and one per re-timed replicate), every one within
REPLICATE_SPREAD of their median, and every replicate showing one crossing over the re-timed
lengths (A cheaper at the shortest, B at the longest, one change of sign between). Otherwise the
verdict is `unsteady`, with the crossings in its note, unless the two are tied.

A tie (`tie_of`): near a crossing two curves are close by nature, and where their timings cannot tell them apart
over a stretch of lengths, that is the answer, as the op model's tie interval is (`devicemodel.device.tie_interval`).
Every length timed (the search's and the replicates') is judged by the 95 % confidence interval of its mean log time
ratio ln(tB/tA) (`faster_by_length`: Student t, the spread between runs pooled over the lengths re-timed): A faster
where the interval lies above 0, B faster where it lies below, neither where it holds 0. In order of N, the lengths
where A leads from the shortest (every one A) and those where B leads to the longest (every one B) are told apart;
the lengths between them are the stretch where either is as fast, whichever way each of them leans (near a crossing,
a length can come out A or B by a per cent, against the order of N: that is the tie, not a failure). Its regret is
the most the mean ratio there differs from 1 (|tB/tA − 1|), what choosing either costs there; N0 lies after the last
length of A's lead, up to the first of B's. Only a quiet machine ties (`quiet`): a busy one's kept timings can hide slow
spells no clock showed, and its verdict stays what the replicate rule says; only from timings that show the spread
between runs (some length timed more than once); and only within TIE_REGRET (a stretch
whose ratio is off 1 by more is not "as fast", whatever the noise).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from scipy.stats import linregress
from scipy.stats import t as student_t


@dataclass
class Probe:
    """One length measured for both variants."""

    n: int
    a: float | None
    """Cost of A (seconds or bytes); None if it ran out of memory."""
    b: float | None
    noise: float = 0.0
    """Standard error of (a - b) / a."""
    a_se: float = 0.0
    """Standard errors of a and b (for the trend check)."""
    b_se: float = 0.0
    runs: int = 0
    """Timed runs kept of each variant (the fewer of the two)."""
    discarded: int = 0
    """Rounds thrown away as disturbed while timing them (`timing.TimeStats.discarded`; the more of the two)."""

    @property
    def rel_diff(self) -> float:
        """(a - b) / a: positive where B is cheaper."""
        if self.a is None:
            return 1.0
        if self.b is None:
            return -1.0
        return (self.a - self.b) / self.a if self.a else 0.0

    @property
    def b_cheaper(self) -> bool:
        if self.a is None or self.b is None:
            return self.a is None and self.b is not None
        return self.b <= self.a

    @property
    def marginal(self) -> bool:
        return abs(self.rel_diff) < 2 * self.noise


@dataclass
class Transition:
    """Where B became no more expensive than A, as measured."""

    verdict: str
    """found | tie (A and B within the noise over a stretch, `tie_of`) | b-cheaper-throughout | a-cheaper-throughout |
    out-of-memory | budget | disturbed | inconsistent | unsteady (replicates that disagree, `replicates_disagree`) |
    memory-limit"""
    measured: float | None = None
    uncertainty: float | None = None
    bracket: tuple[int, int] | None = None
    probes: list[Probe] = field(default_factory=list)
    replicates: list[float] = field(default_factory=list)
    """Crossings found by re-timing the bracket in alternation at the end (one per replicate)."""
    note: str | None = None
    """Why a crossover is not reported (disturbed, inconsistent), in one line."""
    seen: dict | None = None
    """What the disturbance detector saw, when it stopped the search."""
    lengths: list[int] = field(default_factory=list)
    """The lengths re-timed for the replicates (the bracket and one length beyond each end)."""
    earlier: dict | None = None
    """The verdict of an earlier measurement of the same unit through the same store, where this one differs from it
    (`profile.against_earlier`): {verdict, measured, uncertainty, n0_range, note}."""
    tie: tuple[int, int] | None = None
    """A tie's stretch: the first and last length where neither was faster beyond the noise (`Tie`)."""
    regret: float | None = None
    """A tie's regret: the most |tB/tA − 1| over its stretch."""
    n0_range: tuple[int, int] | None = None
    """The N0 a tie implies: from just after the last length where A was faster to the first where B was."""

    def as_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "measured": self.measured,
            "uncertainty": self.uncertainty,
            "bracket": list(self.bracket) if self.bracket else None,
            "probes": [{**asdict(p), "b_cheaper": p.b_cheaper, "marginal": p.marginal} for p in self.probes],
            "replicates": [round(x, 1) for x in self.replicates],
            "lengths": self.lengths,
            "note": self.note,
            "seen": self.seen,
            "earlier": self.earlier,
            "tie": list(self.tie) if self.tie else None,
            "regret": self.regret,
            "n0_range": list(self.n0_range) if self.n0_range else None,
        }


def find_transition(
    compare: Callable[[int], Probe],
    start: int,
    *,
    n_min: int = 1,
    n_max: int,
    max_probes: int,
    rel_tol: float,
    exact: bool = False,
    scan: bool = False,
) -> Transition:
    """Bracket and bisect on integer n. `exact` (deterministic costs such as traced memory) brackets
    with steps of 1, 2, 4, ... around the prediction and bisects down to adjacent integers. `scan` first
    measures one length per octave over the whole range (`scan_lengths`, beside `max_probes`) and bisects the
    last sign change there: no single-crossing assumption, and B cheaper (or dearer) throughout is measured
    at every octave, not inferred from one length."""
    probes: dict[int, Probe] = {}

    def probe(n: int) -> Probe:
        if n not in probes:
            probes[n] = compare(n)
        return probes[n]

    def done(verdict: str, lo: int | None = None, hi: int | None = None) -> Transition:
        ordered = [probes[n] for n in sorted(probes)]
        if lo is None or hi is None:
            return Transition(verdict, probes=ordered)
        return place(ordered, probes[lo], probes[hi], exact)

    budget = max_probes
    if scan:  # the bracket of the last sign change over every octave; the bisection's budget beside the scan
        found = scan_probes(probe, scan_lengths(n_min, n_max))
        if isinstance(found, str):
            return done(found)
        lo, hi = found
        budget += len(probes)
    else:
        n = max(n_min, min(n_max, start))
        first = probe(n)
        if first.a is None and first.b is None:
            return done("out-of-memory")
        bracket = _bracket(probe, n, first.b_cheaper, n_min, n_max, max_probes, exact, probes)
        if isinstance(bracket, str):
            return done(bracket)
        lo, hi = bracket
    while hi - lo > (1 if exact else max(1, math.ceil(rel_tol * lo))) and len(probes) < budget:  # bisect
        mid = (lo + hi) // 2
        if probe(mid).b_cheaper:
            hi = mid
        else:
            lo = mid
    return done("found", lo, hi)


def _bracket(probe: Callable[[int], Probe], n: int, b_cheaper: bool, n_min: int, n_max: int, max_probes: int,
             exact: bool, probes: dict) -> tuple[int, int] | str:  # fmt: skip
    """From a first length, halve or double (steps of 1, 2, 4, ... when exact) until the answer flips: the
    bracket, or the verdict when the range or the budget ends first."""
    lo: int | None = None if b_cheaper else n
    hi: int | None = n if b_cheaper else None
    step = 1
    while lo is None or hi is None:  # bracket: steps of 1, 2, 4, ... when exact, else halve or double
        if len(probes) >= max_probes:
            return "budget"
        if hi is not None:
            if hi <= n_min:
                return "b-cheaper-throughout"
            n = max(n_min, hi - step if exact else hi // 2)
        elif lo is not None:  # one end of the bracket is always known
            if lo >= n_max:
                return "a-cheaper-throughout"
            n = min(n_max, lo + step if exact else lo * 2)
        step *= 2
        if probe(n).b_cheaper:
            hi = n
        else:
            lo = n
    return lo, hi


def scan_lengths(n_min: int, n_max: int) -> list[int]:
    """One length per octave from n_min to n_max, both included: the same lengths for every pair, so a variant
    timed for one pair is reused for the next."""
    out = [n_min * 2**k for k in range(max(0, int(math.log2(max(n_max, 1) / max(n_min, 1)))) + 1)]
    return sorted({n for n in out if n <= n_max} | {n_max})


def scan_probes(probe: Callable[[int], Probe], lengths: list[int]) -> tuple[int, int] | str:
    """Probe every length (up to the first where neither variant fits); the bracket of the last change from A
    cheaper to B cheaper, or the verdict when there is none."""
    seen: list[Probe] = []
    for n in lengths:
        p = probe(n)
        if p.a is None and p.b is None:
            break
        seen.append(p)
    if not seen:
        return "out-of-memory"
    if all(p.b_cheaper for p in seen):
        return "b-cheaper-throughout"
    if not seen[-1].b_cheaper:
        return "a-cheaper-throughout"
    i = max(j for j, p in enumerate(seen) if not p.b_cheaper)
    return seen[i].n, seen[i + 1].n


def place(ordered: list[Probe], lo: Probe, hi: Probe, exact: bool) -> Transition:
    """Put the crossing between the last length where A was cheaper and the first where B was."""
    width = hi.n - lo.n
    if exact or width <= 1:
        return Transition("found", float(hi.n), 0.0 if width <= 1 else width / 2, (lo.n, hi.n), ordered)
    r_lo, r_hi = lo.rel_diff, hi.rel_diff
    slope = (r_hi - r_lo) / width
    n_star = lo.n + (-r_lo / slope if slope > 0 else width / 2)
    noise = math.hypot(lo.noise, hi.noise) / slope if slope > 0 else width
    return Transition("found", n_star, math.hypot(width / 2, noise), (lo.n, hi.n), ordered)


def trend_breaks(probes: list[Probe], tol: float = 0.02, sigmas: float = 3.0) -> list[int]:
    """Lengths where a variant got cheaper as N grew, beyond its noise: both ends of each such step.

    Attention costs never fall with N; a step down larger than `sigmas` standard errors plus `tol`
    (relative) means one of the two timings is wrong, so both are to be measured again."""
    bad: set[int] = set()
    ordered = sorted(probes, key=lambda p: p.n)
    for value, se in (("a", "a_se"), ("b", "b_se")):
        points = [(p.n, getattr(p, value), getattr(p, se)) for p in ordered if getattr(p, value) is not None]
        for (n1, t1, s1), (n2, t2, s2) in itertools.pairwise(points):
            if t2 < t1 * (1 - tol) - sigmas * math.hypot(s1, s2):
                bad |= {n1, n2}
    return sorted(bad)


def crossing_of(points: list[Probe]) -> float | None:
    """Where a least-squares line through (n, (a - b)/a) crosses zero; None if it does not rise with n."""

    usable = [p for p in points if p.a is not None and p.b is not None]
    if len({p.n for p in usable}) < 2:
        return None
    fit = linregress([p.n for p in usable], [p.rel_diff for p in usable])
    return float(-fit.intercept / fit.slope) if fit.slope > 0 else None


REPLICATE_MIN = 3
"""Crossings a found speed crossover needs: the search's and those of at least two re-timed replicates."""
REPLICATE_SPREAD = 0.10
"""How far from their median (relative) every crossing may lie: the replicates re-time the bracket and one length
10 % beyond each end of it, so a crossing further off was extrapolated from those lengths, not measured."""


def one_crossing(points: list[Probe]) -> bool:
    """Whether lengths re-timed together, in order of N, show one crossing: A cheaper at the shortest, B at the
    longest, and one change of sign between."""
    signs = [p.b_cheaper for p in sorted(points, key=lambda p: p.n)]
    return len(signs) >= 2 and not signs[0] and signs[-1] and sum(x != y for x, y in itertools.pairwise(signs)) == 1


def signs_of(points: list[Probe]) -> str:
    """The sign pattern of re-timed lengths, in order of N: A where A was cheaper, B where B was (`AABB`)."""
    return "".join("B" if p.b_cheaper else "A" for p in sorted(points, key=lambda p: p.n))


def replicates_disagree(crossings: list[float], runs: list[list[Probe]]) -> str | None:
    """The replicate rule (see the module's docstring): None where the crossings agree, else one line saying how
    they do not. `crossings`: the search's and each replicate's that crossed; `runs`: each replicate's re-timed
    lengths."""
    shown = ", ".join(f"{c:,.0f}" for c in crossings) or "none"
    if len(crossings) < REPLICATE_MIN:
        plural = "s" * (len(crossings) != 1)
        return f"{len(crossings)} crossing{plural} ({shown}) where a found crossover needs {REPLICATE_MIN}"
    centre = statistics.median(crossings)
    if any(abs(c - centre) > REPLICATE_SPREAD * centre for c in crossings):
        return f"crossings {shown} are not all within {REPLICATE_SPREAD:.0%} of their median {centre:,.0f}"
    bad = [k for k, run in enumerate(runs, 1) if not one_crossing(run)]
    if bad:
        patterns = ", ".join(f"replicate {k}: {signs_of(runs[k - 1])}" for k in bad)
        return f"crossings {shown}, but not one crossing in every replicate ({patterns}, A/B: the cheaper by N)"
    return None


def replicate_interval(values: list[float], floor: float = 0.0, level: float = 0.95) -> tuple[float, float]:
    """Centre and half-width of a `level` prediction interval for one more replicate (Student t).

    The crossings of separate replicates differ by run-to-run drift as well as noise; the interval
    for a further run is t_{(1+level)/2, k-1} · s · sqrt(1 + 1/k) wide on each side of the mean, and
    never narrower than `floor` (the resolution of the search)."""

    k = len(values)
    centre = statistics.median(values)
    if k < 2:
        return centre, max(floor, abs(centre))
    half = student_t.ppf((1 + level) / 2, k - 1) * statistics.stdev(values) * math.sqrt(1 + 1 / k)
    return centre, max(floor, float(half))


QUIET_SHARE = 0.10
"""The most rounds a quiet machine throws away as disturbed, as a share of the rounds kept, over the timings a tie is
read from: the shipped validation on a quiet machine threw away 165 of 12,804 timed calls (about 3 % of rounds of two
calls); a machine that throws away more than a tenth is busy, and what it kept can hold slow spells no clock showed."""
TIE_LEVEL = 0.95
"""The confidence level of the interval of each length's mean log time ratio (the op model's tie is at 95 % too)."""
TIE_REGRET = 0.25
"""The most a tie's regret may be: a tie says either is as fast, and a stretch whose mean ratio is off 1 by more than a
quarter somewhere is not "as fast", whatever the noise. A tenth declined quiet runs: on a quiet 2-core CPU, the ratio
of taylorshift-direct and -efficient (d 32) at one length re-read in another process differed by up to 30 % (N =
1,255: 0.81 and 1.11), and lengths 3 % apart by 20 % (1,304: 1.08, 1,321: 0.90): the timings' own jaggedness near
the crossing, which a tie reports as its regret rather than hides."""


@dataclass(frozen=True)
class Tie:
    """Where two measured curves cannot be told apart (`tie_of`)."""

    stretch: tuple[int, int]
    """The first and last length timed where neither variant was faster beyond the noise."""
    regret: float
    """The most the mean time ratio differs from 1 over the stretch, |tB/tA − 1|: what choosing either one there
    costs, as measured."""
    n0_range: tuple[int, int]
    """The N0 the timings allow: from the length after the last where A was faster to the first where B was (the
    stretch's own end where no length beyond it showed one faster)."""


def quiet(probes: list[Probe]) -> bool:
    """Whether the timings were taken on a quiet machine: rounds thrown away as disturbed at most QUIET_SHARE of the
    rounds kept."""
    return sum(p.discarded for p in probes) <= QUIET_SHARE * sum(p.runs for p in probes)


def faster_by_length(probes: list[Probe], level: float = TIE_LEVEL) -> tuple[list[tuple[int, str, float | None]], int]:
    """Per length timed, in order of N, which variant its timings say is faster, with their mean time ratio tB/tA:
    `A`, `B`, or `=` where the `level` confidence interval of the mean of ln(tB/tA) over its timings holds 0; and the
    degrees of freedom of the spread between runs (0: no length timed twice).

    The spread of one timing's log ratio is the device's noise between runs: the variance of the lengths timed more
    than once about their own means, pooled (Student t with their degrees of freedom), and never less than the
    timing's own noise (`Probe.noise`, from its runs); with no length timed twice, that own noise alone (normal). A
    length where a variant ran out of memory has the other faster (no ratio); one where neither fits, or a time of 0
    (a record's), says nothing."""
    at: dict[int, list[Probe]] = {}
    for p in probes:
        if (p.a is not None or p.b is not None) and (p.a is None or p.a > 0) and (p.b is None or p.b > 0):
            at.setdefault(p.n, []).append(p)
    logs = {n: [math.log(p.b / p.a) for p in ps if p.a and p.b] for n, ps in at.items()}
    df = sum(len(xs) - 1 for n, xs in logs.items() if len(xs) > 1 and len(xs) == len(at[n]))
    squares = sum(sum((x - statistics.fmean(xs)) ** 2 for x in xs) for n, xs in logs.items() if len(xs) == len(at[n]))
    pooled = squares / df if df else 0.0
    quantile = float(student_t.ppf((1 + level) / 2, df if df else math.inf))
    out: list[tuple[int, str, float | None]] = []
    for n, ps in sorted(at.items()):
        if len(logs[n]) < len(ps):  # a variant out of memory here: the other is faster
            out.append((n, "B" if any(p.a is None for p in ps) else "A", None))
            continue
        mean = statistics.fmean(logs[n])
        half = quantile * math.sqrt(max(pooled, statistics.fmean(p.noise**2 for p in ps)) / len(ps))
        out.append((n, "=" if abs(mean) <= half else "A" if mean > 0 else "B", math.exp(mean)))
    return out, df


def tie_of(probes: list[Probe], level: float = TIE_LEVEL) -> Tie | None:
    """The tie the timings show (see the module's docstring), or None: a busy machine (`quiet`), no length timed more
    than once (a tie is read from the spread between runs: one run's own noise does not show it), no length between
    A's lead and B's, a variant out of memory there, or a regret above TIE_REGRET (a length in the stretch that is
    off 1 by more: B far faster before A was is no tie). Where no length beyond the stretch showed one of them
    faster, the N0 range ends with the stretch (B no slower there beyond the noise, nor A below it)."""
    if not quiet(probes):
        return None
    judged, df = faster_by_length(probes, level)
    if not df:
        return None
    sides = [side for _, side, _ in judged]
    last_a = next((i for i, side in enumerate(sides) if side != "A"), len(sides)) - 1  # the lengths A leads from 0
    first_b = len(sides) - next((i for i, side in enumerate(reversed(sides)) if side != "B"), len(sides))
    stretch = judged[last_a + 1 : first_b]
    ratios = [ratio for _, _, ratio in stretch if ratio is not None]
    if not stretch or len(ratios) < len(stretch):  # none between, or a variant out of memory there
        return None
    regret = max(abs(ratio - 1) for ratio in ratios)
    if regret > TIE_REGRET:
        return None
    low = judged[last_a][0] + 1 if last_a >= 0 else stretch[0][0]
    high = judged[first_b][0] if first_b < len(judged) else stretch[-1][0]
    return Tie((stretch[0][0], stretch[-1][0]), regret, (low, high))
