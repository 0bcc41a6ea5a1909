"""Every FLOP rule of costmodel/conventions.py (and the causal shares of costmodel/counting.py), one small op at a
time, with concrete sizes, against a count done by hand in the comments or taken from a paper.

A rule that a variant's total happens to mask (one op among many) is pinned here on its own: change any constant
of any rule, drop any rule, and a test below fails. benchmarks/mutate_rules.py makes each such change in turn and
runs this file to prove it.

The sizes are chosen so that counts per output element, per input element and per row differ: X is 2×3×5
(30 elements in 6 rows of 5); a broadcast binary op reads A (2×3×1, 6 elements) and B (1×5) and writes 2×3×5; a
reduction over the last axis reads 30 elements and writes 6.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest
import sympy as sp
from attn_cost.costmodel.conventions import (
    CONVENTIONS,
    FULL,
    HOSSEINI_EQ24,
    PUBLISHED_CONVENTIONS,
    backward_factor,
    chunk_products,
)
from attn_cost.costmodel.counting import BACKWARD_FACTOR, Counting, F_bwd, F_causal, F_chunk, causal_factor
from attn_cost.costmodel.graph import Graph, Op, Tensor
from attn_cost.costmodel.opkinds import KINDS
from attn_cost.costmodel.symbols import C, N, b, d, h
from attn_cost.costmodel.variants import derive

Build = Callable[[Graph], object]


def _x(g: Graph, name: str = "X") -> Tensor:
    return g.input(name, 2, 3, 5)


def _binary(kind: str) -> Build:
    return lambda g: g.binary(kind, "Y", g.input("A", 2, 3, 1), g.input("B", 1, 5))


def _map(kind: str, gain: str | None = None) -> Build:
    return lambda g: g.map(kind, "Y", _x(g), gain=gain)


def _reduce(kind: str) -> Build:
    return lambda g: g.reduce(kind, "Y", _x(g), axis=-1)


OPS: dict[str, Build] = {
    "matmul": lambda g: g.matmul("Y", _x(g), g.input("W", 5, 7)),  # batch 2 of (3×5)(5×7)
    "linear": lambda g: g.linear("Y", _x(g), g.param("W", 5, 7), g.param("β", 7)),  # 6 rows by (5×7) plus a bias
    "outer": lambda g: g.outer("Y", _x(g), g.input("B", 2, 3, 4)),  # 6 rows of 5·4 = 20: 2×3×20
    "augment": lambda g: g.augment("Y", _x(g)),  # 2×3×6
    "sum": _reduce("sum"),
    "max": _reduce("max"),
    "norm": lambda g: g.traced("norm", "Y", (2, 3), (_x(g),)),  # torch.linalg.vector_norm(X, dim=-1)
    "copy": lambda g: g.copy("Y", _x(g)),
    "fill": lambda g: g.zeros("Y", 2, 3, 5),
    # batch 2, 4 queries, 6 keys, d_qk = 5, d_v = 3: 2·4·6 = 48 scores
    "fused_attention": lambda g: g.fused_attention("Y", g.input("Q", 2, 4, 5), g.input("K", 2, 6, 5),
                                                   g.input("V", 2, 6, 3)),
    # batch 2, 10 tokens in chunks of 4: ⌈10/4⌉ = 3 chunks (the last one ragged, computed whole), d_k = d_v = 3
    "linear_chunk": lambda g: g.linear_chunk("Y", g.input("Q", 2, 10, 3), g.input("K", 2, 10, 3),
                                             g.input("V", 2, 10, 3), chunk=4),
    # the delta rule's βKKᵀ: batch 2, 10 tokens in 3 chunks of 4 (computed whole), K 3 wide, β a factor per row
    "chunk_matmul": lambda g: g.chunk_matmul("A", g.input("K", 2, 10, 3), g.input("K2", 2, 10, 3), chunk=4,
                                             form="scores", rowscale=g.input("β", 2, 10)),
    # (I + A)⁻¹ of each chunk's 4×4 block: batch 2, 3 chunks
    "tri_solve": lambda g: g.tri_solve("T", g.input("A", 2, 10, 4), chunk=4),
    **{k: _binary(k) for k in ("add", "mul", "div", "sub", "maximum", "compare")},
    **{k: _map(k) for k in ("poly2", "softmax", "normalize_rows", "l2normalize", "scale", "exp", "elu1", "cumsum",
                            "layernorm", "gelu", "pointwise", "mask")},
}  # fmt: skip


def one(build: Build) -> Op:
    """The last op a builder emits, on a fresh graph."""
    g = Graph("rule")
    build(g)
    return g.ops[-1]


# -- `full`: every arithmetic operation --------------------------------------------------------------------------

# Per chunk of linear_chunk (C = 4, d = 3): the state products K_cᵀV_c and Q_cS_c, 2·C·d·d = 72 each (144); the
# score products Q_cK_cᵀ and A_cV_c, 2·C·C·d = 96 each (192), on the share F_chunk of the C×C block; 2 heads × 3 chunks.
CHUNK_STATE = 2 * 3 * 144  # 864
CHUNK_SCORES = 2 * 3 * 192 * F_chunk  # 1152·F_chunk

FULL_COUNTS: dict[str, object] = {
    "matmul": 420,  # 2·batch·m·k·n = 2·2·3·5·7
    "linear": 462,  # 2·m·k·n + m·n for the bias = 2·6·5·7 + 6·7 = 420 + 42
    "outer": 120,  # one multiply per output element: 2·3·20
    "poly2": 120,  # x²/2 + x + 1: 4 per element (TaylorShift Eq. 4's 4N² over the N² scores): 4·30
    "softmax": 150,  # max, subtract, exp, sum, divide: 5·30
    "normalize_rows": 60,  # row sum and division (TaylorShift Eq. 4's 2N²): 2·30
    "l2normalize": 102,  # square and accumulate, multiply: 3·30; sqrt and reciprocal per row: 2·6
    "augment": 0,  # a constant column: no arithmetic
    "scale": 30,
    "add": 30,  # one per output element (2×3×5), not per element of A (6)
    "mul": 30,
    "div": 30,
    "sub": 30,
    "maximum": 30,
    "compare": 30,
    "sum": 30,  # one add per input element (30), not per output (6)
    "max": 30,  # one compare per input element
    "exp": 30,
    "elu1": 60,  # a compare and an exp or add: 2·30
    "cumsum": 30,
    # per element: accumulate for the mean, centre, square, accumulate for the variance, scale by 1/σ, γ·x, + β:
    # 7·30; per row the rule counts 2 (one per row statistic): 2·6. (Every ÷, + and √ per row, as `full` defines a
    # FLOP, would be 5: the mean's and the variance's ÷width, + ε, √ and 1/σ.)
    "layernorm": 222,
    "gelu": 150,  # 0.5·x·(1 + erf(x/√2)): 5·30
    "pointwise": 30,
    "norm": 66,  # a square and an add per input element: 2·30; a square root per output: 6
    "mask": 0,  # selection
    "copy": 0,
    "fill": 0,
    # per score: QKᵀ 2·d_qk = 10, PV 2·d_v = 6, the 1/√d scale 1, the softmax 5: 22 on 48 scores
    "fused_attention": 1056,
    # the products, the state's accumulation S ← S + K_cᵀV_c (d² = 9) and each output row's two parts added
    # (C·d = 12), per chunk: 6·(9 + 12) = 126
    "linear_chunk": CHUNK_STATE + 126 + CHUNK_SCORES,
    # per chunk a 4×4 block of 3-wide products, 2·4·4·3 = 96 (times F_chunk), and β times each of the chunk's 4·3
    # key elements, 12: 2 heads × 3 chunks
    "chunk_matmul": 2 * 3 * (96 * F_chunk + 12),
    # forward substitution: T_ij = −Σ_{j≤m<i} A_im·T_mj, i − j − 1 multiply-adds below the diagonal of a 4×4 block:
    # (2, 1): 0, (3, 1): 1, (3, 2): 0, (4, 1): 2, (4, 2): 1, (4, 3): 0, 4 multiply-adds, 8 FLOPs; 6 blocks
    "tri_solve": 6 * 8,
}

# TaylorShift v1 (arXiv 2403.02920v1, Sec. 4.1): Eqs. 4-5 count neither the column sum ΣV nor the Sec. 3.3
# normalisation (l2normalize, augment, the scalar gains); everything else as `full`.
V1_COUNTS = {**FULL_COUNTS, "sum": 0, "l2normalize": 0, "augment": 0}
# TaylorShift ICPR: "N(d+1) for the column sum": one add per input element of ΣV, here 30.
ICPR_COUNTS = {**V1_COUNTS, "sum": 30}
# FlopCounterMode: products only, 2mkn each; a GEMM that accumulates adds nothing there.
MATMUL_COUNTS = {
    **dict.fromkeys(KINDS, 0),
    "matmul": 420,
    "linear": 420,  # 2·6·5·7, the bias left out
    "fused_attention": 768,  # 48 scores × (2·5 + 2·3)
    "linear_chunk": CHUNK_STATE + CHUNK_SCORES,
    "chunk_matmul": 2 * 3 * 96 * F_chunk,
}
# The FlashAttention benchmark: only the two products over the score matrix (X·W is not one: see below; nor is the
# delta rule's βKKᵀ, which no query reads: `chunk_matmul(attention=True)` marks GLA's QKᵀ and Mamba-2's CB).
FLASH_COUNTS = {**dict.fromkeys(KINDS, 0), "fused_attention": 768, "linear_chunk": CHUNK_SCORES}

EXPECTED = {
    "full": FULL_COUNTS,
    "taylorshift-v1": V1_COUNTS,
    "taylorshift-icpr": ICPR_COUNTS,
    "matmul": MATMUL_COUNTS,
    "flash-bench": FLASH_COUNTS,
}


def test_every_convention_and_every_op_kind_has_a_hand_count() -> None:
    assert set(EXPECTED) == set(CONVENTIONS)
    assert set(OPS) == set(KINDS)
    assert all(set(counts) == set(KINDS) for counts in EXPECTED.values())


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("convention", sorted(EXPECTED))
def test_each_rule_on_one_op(convention: str, kind: str) -> None:
    op = one(OPS[kind])
    assert op.kind == kind
    assert sp.expand(CONVENTIONS[convention].op_flops(op) - sp.sympify(EXPECTED[convention][kind])) == 0


def test_the_kinds_each_convention_counts() -> None:
    """What `attn-cost conventions --json` lists as counted; a kind a convention leaves out costs it nothing."""
    assert set(CONVENTIONS["full"].rules) == set(KINDS)
    assert set(CONVENTIONS["taylorshift-v1"].rules) == set(KINDS) - {"sum", "l2normalize", "augment"}
    assert set(CONVENTIONS["taylorshift-icpr"].rules) == set(KINDS) - {"l2normalize", "augment"}
    assert set(CONVENTIONS["matmul"].rules) == {"matmul", "linear", "fused_attention", "linear_chunk", "chunk_matmul"}
    assert set(CONVENTIONS["flash-bench"].rules) == {"matmul", "fused_attention", "linear_chunk", "chunk_matmul"}


def test_a_linear_without_bias_is_its_product_alone() -> None:
    op = one(lambda g: g.linear("Y", _x(g), g.param("W", 5, 7)))
    for name in ("full", "taylorshift-v1", "taylorshift-icpr", "matmul"):
        assert CONVENTIONS[name].op_flops(op) == 420, name  # 2·6·5·7


def test_a_gemm_that_accumulates_adds_one_per_output_element_under_full() -> None:
    """Y ← Y + X·W: the product (420) and 2·3·7 = 42 additions; FlopCounterMode counts the product only."""
    op = one(lambda g: g.matmul("Y", _x(g), g.input("W", 5, 7), into=g.input("Y", 2, 3, 7)))
    expected = {"full": 462, "taylorshift-v1": 462, "taylorshift-icpr": 462, "matmul": 420, "flash-bench": 0}
    assert {name: CONVENTIONS[name].op_flops(op) for name in expected} == expected


def test_the_products_over_the_score_matrix_are_the_flash_benchmarks() -> None:
    """S = QKᵀ and P·V over N keys (batch 2, d_qk = 5, d_v = 3): 2·2·N·5·N = 20N² and 2·2·N·N·3 = 12N² under
    flash-bench and matmul; X·W (no key axis) is not a score product, so flash-bench leaves it out."""
    g = Graph("scores")
    q, k, v = g.input("Q", 2, N, 5), g.input("K", 2, N, 5), g.input("V", 2, N, 3)
    s = g.matmul("S", q, k.T)
    g.matmul("O", s, v)
    qk, pv = g.ops
    for name in ("flash-bench", "matmul"):
        assert sp.expand(CONVENTIONS[name].op_flops(qk) - 20 * N**2) == 0
        assert sp.expand(CONVENTIONS[name].op_flops(pv) - 12 * N**2) == 0
    assert CONVENTIONS["flash-bench"].op_flops(one(OPS["matmul"])) == 0


# -- attention dropout and a key padding mask (--dropout, --padding-mask): ops of the kinds above ---------------


def _fused(mask: bool, dropout: bool) -> Op:
    """The fused op of OPS (48 scores, d_qk = 5, d_v = 3) reading an additive attn_mask and/or dropping."""
    g = Graph("fused")
    q, k, v = g.input("Q", 2, 4, 5), g.input("K", 2, 6, 5), g.input("V", 2, 6, 3)
    g.fused_attention("Y", q, k, v, mask=g.input("bias", 2, 1, 6) if mask else None, dropout=dropout)
    return g.ops[-1]


@pytest.mark.parametrize(("mask", "dropout", "full"), [
    (True, False, 1056 + 48),  # the mask added to each of the 48 scores
    (False, True, 1056 + 3 * 48),  # per score: the draw compared with 1 − p, the keep bit's product, 1/(1 − p)
    (True, True, 1056 + 4 * 48),
])  # fmt: skip
def test_a_fused_kernels_mask_and_dropout(mask: bool, dropout: bool, full: int) -> None:
    """FlopCounterMode and the FlashAttention benchmark count the two products alone whatever the kernel adds."""
    op = _fused(mask, dropout)
    expected = {"full": full, "taylorshift-v1": full, "taylorshift-icpr": full, "matmul": 768, "flash-bench": 768}
    assert {name: CONVENTIONS[name].op_flops(op) for name in expected} == expected
    assert backward_factor(op) == Fraction(21, 8)  # the kernel's backward, as without


def test_dropout_on_materialised_probabilities_op_by_op() -> None:
    """P (2×3×5, 30 probabilities) dropped in training: the keep mask, one compare per element of a draw with 1 − p
    (30; no gradient, nothing in backward), and P ⊙ M/(1 − p), one product per element (30) and, under `full`, the
    folded 1/(1 − p) (30); its backward dP ⊙ M/(1 − p) is the same work once (factor 1, not a product's 2: M has no
    gradient)."""
    g = Graph("dropout", training=True, dropout=sp.Rational(1, 10))
    g.attention_dropout(_x(g, "P"))
    draw, scale = g.ops
    assert (draw.kind, scale.kind, draw.output.storage.dtype) == ("compare", "mul", "bool")
    expected = {"full": (30, 60), "taylorshift-v1": (30, 30), "taylorshift-icpr": (30, 30), "matmul": (0, 0),
                "flash-bench": (0, 0)}  # fmt: skip
    assert {name: (CONVENTIONS[name].op_flops(draw), CONVENTIONS[name].op_flops(scale)) for name in expected} == (
        expected
    )
    assert (backward_factor(draw), backward_factor(scale)) == (0, 1)
    assert Graph("eval", dropout=sp.Rational(1, 10)).attention_dropout(_x(Graph("x"), "P")).name == "P"  # inference


def test_a_padding_mask_op_by_op() -> None:
    """A b×N key mask (b = 2, N = 5 keys) on 2×3×4×5 scores: its inversion, one logical not per key (10, no gradient),
    and the fill of the scores, a selection (0); for a fused kernel its conversion to an additive mask, a selection
    (0); where keys are mixed (Linformer), K ⊙ mask on 2×3×5×4 keys, one product per element (120, one in backward)."""
    g = Graph("padding", training=True, key_padding_mask=True)
    g.pad_scores(g.input("S", 2, 3, 4, 5))
    g.padding_bias(g.input("K", 2, 3, 5, 4))
    g.zero_padded(g.input("K", 2, 3, 5, 4))
    invert, _, _, zero = g.ops
    assert [op.kind for op in g.ops] == ["compare", "mask", "mask", "mul"]
    assert g.inputs[1].shape == (2, 5) and g.inputs[1].storage.dtype == "bool"  # the mask, made once
    for name in ("full", "taylorshift-v1", "taylorshift-icpr"):
        assert [CONVENTIONS[name].op_flops(op) for op in g.ops] == [10, 0, 0, 120], name
    for name in ("matmul", "flash-bench"):
        assert [CONVENTIONS[name].op_flops(op) for op in g.ops] == [0, 0, 0, 0], name
    assert [backward_factor(op) for op in (invert, zero)] == [0, 1]


# -- folded scalar gains: one multiply per element they touch, under `full` only ---------------------------------

GAINED: dict[str, tuple[Build, int]] = {
    # kind: (the op with a gain, what `full` adds for it)
    "matmul": (lambda g: g.matmul("Y", _x(g), g.input("W", 5, 7), gain="α"), 42),  # per output element: 2·3·7
    "scale": (_map("scale", gain="τ"), 30),  # per output element
    "sum": (lambda g: g.reduce("sum", "Y", _x(g), axis=-1, gain="1/N"), 6),  # per output element: 2·3
    "normalize_rows": (_map("normalize_rows", gain="τ"), 6),  # once per row: the divisor, 6 rows
    "l2normalize": (_map("l2normalize", gain="α"), 6),  # once per row: 1/‖x‖ scaled, 6 rows
    "augment": (lambda g: g.augment("Y", _x(g), gain="√(d/N)"), 30),  # per input element (30), not the 36 out
}


@pytest.mark.parametrize("kind", sorted(GAINED))
def test_a_folded_gain_costs_full_one_multiply_per_element_it_touches(kind: str) -> None:
    build, gain = GAINED[kind]
    op = one(build)
    assert op.attrs["gain"]
    assert FULL.op_flops(op) == FULL_COUNTS[kind] + gain
    for name in ("taylorshift-v1", "taylorshift-icpr", "matmul", "flash-bench"):
        assert CONVENTIONS[name].op_flops(op) == EXPECTED[name][kind], name  # gains are free there
        assert CONVENTIONS[name].left_out(op) == FULL_COUNTS[kind] + gain - EXPECTED[name][kind], name


def test_only_full_counts_gains() -> None:
    assert {name for name, conv in CONVENTIONS.items() if conv.count_gains} == {"full"}


# -- backward ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["matmul", "linear", "outer", "mul", "div"])
def test_a_product_needs_a_gradient_for_each_operand(kind: str) -> None:
    assert backward_factor(one(OPS[kind])) == 2


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"matmul", "linear", "outer", "mul", "div", "fused_attention",
                                                      "linear_chunk", "chunk_matmul", "tri_solve"}))  # fmt: skip
def test_an_element_wise_op_or_a_reduction_needs_one_pass(kind: str) -> None:
    assert backward_factor(one(OPS[kind])) == 1


def test_a_chunk_product_needs_a_gradient_for_each_operand_and_three_where_it_is_made_again() -> None:
    """βKKᵀ: dA·K and dAᵀ·K, 2 (fla keeps T, not A, and needs A's gradient); W = T·βK, which fla's backward makes
    again (recompute_w_u_fwd) before dT = dW·(βK)ᵀ and d(βK) = Tᵀ·dW: 3."""
    assert backward_factor(one(OPS["chunk_matmul"])) == 2
    g = Graph("wy")
    g.chunk_matmul("W", g.input("T", 2, 10, 4), g.input("K", 2, 10, 3), chunk=4, form="apply", recompute=True)
    assert backward_factor(g.ops[-1]) == 3


def test_solve_tril_backward_is_two_cubic_products_a_chunk_under_every_convention_that_counts_products() -> None:
    """dA = −Tᵀ·dT·Tᵀ (fla's prepare_wy_repr_bwd): two 4×4×4 products a block, 2·2·4³ = 256, 6 blocks: 1536,
    under matmul, full and the TaylorShift conventions (they count products), none under flash-bench (not a score
    product); no forward substitution again (factor 0)."""
    op = one(OPS["tri_solve"])
    assert backward_factor(op) == 0
    for name in ("matmul", "full", "taylorshift-v1", "taylorshift-icpr"):
        assert CONVENTIONS[name].backward(op) == 6 * 256, name
    assert CONVENTIONS["flash-bench"].backward(op) == 0


def test_the_score_products_take_the_named_backward_factor() -> None:
    """QKᵀ and P·V over N keys: F_bwd (2 as autograd runs them, 2.5 with FlashAttention's recomputation)."""
    g = Graph("scores")
    q, k = g.input("Q", 2, N, 5), g.input("K", 2, N, 5)
    g.matmul("O", g.matmul("S", q, k.T), g.input("V", 2, N, 3))
    assert [backward_factor(op) for op in g.ops] == [F_bwd, F_bwd]
    # FlashAttention's benchmark: bwd = 2.5·fwd; autograd: a gradient for each operand, 2·fwd
    assert {"autograd": 2, "recompute": Fraction(5, 2)} == BACKWARD_FACTOR


def test_fused_attention_backward_runs_five_products_for_two() -> None:
    """Forward: QKᵀ (2·d_qk per score) and PV (2·d_v). Backward: QKᵀ recomputed, dV = PᵀdO (d_v), dP = dO·Vᵀ (d_v),
    dQ = dS·K and dK = dSᵀQ (d_qk each): (3·5 + 2·3)/(5 + 3) = 21/8 for d_qk = 5, d_v = 3."""
    assert backward_factor(one(OPS["fused_attention"])) == Fraction(21, 8)


def test_the_chunk_kernels_backward_runs_ten_products_for_four() -> None:
    """Per chunk (C = 4, d = 3), forward: 2 state products of 2·C·d² = 72 and 2 score products of 2·C²·d = 96;
    backward: 5 of each (`chunk_products`' docstring lists them): 5/2 whatever share of the scores is counted."""
    op = one(OPS["linear_chunk"])
    per = 2 * 3  # heads × chunks
    assert chunk_products(op) == (per * 2 * 72, per * 2 * 96 * F_chunk)
    # backward: K_cᵀV_c, Q_cᵀdO_c, dO_cS_cᵀ, V_cdS_cᵀ, K_cdS_c against the state (2·C·d² = 72 each); over the scores
    # three of width d_k (dA_cK_c, dA_cᵀQ_c, K_cQ_cᵀ) and two of width d_v (dO_cV_cᵀ, A_cᵀdO_c): 2·C²·d = 96 each
    assert chunk_products(op, backward=True) == (per * 5 * 72, per * 5 * 96 * F_chunk)
    assert backward_factor(op) == Fraction(5, 2)  # its bytes and element-wise work
    assert CONVENTIONS["matmul"].backward(op) == per * 5 * 72 + per * 5 * 96 * F_chunk
    assert sp.expand(FULL.backward(op) - (per * 5 * 72 + per * 5 * 96 * F_chunk + Fraction(5, 2) * 126)) == 0


def test_an_op_that_states_its_kernels_backward_keeps_it() -> None:
    """linear-causal-fused's causal_product: its backward is its own (5/2 of the forward there), not a product's 2."""
    op = one(OPS["matmul"])
    op.attrs["backward"] = sp.Rational(7, 3)
    assert backward_factor(op) == sp.Rational(7, 3)


# -- the causal shares (costmodel/counting.py) --------------------------------------------------------------------


def _kept(nq: int, nk: int, align: str) -> list[tuple[int, int]]:
    """(query, key) pairs a causal mask keeps: key j <= i (top-left) or j <= i + nk − nq (bottom-right)."""
    shift = nk - nq if align == "bottom-right" else 0
    return [(i, j) for i in range(nq) for j in range(nk) if j <= i + shift]


@pytest.mark.parametrize(("nq", "nk", "tile"), [(8, 8, 4), (8, 12, 4), (6, 18, 3), (1, 12, 4)])
@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
def test_each_causal_count_is_the_scores_it_names(nq: int, nk: int, tile: int, align: str) -> None:
    """dense: every pair; triangle: the pairs the mask keeps; tiles: every T×T block holding a kept pair, whole;
    half: the FlashAttention benchmark's N·M/2. Counted here by enumerating the pairs."""
    kept = _kept(nq, nk, align)
    blocks = {(i // tile, j // tile) for i, j in kept}
    expected = {"dense": nq * nk, "triangle": len(kept), "tiles": len(blocks) * tile * tile,
                "half": Fraction(nq * nk, 2)}  # fmt: skip
    if nq < tile:  # below one tile the formula is not a count (crossover.curve caps it at dense)
        del expected["tiles"]
    n_kv = nk if nk != nq else None
    for causal, scores in expected.items():
        counting = Counting(causal=causal, tile=tile, n_kv=n_kv, align=align)
        assert counting.scores(nq, nk) == scores, causal
        share = counting.values()[F_causal].xreplace({N: nq, **({} if n_kv is None else {counting.key_length: nk})})
        assert share == Fraction(scores) / (nq * nk), causal


@pytest.mark.parametrize("chunk", [1, 4, 7])
def test_the_share_of_each_chunk_block(chunk: int) -> None:
    """Inside a chunk's C×C block: triangle keeps C(C+1)/2 pairs (enumerated), half C²/2, dense and tiles all."""
    kept = len(_kept(chunk, chunk, "top-left"))
    expected = {"dense": 1, "tiles": 1, "triangle": Fraction(kept, chunk * chunk), "half": Fraction(1, 2)}
    for causal, share in expected.items():
        assert Counting(causal=causal).values()[F_chunk].xreplace({C: chunk}) == share, causal


def test_the_backward_switch_sets_f_bwd() -> None:
    assert Counting(backward="autograd").values()[F_bwd] == 2
    assert Counting(backward="recompute").values()[F_bwd] == Fraction(5, 2)


def test_which_ops_carry_the_causal_share() -> None:
    """A causal fused kernel over several queries computes F_causal of its scores; over one query (decoding) or
    without is_causal, all of them; an op of a masked graph carries it only over a square score matrix."""

    def fused(nq: int, causal: bool) -> Op:
        g = Graph("f")
        g.fused_attention("Y", g.input("Q", 2, nq, 5), g.input("K", 2, N, 5), g.input("V", 2, N, 3), causal=causal)
        return g.ops[-1]

    assert causal_factor(fused(4, True), causal=False) == F_causal
    assert causal_factor(fused(1, True), causal=True) == 1
    assert causal_factor(fused(4, False), causal=True) == 1
    g = Graph("scores")
    q, k = g.input("Q", 2, N, 5), g.input("K", 2, N, 5)
    s = g.matmul("S", q, k.T)
    g.matmul("s", g.input("q", 2, 1, 5), k.T)  # one query: a row of scores, not a square matrix
    g.map("softmax", "P", s)
    square, row, softmax = g.ops
    assert [causal_factor(op, causal=True) for op in (square, row, softmax)] == [F_causal, 1, F_causal]
    assert [causal_factor(op, causal=False) for op in (square, row, softmax)] == [1, 1, 1]


def test_flash_bench_implies_the_benchmarks_own_counting() -> None:
    """benchmark_flash_attention.py's flops(): 4·b·h·N²·d, `// (2 if causal else 1)`, bwd 2.5× fwd."""
    implied = {name: dict(conv.counting) for name, conv in CONVENTIONS.items() if conv.counting}
    assert implied == {"flash-bench": {"causal": "half", "backward": "recompute"}}


# -- the papers ---------------------------------------------------------------------------------------------------


def _steps(variant: str, convention: str) -> list[tuple[str, sp.Expr]]:
    """The ops a convention counts, in the variant's order, per head (b = h = 1)."""
    ops = derive(variant).ops
    counts = [sp.factor(CONVENTIONS[convention].op_flops(op).xreplace({b: 1, h: 1})) for op in ops]
    return [(op.kind, n) for op, n in zip(ops, counts, strict=True) if n != 0]


def test_taylorshift_section_4_1_step_by_step() -> None:
    """TaylorShift v1, Sec. 4.1, direct (Eq. 1 step by step): "2N²d operations to multiply QKᵀ, 4N² operations to
    apply x ↦ ½x² + x + 1 element-wise to this N×N matrix, 2N² operations for normalization, and 2N²d operations
    for the final multiplication by V". Efficient: "the tensor operation has Nd² FLOPS and the subsequent matrix
    multiplication needs 2Nd²(d+1)", the same again for Q; "4Nd(d+1) operations ... for the linear influence QKᵀV"
    (2Nd(d+1) for KᵀV, 2Nd(d+1) for Q·(KᵀV)); "3N(d+1) FLOPS for the sums and scalar multiplication" (Ŷ/2, the
    addition of Q(KᵀV), the addition of ΣV); "the Nd operations for normalization"."""
    assert _steps("taylorshift-direct", "taylorshift-v1") == [
        ("matmul", 2 * N**2 * d),
        ("poly2", 4 * N**2),
        ("normalize_rows", 2 * N**2),
        ("matmul", 2 * N**2 * d),
    ]
    plus_one = d + 1
    assert _steps("taylorshift-efficient", "taylorshift-v1") == [
        ("outer", N * d**2),
        ("matmul", 2 * N * d**2 * plus_one),
        ("matmul", 2 * N * d * plus_one),
        ("outer", N * d**2),
        ("matmul", 2 * N * d**2 * plus_one),
        ("scale", N * plus_one),
        ("matmul", sp.factor(2 * N * d * plus_one + N * plus_one)),
        ("add", N * plus_one),
        ("div", N * d),
    ]
    # the ICPR version "adds N(d+1) for the column sum": ΣV over the N rows of the augmented V
    assert ("sum", N * plus_one) in _steps("taylorshift-efficient", "taylorshift-icpr")


# -- a paper's published totals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "c_attn"),
    [("softmax", 15), ("optimized-attention", 12), ("super-attention", 12), ("efficient-attention", 9)],
)
def test_hosseini_eq24_is_the_papers(variant: str, c_attn: int) -> None:
    """Eq. 24 of Hosseini et al.: FLOPs = C_Attn·ℓ·d_m + 15·h·ℓ², C_Attn 15 (standard), 12 (Optimized, Super),
    9 (Efficient); here ℓ = 10, h = 2, d_m = h·d = 8, per sample times a batch of 3."""
    ell, heads, d_m, batch = 10, 2, 8, 3
    expected = batch * (c_attn * ell * d_m + 15 * heads * ell**2)
    assert HOSSEINI_EQ24.total(variant).xreplace({N: ell, h: heads, d: d_m // heads, b: batch}) == expected
    assert set(PUBLISHED_CONVENTIONS) == {"hosseini-eq24"}
    assert set(HOSSEINI_EQ24.formulas) == {"softmax", "optimized-attention", "super-attention", "efficient-attention"}
