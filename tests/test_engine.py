"""The engine's mechanisms on small graphs whose answers are worked out by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp
from attn_cost.costmodel.conventions import FULL, MATMUL, TAYLORSHIFT_V1
from attn_cost.costmodel.crossover import compare
from attn_cost.costmodel.derive import Derived, nonneg_for_dims_at_least_one, prune_dominated
from attn_cost.costmodel.display import text
from attn_cost.costmodel.errors import ModelError
from attn_cost.costmodel.graph import Graph
from attn_cost.costmodel.symbols import C, N, d


def _chain() -> Derived:
    """X(N×d) → S = X Xᵀ (N×N) → P = softmax(S) → Y = P X (N×d)."""
    g = Graph("chain")
    x = g.input("X", N, d)
    s = g.matmul("S", x, x.T)
    p = g.map("softmax", "P", s)
    g.output(g.matmul("Y", p, x))
    return Derived(g)


def test_liveness_frees_after_last_use_and_keeps_outputs() -> None:
    steps = [s.elements() for s in _chain().steps]
    # step 1: X and S; step 2: X, S and P (S is read here for the last time); step 3: X, P, Y
    assert steps == [sp.expand(N * d + N**2), sp.expand(N * d + 2 * N**2), sp.expand(2 * N * d + N**2)]


def test_peak_is_the_max_over_steps_with_dominated_steps_pruned() -> None:
    peak = _chain().peak()
    # step 1 (Nd + N²) is bounded by step 2 for all N, d >= 1; steps 2 and 3 trade places at N = d
    assert set(peak.branches) == {sp.expand(N * d + 2 * N**2), sp.expand(2 * N * d + N**2)}
    assert peak.dominant == sp.expand(N * d + 2 * N**2)
    value, step = peak.at({N: 10, d: 4})
    assert value == 4 * 10 + 2 * 100 and step.op.kind == "softmax"


def test_peak_bytes_follow_the_dtype() -> None:
    peak = _chain().peak("bf16")
    assert peak.dominant == sp.expand(2 * (N * d + 2 * N**2))


def test_inplace_ops_allocate_nothing_and_workspace_counts_only_during_its_op() -> None:
    g = Graph("inplace")
    x = g.input("X", N, d)
    y = g.map("normalize_rows", "X", x, inplace=True)  # N row sums of scratch
    g.output(g.map("scale", "Y", y, inplace=True))
    steps = [s.elements() for s in Derived(g).steps]
    assert steps == [N * d + N, N * d]


def test_views_share_storage() -> None:
    g = Graph("view")
    x = g.input("X", N, d + 1)
    g.output(g.binary("div", "Y", x.cols(1), x.cols(0, 1)))
    (step,) = Derived(g).steps
    assert step.elements() == sp.expand(N * (d + 1) + N * d)


def test_shapes_are_checked() -> None:
    g = Graph("bad")
    x = g.input("X", N, d)
    with pytest.raises(ModelError):
        g.matmul("S", x, x)


def test_conventions_price_the_same_op_differently() -> None:
    g = Graph("mm")
    x = g.input("X", N, d)
    w = g.input("W", d, d)
    y = g.matmul("Y", x, w, gain="α")
    g.output(y)
    (op,) = g.ops
    assert MATMUL.op_flops(op) == 2 * N * d * d
    assert TAYLORSHIFT_V1.op_flops(op) == 2 * N * d * d  # folded gains are free in the paper's count
    assert sp.expand(FULL.op_flops(op) - (2 * N * d * d + N * d)) == 0
    assert sp.expand(TAYLORSHIFT_V1.left_out(op) - N * d) == 0


def test_traffic_reads_inputs_and_writes_outputs_once() -> None:
    # step 1 reads X twice (X and Xᵀ) and writes S; step 2 reads S, writes P; step 3 reads P and X, writes Y
    expected = (2 * N * d + N**2) + (2 * N**2) + (N**2 + N * d + N * d)
    assert sp.expand(_chain().traffic("fp32") - 4 * expected) == 0


@pytest.mark.parametrize(
    ("expr", "nonneg"),
    [
        (N**2 - N, True), (N * d - d, True), (N - d, False), (N**2 - 2 * N, False), (sp.Integer(3), True),
        # a size in a denominator (chunked linear attention's N/C chunks): 1/C lies in (0, 1]
        (N * d - N * d / C, True), (N * d / C - N * d, False), (N / C - 1, False), (N / C + N / C**2, True),
        (N * d**2 / C + N * d - N * d**2 / C**2, True),
    ],
)  # fmt: skip
def test_nonnegativity_for_sizes_at_least_one(expr: sp.Expr, nonneg: bool) -> None:
    assert nonneg_for_dims_at_least_one(expr) is nonneg


def test_a_size_in_a_denominator_is_a_fraction_once_it_is_fixed() -> None:
    from attn_cost.costmodel.polyterms import in_n, terms

    assert in_n(terms(N**2 / C + 3 * N * d / C**2), {C: 4, d: 8}) == (Fraction(1, 4), Fraction(3 * 8, 16), 0)
    assert prune_dominated([N * d, N * d / C]) == [N * d]


def test_prune_keeps_only_branches_that_can_be_the_maximum() -> None:
    kept = prune_dominated([N * d, N**2, N**2 + N, N * d + 1])
    assert set(kept) == {N**2 + N, N * d + 1}


def _poly(*coeffs: int) -> tuple[Fraction, ...]:
    return tuple(Fraction(c) for c in coeffs)


def test_compare_single_crossing() -> None:
    # a = N², b = 10N: b is cheaper from N = 10 on
    r = compare([_poly(1, 0, 0)], [_poly(10, 0)])
    assert (r["n"], r["verdict"]) == (10, "crosses")


def test_compare_always_never_equal() -> None:
    assert compare([_poly(2, 0)], [_poly(1, 0)])["verdict"] == "always"
    assert compare([_poly(1, 0)], [_poly(1, 0, 0)])["verdict"] == "never"
    assert compare([_poly(3, 1)], [_poly(3, 1)])["verdict"] == "equal"


def test_compare_multiple_crossings() -> None:
    # a - b = (N - 2)(N - 5)(N - 9): positive on (2, 5), negative on (5, 9), positive after 9
    a = [_poly(1, 0, 0, 0)]
    b = [_poly(16, -73, 90)]
    r = compare(a, b)
    assert r["verdict"] == "multiple" and r["n"] == 9
    assert r["crossings"] == pytest.approx([2, 5, 9])


def test_compare_with_maxima_of_branches() -> None:
    # a = max(N², 20), b = 5N + 6: b cheaper below 2.8 (where a is flat at 20), dearer until 6, cheaper after
    r = compare([_poly(1, 0, 0), _poly(20)], [_poly(5, 6)])
    assert (r["n"], r["verdict"]) == (6, "multiple")
    assert r["crossings"] == pytest.approx([2.8, 6])


def test_compare_bounded_window_is_reported_as_never() -> None:
    # b cheaper only between 2 and 5, dearer after: a - b = -(N - 2)(N - 5)
    r = compare([_poly(0)], [_poly(1, -7, 10)])
    assert r["verdict"] == "never"
    assert r["b_cheaper"] == [pytest.approx((2.0, 5.0))]


@pytest.mark.parametrize(
    ("expr", "shown"),
    [
        ("4*N**2*d + 6*N**2", "4N²d + 6N²"),
        ("N*(4*d**3 + 10*d**2 + 8*d + 3)", "N(4d³ + 10d² + 8d + 3)"),
        ("d**2 + d + 1/2", "d² + d + 1/2"),
        ("8*d**3 + 10*d**2 - 3", "8d³ + 10d² − 3"),
    ],
)
def test_display_prints_like_the_paper(expr: str, shown: str) -> None:
    assert text(sp.sympify(expr, locals={"N": N, "d": d})) == shown


def test_heads_of_latte_tie_its_latents_to_the_head_dim() -> None:
    """Latte's products cost 4NLd per head (Latte, matmul convention); with L = d = 64/h that is 4N·64²/h."""
    from attn_cost.costmodel.heads import heads

    result = heads("latte", "flops", 64, n=1024, convention=MATMUL.name)
    expected = {hv: 4 * 1024 * 64 * 64 // hv for hv in (1, 2, 4, 8, 16, 32, 64)}
    assert {hv: value for hv, _, value in result.table} == expected
