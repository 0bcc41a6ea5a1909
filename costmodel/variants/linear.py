"""Linear attention with the elu+1 feature map (Katharopoulos et al., "Transformers are RNNs", 2020).

The feature map and the normaliser are the graph's options (`--feature-map identity|elu1|relu`, `--normalize/
--no-normalize`, as flash-linear-attention's LinearAttention and chunk_linear_attn take them): `Graph.feature` applies
φ (elu + 1 unless told another), and where `Graph.normalising` says no, every op of the denominator is left out and
the numerator is the output.

Three ways to compute it, with very different memory (the paper's Sec. 3.2-3.4):
bidirectional φ(Q)(φ(K)ᵀV); causal as a materialised cumulative sum of φ(K_j)V_jᵀ (N·d·d_v);
causal as the recurrence s_i = s_{i-1} + φ(k_i)v_iᵀ (constant state, one token at a time).
No ε is added to the denominator: φ > 0 keeps it positive.
"""

from __future__ import annotations

import sympy as sp
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import C, N, b, d, h
from attn_cost.costmodel.variants import decode_step, variant

PAPER = "Katharopoulos et al., Transformers are RNNs, ICML 2020 (Eqs. 6, 9-12, 16-20)"


@variant(
    "linear",
    "linear attention φ(Q)(φ(K)ᵀV) / φ(Q)Σφ(K), φ = elu + 1: O(N d d_v) time, no N×N matrix",
    source=PAPER,
    family="linear",
    causal_form="linear-causal",
)
def linear(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    normalised = g.normalising()
    fK = g.feature("φ(K)", K)
    KV = g.matmul("φ(K)ᵀV", fK.T, V)
    z = g.reduce("sum", "Σφ(K)", fK, axis=-2, label="z ← Σⱼ φ(Kⱼ)") if normalised else None
    fQ = g.feature("φ(Q)", Q)
    num = g.matmul("num", fQ, KV, label="num ← φ(Q)(φ(K)ᵀV)")
    if z is None:
        return num
    den = g.matmul("den", fQ, z.T, label="den ← φ(Q)·z")
    return g.binary("div", "Y", num, den, inplace=True, label="Y ← num / den")


@variant(
    "linear-causal",
    "causal linear attention via a materialised cumulative sum Sᵢ = Σ_{j≤i} φ(Kⱼ)Vⱼᵀ (N·d·d_v memory)",
    source=PAPER,
    family="linear",
    causal=True,
)
def linear_causal(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    normalised = g.normalising()
    fK = g.feature("φ(K)", K)
    S = g.outer("S", fK, V, label="Sᵢ ← φ(Kᵢ)⊗Vᵢ")
    S = g.map("cumsum", "S", S, inplace=True, label="Sᵢ ← Σ_{j≤i} φ(Kⱼ)Vⱼᵀ")
    if normalised:  # in place on φ(K) (a copy where φ is the identity: K is the caller's)
        z = g.map("cumsum", "z", fK, inplace=fK is not K, label="zᵢ ← Σ_{j≤i} φ(Kⱼ)")
    fQ = g.feature("φ(Q)", Q)
    q = fQ.view(b, h, N, 1, d)
    num = g.matmul("num", q, S.view(b, h, N, d, d), label="numᵢ ← φ(Qᵢ)ᵀSᵢ")
    if not normalised:
        return num.view(b, h, N, d)
    den = g.matmul("den", q, z.view(b, h, N, d, 1), label="denᵢ ← φ(Qᵢ)ᵀzᵢ")
    return g.binary("div", "Y", num, den, inplace=True, label="Y ← num / den").view(b, h, N, d)


def recurrent_step(g: Graph, q: Tensor, k: Tensor, v: Tensor, S: Tensor, z: Tensor | None) -> Tensor:
    """One token: s += φ(k)vᵀ, z += φ(k), y = φ(q)ᵀs / φ(q)ᵀz (the paper's Eqs. 18-20); without the normaliser
    (z None) y = φ(q)ᵀs."""
    fk = g.feature("φ(k)", k)
    kv = g.outer("φ(k)vᵀ", fk, v)
    S = g.binary("add", "s", S, kv.view(b, h, d, d), inplace=True, label="s ← s + φ(k)vᵀ")
    if z is not None:
        z = g.binary("add", "z", z, fk.view(b, h, d, 1), inplace=True, label="z ← z + φ(k)")
    fq = g.feature("φ(q)", q).view(b, h, 1, d)
    num = g.matmul("num", fq, S, label="num ← φ(q)ᵀs")
    if z is None:
        return num
    den = g.matmul("den", fq, z, label="den ← φ(q)ᵀz")
    return g.binary("div", "y", num, den, inplace=True, label="y ← num / den")


@variant(
    "linear-recurrent",
    "causal linear attention as an RNN: state s (d×d_v) and z (d) updated one token at a time",
    source=PAPER,
    family="linear",
    causal=True,
)
def linear_recurrent(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    S = g.zeros("s", b, h, d, d)
    z = g.zeros("z", b, h, d, 1) if g.normalising() else None
    Y = g.zeros("Y", b, h, N, d, label="Y ← empty output")
    with g.loop(N, "tokens"):
        y = recurrent_step(g, Q.select(2, "qₜ"), K.select(2, "kₜ"), V.select(2, "vₜ"), S, z)
        g.store(Y.select(2, "Yₜ"), y, label="Yₜ ← y")
    return Y


KERNEL_BACKWARD = sp.Rational(5, 2)
"""The causal_product kernel's backward per forward FLOP: forward makes two d×d_v passes per token
(s += φ(k)vᵀ, φ(q)ᵀs); backward makes five (it recomputes the running state for ∇Q, then runs a
reverse state for ∇K and ∇V): 10·N·d·d_v per head against 4·N·d·d_v forward (fast-transformers,
`causal_product_cpu.cpp` / `causal_product_cuda.cu`)."""


@variant(
    "linear-causal-fused",
    "causal linear attention as the authors' fused kernel runs it: one d×d_v state per head, no N·d·d_v tensor",
    source=PAPER + "; the authors' causal_product kernel (fast-transformers)",
    family="linear",
    causal=True,
)
def linear_causal_fused(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    normalised = g.normalising()
    fQ = g.feature("φ(Q)", Q)
    fK = g.feature("φ(K)", K)
    if normalised:
        zc = g.map("cumsum", "Z", fK, label="Zᵢ ← Σ_{j≤i} φ(Kⱼ)")
        den = g.matmul("den", fQ.view(b, h, N, 1, d), zc.view(b, h, N, d, 1), label="denᵢ ← φ(Qᵢ)·Zᵢ")
    S = g.zeros("s", b, h, d, d, label="s ← 0 (the kernel's state)")
    Y = g.zeros("Y", b, h, N, d, label="Y ← empty output")
    with g.loop(N, "tokens"):
        fk = fK.select(2, "φ(k)ₜ").view(b, h, d, 1)
        S = g.matmul("s", fk, V.select(2, "vₜ").view(b, h, 1, d), into=S, label="s ← s + φ(kₜ)vₜᵀ")
        g.ops[-1].attrs["backward"] = KERNEL_BACKWARD
        y = g.matmul("y", fQ.select(2, "φ(q)ₜ").view(b, h, 1, d), S, label="y ← φ(qₜ)ᵀs")
        g.ops[-1].attrs["backward"] = KERNEL_BACKWARD
        g.store(Y.select(2, "Yₜ"), y, label="Yₜ ← y")
    if not normalised:
        return Y
    return g.binary("div", "Y", Y, den.view(b, h, N, 1), inplace=True, label="Y ← Y / den")


CHUNKED = (
    "Yang et al., Gated Linear Attention Transformers with Hardware-Efficient Training, ICML 2024 (Sec. 3: the "
    "chunkwise parallel form); flash-linear-attention's chunk kernels"
)


@variant(
    "linear-chunked",
    "causal linear attention in chunks of C tokens, as GPU kernels run it: quadratic inside a chunk, a d×d_v "
    "state carried between chunks",
    source=PAPER + "; " + CHUNKED,
    family="linear",
    causal=True,
)
def linear_chunked(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    """The chunkwise form with every chunk's state materialised (flash-linear-attention's `chunk` mode, which
    stores the state entering each chunk): ⌈N/C⌉ chunks. Where C does not divide N, Q, K and V are padded with
    zero rows to C⌈N/C⌉ (as the reference does, all three before it drops any; later queries never see the
    padded keys) and the output keeps its first N rows."""
    normalised = g.normalising()
    n = sp.ceiling(N / C)
    Qp = g.pad("Q", Q, 2, C, label="Q ← Q padded to whole chunks")
    Kp = g.pad("K", K, 2, C, label="K ← K padded to whole chunks")
    Vp = g.pad("V", V, 2, C, holds=(Q, K), label="V ← V padded to whole chunks")
    fQ = g.feature("φ(Q)", Qp).view(b, h, n, C, d)
    fK = g.feature("φ(K)", Kp).view(b, h, n, C, d)
    Vc = Vp.view(b, h, n, C, d, name="V chunks")
    U = g.matmul("U", fK.T, Vc, label="U_c ← φ(K_c)ᵀV_c (each chunk's state)")
    if normalised:
        u = g.reduce("sum", "u", fK, axis=-2, label="u_c ← Σ_{j∈c} φ(Kⱼ)")
    S = g.map("cumsum", "S", U, label="S_c ← Σ_{c'≤c} U_c'")
    S = g.binary("sub", "S", S, U, inplace=True, label="S_c ← S_c − U_c (the state entering chunk c)")
    if normalised:
        z = g.map("cumsum", "z", u, label="z_c ← Σ_{c'≤c} u_c'")
        z = g.binary("sub", "z", z, u, inplace=True, label="z_c ← z_c − u_c")
    num = g.matmul("num", fQ, S, label="num ← φ(Q_c)S_c (earlier chunks)")
    if normalised:
        den = g.matmul("den", fQ, z.T, label="den ← φ(Q_c)z_c")
    A = g.matmul("A", fQ, fK.T, label="A_c ← φ(Q_c)φ(K_c)ᵀ (C×C per chunk)")
    A = g.map("mask", "A", A, inplace=True, label="A_c ← 0 above the diagonal")
    num = g.matmul("num", A, Vc, into=num, label="num ← num + A_cV_c (inside the chunk)")
    if not normalised:
        return num.view(b, h, n * C, d).narrow(2, N)
    den = g.binary("add", "den", den, g.reduce("sum", "Σ A", A, axis=-1), inplace=True, label="den ← den + Σⱼ A_c")
    Y = g.binary("div", "Y", num, den, inplace=True, label="Y ← num / den")
    return Y.view(b, h, n * C, d).narrow(2, N)


FLA = (
    "flash-linear-attention (fla-core 0.6.0): chunk_linear_attn(normalize=True; False with --no-normalize), i.e. "
    "chunk_simple_gla's kernels chunk_fwd_h and chunk_fwd_o, then normalize_with_z_state"
)


@variant(
    "linear-chunked-fused",
    "causal linear attention as flash-linear-attention's fused chunk kernels run it: C×C scores and the running "
    "state on chip, one d×d_v state per chunk in memory, the normaliser after them",
    source=PAPER + "; " + CHUNKED + "; " + FLA,
    family="linear",
    causal=True,
)
def linear_chunked_fused(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    """φ = elu + 1 applied before the kernels (two element-wise kernels, as a layer calls them); the chunk kernels
    (`Graph.linear_chunk`, chunks of C = --chunk tokens, ⌈N/C⌉ of them, the last one masked, not padded in
    memory) make the numerator; the denominator as flash-linear-attention's normalize_with_z_state makes it
    (scale 1): the running key sum z = cumsum(φ(K)) to memory, φ(Q)·scale, its product with z, the row sum, + 10⁻¹⁰,
    then the division into a new tensor, and z's last row copied out (the normaliser's final state, returned and
    dropped). φ(Q), φ(K) and V are chunk_linear_attn's arguments, the numerator and the denominator
    normalize_with_z_state's: alive until it returns."""
    normalised = g.normalising()
    fQ = g.feature("φ(Q)", Q)
    fK = g.feature("φ(K)", K)
    num = g.linear_chunk("num", fQ, fK, V, chunk=C, label="numᵢ ← Σ_{j≤i} (φ(Qᵢ)·φ(Kⱼ))Vⱼ (fused chunk kernels)")
    if not normalised:  # chunk_linear_attn(normalize=False): the kernels' output is the answer
        return num
    z = g.map("cumsum", "z", fK, label="zᵢ ← Σ_{j≤i} φ(Kⱼ) (the running key sum)")
    qs = g.map("scale", "φ(Q)s", fQ, label="φ(Q)s ← φ(Q)·scale (scale = 1)")
    qz = g.binary("mul", "φ(Q)s⊙z", qs, z)
    den = g.reduce("sum", "den", qz, axis=-1, label="denᵢ ← Σ φ(Q)s⊙z")
    den = g.map("pointwise", "den", den, label="den ← den + 10⁻¹⁰")
    Y = g.binary("div", "Y", num, den, label="Y ← num / den")
    g.copy("z_N", z.select(2, "z_N"), label="z_N ← the key sum's last row (fla's final normaliser state)")
    g.ops[-1].attrs["holds"] = [fQ, fK, V, num, den]
    return Y


@decode_step("linear-causal", "linear-recurrent", "linear-causal-fused", "linear-chunked", "linear-chunked-fused")
def linear_decode(g: Graph) -> None:
    q, k, v = (g.input(n, b, h, d) for n in ("q", "k", "v"))
    S = g.input("s", b, h, d, d)
    z = g.input("z", b, h, d, 1) if g.normalising() else None
    g.keep(S, *([z] if z is not None else []))  # the recurrent state outlives the step
    g.output(recurrent_step(g, q, k, v, S, z))
