"""How many heads minimise a cost at a fixed embedding width (d = d_embed / h).

Two answers, as in TaylorShift Sec. 4.3: the continuous optimum (where d cost / d h = 0, written
as a condition on d when d_embed cancels out) and the best feasible integer h, a divisor of d_embed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import sympy as sp
from attn_cost.costmodel.conventions import DEFAULT
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting
from attn_cost.costmodel.crossover import Setting, at_sizes, cost_branches, evaluate
from attn_cost.costmodel.derive import dominant_for_large
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import FOLLOW_D, G, N, b, d, d_embed, h, h_kv


@dataclass
class HeadsResult:
    """The head trade-off of one variant on one cost."""

    variant: str
    cost: str
    d_embed: int
    n: int
    table: list[tuple[int, int, int]]
    """(h, d, cost) for every feasible h: a divisor of d_embed (and a multiple of the key/value heads)."""
    best_h: int
    condition: sp.Expr | None = None
    """Stationarity condition as a polynomial in d that must vanish (None when the cost is monotone in h)."""
    d_star: list[float] = field(default_factory=list)
    """Positive real roots of the condition: continuous optima in d."""

    @property
    def h_star(self) -> list[float]:
        return [self.d_embed / x for x in self.d_star]

    @property
    def monotone(self) -> bool:
        costs = [c for _, _, c in self.table]
        return all(x <= y for x, y in pairwise(costs)) or all(x >= y for x, y in pairwise(costs))

    @property
    def trend(self) -> str:
        """How the cost moves as h grows over the feasible divisors."""
        costs = [c for _, _, c in self.table]
        if all(x <= y for x, y in pairwise(costs)):
            return "increases with h"
        if all(x >= y for x, y in pairwise(costs)):
            return "decreases with h"
        return f"is smallest at h = {self.best_h}"


def divisors(n: int) -> list[int]:
    """Every divisor of n, ascending, in O(√n) steps (pairs k, n // k with k <= √n)."""
    small, large = [], []
    for k in range(1, math.isqrt(n) + 1):
        if n % k == 0:
            small.append(k)
            if k != n // k:
                large.append(n // k)
    return small + large[::-1]


def heads(
    variant: str,
    cost: str,
    embed: int,
    *,
    n: int = 1024,
    batch: int = 1,
    convention: str = DEFAULT,
    dtype: str = "fp32",
    extra: dict[sp.Symbol, int] | None = None,
    counting: Counting = DEFAULT_COUNTING,
) -> HeadsResult:
    """Cost of every feasible head count and the continuous optimum."""
    if embed < 1:
        raise UserError(f"--d-embed must be a positive integer, got {embed}")
    branches = cost_branches(variant, cost, Setting(convention, dtype, counting=counting))
    fixed = {b: batch, **(extra or {})}
    follow = {s: d for s in FOLLOW_D if s not in fixed}  # Latte's L and d_v follow the head dim unless given
    branches = tuple(e.xreplace(follow) for e in branches)
    feasible = divisors(embed)
    for sym, flag in ((h_kv, "--kv-heads"), (G, "--groups")):
        share = fixed.get(sym)
        if share is not None and any(sym in e.free_symbols for e in branches):
            feasible = [hv for hv in feasible if hv % share == 0]  # key/value heads, groups must divide the heads
            if not feasible:
                raise UserError(
                    f"no head count h dividing d_embed = {embed} is a multiple of {flag} {share}, so {variant} "
                    f"has no feasible layout: choose {flag} from the divisors of d_embed"
                )
    table = []
    for hv in feasible:
        dims = {**fixed, h: hv, d: embed // hv}
        value = evaluate(at_sizes(branches, dims, variant), n)
        table.append((hv, embed // hv, int(value)))
    best = min(table, key=lambda row: (row[2], row[0]))[0]
    condition, roots = _stationary(branches, fixed, n)
    return HeadsResult(variant, cost, embed, n, table, best, condition, roots)


def _stationary(
    branches: tuple[sp.Expr, ...], fixed: dict[sp.Symbol, int], n: int
) -> tuple[sp.Expr | None, list[float]]:
    """Condition on d where d/dh of the large-N cost vanishes, and its positive roots at N = n."""
    dom = dominant_for_large([sp.expand(e.xreplace(fixed)) for e in branches])
    if dom is None:
        return None, []
    per_embed = sp.expand(dom.xreplace({d: d_embed / h}))
    slope = sp.numer(sp.together(sp.diff(per_embed, h)))
    cond = sp.numer(sp.together(sp.expand(slope.xreplace({h: d_embed / d}))))
    factors = [f for f, _ in sp.factor_list(cond)[1] if d in f.free_symbols and not f.is_Pow and f != d]
    if not factors or any(s not in (d, N) for f in factors for s in f.free_symbols):
        return None, []
    condition = sp.expand(sp.Mul(*factors))
    lead = sp.Poly(condition, d).LC()
    if (lead.xreplace({N: n}) if lead.free_symbols else lead) < 0:
        condition = -condition
    coeffs = [float(c) for c in sp.Poly(condition.xreplace({N: n}), d).all_coeffs()]
    roots = sorted(float(z.real) for z in np.roots(coeffs) if abs(z.imag) < 1e-12 and z.real > 0)
    return condition, roots
