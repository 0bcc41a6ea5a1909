"""The derived TaylorShift formulas against the paper, symbol for symbol.

Every expected value below is typed from Nauen et al., TaylorShift (arXiv 2403.02920v1): Eqs. 4-7,
Sec. 4.2-4.3 and Table 2, or from the ICPR summary in the authors' publication feed.
"""

from __future__ import annotations

import math

import pytest
import sympy as sp
from attn_cost.costmodel.conventions import get_convention
from attn_cost.costmodel.crossover import Setting, crossover
from attn_cost.costmodel.derive import multihead
from attn_cost.costmodel.heads import heads
from attn_cost.costmodel.symbols import BY_NAME, N, b, d, h
from attn_cost.costmodel.variants import derive

SINGLE = {b: 1, h: 1}


def paper(formula: str) -> sp.Expr:
    return sp.sympify(formula, locals=dict(BY_NAME))


def flops(variant: str, convention: str) -> sp.Expr:
    return derive(variant).flops(get_convention(convention))


def large_n_peak(variant: str) -> sp.Expr:
    return derive(variant).peak().dominant


@pytest.mark.parametrize(
    ("variant", "convention", "published"),
    [
        ("taylorshift-direct", "taylorshift-v1", "4*N**2*d + 6*N**2"),  # Eq. 4
        ("taylorshift-efficient", "taylorshift-v1", "N*(4*d**3 + 10*d**2 + 8*d + 3)"),  # Eq. 5
        ("taylorshift-efficient", "taylorshift-icpr", "N*(4*d**3 + 10*d**2 + 9*d + 4)"),  # ICPR
    ],
)
def test_single_head_flops_equal_the_paper(variant: str, convention: str, published: str) -> None:
    derived = sp.expand(flops(variant, convention).xreplace(SINGLE))
    assert derived == sp.expand(paper(published))


@pytest.mark.parametrize(
    ("variant", "published"),
    [
        ("taylorshift-direct", "d*N + 2*N**2"),  # Sec. 4.2, entries_triv
        ("taylorshift-efficient", "d**2*(d + 1) + 2*d*N + (d + 1)*N + d**2*N"),  # Sec. 4.2, entries_eff
    ],
)
def test_peak_entries_equal_the_paper(variant: str, published: str) -> None:
    assert sp.expand(large_n_peak(variant).xreplace(SINGLE)) == sp.expand(paper(published))


def test_efficient_peak_is_reached_while_computing_a_mod() -> None:
    """Sec. 4.2: 'the efficient version requires maximum memory during the calculation of A_mod'."""
    step = derive("taylorshift-efficient").peak().dominant_step()
    assert step.op.kind == "matmul" and "A_mod" in step.op.output.name


def test_direct_peak_is_reached_while_applying_the_taylor_softmax() -> None:
    step = derive("taylorshift-direct").peak().dominant_step()
    assert step.op.kind == "poly2"


@pytest.mark.parametrize(
    ("variant", "quantity", "published"),
    [
        ("taylorshift-direct", "taylorshift-v1", "4*N**2*d_embed + 6*h*N**2"),
        ("taylorshift-efficient", "taylorshift-v1", "N*(4*d_embed**3/h**2 + 10*d_embed**2/h + 8*d_embed + 3*h)"),
        ("taylorshift-efficient", "taylorshift-icpr", "N*(4*d_embed**3/h**2 + 10*d_embed**2/h + 9*d_embed + 4*h)"),
        ("taylorshift-direct", "peak", "d_embed*N + 2*N**2*h"),
        ("taylorshift-efficient", "peak", "d_embed**3/h**2 + (N + 1)*d_embed**2/h + 3*N*d_embed + N*h"),
    ],
)
def test_multi_head_forms_of_section_4_3(variant: str, quantity: str, published: str) -> None:
    per_head = large_n_peak(variant) if quantity == "peak" else flops(variant, quantity)
    assert multihead(per_head.xreplace({b: 1})) == sp.expand(paper(published))


def test_batch_and_heads_scale_every_cost_linearly() -> None:
    for variant in ("softmax", "softmax-fused", "taylorshift-direct", "taylorshift-efficient"):
        one = flops(variant, "full").xreplace(SINGLE)
        assert sp.expand(flops(variant, "full") - b * h * one) == 0


TABLE_2 = {  # d: (N0, N1), TaylorShift Table 2
    8: (73, 47),
    16: (273, 159),
    32: (1057, 574),
    64: (4161, 2174),
    128: (16513, 8446),
}


@pytest.mark.parametrize("dval", sorted(TABLE_2))
def test_table_2(dval: int) -> None:
    dims = {d: dval, h: 1, b: 1}
    n0 = crossover("taylorshift-direct", "taylorshift-efficient", "flops", dims)
    n1 = crossover("taylorshift-direct", "taylorshift-efficient", "memory", dims)
    assert (n0.n, n1.n) == TABLE_2[dval]
    assert n0.verdict == n1.verdict == "crosses"


@pytest.mark.parametrize("dval", sorted(TABLE_2))
def test_icpr_counting_gives_the_same_table(dval: int) -> None:
    dims = {d: dval, h: 1, b: 1}
    n0 = crossover("taylorshift-direct", "taylorshift-efficient", "flops", dims, Setting("taylorshift-icpr"))
    assert n0.n == TABLE_2[dval][0]


def test_closed_forms_eq_6_and_eq_7() -> None:
    dims = {d: 64, h: 1, b: 1}
    n0 = crossover("taylorshift-direct", "taylorshift-efficient", "flops", dims)
    n1 = crossover("taylorshift-direct", "taylorshift-efficient", "memory", dims)
    assert sp.simplify(n0.exact - paper("d**2 + d + 1/2")) == 0
    eq7 = paper("(d**2 + 2*d + 1 + sqrt(d**4 + 12*d**3 + 14*d**2 + 4*d + 1)) / 4")
    assert sp.simplify(n1.exact - eq7) == 0


def _n1_by_integer_search(dv: int) -> int:
    """Smallest N with 2N² + dN >= d³ + (N+1)d² + 3Nd + N, found by scanning up from the float estimate."""
    n = max(1, int((dv * dv) / 4))
    while 2 * n * n + dv * n < dv**3 + (n + 1) * dv**2 + 3 * n * dv + n:
        n += 1
    while n > 1 and 2 * (n - 1) ** 2 + dv * (n - 1) >= dv**3 + n * dv**2 + 3 * (n - 1) * dv + (n - 1):
        n -= 1
    return n


@pytest.mark.parametrize("dval", [2, 3, 5, 7, 12, 24, 48, 96, 100, 200, 256, 333, 512])
def test_transition_points_for_any_d(dval: int) -> None:
    """N0 = ceil(d² + d + 1/2) = d² + d + 1 and N1 from the quadratic of Sec. 4.2, for d off the table."""
    dims = {d: dval, h: 1, b: 1}
    n0 = crossover("taylorshift-direct", "taylorshift-efficient", "flops", dims, exact=False)
    n1 = crossover("taylorshift-direct", "taylorshift-efficient", "memory", dims, exact=False)
    assert n0.n == dval * dval + dval + 1
    assert n1.n == _n1_by_integer_search(dval)
    assert n1.n == math.ceil(
        (dval**2 + 2 * dval + 1 + math.sqrt(dval**4 + 12 * dval**3 + 14 * dval**2 + 4 * dval + 1)) / 4
    )


def test_optimal_heads_for_flops_section_4_3() -> None:
    """3 = 8d³ + 10d² has its single positive root at d ≈ 0.47, so h0 ≈ d_embed / 0.47 > d_embed."""
    r = heads("taylorshift-efficient", "flops", 256)
    assert sp.expand(r.condition - paper("8*d**3 + 10*d**2 - 3")) == 0
    assert r.d_star == pytest.approx([0.47], abs=0.005)
    assert r.best_h == 256 and r.trend == "decreases with h"


def test_optimal_heads_for_flops_icpr_counting() -> None:
    r = heads("taylorshift-efficient", "flops", 256, convention="taylorshift-icpr")
    assert r.d_star == pytest.approx([0.53], abs=0.005)


def test_optimal_heads_for_memory_section_4_3() -> None:
    """0 = -2d³ - (N+1)d² + N implies d < 1, i.e. h1 > d_embed."""
    r = heads("taylorshift-efficient", "memory", 256, n=1024)
    published = paper("-2*d**3 - (N + 1)*d**2 + N")
    assert sp.simplify(r.condition / published) in (1, -1)
    assert len(r.d_star) == 1 and r.d_star[0] < 1


@pytest.mark.parametrize("variant", ["taylorshift-direct", "softmax"])
def test_direct_forms_get_dearer_with_more_heads(variant: str) -> None:
    for cost in ("flops", "memory"):
        r = heads(variant, cost, 256)
        assert r.best_h == 1 and r.trend == "increases with h"


def test_efficient_flops_are_linear_in_n_and_direct_quadratic() -> None:
    assert sp.degree(flops("taylorshift-efficient", "full"), N) == 1
    assert sp.degree(flops("taylorshift-direct", "full"), N) == 2
    assert sp.degree(large_n_peak("taylorshift-efficient"), N) == 1
    assert sp.degree(large_n_peak("taylorshift-direct"), N) == 2


def test_crossovers_grow_with_d() -> None:
    previous = (0, 0)
    for dval in range(1, 65):
        dims = {d: dval, h: 1, b: 1}
        pair = ("taylorshift-direct", "taylorshift-efficient")
        now = tuple(crossover(*pair, cost, dims, exact=False).n for cost in ("flops", "memory"))
        assert now[0] > previous[0] and now[1] > previous[1], dval
        previous = now


def test_matmul_convention_counts_only_the_four_products_of_algorithm_1() -> None:
    """(K⊠K)ᵀV and (Q⊠Q)A_mod: 2Nd²(d+1) each; KᵀV and Q(KᵀV): 2Nd(d+1) each."""
    expected = 2 * (2 * N * d**2 * (d + 1)) + 2 * (2 * N * d * (d + 1))
    assert sp.expand(flops("taylorshift-efficient", "matmul").xreplace(SINGLE) - expected) == 0


def test_v1_leaves_out_the_normalisation_and_the_column_sum() -> None:
    """The paper's count skips the Sec. 3.3 normalisation; `full` prices what it skipped."""
    derived = derive("taylorshift-efficient")
    v1 = get_convention("taylorshift-v1")
    left = {op.kind for op in derived.ops if v1.left_out(op) != 0}
    assert left == {"augment", "l2normalize", "sum", "matmul", "add"}
    total = sp.expand(derived.flops(get_convention("full")) - derived.flops(v1))
    assert total == derived.left_out(v1)
