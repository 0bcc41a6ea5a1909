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
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cache
from itertools import pairwise

import numpy as np
import sympy as sp
from attn_cost.costmodel.conventions import DEFAULT, PublishedConvention, get_convention
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting, N_kv
from attn_cost.costmodel.derive import dominant_for_large, prune_dominated
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.polyterms import in_n, terms
from attn_cost.costmodel.symbols import N, d
from attn_cost.costmodel.variants import derive, get_variant

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

    def as_json(self) -> dict:
        return {
            "convention": self.convention,
            "dtype": self.dtype,
            "scope": self.scope,
            "mode": self.mode,
            "counting": self.counting.as_json(),
        }


@cache
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
    derived = derive(name, setting.scope, setting.mode, counting.n_kv is not None, counting.bias)
    if cost == "flops":
        out: tuple[sp.Expr, ...] = (derived.flops(conv, counting),)
    elif cost == "memory":
        out = tuple(derived.peak(setting.dtype).branches)
    else:
        out = (derived.traffic(setting.dtype, counting),)
    if counting.n_kv is None:
        return out
    fixed = tuple(sp.expand(e.xreplace({N_kv: counting.n_kv})) for e in out)  # a key length set like a size
    return tuple(prune_dominated(list(fixed))) if cost == "memory" else fixed


def at_sizes(branches: tuple[sp.Expr, ...], dims: dict[sp.Symbol, int], what: str) -> list[Poly]:
    """Substitute every dimension but N and return exact polynomial coefficients in N."""
    try:
        return [in_n(terms(e), dims) for e in branches]
    except KeyError as missing:
        raise UserError(f"{what} depends on {missing.args[0]}: give a value for it") from None


class Cap(tuple):
    """A polynomial that bounds a curve from above: the curve is min(max(branches), cap)."""


def curve(name: str, cost: str, setting: Setting, dims: dict[sp.Symbol, int]) -> list[Poly]:
    """A variant's cost as polynomial branches in N. With `--causal-count tiles` the FLOPs are capped by
    the dense count: below one tile (N < T) the tile formula N(N+T)/2 would exceed the N² scores there
    are, and a blocked kernel computes the whole matrix as one tile."""
    polys = at_sizes(cost_branches(name, cost, setting), dims, name)
    if cost == "flops" and setting.counting.causal == "tiles" and not isinstance(
        get_convention(setting.convention), PublishedConvention
    ):
        dense = replace(setting, counting=replace(setting.counting, causal="dense"))
        polys.append(Cap(at_sizes(cost_branches(name, cost, dense), dims, name)[0]))
    return polys


def evaluate(polys: list[Poly], x: Fraction | int) -> Fraction:
    """Maximum over the branches at x, exactly (no more than a `Cap` branch, where there is one)."""
    best = cap = None
    for p in polys:
        v = Fraction(0)
        for c in p:
            v = v * x + c
        if isinstance(p, Cap):
            cap = v if cap is None or v < cap else cap
            continue
        best = v if best is None or v > best else best
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

    def describe(self) -> str:
        """A plain sentence for the terminal."""
        if self.verdict == "equal":
            return f"{self.b} and {self.a} cost the same for every N"
        if self.verdict == "always":
            return f"{self.b} is never more expensive than {self.a}"
        if self.verdict == "never":
            if self.b_cheaper:
                spans = ", ".join(f"[{lo:.0f}, {hi:.0f})" for lo, hi in self.b_cheaper if hi is not None)
                return f"{self.b} is cheaper only on N in {spans}; {self.a} is cheaper for large N"
            return f"{self.b} is never cheaper than {self.a}"
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


def compare(pa: list[Poly], pb: list[Poly]) -> dict:
    """Sign analysis of cost_a - cost_b over N >= 1."""
    segments = []
    for lo, hi, x in probes(breakpoints([pa, pb])):
        diff = evaluate(pa, x) - evaluate(pb, x)
        sign = (diff > 0) - (diff < 0)
        if segments and segments[-1][2] == sign:
            segments[-1] = (segments[-1][0], hi, sign)
        else:
            segments.append((lo, hi, sign))
    signs = [s for _, _, s in segments]
    crossings = [hi for (_, hi, s), (_, _, t) in pairwise(segments) if s != t and 0 not in (s, t)]
    cheaper = [(lo, hi) for lo, hi, s in segments if s > 0]
    if all(s == 0 for s in signs):
        return {"n": 1, "verdict": "equal"}
    if signs[-1] < 0:
        return {"n": None, "verdict": "never", "crossings": crossings, "b_cheaper": cheaper}
    negatives = [hi for _, hi, s in segments if s < 0]
    if not negatives:
        return {"n": 1, "verdict": "always", "b_cheaper": cheaper}
    root = negatives[-1]
    losing_from = next(lo for lo, hi, s in reversed(segments) if s < 0)
    n = first_integer_from(lambda x: evaluate(pa, x) >= evaluate(pb, x), root, losing_from)
    verdict = "crosses" if len(crossings) <= 1 else "multiple"
    return {"n": n, "verdict": verdict, "root": root, "crossings": crossings, "b_cheaper": cheaper}


def first_integer_from(holds: Callable[[int], bool], near: float, floor: float = 1.0) -> int:
    """The integer where `holds` turns true for good, from a float estimate `near` of the sign change.

    `holds` is false on (floor, near) and true from near on; near is a float root, which can be off
    by more than 1 at large N. Exact and O(log): an integer bracket (holds(lo) false, holds(hi) true)
    is grown geometrically around ceil(near), then bisected. No step-by-one walk at any size."""
    start = max(1, math.ceil(near - 1e-9 * max(1.0, near)))
    step = 1
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
    while hi - lo > 1:  # invariant: holds(lo) is false, holds(hi) is true
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _freeze(dims: dict[sp.Symbol, int]) -> tuple[tuple[sp.Symbol, int], ...]:
    return tuple(sorted(dims.items(), key=lambda kv: kv[0].name))


@cache
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
    if diff.free_symbols - {N, d}:
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


def transition_row(
    a: str, b: str, dims: dict[sp.Symbol, int], setting: Setting = Setting(), tied_to_d: tuple[sp.Symbol, ...] = ()
) -> dict:
    """All three transition points of one pair at fixed dims, as a JSON-ready dict."""
    from attn_cost.costmodel.display import plain

    used = {s for name in (a, b) for c in TABLE_COSTS for e in cost_branches(name, c, setting) for s in e.free_symbols}
    sizes = {JSON_DIM_NAMES.get(str(k), str(k)): int(v) for k, v in dims.items() if k in used or str(k) in "dhb"}
    row: dict = {"a": a, "b": b, **sizes, **setting.as_json()}
    for cost, key in TABLE_COSTS.items():
        c = crossover(a, b, cost, dims, setting, tied_to_d=tied_to_d)
        row[key] = c.n
        row[cost] = {
            "n": c.n,
            "verdict": c.verdict,
            "root": c.root,
            "crossings": c.crossings,
            "b_cheaper": [list(iv) for iv in c.b_cheaper],
            "exact": plain(c.exact) if c.exact is not None else None,
            "summary": c.describe() + _beyond_n_kv(c, setting),
        }
    return row


def _beyond_n_kv(c: Crossover, setting: Setting) -> str:
    """A warning when a causal count that holds for N <= N_kv is read beyond N_kv."""
    n_kv = setting.counting.n_kv
    if "N <= N_kv" not in setting.counting.assumptions() or (c.n is not None and c.n <= n_kv):
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
    for lo, hi, x in probes(breakpoints(curves)):
        values = [evaluate(c, x) for c in curves]
        best = min(values)
        winners = [n for n, v in zip(names, values, strict=True) if v == best]
        if intervals and intervals[-1][2] == winners:
            intervals[-1] = (intervals[-1][0], hi, winners)
        else:
            intervals.append((lo, hi, winners))
    return Cheapest(cost, intervals)
