"""Polynomials in the model's dimensions as plain dicts {exponents: coefficient}.

Every cost the engine derives is a polynomial with rational coefficients in N, d, h, b, ..., where a
size other than N may also appear in a denominator (chunked linear attention keeps N/C chunk states):
such a reciprocal 1/x is a generator of its own, x⁻¹, which lies in (0, 1] where x >= 1.
Code that pads N up to a multiple of D (whole chunks, windows, landmarks) adds two step generators per D:
⌈N/D⌉ (>= 1, growing like N/D) and the bracket [D ∤ N] (0 or 1: whether it pads at all); ⌊N/D⌋ and N mod D
are written in them. Once the other sizes are fixed, such a cost is a polynomial in N on each residue class
of N modulo the divisors' least common multiple (`Stepped`).
Comparisons that run many times (is one branch always below another? which dominates for large N?
what is the polynomial in N once the other sizes are fixed?) are done here in pure Python, so the
analytic commands stay fast; sympy builds each dict once.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from itertools import product
from math import ceil, comb, lcm, prod

import sympy as sp
from attn_cost.costmodel.counting import N_kv
from attn_cost.costmodel.symbols import BY_NAME, Pads

SIZES: tuple[sp.Symbol, ...] = (*BY_NAME.values(), N_kv)
INVERSES: dict[sp.Symbol, sp.Symbol] = {
    s: sp.Symbol(f"{s.name}⁻¹", positive=True) for s in SIZES if s.name not in ("N", "N_kv")
}
"""The reciprocal of each size that may divide a cost (not N: a cost never shrinks as N grows)."""
GENS: tuple[sp.Symbol, ...] = (*SIZES, *INVERSES.values())
"""The generators, in a fixed order: N first, then the other sizes (N_kv, the key length of `--n-kv`, last of
them), then the reciprocals."""
N_INDEX = 0
RECIPROCAL: tuple[bool, ...] = tuple(i >= len(SIZES) for i in range(len(GENS)))
SIZE_OF: tuple[sp.Symbol, ...] = (*SIZES, *INVERSES)
"""The size each generator stands for (its own, or the one it is the reciprocal of)."""

StepGen = tuple[sp.Expr, str]
"""A step generator: (D, 'ceil') for ⌈N/D⌉, (D, 'pads') for [D ∤ N]."""
Monomial = tuple  # exponents over GENS, then a tuple of (StepGen, exponent) pairs (empty for a polynomial)
Terms = dict[Monomial, Fraction]

_N = SIZES[0]


def _divisor(arg: sp.Expr) -> sp.Expr | None:
    """D where arg is N/D (D free of N), else None."""
    d = sp.cancel(_N / arg)
    return d if _N not in d.free_symbols and d.is_positive else None


_STEP_SYMBOLS: dict[StepGen, sp.Symbol] = {}


def _step_symbol(gen: StepGen) -> sp.Symbol:
    if gen not in _STEP_SYMBOLS:
        _STEP_SYMBOLS[gen] = sp.Symbol(f"step{len(_STEP_SYMBOLS)}", positive=gen[1] == "ceil", nonnegative=True)
    return _STEP_SYMBOLS[gen]


def _without_steps(expr: sp.Expr) -> tuple[sp.Expr, dict[sp.Symbol, StepGen]]:
    """expr with ⌈N/D⌉, ⌊N/D⌋, N mod D and [D ∤ N] written in step symbols (⌊N/D⌋ = ⌈N/D⌉ − [D ∤ N],
    N mod D = N − D·⌊N/D⌋); raises ValueError for a step of anything but N/D."""
    found: dict[sp.Symbol, StepGen] = {}

    def gen(d: sp.Expr | None, kind: str, what: sp.Expr) -> sp.Symbol:
        if d is None:
            raise ValueError(f"{what}: only steps of N/D (N rounded to a multiple of D) are modelled")
        s = _step_symbol((d, kind))
        found[s] = (d, kind)
        return s

    def rewrite(e: sp.Expr) -> sp.Expr:
        if isinstance(e, sp.ceiling):
            return gen(_divisor(e.args[0]), "ceil", e)
        if isinstance(e, sp.floor):
            d = _divisor(e.args[0])
            return gen(d, "ceil", e) - gen(d, "pads", e)
        if isinstance(e, sp.Mod):
            d = e.args[1] if e.args[0] == _N else None
            return _N - d * (gen(d, "ceil", e) - gen(d, "pads", e)) if d is not None else gen(None, "", e)
        if isinstance(e, Pads):
            return gen(_divisor(e.args[0] / e.args[1]) if e.args[0] == _N else None, "pads", e)
        return e

    if not expr.has(sp.ceiling, sp.floor, sp.Mod, Pads):
        return expr, found
    return sp.expand(expr.replace(lambda e: isinstance(e, (sp.ceiling, sp.floor, sp.Mod, Pads)), rewrite)), found


@cache
def terms(expr: sp.Expr) -> Terms:
    """The polynomial as {exponent tuple over GENS (+ its steps): coefficient} (a size's negative power as its
    reciprocal's)."""
    expr, steps = _without_steps(sp.expand(expr))
    expr = expr.replace(
        lambda e: e.is_Pow and e.base in INVERSES and e.exp.is_negative, lambda e: INVERSES[e.base] ** -e.exp
    )
    order = sorted(steps, key=lambda s: (str(steps[s][0]), steps[s][1]))
    poly = sp.Poly(expr, *GENS, *order)
    out: Terms = defaultdict(Fraction)
    for m, c in poly.terms():
        if c == 0:
            continue
        step = tuple(
            (steps[s], 1 if steps[s][1] == "pads" else e) for s, e in zip(order, m[len(GENS) :], strict=True) if e
        )
        key = (*m[: len(GENS)], step)
        out[key] += Fraction(int(c.p), int(c.q))  # [D ∤ N]² = [D ∤ N]
    return {m: c for m, c in out.items() if c}


def subtract(p: Terms, q: Terms) -> Terms:
    out = dict(p)
    for m, c in q.items():
        v = out.get(m, Fraction(0)) - c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def _flat(p: Terms) -> tuple[list[bool], dict[tuple[int, ...], Fraction]]:
    """p over GENS and its step generators as plain exponent tuples, and which generators lie in [0, 1] (the
    reciprocals and the brackets [D ∤ N]; the others, sizes and ⌈N/D⌉, are >= 1)."""
    gens = sorted({g for m in p for g, _ in m[-1]}, key=lambda g: (str(g[0]), g[1]))
    unit = [*RECIPROCAL, *(g[1] == "pads" for g in gens)]
    flat = {(*m[:-1], *(dict(m[-1]).get(g, 0) for g in gens)): c for m, c in p.items()}
    return unit, flat


def nonneg_when_at_least_one(p: Terms) -> bool:
    """Sufficient test that p >= 0 whenever every size is >= 1: substitute x -> 1 + x for each
    size and require every coefficient of the result to be non-negative. A reciprocal t = 1/x in (0, 1] is
    t = 1/(1 + y), y >= 0: p times (1 + y)^K (K: t's highest power, a positive factor) is polynomial in y.
    ⌈N/D⌉ >= 1 is shifted as a size; a bracket [D ∤ N] in [0, 1] is handled as a reciprocal (its value 0 is
    the limit y -> ∞, where the polynomial is still >= 0 by continuity)."""
    unit, flat = _flat(p)
    top = [max((m[i] for m in flat), default=0) if u else 0 for i, u in enumerate(unit)]
    shifted: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)
    for monom, c in flat.items():
        monom = tuple(k - e if inverse else e for e, k, inverse in zip(monom, top, unit, strict=True))
        for ks in product(*(range(e + 1) for e in monom)):
            shifted[ks] += c * prod(comb(e, k) for e, k in zip(monom, ks, strict=True))
    return all(v >= 0 for v in shifted.values())


def eventually_positive(p: Terms) -> bool:
    """The terms of highest total degree (a reciprocal's power counted negative, ⌈N/D⌉ as a size) are all
    positive (p > 0 once every size is large); a term with a bracket [D ∤ N], which may be 0, is not leading
    and must be positive where it is of that degree or more."""
    plain = [m for m in p if not any(g[1] == "pads" for g, _ in m[-1])]
    if not plain:
        return False
    top = max(_degree(m) for m in plain)
    return all(c > 0 for m, c in p.items() if _degree(m) >= top)


def _degree(monom: Monomial) -> int:
    own = sum(-e if inverse else e for e, inverse in zip(monom[:-1], RECIPROCAL, strict=True))
    return own + sum(e for g, e in monom[-1] if g[1] == "ceil")


def n_degree(expr: sp.Expr) -> int:
    """How fast a cost grows with N: its degree in N, ⌈N/D⌉ counted as N (a padded length grows as N does)."""
    return max((_n_degree(m) for m in terms(expr)), default=0)


def _n_degree(monom: Monomial) -> int:
    return monom[N_INDEX] + sum(e for g, e in monom[-1] if g[1] == "ceil")


def leads_for_large_n(p: Terms) -> bool:
    """p >= 0 once N is large, for every (large enough) value of the other sizes. ⌈N/D⌉ grows as N/D: the
    leading terms are read with N/D for it (what it rounds off is of lower degree); where they cancel, what
    decides is the rounding, and the answer is no."""
    if not p:
        return True
    degree = max(_n_degree(m) for m in p)
    lead: Terms = defaultdict(Fraction)
    for m, c in p.items():
        if _n_degree(m) != degree:
            continue
        exps, coeff = list(m[:-1]), c
        for (d, kind), e in m[-1]:
            if kind == "ceil":
                exps[N_INDEX] += e
                for base, power in sp.Mul(d).as_powers_dict().items():
                    if base.is_Integer:
                        coeff /= int(base) ** (e * int(power))
                    else:  # N/D: D's own power first, then its reciprocal
                        k, own = e * int(power), GENS.index(base)
                        cancel = min(k, exps[own])
                        exps[own] -= cancel
                        exps[GENS.index(INVERSES[base])] += k - cancel
        key = (*exps, tuple((g, e) for g, e in m[-1] if g[1] == "pads"))
        lead[key] += coeff
    lead = {m: c for m, c in lead.items() if c}
    if not lead:
        return False
    return nonneg_when_at_least_one(lead) or eventually_positive(lead)


def in_n(p: Terms, values: dict[sp.Symbol, int]) -> tuple[Fraction, ...] | Stepped:
    """Coefficients in N (highest power first) once every other size is fixed, or a `Stepped` cost where p pads
    N; raises KeyError naming a size that has no value."""
    sizes = [*(values.get(g) for g in SIZES), *(_reciprocal(values.get(g)) for g in INVERSES)]
    by_degree: dict[tuple, Fraction] = defaultdict(Fraction)
    for monom, c in p.items():
        factor = c
        for i, e in enumerate(monom[:-1]):
            if e and i != N_INDEX:
                size = sizes[i]
                if size is None:
                    raise KeyError(SIZE_OF[i].name)
                factor *= size**e
        power, steps = monom[N_INDEX], []
        for g, e in monom[-1]:
            (dv, kind) = _at(g, values)
            if dv > 1:
                steps.append(((dv, kind), e))
            elif kind == "ceil":  # ⌈N/1⌉ = N
                power += e
            else:  # [1 ∤ N] = 0
                factor = Fraction(0)
        by_degree[(power, tuple(steps))] += factor
    if any(steps and c for (_, steps), c in by_degree.items()):
        return Stepped.of(by_degree)
    top = max((k for k, _ in by_degree), default=0)
    return tuple(by_degree.get((k, ()), Fraction(0)) for k in range(top, -1, -1))


def _at(gen: StepGen, values: dict[sp.Symbol, int]) -> tuple[int, str]:
    """A step generator with its divisor at the given sizes (a positive integer)."""
    d, kind = gen
    value = sp.sympify(sp.sympify(d).xreplace(values))
    missing = sorted(s.name for s in getattr(value, "free_symbols", ()))
    if missing:
        raise KeyError(missing[0])
    if not (value.is_Integer and value > 0):
        raise ValueError(f"N is padded to a multiple of {d} = {value}, which is not a positive integer")
    return int(value), kind


@dataclass(frozen=True, eq=False)
class Stepped:
    """A cost in N (the other sizes fixed) with ⌈N/D⌉ and [D ∤ N] in it: on each residue class r of N modulo
    `period` (the divisors' lcm) it is the polynomial `poly(r)`; `at(x)` evaluates it exactly at any N."""

    terms: tuple[tuple[tuple[int, tuple[tuple[tuple[int, str], int], ...]], Fraction], ...]
    period: int
    _polys: dict[int, tuple[Fraction, ...]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, by_degree: dict) -> Stepped:
        items = tuple((k, c) for k, c in by_degree.items() if c)
        return cls(items, lcm(1, *(d for (_, steps), _ in items for (d, _), _ in steps)))

    def at(self, x: Fraction | int) -> Fraction:
        x = Fraction(x)
        total = Fraction(0)
        for (power, steps), c in self.terms:
            v = c * x**power
            for (d, kind), e in steps:
                v *= Fraction(ceil(x / d)) ** e if kind == "ceil" else (x / d).denominator != 1
            total += v
        return total

    @property
    def divisors(self) -> tuple[int, ...]:
        """The lengths N is padded to a multiple of."""
        return tuple(sorted({d for (_, steps), _ in self.terms for (d, _), _ in steps}))

    def bound(self, upper: bool, pads: dict[int, int]) -> tuple[Fraction, ...]:
        """A polynomial in N (highest power first) no more (`upper`: no less) than the cost at every N >= 1 where
        each [D ∤ N] is `pads[D]`: on the multiples of D, ⌈N/D⌉ is N/D; elsewhere each term takes it at
        (N + 1)/D or (N + D − 1)/D, whichever makes the term least (most)."""
        coeffs: dict[int, Fraction] = defaultdict(Fraction)
        for (power, steps), c in self.terms:
            if any(kind == "pads" and not pads[d] for (d, kind), _ in steps):
                continue  # the bracket is 0
            high = (c > 0) == upper  # every ⌈N/D⌉ at its top
            part = {power: c}
            for (d, kind), e in steps:
                if kind == "ceil":
                    s = 0 if not pads[d] else d - 1 if high else 1
                    part = _times(part, {k: Fraction(comb(e, k) * s ** (e - k), d**e) for k in range(e + 1)})
            for k, v in part.items():
                coeffs[k] += v
        return _highest_first(coeffs)

    def block(self, x: int) -> tuple[Fraction, ...]:
        """The polynomial in N (highest power first) equal to the cost at every N where each ⌈N/D⌉ and [D ∤ N] is
        as at x: x's stretch between two multiples of the divisors (x alone where it is a multiple of one)."""
        coeffs: dict[int, Fraction] = defaultdict(Fraction)
        for (power, steps), c in self.terms:
            v = c
            for (d, kind), e in steps:
                v *= Fraction(-(-x // d)) ** e if kind == "ceil" else int(x % d != 0)
            coeffs[power] += v
        return _highest_first(coeffs)

    def poly(self, r: int) -> tuple[Fraction, ...]:
        """The polynomial in N (highest power first) that equals the cost at every N ≡ r (mod period)."""
        r %= self.period
        if r not in self._polys:
            coeffs: dict[int, Fraction] = defaultdict(Fraction)
            for (power, steps), c in self.terms:
                part = {power: c}  # ⌈N/D⌉ = (N + s)/D with s = (−r) mod D on this class
                for (d, kind), e in steps:
                    if kind == "pads":
                        part = part if r % d else {}
                        continue
                    s = -r % d
                    term = {k: Fraction(comb(e, k) * s ** (e - k), d**e) for k in range(e + 1)}
                    part = _times(part, term)
                for k, v in part.items():
                    coeffs[k] += v
            self._polys[r] = _highest_first(coeffs)
        return self._polys[r]


def _highest_first(coeffs: dict[int, Fraction]) -> tuple[Fraction, ...]:
    top = max(coeffs, default=0)
    return tuple(coeffs.get(k, Fraction(0)) for k in range(top, -1, -1))


def _times(p: dict[int, Fraction], q: dict[int, Fraction]) -> dict[int, Fraction]:
    out: dict[int, Fraction] = defaultdict(Fraction)
    for i, a in p.items():
        for j, b in q.items():
            out[i + j] += a * b
    return dict(out)


def _reciprocal(size: int | None) -> Fraction | None:
    return None if size is None else Fraction(1, size)
