"""Polynomials in the model's dimensions as plain dicts {exponents: coefficient}.

Every cost the engine derives is a polynomial with rational coefficients in N, d, h, b, ..., where a
size other than N may also appear in a denominator (chunked linear attention keeps N/C chunk states):
such a reciprocal 1/x is a generator of its own, x⁻¹, which lies in (0, 1] where x >= 1.
Comparisons that run many times (is one branch always below another? which dominates for large N?
what is the polynomial in N once the other sizes are fixed?) are done here in pure Python, so the
analytic commands stay fast; sympy builds each dict once.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from functools import cache
from itertools import product
from math import comb, prod

import sympy as sp
from attn_cost.costmodel.counting import N_kv
from attn_cost.costmodel.symbols import BY_NAME

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

Terms = dict[tuple[int, ...], Fraction]


@cache
def terms(expr: sp.Expr) -> Terms:
    """The polynomial as {exponent tuple over GENS: coefficient} (a size's negative power as its reciprocal's)."""
    expr = sp.expand(expr).replace(
        lambda e: e.is_Pow and e.base in INVERSES and e.exp.is_negative, lambda e: INVERSES[e.base] ** -e.exp
    )
    poly = sp.Poly(expr, *GENS)
    return {m: Fraction(int(c.p), int(c.q)) for m, c in poly.terms() if c != 0}


def subtract(p: Terms, q: Terms) -> Terms:
    out = dict(p)
    for m, c in q.items():
        v = out.get(m, Fraction(0)) - c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def nonneg_when_at_least_one(p: Terms) -> bool:
    """Sufficient test that p >= 0 whenever every size is >= 1: substitute x -> 1 + x for each
    size and require every coefficient of the result to be non-negative. A reciprocal t = 1/x in (0, 1] is
    t = 1/(1 + y), y >= 0: p times (1 + y)^K (K: t's highest power, a positive factor) is polynomial in y."""
    top = [max((m[i] for m in p), default=0) if RECIPROCAL[i] else 0 for i in range(len(GENS))]
    shifted: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)
    for monom, c in p.items():
        monom = tuple(k - e if inverse else e for e, k, inverse in zip(monom, top, RECIPROCAL, strict=True))
        for ks in product(*(range(e + 1) for e in monom)):
            shifted[ks] += c * prod(comb(e, k) for e, k in zip(monom, ks, strict=True))
    return all(v >= 0 for v in shifted.values())


def eventually_positive(p: Terms) -> bool:
    """The terms of highest total degree (a reciprocal's power counted negative) are all positive (p > 0 once
    every size is large)."""
    if not p:
        return False
    top = max(_degree(m) for m in p)
    return all(c > 0 for m, c in p.items() if _degree(m) == top)


def _degree(monom: tuple[int, ...]) -> int:
    return sum(-e if inverse else e for e, inverse in zip(monom, RECIPROCAL, strict=True))


def leads_for_large_n(p: Terms) -> bool:
    """p >= 0 once N is large, for every (large enough) value of the other sizes."""
    if not p:
        return True
    degree = max(m[N_INDEX] for m in p)
    lead = {m: c for m, c in p.items() if m[N_INDEX] == degree}
    return nonneg_when_at_least_one(lead) or eventually_positive(lead)


def in_n(p: Terms, values: dict[sp.Symbol, int]) -> tuple[Fraction, ...]:
    """Coefficients in N (highest power first) once every other size is fixed; raises KeyError
    naming a size that has no value."""
    sizes = [*(values.get(g) for g in SIZES), *(_reciprocal(values.get(g)) for g in INVERSES)]
    by_degree: dict[int, Fraction] = defaultdict(Fraction)
    for monom, c in p.items():
        factor = c
        for i, e in enumerate(monom):
            if e and i != N_INDEX:
                size = sizes[i]
                if size is None:
                    raise KeyError(SIZE_OF[i].name)
                factor *= size**e
        by_degree[monom[N_INDEX]] += factor
    top = max(by_degree, default=0)
    return tuple(by_degree.get(k, Fraction(0)) for k in range(top, -1, -1))


def _reciprocal(size: int | None) -> Fraction | None:
    return None if size is None else Fraction(1, size)
