"""Every variant of the source papers against independent arithmetic from their definitions."""

from __future__ import annotations

import pytest
import sympy as sp
from attn_cost.costmodel.conventions import get_convention
from attn_cost.costmodel.crossover import Setting, cheapest, crossover
from attn_cost.costmodel.symbols import L, N, b, d, h
from attn_cost.costmodel.variants import all_variants, derive

FULL = get_convention("full")
MATMUL = get_convention("matmul")
ONE = {b: 1, h: 1}


def flops(name: str, conv=FULL, scope: str = "core", mode: str = "inference") -> sp.Expr:
    return derive(name, scope, mode).flops(conv)


def large_n_peak(name: str, scope: str = "core") -> sp.Expr:
    return derive(name, scope).peak().dominant


# -- Hosseini et al.: parameter tables -------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "d_m", "published"),
    [
        ("softmax", 32, 4_224),
        ("softmax", 128, 66_048),
        ("softmax", 1024, 4_198_400),
        ("optimized-attention", 32, 3_168),
        ("optimized-attention", 128, 49_536),
        ("optimized-attention", 1024, 3_148_800),
        ("efficient-attention", 32, 2_112),
        ("efficient-attention", 128, 33_024),
        ("efficient-attention", 1024, 2_099_200),
    ],
)
@pytest.mark.parametrize("heads", [1, 4, 8])
def test_parameter_tables(variant: str, d_m: int, published: int, heads: int) -> None:
    params = derive(variant, "layer").params.xreplace({h: heads, d: d_m // heads})
    assert params == published


@pytest.mark.parametrize(
    ("d_m", "ell", "published"),
    [(32, 32, 3_168), (128, 64, 37_184), (128, 96, 42_336)],  # IMDB, MNIST, Amazon
)
def test_super_attention_parameters_depend_on_the_context_length(d_m: int, ell: int, published: int) -> None:
    params = derive("super-attention", "layer").params.xreplace({h: 4, d: d_m // 4, N: ell})
    assert params == published


def test_hosseini_variants_drop_one_matmul_per_head_per_removed_projection() -> None:
    """Per the paper: Optimized h fewer matmuls than standard, Efficient 2h fewer (a projection each)."""
    standard = flops("softmax", MATMUL, "layer")
    projection = 2 * b * N * (h * d) ** 2  # one d_m×d_m product over b·N rows
    assert sp.expand(standard - flops("optimized-attention", MATMUL, "layer") - projection) == 0
    assert sp.expand(standard - flops("efficient-attention", MATMUL, "layer") - 2 * projection) == 0
    # Super adds W_A·X back: an ℓ×ℓ by ℓ×d_m product per sample
    super_minus_efficient = flops("super-attention", MATMUL, "layer") - flops("efficient-attention", MATMUL, "layer")
    assert sp.expand(super_minus_efficient - 2 * b * N * N * h * d) == 0


def test_eq24_is_available_as_a_convention_and_differs_from_the_derived_count() -> None:
    st = Setting("hosseini-eq24", scope="layer", mode="training")
    dims = {d: 32, h: 4, b: 1}
    assert crossover("softmax", "efficient-attention", "flops", dims, st).verdict == "always"
    from attn_cost.costmodel.published import compare_published

    (eq24,) = [p for p in compare_published("efficient-attention") if "Eq. 24" in p["where"]]
    assert not eq24["matches"] and "projection" in eq24["why"]


# -- Katharopoulos et al.: linear attention ----------------------------------------------------------


def test_linear_attention_costs_n_d_dv() -> None:
    """φ(K)ᵀV and φ(Q)(φ(K)ᵀV): 2·N·d·d_v each (d_v = d); φ(Q)z: 2Nd; Σφ(K): Nd."""
    expected = 2 * N * d * d + 2 * N * d * d + 2 * N * d
    assert sp.expand(flops("linear", MATMUL).xreplace(ONE) - expected) == 0


def test_linear_causal_materialises_n_d_dv_state() -> None:
    """The paper: storing every S_i multiplies memory by max(D, M): N·C·M entries."""
    peak = sp.Poly(large_n_peak("linear-causal").xreplace(ONE), N, d)
    assert peak.coeff_monomial(N * d**2) == 1


def test_linear_recurrent_state_is_constant() -> None:
    """Besides Q, K, V and the output (4Nd), the recurrent form holds O(d²) state, whatever N."""
    extra = sp.expand(large_n_peak("linear-recurrent").xreplace(ONE) - 4 * N * d)
    assert N not in extra.free_symbols and sp.degree(extra, d) == 2


def test_causal_forms_do_the_same_products() -> None:
    for a, bname in (("linear-causal", "linear-recurrent"),):
        assert sp.expand(flops(a, MATMUL) - flops(bname, MATMUL)) == 0


# -- Dolga et al.: Latte ------------------------------------------------------------------------------


def test_latte_bidirectional_is_two_n_l_d_products() -> None:
    """softmax_T(K)ᵀV is (L×N)(N×d): 2NLd; softmax_L(Q)M is (N×L)(L×d): 2NLd."""
    assert sp.expand(flops("latte", MATMUL).xreplace(ONE) - 4 * N * L * d) == 0


@pytest.mark.parametrize(
    ("variant", "nld_memory"),
    [("latte", False), ("latte-causal", True), ("latte-recurrent", False)],
)
def test_latte_memory_matches_table_1(variant: str, nld_memory: bool) -> None:
    """Table 1: causal vectorised O(TLD) memory; bidirectional and sequential O(TL + LD)."""
    peak = derive(variant).peak()
    branch = peak.at({N: 10**6, L: 100, d: 100, b: 1, h: 1})[1].elements().xreplace(ONE)
    poly = sp.Poly(branch, N, L, d)
    assert (poly.coeff_monomial(N * L * d) != 0) is nld_memory
    assert poly.total_degree() <= 3


def test_latte_time_is_linear_in_n_and_l() -> None:
    for variant in ("latte", "latte-causal", "latte-recurrent"):
        f = flops(variant).xreplace(ONE)
        assert sp.degree(f, N) == 1 and sp.degree(f, L) == 1


# -- asymptotics ---------------------------------------------------------------------------------------


LINEAR_IN_N = [
    "linear",
    "linear-causal",
    "linear-recurrent",
    "latte",
    "latte-causal",
    "latte-recurrent",
    "taylorshift-efficient",
]
QUADRATIC_IN_N = ["softmax", "softmax-causal", "softmax-fused", "taylorshift-direct"]


SIZES = {b: 2, h: 4, d: 64, L: 32}


def _ratio(expr: sp.Expr) -> sp.Expr:
    """lim cost(2N)/cost(N) as N → ∞."""
    e = expr.xreplace(SIZES)
    return sp.limit(e.xreplace({N: 2 * N}) / e, N, sp.oo)


def _peak_ratio(name: str) -> float:
    """Peak memory (a maximum over steps) at 2N over N, for N far beyond every crossing."""
    peak = derive(name).peak()
    big = 10**9
    return float(peak.at({**SIZES, N: 2 * big})[0] / peak.at({**SIZES, N: big})[0])


@pytest.mark.parametrize("variant", LINEAR_IN_N)
def test_linear_variants_double_when_n_doubles(variant: str) -> None:
    assert _ratio(flops(variant)) == 2
    assert _peak_ratio(variant) == pytest.approx(2, rel=1e-6)


@pytest.mark.parametrize("variant", QUADRATIC_IN_N)
def test_quadratic_variants_quadruple_when_n_doubles(variant: str) -> None:
    assert _ratio(flops(variant)) == 4


def test_fused_attention_memory_is_linear_and_materialised_quadratic() -> None:
    assert _peak_ratio("softmax-fused") == pytest.approx(2, rel=1e-6)
    assert _peak_ratio("softmax") == pytest.approx(4, rel=1e-6)


def test_every_variant_builds_at_every_scope_it_claims() -> None:
    for v in all_variants():
        for scope in v.scopes:
            derived = derive(v.name, scope)
            assert derived.flops(FULL) != 0 and derived.peak().branches


# -- surroundings, modes, types ---------------------------------------------------------------------


def test_surroundings_cancel_in_flop_crossovers() -> None:
    """Projections, norms and MLP cost the same for both variants, so N0 does not move with scope."""
    from attn_cost.costmodel.symbols import D, r

    dims = {d: 32, h: 8, b: 1, L: 32, r: 4, D: 12}
    core = crossover("softmax", "taylorshift-efficient", "flops", dims).n
    for scope in ("layer", "block", "model"):
        assert crossover("softmax", "taylorshift-efficient", "flops", dims, Setting(scope=scope)).n == core


def test_model_parameters_grow_with_depth() -> None:
    from attn_cost.costmodel.symbols import D, r

    params = derive("softmax", "model").params
    width = h * d
    per_block = 4 * (width**2 + width) + 2 * width * r * width + r * width + width + 4 * width  # attn, MLP, 2 LN
    assert sp.expand(params - (D * per_block + 2 * width)) == 0


def test_training_flops_of_products_triple_and_fused_attention_counts_like_pytorch() -> None:
    """Backward of a matmul is two matmuls; FlopCounterMode counts SDPA backward as 5 products of 2."""
    fwd = flops("softmax", MATMUL)
    assert sp.expand(flops("softmax", MATMUL, mode="training") - 3 * fwd) == 0
    fused = flops("softmax-fused", MATMUL, mode="training").xreplace(ONE)
    assert sp.expand(fused - (4 * N**2 * d + 10 * N**2 * d)) == 0


def test_training_keeps_activations() -> None:
    """Training holds what backward needs: never less than inference, and more for most variants."""
    sizes = {**ONE, d: 64, L: 64}
    for name in ("softmax", "taylorshift-efficient", "linear", "latte-causal"):
        for n in (64, 4096):
            inf = derive(name).peak().at({**sizes, N: n})[0]
            train = derive(name, "core", "training").peak().at({**sizes, N: n})[0]
            assert train >= inf
    n = {**sizes, N: 4096}
    assert derive("softmax", "core", "training").peak().at(n)[0] > derive("softmax").peak().at(n)[0]


def test_bytes_follow_dtype() -> None:
    full = derive("softmax").peak("fp32").dominant
    half = derive("softmax").peak("bf16").dominant
    assert sp.expand(full - 2 * half) == 0
    # the fused kernel's log-sum-exp stays fp32 (4 bytes per row in both), so bytes do not simply halve
    lse = derive("softmax-fused").peak("fp32").dominant - 2 * derive("softmax-fused").peak("bf16").dominant
    assert sp.expand(lse + 4 * b * h * N) == 0


# -- decoding ----------------------------------------------------------------------------------------


def test_decode_cost_per_token() -> None:
    """Softmax with a KV cache reads N+1 keys and values; a recurrent state costs the same every token."""
    st = derive("softmax-causal", "decode").flops(MATMUL).xreplace(ONE)
    assert sp.expand(st - 4 * (N + 1) * d) == 0
    lin = derive("linear-recurrent", "decode").flops(MATMUL).xreplace(ONE)
    assert sp.expand(lin - (2 * d * d + 2 * d)) == 0
    latte = derive("latte-recurrent", "decode").flops(MATMUL).xreplace(ONE)
    assert sp.expand(latte - 2 * L * d) == 0
    for name in ("linear-recurrent", "latte-recurrent"):
        for cost in ("flops", "memory", "traffic"):
            c = crossover("softmax-causal", name, cost, {d: 64, h: 1, b: 1, L: 64}, Setting(scope="decode"))
            assert c.verdict == "crosses" and c.n < 300


# -- many-way view -------------------------------------------------------------------------------------


def test_cheapest_intervals_agree_with_pairwise_crossovers() -> None:
    dims = {d: 64, h: 1, b: 1, L: 64}
    view = cheapest(["softmax", "linear", "taylorshift-efficient"], "flops", dims)
    assert view.at(10) == ["softmax"] and view.at(10**6) == ["linear"]
    switch = crossover("softmax", "linear", "flops", dims)
    assert view.intervals[1][0] == pytest.approx(switch.root)
