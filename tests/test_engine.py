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


# -- padded lengths: ⌈N/D⌉ and [D∤N] ---------------------------------------------------------------------


def _brute_n(a: sp.Expr, b_: sp.Expr, upto: int) -> int | None:
    """One past the largest whole N <= upto where cost b exceeds cost a, by plain evaluation (math.ceil)."""
    import math

    from attn_cost.costmodel.symbols import Pads

    def plain(e: sp.Expr):
        e = e.replace(Pads, lambda n, m: sp.ceiling(n / m) - sp.floor(n / m))
        return sp.lambdify(N, e, modules=[{"ceiling": math.ceil, "floor": math.floor, "Max": max}, "math"])

    fa, fb = plain(a), plain(b_)
    losing = [n for n in range(1, upto + 1) if fb(n) > fa(n)]
    return losing[-1] + 1 if losing else 1


@pytest.mark.parametrize(("cost", "chunk", "dv"), [("flops", 64, 64), ("memory", 64, 64), ("traffic", 48, 32),
                                                   ("memory", 48, 128), ("flops", 100, 32)])  # fmt: skip
def test_crossover_of_a_padded_cost_is_brute_force_exact(cost: str, chunk: int, dv: int) -> None:
    """softmax-causal against linear-chunked, whose costs step at multiples of C: N0/N1 equal one past the largest
    N at which linear-chunked costs more, found by evaluating both at every N up to well past the crossing."""
    from attn_cost.costmodel.crossover import Setting, cost_branches, crossover
    from attn_cost.costmodel.symbols import DEFAULTS, b, h

    dims = {**DEFAULTS, C: chunk, d: dv, b: 4, h: 2}
    st = Setting(dtype="bf16")
    got = crossover("softmax-causal", "linear-chunked", cost, dims, st, exact=False)
    a, b_ = (sp.Max(*(e.xreplace(dims) for e in cost_branches(v, cost, st))) for v in ("softmax-causal",
                                                                                       "linear-chunked"))  # fmt: skip
    assert got.n is not None
    assert got.n == _brute_n(a, b_, 3 * got.n + 4 * chunk)


def test_a_step_that_never_settles_is_never_cheaper_and_says_where() -> None:
    """B = 100·8⌈N/8⌉ against A = 100N + 500: B is dearer exactly where N rounds up by 6 or 7 (N mod 8 = 1, 2), at
    every length however large; brute force agrees on the residues."""
    from attn_cost.costmodel.crossover import at_sizes
    from attn_cost.costmodel.symbols import padded

    pa, pb = at_sizes((100 * N + 500,), {}, "a"), at_sizes((100 * padded(N, 8),), {}, "b")
    result = compare(pa, pb)
    assert result["verdict"] == "never" and result["n"] is None
    assert "N mod 8 is 1, 2" in result["note"]
    assert {n % 8 for n in range(1, 200) if 800 * -(-n // 8) > 100 * n + 500} == {1, 2}


def test_padded_costs_prune_and_evaluate_exactly() -> None:
    """A padded copy only adds ([C∤N] in [0, 1], ⌈N/C⌉ >= 1): pruning drops what it bounds and keeps the padded
    length; its value at every N is the rounded-up length's."""
    from attn_cost.costmodel.polyterms import in_n, terms
    from attn_cost.costmodel.symbols import Pads, padded

    copy = N * d + Pads(N, C) * d * padded(N, C)
    assert prune_dominated([N * d, copy]) == [copy]
    assert d * padded(N, C) in prune_dominated([N * d, d * padded(N, C)])
    assert nonneg_for_dims_at_least_one(N - N * Pads(N, C))  # N·[C|N]
    cost = in_n(terms(3 * padded(N, C) + Pads(N, C) * N), {C: 8})
    assert [cost.at(n) for n in (7, 8, 9, 16, 17)] == [24 + 7, 24, 48 + 9, 48, 72 + 17]
    assert cost.period == 8 and cost.poly(1) == (Fraction(4), Fraction(21))  # N ≡ 1 (mod 8): 3(N + 7) + N


def test_formula_says_where_a_padded_cost_steps(cli) -> None:
    """linear-chunked's formulas in ⌈N⌉_C (N rounded up to whole chunks), with a line saying what the notation
    means; the JSON lists the multiples N is padded to, and its formulas read back as sympy's ceiling."""
    r = cli("formula", "linear-chunked", "--convention", "matmul")
    assert r.code == 0, r.err
    assert "⌈N⌉_C" in r.out and "[C∤N]" in r.out
    assert "N rounded up to a multiple of C" in " ".join(r.out.split())
    data = cli("formula", "linear-chunked", "--json").json()
    assert [x["multiple"] for x in data["padded_to"]] == ["C"]
    from attn_cost.costmodel.symbols import BY_NAME

    flops = sp.sympify(data["flops"]["matmul"], locals=dict(BY_NAME))
    at = {N: 65, C: 64, BY_NAME["b"]: 1, BY_NAME["h"]: 1, d: 8}  # two chunks of 4Cd² + 2Cd + 4C²d products
    assert flops.xreplace(at) == 2 * (4 * 64 * 8**2 + 2 * 64 * 8 + 4 * 64**2 * 8)
    assert cli("formula", "softmax", "--json").json()["padded_to"] == []
