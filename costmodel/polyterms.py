"""Polynomials in the model's dimensions as plain dicts {exponents: coefficient}.

Every cost the engine derives is a polynomial with rational coefficients in N, d, h, b, ...
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

GENS: tuple[sp.Symbol, ...] = (*BY_NAME.values(), N_kv)
"""The generators, in a fixed order: N first (N_kv, the key length of `--n-kv`, last)."""
N_INDEX = 0

Terms = dict[tuple[int, ...], Fraction]


@cache
def terms(expr: sp.Expr) -> Terms:
    """The polynomial as {exponent tuple over GENS: coefficient}."""
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
    size and require every coefficient of the result to be non-negative."""
    shifted: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)
    for monom, c in p.items():
        for ks in product(*(range(e + 1) for e in monom)):
            shifted[ks] += c * prod(comb(e, k) for e, k in zip(monom, ks, strict=True))
    return all(v >= 0 for v in shifted.values())


def eventually_positive(p: Terms) -> bool:
    """The terms of highest total degree are all positive (p > 0 once every size is large)."""
    if not p:
        return False
    top = max(sum(m) for m in p)
    return all(c > 0 for m, c in p.items() if sum(m) == top)


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
    sizes = [values.get(g) for g in GENS]
    by_degree: dict[int, Fraction] = defaultdict(Fraction)
    for monom, c in p.items():
        factor = c
        for i, e in enumerate(monom):
            if e and i != N_INDEX:
                size = sizes[i]
                if size is None:
                    raise KeyError(GENS[i].name)
                factor *= size**e
        by_degree[monom[N_INDEX]] += factor
    top = max(by_degree, default=0)
    return tuple(by_degree.get(k, Fraction(0)) for k in range(top, -1, -1))
