"""Transition points: from which N variant B is no more expensive than variant A.

Costs are maxima of polynomials in N once the other dimensions are fixed (FLOPs and traffic are
a single polynomial, peak memory a maximum over the op list). Every sign change of
cost_A - cost_B lies at a real root of a difference of two such polynomials, so the roots of all
pairwise differences cut [1, ∞) into intervals on which the comparison cannot change; one exact
evaluation (rational arithmetic) per interval decides it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from itertools import pairwise, product
from typing import cast

import numpy as np
import sympy as sp
from attn_cost.costmodel.conventions import DEFAULT, PublishedConvention, get_convention, op_convention
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting, N_kv
from attn_cost.costmodel.derive import dominant_for_large, prune_dominated
from attn_cost.costmodel.display import plain
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.memo import persisted
from attn_cost.costmodel.polyterms import Stepped, in_n, terms
from attn_cost.costmodel.symbols import BY_NAME, N, Pads, d
from attn_cost.costmodel.variants import derive_counted, get_variant

COSTS: dict[str, str] = {
    "flops": "floating-point operations (under a convention)",
    "memory": "peak live memory in bytes (liveness walk over the op list)",
    "traffic": "bytes read + written with every op as its own kernel",
}

Poly = tuple[Fraction, ...]
"""Coefficients, highest power first."""


@dataclass(frozen=True)
class Setting:
    """How costs are counted: FLOP convention, element type, scope, mode and the counting rules."""

    convention: str = DEFAULT
    dtype: str = "fp32"
    scope: str = "core"
    mode: str = "inference"
    counting: Counting = DEFAULT_COUNTING

    def timed(self) -> Setting:
        """The setting as a timing sees it: the FLOP convention and the switches that only count at their defaults
        (`Counting.timed`). A time measured at one setting answers for another only where their `timed` agree: the
        scope, the element type, the mode and every switch that changes what runs."""
        return replace(self, convention=DEFAULT, counting=self.counting.timed())

    def as_json(self) -> dict:
        return {
            "convention": self.convention,
            "dtype": self.dtype,
            "scope": self.scope,
            "mode": self.mode,
            "counting": self.counting.as_json(),
        }


@persisted
def cost_branches(name: str, cost: str, setting: Setting = Setting()) -> tuple[sp.Expr, ...]:
    """Symbolic cost of a variant as the branches of a maximum (one branch for FLOPs and traffic)."""
    conv = get_convention(setting.convention)
    if cost not in COSTS:
        raise UserError(f"unknown cost {cost!r} (known: {', '.join(COSTS)})")
    if cost == "flops" and isinstance(conv, PublishedConvention):
        if (setting.scope, setting.mode) != (conv.scope, conv.mode):
            raise UserError(
                f"{conv.name} gives {conv.mode} totals of a {conv.scope}: use --scope {conv.scope} --mode {conv.mode}"
            )
        return (conv.total(name),)
    counting = setting.counting
    derived = derive_counted(name, setting.scope, setting.mode, counting)
    if cost == "flops":
        out: tuple[sp.Expr, ...] = (derived.flops(op_convention(setting.convention), counting),)
    elif cost == "memory":
        out = tuple(derived.peak(setting.dtype).branches)
    else:
        out = (derived.traffic(setting.dtype, counting),)
    if counting.n_kv is None:
        return out
    fixed = tuple(sp.expand(e.xreplace({N_kv: counting.n_kv})) for e in out)  # a key length set like a size
    return tuple(prune_dominated(list(fixed))) if cost == "memory" else fixed


def at_sizes(branches: tuple[sp.Expr, ...], dims: dict[sp.Symbol, int], what: str) -> list[Poly]:
    """Substitute every dimension but N and return exact polynomial coefficients in N (a `Stepped` cost where N
    is padded: `evaluate`, `compare` and `cheapest` take both)."""
    try:
        return [cast(Poly, in_n(terms(e), dims)) for e in branches]
    except KeyError as missing:
        raise UserError(f"{what} depends on {missing.args[0]}: give a value for it") from None


class Cap(tuple):
    """A polynomial that bounds a curve from above: the curve is min(max(branches), cap)."""


class SteppedCap(Stepped):
    """A `Cap` whose cost pads N."""


def curve(name: str, cost: str, setting: Setting, dims: dict[sp.Symbol, int]) -> list[Poly]:
    """A variant's cost as polynomial branches in N. With `--causal-count tiles` the FLOPs are capped by
    the dense count: below one tile (N < T) the tile formula N(N+T)/2 would exceed the N² scores there
    are, and a blocked kernel computes the whole matrix as one tile."""
    polys = at_sizes(cost_branches(name, cost, setting), dims, name)
    if (
        cost == "flops"
        and setting.counting.causal == "tiles"
        and not isinstance(get_convention(setting.convention), PublishedConvention)
    ):
        dense = replace(setting, counting=replace(setting.counting, causal="dense"))
        top: Poly | Stepped = at_sizes(cost_branches(name, cost, dense), dims, name)[0]
        polys.append(cast(Poly, SteppedCap(top.terms, top.period)) if isinstance(top, Stepped) else Cap(top))
    return polys


def evaluate(polys: list[Poly], x: Fraction | int) -> Fraction:
    """Maximum over the branches at x, exactly (no more than a `Cap` branch, where there is one); a `Stepped`
    branch (a padded length) is evaluated with its ⌈N/D⌉ at x."""
    best: Fraction | None = None
    cap: Fraction | None = None
    for p in polys:
        if isinstance(p, Stepped):
            v = p.at(x)
        else:
            v = Fraction(0)
            for c in p:
                v = v * x + c
        if isinstance(p, (Cap, SteppedCap)):
            cap = v if cap is None or v < cap else cap
            continue
        best = v if best is None or v > best else best
    assert best is not None, "a curve has a branch besides its cap"
    return best if cap is None or best <= cap else cap


def _sub(p: Poly, q: Poly) -> Poly:
    n = max(len(p), len(q))
    p = (Fraction(0),) * (n - len(p)) + p
    q = (Fraction(0),) * (n - len(q)) + q
    return tuple(a - b for a, b in zip(p, q, strict=True))


def _real_roots_above_one(p: Poly) -> list[float]:
    coeffs = list(p)
    while coeffs and coeffs[0] == 0:
        coeffs.pop(0)
    if len(coeffs) < 2:
        return []
    roots = np.roots([float(c) for c in coeffs])
    return [float(z.real) for z in roots if abs(z.imag) <= 1e-9 * max(1.0, abs(z.real)) and z.real > 1]


def breakpoints(curves: list[list[Poly]]) -> list[float]:
    """Every N > 1 where the order of any two branches (of any curves) can change."""
    branches = [p for c in curves for p in c]
    pts = set()
    for i, p in enumerate(branches):
        for q in branches[i + 1 :]:
            pts.update(_real_roots_above_one(_sub(p, q)))
    return sorted(pts)


def probes(points: list[float]) -> list[tuple[float, float | None, Fraction]]:
    """Intervals [lo, hi) of [1, ∞) between breakpoints, each with an interior probe point."""
    edges = [1.0, *points]
    out = []
    for lo, hi in zip(edges, [*edges[1:], None], strict=True):
        mid = (lo + hi) / 2 if hi is not None else lo + max(1.0, lo)
        out.append((lo, hi, Fraction(mid)))
    return out


@dataclass
class Crossover:
    """Where variant b becomes (and stays) no more expensive than variant a."""

    a: str
    b: str
    cost: str
    dims: dict[str, int]
    n: int | None
    """Smallest integer N from which cost_b <= cost_a for every larger N; None if never."""
    verdict: str
    """crosses | always | never | multiple | equal."""
    root: float | None = None
    """The real N where the last crossing happens (n is its ceiling)."""
    crossings: list[float] = field(default_factory=list)
    """Every N >= 1 where the cheaper of the two changes."""
    b_cheaper: list[tuple[float, float | None]] = field(default_factory=list)
    """Intervals of N on which b is strictly cheaper."""
    exact: sp.Expr | None = None
    """The crossing as a closed form in d, where sympy gives one (other dims fixed)."""
    note: str = ""
    """What a sentence adds where a cost pads N and b stays dearer at some N however large."""

    def describe(self) -> str:
        """A plain sentence for the terminal."""
        if self.verdict == "equal":
            return f"{self.b} and {self.a} cost the same for every N"
        if self.verdict == "always":
            return f"{self.b} is never more expensive than {self.a}"
        if self.verdict == "never":
            if self.b_cheaper:
                spans = ", ".join(f"[{lo:.0f}, {hi:.0f})" for lo, hi in self.b_cheaper if hi is not None)
                return f"{self.b} is cheaper only on N in {spans}; {self.a} is cheaper for large N{self.note}"
            return f"{self.b} is never cheaper than {self.a}{self.note}"
        many = f" (the curves cross {len(self.crossings)} times)" if self.verdict == "multiple" else ""
        return f"{self.b} is no more expensive than {self.a} from N = {self.n}{many}"


def crossover(
    a: str,
    b: str,
    cost: str,
    dims: dict[sp.Symbol, int],
    setting: Setting = Setting(),
    *,
    exact: bool = True,
    tied_to_d: tuple[sp.Symbol, ...] = (),
) -> Crossover:
    """The transition point between two variants on one cost at fixed dims (all but N).

    `tied_to_d` names sizes that equal d by default (Latte's L): the closed form then follows d
    with them, instead of holding them at today's value."""
    get_variant(a), get_variant(b)
    pa = curve(a, cost, setting, dims)
    pb = curve(b, cost, setting, dims)
    out = Crossover(a, b, cost, {str(k): int(v) for k, v in dims.items()}, **compare(pa, pb))
    if exact and out.root is not None and d in dims:
        others = _freeze({k: v for k, v in dims.items() if k != d and k not in tied_to_d})
        out.exact = exact_root(a, b, cost, setting, others, dims[d], out.root, tuple(tied_to_d))
    return out


def _sign(x: Fraction) -> int:
    return (x > 0) - (x < 0)


def _segments(pa: list[Poly], pb: list[Poly]) -> list[tuple[float, float | None, int]]:
    """[lo, hi) intervals of real N >= 1 on which sign(cost_a - cost_b) is constant (polynomial curves)."""
    segments: list[tuple[float, float | None, int]] = []
    for lo, hi, x in probes(breakpoints([pa, pb])):
        sign = _sign(evaluate(pa, x) - evaluate(pb, x))
        if segments and segments[-1][2] == sign:
            segments[-1] = (segments[-1][0], hi, sign)
        else:
            segments.append((lo, hi, sign))
    return segments


def compare(pa: list[Poly], pb: list[Poly]) -> dict:
    """Sign analysis of cost_a - cost_b over N >= 1 (over whole N where a cost pads N: `_compare_steps`)."""
    if any(isinstance(p, Stepped) for p in (*pa, *pb)):
        return _compare_steps(pa, pb)
    segments = _segments(pa, pb)
    signs = [s for _, _, s in segments]
    crossings = [hi for (_, hi, s), (_, _, t) in pairwise(segments) if s != t and 0 not in (s, t)]
    cheaper = [(lo, hi) for lo, hi, s in segments if s > 0]
    if all(s == 0 for s in signs):
        return {"n": 1, "verdict": "equal"}
    if signs[-1] < 0:
        return {"n": None, "verdict": "never", "crossings": crossings, "b_cheaper": cheaper}
    negatives = [hi for _, hi, s in segments if s < 0 and hi is not None]  # the last segment is not negative
    if not negatives:
        return {"n": 1, "verdict": "always", "b_cheaper": cheaper}
    root = negatives[-1]
    losing_from = next(lo for lo, hi, s in reversed(segments) if s < 0)
    n = first_integer_from(lambda x: evaluate(pa, x) >= evaluate(pb, x), root, losing_from)
    verdict = "crosses" if len(crossings) <= 1 else "multiple"
    return {"n": n, "verdict": verdict, "root": root, "crossings": crossings, "b_cheaper": cheaper}


def _period(curves: list[list[Poly]]) -> int:
    return math.lcm(1, *(p.period for c in curves for p in c if isinstance(p, Stepped)))


def in_class(polys: list[Poly], r: int) -> list[Poly]:
    """A curve on the residue class N ≡ r of its period: each `Stepped` branch as that class's polynomial."""
    out: list[Poly] = []
    for p in polys:
        if isinstance(p, Stepped):
            stepped = cast(Stepped, p)
            out.append(Cap(stepped.poly(r)) if isinstance(p, SteppedCap) else stepped.poly(r))
        else:
            out.append(p)
    return out


MAX_WALK = 1 << 16
"""The most whole N a comparison of padded costs steps through one by one (where the residue classes of N
disagree on which is cheaper, near a crossing); beyond it such a stretch is shown as one, `mixed`."""
MAX_CLASSES = 256
"""The most residue classes of N a comparison of padded costs works through one by one (each is a few
milliseconds): beyond it the comparison goes stretch by stretch between multiples of the padding (`_unsure`)."""
MAX_STRETCHES = 1 << 14
"""The most stretches between multiples of the padding a comparison works through exactly (each well under a
millisecond); a comparison that needs more, and more than MAX_CLASSES classes, is refused in one line."""


Run = tuple[int, int | None, object]


def _integer_runs(
    curves: list[list[Poly]], key: Callable[[list[Fraction]], object], unsure: Unsure | None
) -> list[Run]:
    """Runs [lo, hi) of whole N >= 1 with one value of `key(costs at N)`, for curves with padded lengths: stretch
    by stretch where `_stretches` chose them (`unsure`: the ranges of N to work out exactly), else class by class."""
    return _by_classes(curves, key) if unsure is None else _by_stretches(curves, key, unsure)


@dataclass
class Unsure:
    """Where bounds of padded costs (`Stepped.bound`) leave the order of some two curves open (`_unsure`)."""

    ranges: list[tuple[int, int]]
    """The ranges [lo, hi] of whole N where they do: worked out exactly, stretch by stretch."""
    starts: list[int]
    """The N at which an order they settle may change (between two of them, outside `ranges`, it is one)."""
    mixed_from: int | None = None
    """From this N on, the order of some two curves is settled but depends on whether N is a multiple of the
    padding (`dearer` says where one of them stays dearer); None where one order holds for every large N."""
    dearer: str = ""


def _stretches(curves: list[list[Poly]]) -> Unsure | None:
    """How a comparison of padded costs goes, with work that does not grow with the padding. Where polynomials that
    bound the padded costs settle the order of every two curves, that order holds, and only the ranges of N they
    leave open are worked out exactly, stretch by stretch between multiples of the padding (`_unsure`). Where the
    bounds leave the order open for every large N, or the stretches are more than the residue classes of N modulo
    the period, the classes are worked out instead: None. A comparison that needs more than MAX_STRETCHES stretches
    and MAX_CLASSES classes is refused in one line."""
    period = _period(curves)
    unsure = _unsure(curves)
    divisors = _divisors(curves)
    count = None
    if unsure is not None:
        cuts = sum(hi // dv - (lo - 1) // dv for lo, hi in unsure.ranges for dv in divisors)
        count = 2 * cuts + len(unsure.ranges)
    if count is not None and count <= MAX_STRETCHES and (count < period or period > MAX_CLASSES):
        return unsure
    if period > MAX_CLASSES:
        shown = ", ".join(f"{dv:,}" for dv in divisors)
        raise UserError(
            f"comparing costs that pad N to multiples of {shown} takes more than {MAX_STRETCHES:,} steps here: "
            "choose a smaller padding size (such as --chunk)"
        )
    return None


def _divisors(curves: list[list[Poly]]) -> list[int]:
    return sorted({dv for c in curves for p in c if isinstance(p, Stepped) for dv in p.divisors})


Signed = list[tuple[int, int | None, int]]
"""Ranges [lo, hi] of whole N (hi None: no end), each with the sign of cost_a − cost_b on all of it."""


def _known(pa: list[Poly], pb: list[Poly], pads: dict[int, int]) -> Signed:
    """The whole N, among those where each [D ∤ N] is `pads[D]`, at which bounds of the padded costs
    (`Stepped.bound`) tell which of a and b is cheaper, strictly: where a's lower bound is above b's upper one
    (sign 1), or a's upper bound below b's lower one (sign −1). Each range stops short of the bounds' crossings by
    their float error."""
    ranges: Signed = []
    for low, high, sign in ((_bound(pa, False, pads), _bound(pb, True, pads), 1),
                            (_bound(pa, True, pads), _bound(pb, False, pads), -1)):  # fmt: skip
        for lo, hi, s in _segments(low, high):
            if s != sign:
                continue
            first = 1 if lo <= 1 else math.floor(lo * (1 + 1e-9)) + 1
            last = None if hi is None else math.ceil(hi * (1 - 1e-9)) - 1
            if last is None or last >= first:
                ranges.append((first, last, sign))
    return sorted(ranges)


def _unsure(curves: list[list[Poly]]) -> Unsure | None:
    """Where bounds of the padded costs leave the order of some two curves open, taken apart by whether N is a
    multiple of each padding divisor (the padding's own bracket [D ∤ N] then is 0 or 1, and only the rounding of
    ⌈N/D⌉ is left to bound); None where some order stays open for every large N. Curves that are the same cost tie
    everywhere."""
    divisors = _divisors(curves)
    patterns = [dict(zip(divisors, bits, strict=True)) for bits in product((0, 1), repeat=len(divisors))]
    open_ranges: list[tuple[int, int]] = []
    starts: set[int] = set()
    mixed_from: int | None = None
    dearer = ""
    for i, pa in enumerate(curves):
        for pb in curves[i + 1 :]:
            if _same_curve(pa, pb):
                continue
            per = [_known(pa, pb, pads) for pads in patterns]
            found = [next(((lo, sign) for lo, hi, sign in k if hi is None), None) for k in per]
            tails = [t for t in found if t is not None]
            if len(tails) < len(found):
                return None
            starts.update(lo for k in per for lo, _, _ in k)
            agreed = _agreed(per)
            if len({sign for _, sign in tails}) > 1:  # settled for large N, but not alike on every multiple
                since = max(lo for lo, _ in tails)
                mixed_from = since if mixed_from is None else max(mixed_from, since)
                dearer = dearer or _where(divisors, [p for p, t in zip(patterns, tails, strict=True) if t[1] < 0])
                agreed = [(lo, hi, s) for lo, hi, s in agreed if lo < since]
                agreed = [(lo, since - 1 if hi is None or hi >= since else hi, s) for lo, hi, s in agreed]
                agreed.append((since, None, 0))  # from here on: mixed, not worked out
            n = 1
            for lo, hi, _ in agreed:
                if lo > n:
                    open_ranges.append((n, lo - 1))
                n = max(n, hi + 1) if hi is not None else n
    if mixed_from is not None:
        open_ranges = [(lo, min(hi, mixed_from - 1)) for lo, hi in open_ranges if lo < mixed_from]
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(open_ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return Unsure(merged, sorted(starts), mixed_from, dearer)


def _agreed(per: list[Signed]) -> Signed:
    """The ranges on which every pattern's known ranges hold one sign."""
    edges = sorted({1, *(x for k in per for lo, hi, _ in k for x in (lo, None if hi is None else hi + 1) if x)})

    def sign_at(k: Signed, n: int) -> int | None:
        return next((s for lo, hi, s in k if lo <= n and (hi is None or n <= hi)), None)

    out: Signed = []
    for a, b in zip(edges, [*edges[1:], None], strict=True):
        signs = {sign_at(k, a) for k in per}
        sign = signs.pop() if len(signs) == 1 else None
        if sign is not None:
            out.append((a, None if b is None else b - 1, sign))
    return out


def _where(divisors: list[int], patterns: list[dict[int, int]]) -> str:
    """The N of some padding patterns, in words: `where N is not a multiple of 4,096`."""

    def one(pads: dict[int, int]) -> str:
        return " and ".join(f"N is {'not ' if pads[dv] else ''}a multiple of {dv:,}" for dv in divisors)

    return " (for large N it is dearer where " + " or ".join(one(p) for p in patterns) + ")" if patterns else ""


def _same_curve(pa: list[Poly], pb: list[Poly]) -> bool:
    def form(p: Poly) -> object:
        return (type(p), p.terms) if isinstance(p, Stepped) else (type(p), tuple(p))

    return [form(p) for p in pa] == [form(p) for p in pb]


def _bound(polys: list[Poly], upper: bool, pads: dict[int, int]) -> list[Poly]:
    """A curve's padded branches as polynomials below (`upper`: above) them at every N >= 1 where each [D ∤ N] is
    `pads[D]`."""
    return [_as(p, p.bound(upper, pads)) if isinstance(p, Stepped) else p for p in polys]


def _as(p: Stepped, poly: tuple[Fraction, ...]) -> Poly:
    return Cap(poly) if isinstance(p, SteppedCap) else poly


def _by_stretches(curves: list[list[Poly]], key: Callable[[list[Fraction]], object], unsure: Unsure) -> list[Run]:
    """Runs of `key` over whole N: one value between two N where the bounds settle a new order (`_unsure`), and, on
    each range they leave open, the exact runs of its stretches between multiples of the padding (the costs are
    polynomials on each: their crossings cut it, and every cut is checked with exact arithmetic)."""
    runs: list[Run] = []
    divisors = sorted({dv for c in curves for p in c if isinstance(p, Stepped) for dv in p.divisors})

    def add(lo: int, hi: int | None, value: object) -> None:
        if runs and runs[-1][2] == value and runs[-1][1] == lo:
            runs[-1] = (runs[-1][0], hi, value)
        elif hi is None or hi > lo:
            runs.append((lo, hi, value))

    def exact(n: int) -> object:
        return key([evaluate(c, n) for c in curves])

    def settled(lo: int, hi: int | None) -> None:  # [lo, hi): each piece between two starts is one value
        edges = [lo, *(x for x in unsure.starts if lo < x and (hi is None or x < hi))]
        for a, b in zip(edges, [*edges[1:], hi], strict=True):
            add(a, b, exact(a))

    n = 1
    for lo, hi in unsure.ranges:
        if lo > n:
            settled(n, lo)
        cuts = sorted({m for dv in divisors for m in range(-(-lo // dv) * dv, hi + 1, dv)})
        start = lo
        for m in [*cuts, hi + 1]:
            if m > start:
                blocks = [[_as(p, p.block(start)) if isinstance(p, Stepped) else p for p in c] for c in curves]
                edges = sorted({start, m, *(math.ceil(x) for x in breakpoints(blocks) if start < x < m)})
                for a, b in pairwise(edges):
                    _exact_runs(a, b, exact, add)
            if m <= hi:
                add(m, m + 1, exact(m))
            start = m + 1
        n = hi + 1
    if unsure.mixed_from is None:
        settled(n, None)
    else:
        settled(n, unsure.mixed_from)
        add(max(n, unsure.mixed_from), None, "mixed")
    return runs


def _exact_runs(lo: int, hi: int, exact: Callable[[int], object], add: Callable[[int, int, object], None]) -> None:
    """The runs of `exact` on [lo, hi), a stretch on which it changes only near the ends (float roots cut it): each
    change found by bisection with exact values."""
    while lo < hi:
        value = exact(lo)
        if exact(hi - 1) == value:
            add(lo, hi, value)
            return
        same, other = lo, hi - 1
        while other - same > 1:
            mid = (same + other) // 2
            same, other = (mid, other) if exact(mid) == value else (same, mid)
        add(lo, other, value)
        lo = other


def _by_classes(curves: list[list[Poly]], key: Callable[[list[Fraction]], object]) -> list[Run]:
    """Runs of `key` over whole N, class by class: on each residue class of N modulo the period the curves are
    polynomials (`in_class`), whose crossings cut N into intervals where each class keeps its key; where the
    classes agree the run is one, where they do not the N are stepped through exactly (up to MAX_WALK; a run with
    no end that mixes keys is "mixed")."""
    period = _period(curves)
    per_class = []
    cuts: set[float] = set()
    for r in range(period):
        classed = [in_class(c, r) for c in curves]
        points = breakpoints(classed)
        cuts.update(points)
        per_class.append([(lo, hi, key([evaluate(c, x) for c in classed])) for lo, hi, x in probes(points)])
    runs: list[Run] = []

    def add(lo: int, hi: int | None, value: object) -> None:
        if runs and runs[-1][2] == value and runs[-1][1] == lo:
            runs[-1] = (runs[-1][0], hi, value)
        elif hi is None or hi > lo:
            runs.append((lo, hi, value))

    edges = sorted({1, *(math.ceil(c) for c in cuts if c > 1)})
    for lo, hi in zip(edges, [*edges[1:], None], strict=True):
        values = {_key_at(per_class[n % period], n) for n in range(lo, lo + period) if hi is None or n < hi}
        if len(values) == 1:
            add(lo, hi, values.pop())
        elif hi is not None and hi - lo <= MAX_WALK:
            for n in range(lo, hi):
                add(n, n + 1, key([evaluate(c, n) for c in curves]))
        else:
            add(lo, hi, "mixed")
    return runs


def _key_at(segments: list, n: int) -> object:
    """The value of the segment (from N = 1 on, in order) that holds n."""
    return next(v for _, hi, v in segments if hi is None or n < hi)


def _compare_steps(pa: list[Poly], pb: list[Poly]) -> dict:
    """Sign analysis of cost_a - cost_b over whole N >= 1 where a cost pads N, from the runs of its sign
    (`_integer_runs`): N0 is one past the largest N at which b costs more; where b is dearer for every large N
    in some residue classes of N and not in others, `note` names those N."""
    unsure = _stretches([pa, pb])
    runs = _integer_runs([pa, pb], lambda v: _sign(v[0] - v[1]), unsure)
    cheaper = [(float(lo), None if hi is None else float(hi)) for lo, hi, s in runs if s == 1]
    changes = [float(lo) for (_, _, s), (lo, _, t) in pairwise(runs) if s != t and 0 not in (s, t)]
    if all(s == 0 for _, _, s in runs):
        return {"n": 1, "verdict": "equal"}
    if runs[-1][2] != 1 and runs[-1][2] != 0:
        note = _dearer(pa, pb) if unsure is None else unsure.dearer
        return {"n": None, "verdict": "never", "crossings": changes, "b_cheaper": cheaper, "note": note}
    if unsure is None:  # by classes: each class's last losing N, exactly
        period = _period([pa, pb])
        losing = [n + 1 for r in range(period) if (n := _last_losing(pa, pb, r, period)) is not None]
    else:  # the runs are exact
        losing = [hi for _, hi, s in runs if s == -1 and hi is not None]
    if not losing:
        return {"n": 1, "verdict": "always", "b_cheaper": cheaper}
    n = max(losing)
    verdict = "crosses" if len(changes) <= 1 else "multiple"
    return {"n": n, "verdict": verdict, "root": float(n), "crossings": changes, "b_cheaper": cheaper}


def _last_losing(pa: list[Poly], pb: list[Poly], r: int, period: int) -> int | None:
    """The largest N ≡ r (mod period), N >= 1, where cost_b > cost_a, exactly; None if there is none. The class's
    polynomials locate it (their last negative interval); `first_integer_from` pins it on the progression."""
    ca, cb = in_class(pa, r), in_class(pb, r)
    losing = [(lo, hi) for lo, hi, s in _segments(ca, cb) if s < 0]

    def holds(j: int) -> bool:  # at the class's j-th N (j >= 1): r, r + period, ...
        n = r + (j - 1) * period
        return evaluate(pa, n) >= evaluate(pb, n)

    for lo, hi in reversed(losing):
        assert hi is not None, "the last interval is not losing (checked by the caller)"
        j = first_integer_from(holds, (hi - r) / period + 1, max(1.0, (lo - r) / period + 1)) - 1
        n = r + (j - 1) * period
        if j >= 1 and n >= 1 and n >= lo - 1 and not holds(j):
            return n
    return None


def _dearer(pa: list[Poly], pb: list[Poly]) -> str:
    """Where b stays dearer for large N in some residue classes of N only: which (for a period of at most
    MAX_CLASSES; '' otherwise, or where every class has b dearer)."""
    period = _period([pa, pb])
    if period > MAX_CLASSES:
        return ""
    tail = [r for r in range(period) if _segments(in_class(pa, r), in_class(pb, r))[-1][2] < 0]
    shown = ", ".join(str(r) for r in tail[:8]) + (", …" if len(tail) > 8 else "")
    return f" (for large N it is dearer where N mod {period} is {shown})" if 0 < len(tail) < period else ""


def first_integer_from(holds: Callable[[int], bool], near: float, floor: float = 1.0) -> int:
    """The integer where `holds` turns true for good, from a float estimate `near` of the sign change.

    `holds` is false on (floor, near) and true from near on; near is a float root, which can be off
    by more than 1 at large N. Exact and O(log): an integer bracket (holds(lo) false, holds(hi) true)
    is grown geometrically around ceil(near), then bisected. No step-by-one walk at any size."""
    start = max(1, math.ceil(near - 1e-9 * max(1.0, near)))
    step = 1
    lo: int | None
    hi: int | None
    if holds(start):
        hi, lo = start, None
        while lo is None:
            x = start - step
            if x <= floor:  # the estimate was high: the losing interval starts at floor
                x = max(1, math.floor(floor))
                if x >= hi or holds(x):
                    return hi  # no integer of the losing interval is below the estimate
            if holds(x):
                hi = x
            else:
                lo = x
            step *= 2
    else:
        lo, hi = start, None
        while hi is None:
            x = start + step
            if holds(x):
                hi = x
            else:
                lo = x
            step *= 2
    assert lo is not None and hi is not None  # the loops above end with both ends of the bracket
    while hi - lo > 1:  # invariant: holds(lo) is false, holds(hi) is true
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _freeze(dims: dict[sp.Symbol, int]) -> tuple[tuple[sp.Symbol, int], ...]:
    return tuple(sorted(dims.items(), key=lambda kv: kv[0].name))


@persisted
def _symbolic_roots(
    a: str, b: str, cost: str, setting: Setting, others: tuple[tuple[sp.Symbol, int], ...], tied: tuple[sp.Symbol, ...]
) -> tuple[sp.Expr, ...]:
    """Roots in N (as functions of d) of the difference of the large-N branches."""
    fixed = {**dict(others), **{s: d for s in tied}}
    ea = dominant_for_large([sp.expand(e.xreplace(fixed)) for e in cost_branches(a, cost, setting)])
    eb = dominant_for_large([sp.expand(e.xreplace(fixed)) for e in cost_branches(b, cost, setting)])
    if ea is None or eb is None:
        return ()
    diff = sp.expand(ea - eb)
    if diff.free_symbols - {N, d} or diff.has(sp.ceiling, Pads):  # a padded length has no closed-form crossing
        return ()
    poly = sp.Poly(diff, N)
    while poly.degree() > 0 and poly.eval(0) == 0:  # drop the trivial roots at N = 0
        poly = sp.Poly(sp.cancel(poly.as_expr() / N), N)
    poly = poly.primitive()[1]  # a common factor of the coefficients does not move the roots
    if poly.degree() == 1:
        c1, c0 = poly.all_coeffs()
        return (sp.cancel(-c0 / c1),)
    if poly.degree() == 2:
        qa, qb, qc = (sp.factor(c) for c in poly.all_coeffs())
        disc = sp.expand(qb**2 - 4 * qa * qc)
        return tuple(sp.cancel(-qb / (2 * qa)) + s * sp.sqrt(disc) / sp.cancel(2 * qa) for s in (1, -1))
    return ()


def exact_root(
    a: str,
    b: str,
    cost: str,
    setting: Setting,
    others: tuple[tuple[sp.Symbol, int], ...],
    dval: int,
    root: float,
    tied: tuple[sp.Symbol, ...] = (),
) -> sp.Expr | None:
    """The closed form (in d) of the crossing at `root`, if the large-N branches give one that matches it."""
    for cand in _symbolic_roots(a, b, cost, setting, others, tied):
        value = complex(cand.xreplace({d: sp.Integer(dval)}).evalf())
        if abs(value.imag) < 1e-9 and abs(value.real - root) <= 1e-6 * max(1.0, root):
            return cand
    return None


DEFAULT_PAIRS: tuple[tuple[str, str], ...] = (
    ("taylorshift-direct", "taylorshift-efficient"),
    ("softmax", "taylorshift-efficient"),
)
"""The pairs `attn-cost crossover` shows when none are chosen."""

JSON_DIM_NAMES = {"b": "batch", "h": "heads"}
"""In JSON rows "a" and "b" name the variants, so batch and heads are spelt out."""

TABLE_COSTS = {"flops": "n0", "memory": "n1", "traffic": "n_traffic"}
"""Each cost and the key its transition point has in a table row (N0, N1 as in TaylorShift)."""


@dataclass
class CostPoint:
    """One cost's transition point in a table row: a `Crossover` as the tables and `--json` show it."""

    n: int | None
    verdict: str
    root: float | None
    crossings: list[float]
    b_cheaper: list[tuple[float, float | None]]
    exact: str | None
    """The closed form as plain text (`display.plain`), None where there is none."""
    summary: str
    """`Crossover.describe`, with a warning where a causal count is read beyond N_kv."""

    def as_json(self) -> dict:
        return {
            "n": self.n,
            "verdict": self.verdict,
            "root": self.root,
            "crossings": self.crossings,
            "b_cheaper": [list(iv) for iv in self.b_cheaper],
            "exact": self.exact,
            "summary": self.summary,
        }


@dataclass
class ProfileColumns:
    """A device profile's points for one row: N0 and N1 on its fitted curves, and as measured on the device
    (with their spread); None where the profile has no fit or no measurement at the row's sizes and setting."""

    corrected_n0: int | None = None
    corrected_n1: int | None = None
    measured_n0: float | None = None
    n0_uncertainty: float | None = None
    measured_n1: float | None = None
    n1_uncertainty: float | None = None
    n0_verdict: str | None = None
    """What the measured search found (found, unsteady, b-cheaper-throughout, ...); None in profiles before it."""
    n0_standing: str | None = None
    """Whether the measured N0 stands (`stands`) or why not (profilers/measure/standing.py); None where not judged."""
    n0_launch_bound: list[str] | None = None
    """The variants whose time at the measured crossing is mostly a fixed cost (launch-bound)."""
    n0_tie: list[float] | None = None
    """Where the measured verdict is a tie: the lengths where neither was faster beyond the noise."""
    n0_regret: float | None = None
    """A tie's regret: the most |tB/tA − 1| over its stretch."""
    n0_range: list[float] | None = None
    """The N0 a tie implies (the first N where B is no slower lies in it)."""
    n1_verdict: str | None = None

    def as_json(self) -> dict:
        return asdict(self)


@dataclass
class DeviceColumns:
    """What a device adds to a transition row (`crossover --device`): the profile's points, where the device has
    a profile, and the op model's N0 with its bootstrap interval (None where it has no op calibration or the
    model does not apply)."""

    device: str
    """The device's slug."""
    profile: ProfileColumns | None = None
    """None for a device with an op calibration and no profile: its rows carry no corrected or measured keys."""
    predicted_n0: int | None = None
    predicted_n0_low: int | None = None
    predicted_n0_high: int | None = None
    predicted_by: str = "calibrated"
    """The kind of model that predicted N0: a measured device's op calibration (`calibrated`) or a GPU's datasheet
    (`datasheet`)."""
    predicted: dict | None = None
    """The op model's tie interval, its regret and what it extrapolated (`calibrated.model.Prediction.as_json`), where
    the op model predicted."""
    memory_bytes: int | None = None
    """The device's memory, where it is known (a datasheet GPU)."""
    kernels: dict | None = None
    """Per variant, the kernel that priced each family a `--kernel` chooses and why (a datasheet GPU)."""
    fits_in_memory: bool | None = None
    """Whether A and B both fit in `memory_bytes` at the predicted N0 (None where either is unknown): a crossing
    past the memory is a prediction of a run that cannot happen."""

    def as_json(self) -> dict:
        extra = {k: v for k, v in (self.predicted or {}).items() if k not in ("predicted_n0", "predicted_n0_low",
                                                                             "predicted_n0_high")}  # fmt: skip
        return {
            "device": self.device,
            **(self.profile.as_json() if self.profile is not None else {}),
            "predicted_n0": self.predicted_n0,
            "predicted_n0_low": self.predicted_n0_low,
            "predicted_n0_high": self.predicted_n0_high,
            **extra,
            "predicted_by": self.predicted_by,
            **({"kernels": self.kernels} if self.kernels else {}),
            **(
                {"memory_bytes": self.memory_bytes, "fits_in_memory": self.fits_in_memory}
                if self.memory_bytes is not None
                else {}
            ),
        }

    @property
    def extrapolated(self) -> bool:
        """Whether the op model priced an op of the row without a timing of its shape."""
        return bool((self.predicted or {}).get("predicted_extrapolated"))


@dataclass
class TransitionRow:
    """All three transition points of one pair at fixed sizes: one row of `attn-cost crossover` and of the
    report, typed; `as_json` is the row `crossover --json` prints."""

    a: str
    b: str
    sizes: dict[str, int]
    """The sizes the pair's costs depend on, and d, h, b always, by their JSON names (`JSON_DIM_NAMES`)."""
    setting: Setting
    costs: dict[str, CostPoint]
    """Each cost of `TABLE_COSTS`, in its order."""
    device: DeviceColumns | None = None

    @property
    def d(self) -> int:
        return self.sizes["d"]

    @property
    def heads(self) -> int:
        return self.sizes["heads"]

    @property
    def batch(self) -> int:
        return self.sizes["batch"]

    @property
    def n0(self) -> int | None:
        return self.costs["flops"].n

    @property
    def n1(self) -> int | None:
        return self.costs["memory"].n

    def dims(self) -> dict[sp.Symbol, int]:
        """The sizes keyed by the engine's symbols."""
        names = {v: k for k, v in JSON_DIM_NAMES.items()}
        return {BY_NAME[names.get(k, k)]: v for k, v in self.sizes.items()}

    def as_json(self) -> dict:
        row: dict = {"a": self.a, "b": self.b, **self.sizes, **self.setting.as_json()}
        for cost, key in TABLE_COSTS.items():
            row[key] = self.costs[cost].n
            row[cost] = self.costs[cost].as_json()
        return {**row, **(self.device.as_json() if self.device is not None else {})}


def depends_on(names: tuple[str, ...], dims: dict[sp.Symbol, int], setting: Setting) -> dict[sp.Symbol, int]:
    """The sizes of `dims` that the variants' costs depend on, and d, h and b always: what a row names, and what a
    measurement must have been taken at to be shown under it."""
    used = {s for name in names for c in TABLE_COSTS for e in cost_branches(name, c, setting) for s in e.free_symbols}
    return {k: v for k, v in dims.items() if k in used or str(k) in ("d", "h", "b")}


def transition_row(
    a: str, b: str, dims: dict[sp.Symbol, int], setting: Setting = Setting(), tied_to_d: tuple[sp.Symbol, ...] = ()
) -> TransitionRow:
    """All three transition points of one pair at fixed dims."""

    sizes = {JSON_DIM_NAMES.get(str(k), str(k)): int(v) for k, v in depends_on((a, b), dims, setting).items()}
    costs = {}
    for cost in TABLE_COSTS:
        c = crossover(a, b, cost, dims, setting, tied_to_d=tied_to_d)
        costs[cost] = CostPoint(
            c.n, c.verdict, c.root, c.crossings, c.b_cheaper,
            plain(c.exact) if c.exact is not None else None, c.describe() + _beyond_n_kv(c, setting),
        )  # fmt: skip
    return TransitionRow(a, b, sizes, setting, costs)


def _beyond_n_kv(c: Crossover, setting: Setting) -> str:
    """A warning when a causal count that holds for N <= N_kv is read beyond N_kv."""
    n_kv = setting.counting.n_kv
    if n_kv is None or "N <= N_kv" not in setting.counting.assumptions() or (c.n is not None and c.n <= n_kv):
        return ""
    return f" (beyond N_kv = {n_kv:,}: the causal counts hold for N <= N_kv only)"


@dataclass
class Cheapest:
    """Which of several variants is cheapest on each interval of N."""

    cost: str
    intervals: list[tuple[float, float | None, list[str]]]
    """(from N, to N or None for ∞, the cheapest variants there: several when they tie)."""

    def at(self, n: float) -> list[str]:
        return next(names for lo, hi, names in self.intervals if lo <= n and (hi is None or n < hi))


def cheapest(names: list[str], cost: str, dims: dict[sp.Symbol, int], setting: Setting = Setting()) -> Cheapest:
    """Split N >= 1 into intervals and name the cheapest variant on each (ties listed together)."""
    curves = [curve(n, cost, setting, dims) for n in names]
    intervals: list[tuple[float, float | None, list[str]]] = []
    if any(isinstance(p, Stepped) for c in curves for p in c):  # padded lengths: whole N

        def cheapest_at(values: list[Fraction]) -> tuple[str, ...]:
            return tuple(n for n, v in zip(names, values, strict=True) if v == min(values))

        runs = _integer_runs(curves, cheapest_at, _stretches(curves))
        return Cheapest(cost, [(float(lo), None if hi is None else float(hi), sorted(names) if w == "mixed" else
                                list(cast(tuple, w))) for lo, hi, w in runs])  # fmt: skip
    for lo, hi, x in probes(breakpoints(curves)):
        values = [evaluate(c, x) for c in curves]
        best = min(values)
        winners = [n for n, v in zip(names, values, strict=True) if v == best]
        if intervals and intervals[-1][2] == winners:
            intervals[-1] = (intervals[-1][0], hi, winners)
        else:
            intervals.append((lo, hi, winners))
    return Cheapest(cost, intervals)
