"""The linear attention hybrid models run now: retention, gated linear attention, the delta rule (DeltaNet, Gated
DeltaNet) and Mamba-2's state-space duality, each as its chunk kernels run it (flash-linear-attention, fla-core
0.6.0; mamba_ssm for Mamba-2's SSD, which fla's Mamba2 layer calls) and as its recurrence, one token at a time.

All five are causal linear attention with a decay and a d_k×d_v state per head:

    S_t = decay_t ⊙ S_{t−1} + k_t·v_tᵀ  (the delta rule: S_t = decay_t·S_{t−1} + β_t·k_t(v_t − S_{t−1}ᵀk_t)ᵀ)
    y_t = S_tᵀ·q_t · scale

with the decay fixed per head (retention's γ = 1 − 2^(−5−i) for head i), a scalar per token (Mamba-2's exp(Δ_t·A),
Gated DeltaNet's α_t), a vector per token over the key dimension (GLA's α_t), or none (DeltaNet). The chunked form
(the default name) cuts the sequence into chunks of C tokens (`--chunk`): quadratic inside a chunk, the state
carried between chunks; `Graph.linear_chunk` is the chunk kernels, with the tensors the libraries write to memory
as ops of their own (the gate's cumulative sum, GLA's intra-chunk scores, the delta rule's WY representation,
Mamba-2's chunk states and CB). The `-recurrent` forms are the recurrence as PyTorch runs it token by token, and
every form decodes with the recurrence (`decode`: one token against the state, no KV cache).

Where the op list simplifies the libraries (docs/variants.md says it per variant): the layers' short convolutions,
output gates and norms and RetNet's xPos are not modelled (the layer scope is the standard Q/K/V/O projections,
one full-rank projection per gate input); kernels that make two results in one launch are two ops.
"""

from __future__ import annotations

import sympy as sp
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import C, G, N, b, d, d_state, d_v, h, padded
from attn_cost.costmodel.variants import decode_step, variant

FLA = "flash-linear-attention (fla-core 0.6.0)"
RETNET = "Sun et al., Retentive Network, arXiv 2307.08621 (Eqs. 1-8: the recurrent, parallel and chunkwise forms)"
GLA = "Yang et al., Gated Linear Attention Transformers with Hardware-Efficient Training, arXiv 2312.06635 (Sec. 4)"
DELTANET = "Yang et al., Parallelizing Linear Transformers with the Delta Rule over Sequence Length, arXiv 2406.06484"
GATED_DELTANET = "Yang, Kautz and Hatamizadeh, Gated Delta Networks: Improving Mamba2 with Delta Rule, arXiv 2412.06464"
MAMBA2 = "Dao and Gu, Transformers are SSMs (Mamba-2), arXiv 2405.21060 (Sec. 6: the SSD algorithm)"
MAMBA_SSM = (
    "mamba_ssm's SSD kernels (mamba_chunk_scan_combined: chunk_cumsum, chunk_state, state_passing, bmm_chunk, "
    "chunk_scan), which fla's Mamba2 layer calls"
)

SCALE = "1/√d"
"""The query scale of fla's kernels (scale = K^−0.5), folded into the products."""
GATE_NORMALIZER = "1/16"
"""GLA's gate: logsigmoid(x)/16 (fla's GatedLinearAttention, gate_logit_normalizer=16)."""


def _chunk_gate(g: Graph, x: Tensor, name: str, gain: str | None = None) -> Tensor:
    """The gate's cumulative sum inside each chunk, fp32 (fla's chunk_local_cumsum)."""
    return g.map("cumsum", name, x, dtype="fp32", gain=gain,
                 label=f"{name} ← Σ within each chunk of {x.name} (fp32, chunk_local_cumsum)")  # fmt: skip


# -- retention ---------------------------------------------------------------------------------------------------


@variant(
    "retention",
    "retention (RetNet): causal linear attention with a fixed decay γ per head, chunked (fla's chunk_retention)",
    source=RETNET + "; " + FLA + ": chunk_retention = chunk_simple_gla with g_gamma (chunk_fwd_h, chunk_fwd_o)",
    family="linear-rnn",
    causal=True,
    v_width=d_v,
)
def retention(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    """chunk_retention(q, k, v): chunk_simple_gla with the decay γ_i = 1 − 2^(−5−i) of head i as g_gamma (no gate
    tensor, no cumulative sum: the kernels compute γ's powers), scale 1/√d."""
    return g.linear_chunk("Y", Q, K, V, chunk=C, gate="head", gain=SCALE,
                          label="Yᵢ ← Σ_{j≤i} γ^(i−j)(qᵢ·kⱼ)vⱼ/√d (chunk kernels)")  # fmt: skip


def retention_step(g: Graph, q: Tensor, k: Tensor, v: Tensor, S: Tensor) -> Tensor:
    """One token: S ← γS + kvᵀ, y = Sᵀq/√d (RetNet's Eq. 1 recurrence, per head)."""
    S = g.map("scale", "S", S, inplace=True, label="S ← γ·S")
    S = g.matmul("S", k.view(b, h, d, 1), v.view(b, h, 1, d_v), into=S, label="S ← S + kvᵀ")
    return g.matmul("y", q.view(b, h, 1, d), S, gain=SCALE, label="y ← qᵀS/√d")


@variant(
    "retention-recurrent",
    "retention as its recurrence: a d×d_v state per head, decayed by γ and updated one token at a time",
    source=RETNET,
    family="linear-rnn",
    causal=True,
    v_width=d_v,
)
def retention_recurrent(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    S = g.zeros("S", b, h, d, d_v)
    Y = g.zeros("Y", b, h, N, d_v, label="Y ← empty output")
    with g.loop(N, "tokens"):
        y = retention_step(g, Q.select(2, "qₜ"), K.select(2, "kₜ"), V.select(2, "vₜ"), S)
        g.store(Y.select(2, "Yₜ"), y, label="Yₜ ← y")
    return Y


@decode_step("retention", "retention-recurrent")
def retention_decode(g: Graph) -> None:
    q, k = g.input("q", b, h, d), g.input("k", b, h, d)
    v = g.input("v", b, h, d_v)
    S = g.input("S", b, h, d, d_v)
    g.keep(S)  # the recurrent state outlives the step
    g.output(retention_step(g, q, k, v, S))


# -- gated linear attention --------------------------------------------------------------------------------------


@variant(
    "gla",
    "gated linear attention: a data-dependent decay per token and key dimension, chunked (fla's chunk_gla)",
    source=GLA + "; " + FLA + ": chunk_gla (chunk_local_cumsum, chunk_fwd_h, chunk_gla_fwd_intra_gk, "
    "chunk_gla_fwd_o_gk)",
    family="linear-rnn",
    causal=True,
    v_width=d_v,
    extra_inputs=(("α", d),),
)
def gla(g: Graph, Q: Tensor, K: Tensor, V: Tensor, alpha: Tensor) -> Tensor:
    """fla's GatedLinearAttention: g = logsigmoid(α)/16 (the layer), then chunk_gla: its cumulative sum inside each
    chunk (fp32), the intra-chunk scores A = (Q⊙e^G)(K⊙e^−G)ᵀ with the gate applied per key dimension (fp32,
    C per token: chunk_gla_fwd_intra_gk, which fla computes in sub-chunks of 16 for stability, counted here as the
    whole C×C product), and the states and output (chunk_fwd_h with gk, chunk_gla_fwd_o_gk). fla keeps q, k, v,
    g, its cumulative sum and A for backward and recomputes the states."""
    lg = g.map("pointwise", "g", alpha, gain=GATE_NORMALIZER, label="g ← logsigmoid(α)/16")
    G_ = _chunk_gate(g, lg, "G")
    A = g.chunk_matmul("A", Q, K, chunk=C, form="scores", gate="vector", gates=(G_,), dtype="fp32", attention=True,
                       saves=(Q, K, G_, "out"), label="A ← (Q⊙e^G)(K⊙e^−G)ᵀ per chunk (fp32)")  # fmt: skip
    return g.linear_chunk("Y", Q, K, V, chunk=C, gate="vector", gates=(G_,), scores=A, gain=SCALE,
                          saves=(Q, K, V, lg, G_, A), label="Y ← (Q⊙e^G)S_c/√d + A_cV_c (chunk kernels)")  # fmt: skip


def gla_step(g: Graph, q: Tensor, k: Tensor, v: Tensor, lg: Tensor, S: Tensor) -> Tensor:
    """One token: S ← diag(α)S + kvᵀ with α = exp(g), y = Sᵀq/√d (GLA's recurrent form, Eq. 3)."""
    a = g.map("exp", "α", lg, label="α ← exp(g)")
    S = g.binary("mul", "S", S, a.view(b, h, d, 1), inplace=True, label="S ← diag(α)S")
    S = g.matmul("S", k.view(b, h, d, 1), v.view(b, h, 1, d_v), into=S, label="S ← S + kvᵀ")
    return g.matmul("y", q.view(b, h, 1, d), S, gain=SCALE, label="y ← qᵀS/√d")


@variant(
    "gla-recurrent",
    "gated linear attention as its recurrence: a d×d_v state per head, decayed per key dimension, one token at a time",
    source=GLA,
    family="linear-rnn",
    causal=True,
    v_width=d_v,
    extra_inputs=(("α", d),),
)
def gla_recurrent(g: Graph, Q: Tensor, K: Tensor, V: Tensor, alpha: Tensor) -> Tensor:
    lg = g.map("pointwise", "g", alpha, gain=GATE_NORMALIZER, label="g ← logsigmoid(α)/16")
    S = g.zeros("S", b, h, d, d_v)
    Y = g.zeros("Y", b, h, N, d_v, label="Y ← empty output")
    with g.loop(N, "tokens"):
        y = gla_step(g, Q.select(2, "qₜ"), K.select(2, "kₜ"), V.select(2, "vₜ"), lg.select(2, "gₜ"), S)
        g.store(Y.select(2, "Yₜ"), y, label="Yₜ ← y")
    return Y


@decode_step("gla", "gla-recurrent")
def gla_decode(g: Graph) -> None:
    q, k = g.input("q", b, h, d), g.input("k", b, h, d)
    v = g.input("v", b, h, d_v)
    alpha = g.input("α", b, h, d)
    S = g.input("S", b, h, d, d_v)
    g.keep(S)
    lg = g.map("pointwise", "g", alpha, gain=GATE_NORMALIZER, label="g ← logsigmoid(α)/16")
    g.output(gla_step(g, q, k, v, lg, S))


# -- the delta rule ----------------------------------------------------------------------------------------------


def _delta_inputs(g: Graph, Q: Tensor, K: Tensor, beta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Q and K normalised to unit length (fla's l2norm_fwd, use_qk_l2norm_in_kernel) and β = sigmoid(β logits)."""
    Qn = g.map("l2normalize", "Q̂", Q, label="Q̂ ← Q/‖Q‖")
    Kn = g.map("l2normalize", "K̂", K, label="K̂ ← K/‖K‖")
    return Qn, Kn, g.map("pointwise", "β", beta, label="β ← sigmoid(β)")


def _wy(g: Graph, Kn: Tensor, V: Tensor, beta: Tensor, gates: tuple[Tensor, ...] = ()) -> tuple[Tensor, Tensor, Tensor]:
    """The delta rule's WY representation inside each chunk (fla's prepare_wy_repr_fwd): A = βKKᵀ strictly below
    the diagonal (fp32; with a gate, times exp(G_i − G_j)), T = (I + A)⁻¹ (solve_tril, in the keys' dtype, kept
    for backward), W = T·(β⊙K) (with a gate, K's rows times exp(G_i)) and U = T·(β⊙V), which fla's backward makes
    again (recompute_w_u_fwd: one kernel for both, two ops here)."""
    gate = "token" if gates else "none"
    A = g.chunk_matmul("A", Kn, Kn, chunk=C, form="scores", rowscale=beta, gate=gate, gates=gates, dtype="fp32",
                       label="A ← βKKᵀ below the diagonal, per chunk (fp32, chunk_scaled_dot_kkt)")  # fmt: skip
    T = g.tri_solve("T", A, chunk=C, label="T ← (I + A)⁻¹ per chunk (solve_tril)")
    W = g.chunk_matmul("W", T, Kn, chunk=C, form="apply", rowscale=beta, gate=gate, gates=gates, recompute=True,
                       label="W ← T(β⊙K) (recompute_w_u)")  # fmt: skip
    U = g.chunk_matmul("U", T, V, chunk=C, form="apply", rowscale=beta, recompute=True,
                       label="U ← T(β⊙V) (recompute_w_u)")  # fmt: skip
    return T, W, U


@variant(
    "deltanet",
    "DeltaNet: linear attention with delta-rule updates, chunked by the WY representation (fla's chunk_delta_rule)",
    source=DELTANET + "; " + FLA + ": chunk_delta_rule (chunk_scaled_dot_kkt, solve_tril, recompute_w_u, "
    "chunk_gated_delta_rule_fwd_h, chunk_fwd_o)",
    family="linear-rnn",
    causal=True,
    v_width=d_v,
    extra_inputs=(("β", 1),),
)
def deltanet(g: Graph, Q: Tensor, K: Tensor, V: Tensor, beta: Tensor) -> Tensor:
    """chunk_delta_rule(q, k, v, β, use_qk_l2norm_in_kernel=True): unit-length Q and K, the WY representation
    (`_wy`), then the states with v_new = U − W·S and the output (chunk_gated_delta_rule_fwd_h, chunk_fwd_o). fla
    keeps Q̂, K̂, V, β and T for backward and recomputes W, U, the states and v_new."""
    Qn, Kn, beta = _delta_inputs(g, Q, K, beta)
    T, W, U = _wy(g, Kn, V, beta)
    return g.linear_chunk("Y", Qn, Kn, U, w=W, chunk=C, gain=SCALE, saves=(Qn, Kn, V, beta, T),
                          label="Y ← Q̂S_c/√d + A_c·v_new (chunk kernels, v_new = U − WS_c)")  # fmt: skip


def delta_step(g: Graph, q: Tensor, k: Tensor, v: Tensor, beta: Tensor, S: Tensor, a: Tensor | None = None) -> Tensor:
    """One token of the delta rule: (gated: S ← αS), S ← S + k·β(v − Sᵀk)ᵀ, y = Sᵀq/√d (DeltaNet's Eq. of the
    recurrence, Gated DeltaNet's with α)."""
    if a is not None:
        S = g.binary("mul", "S", S, a.view(b, h, 1, 1), inplace=True, label="S ← αS")
    old = g.matmul("kᵀS", k.view(b, h, 1, d), S, label="v_old ← Sᵀk")
    u = g.binary("sub", "u", v.view(b, h, 1, d_v), old, label="u ← v − v_old")
    u = g.binary("mul", "u", u, beta.view(b, h, 1, 1), inplace=True, label="u ← βu")
    S = g.matmul("S", k.view(b, h, d, 1), u, into=S, label="S ← S + kuᵀ")
    return g.matmul("y", q.view(b, h, 1, d), S, gain=SCALE, label="y ← qᵀS/√d")


@variant(
    "deltanet-recurrent",
    "DeltaNet as its recurrence: delta-rule updates of a d×d_v state per head, one token at a time",
    source=DELTANET,
    family="linear-rnn",
    causal=True,
    v_width=d_v,
    extra_inputs=(("β", 1),),
)
def deltanet_recurrent(g: Graph, Q: Tensor, K: Tensor, V: Tensor, beta: Tensor) -> Tensor:
    Qn, Kn, beta = _delta_inputs(g, Q, K, beta)
    S = g.zeros("S", b, h, d, d_v)
    Y = g.zeros("Y", b, h, N, d_v, label="Y ← empty output")
    with g.loop(N, "tokens"):
        y = delta_step(g, Qn.select(2, "qₜ"), Kn.select(2, "kₜ"), V.select(2, "vₜ"), beta.select(2, "βₜ"), S)
        g.store(Y.select(2, "Yₜ"), y, label="Yₜ ← y")
    return Y


def _delta_decode_inputs(g: Graph, gated: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor | None]:
    q, k = g.input("q", b, h, d), g.input("k", b, h, d)
    v = g.input("v", b, h, d_v)
    a = g.input("a", b, h) if gated else None
    beta = g.input("β", b, h)
    S = g.input("S", b, h, d, d_v)
    g.keep(S)
    qn = g.map("l2normalize", "q̂", q, label="q̂ ← q/‖q‖")
    kn = g.map("l2normalize", "k̂", k, label="k̂ ← k/‖k‖")
    beta = g.map("pointwise", "β", beta, label="β ← sigmoid(β)")
    if a is not None:
        a = _decay(g, a)
        a = g.map("exp", "α", a, inplace=True, label="α ← exp(g)")
    return qn, kn, v, beta, S, a


@decode_step("deltanet", "deltanet-recurrent")
def deltanet_decode(g: Graph) -> None:
    qn, kn, v, beta, S, _ = _delta_decode_inputs(g, gated=False)
    g.output(delta_step(g, qn, kn, v, beta, S))


# -- gated delta rule --------------------------------------------------------------------------------------------


def _decay(g: Graph, a: Tensor) -> Tensor:
    """Gated DeltaNet's (and Mamba-2's) log decay per token and head, g = −exp(A_log)·softplus(a + dt_bias)."""
    g.param("A_log", h)
    g.param("dt_bias", h)
    return g.map("pointwise", "g", a, gain="−exp(A_log)", label="g ← −exp(A_log)·softplus(a + dt_bias)")


@variant(
    "gated-deltanet",
    "Gated DeltaNet: delta-rule updates with a scalar decay per token (Mamba-2's), chunked (fla's "
    "chunk_gated_delta_rule)",
    source=GATED_DELTANET + "; " + FLA + ": chunk_gated_delta_rule (the gate's chunk_local_cumsum, "
    "chunk_scaled_dot_kkt, solve_tril, recompute_w_u, chunk_gated_delta_rule_fwd_h, chunk_fwd_o)",
    family="linear-rnn",
    causal=True,
    v_width=d_v,
    extra_inputs=(("a", 1), ("β", 1)),
)
def gated_deltanet(g: Graph, Q: Tensor, K: Tensor, V: Tensor, a: Tensor, beta: Tensor) -> Tensor:
    """fla's GatedDeltaNet (use_gate_in_kernel, use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel): the decay
    g = −exp(A_log)·softplus(a + dt_bias) and its cumulative sum inside each chunk (fp32; one kernel in fla,
    gdn_gate_chunk_cumsum, two ops here), unit-length Q and K, β = sigmoid; the WY representation with the decay
    (`_wy`: at C = 64 fla fuses the products and the solve into one kernel and never writes the fp32 A; the op
    list writes them apart, as fla does at other chunk sizes), then the states and output with the decay."""
    Qn, Kn, beta = _delta_inputs(g, Q, K, beta)
    G_ = _chunk_gate(g, _decay(g, a), "G")
    T, W, U = _wy(g, Kn, V, beta, gates=(G_,))
    return g.linear_chunk("Y", Qn, Kn, U, w=W, chunk=C, gate="token", gates=(G_,), gain=SCALE,
                          saves=(Qn, Kn, V, G_, beta, T),
                          label="Y ← e^G(Q̂S_c)/√d + (A_c⊙decay)·v_new (chunk kernels)")  # fmt: skip


@variant(
    "gated-deltanet-recurrent",
    "Gated DeltaNet as its recurrence: delta-rule updates with a scalar decay of a d×d_v state, one token at a time",
    source=GATED_DELTANET,
    family="linear-rnn",
    causal=True,
    v_width=d_v,
    extra_inputs=(("a", 1), ("β", 1)),
)
def gated_deltanet_recurrent(g: Graph, Q: Tensor, K: Tensor, V: Tensor, a: Tensor, beta: Tensor) -> Tensor:
    Qn, Kn, beta = _delta_inputs(g, Q, K, beta)
    lg = _decay(g, a)
    S = g.zeros("S", b, h, d, d_v)
    Y = g.zeros("Y", b, h, N, d_v, label="Y ← empty output")
    with g.loop(N, "tokens"):
        alpha = g.map("exp", "α", lg.select(2, "gₜ"), label="α ← exp(gₜ)")
        y = delta_step(g, Qn.select(2, "qₜ"), Kn.select(2, "kₜ"), V.select(2, "vₜ"), beta.select(2, "βₜ"), S, alpha)
        g.store(Y.select(2, "Yₜ"), y, label="Yₜ ← y")
    return Y


@decode_step("gated-deltanet", "gated-deltanet-recurrent")
def gated_deltanet_decode(g: Graph) -> None:
    qn, kn, v, beta, S, alpha = _delta_decode_inputs(g, gated=True)
    g.output(delta_step(g, qn, kn, v, beta, S, alpha))


# -- Mamba-2 -----------------------------------------------------------------------------------------------------


def _groups(x: Tensor, heads: sp.Expr, *rest: sp.Expr) -> Tensor:
    """x viewed with its heads as (G groups, heads per group): B and C (1 a group) against X's h/G heads."""
    return x.view(b, G, heads, *rest)


@variant(
    "mamba2",
    "Mamba-2 (SSD): a scalar decay per token and head, d_state-wide B and C shared by groups of heads, chunked",
    source=MAMBA2 + "; " + MAMBA_SSM,
    family="linear-rnn",
    causal=True,
    qk_width=d_state,
    qk_heads=G,
    extra_inputs=(("Δ", 1),),
)
def mamba2(g: Graph, Cq: Tensor, B: Tensor, X: Tensor, dt: Tensor) -> Tensor:
    """mamba_chunk_scan_combined(x, dt, A, B, C, D, dt_bias, dt_softplus=True), its five kernels: Δ = softplus(dt +
    dt_bias) and dA's cumulative sum inside each chunk (chunk_cumsum: one kernel, two fp32 results, padded to whole
    chunks), each chunk's own state Σⱼ e^(dA_C − dA_j)Δⱼ·xⱼBⱼᵀ (chunk_state, fp32), the states entering each chunk
    (state_passing: a decayed running sum over the chunks, in the activation dtype), CB = C_cB_cᵀ per group
    (bmm_chunk, fp32, padded) and the output e^(dA_i)C_iS_c + Σⱼ≤ᵢ CB_ij e^(dA_i − dA_j)Δⱼxⱼ + D·xᵢ (chunk_scan).
    Q, K, V are C, B (G groups, d_state wide) and X (h heads of P = d). mamba keeps X, Δ, dA, A, B, C, D and the
    output for backward and recomputes the states and CB."""
    g.param("A_log", h)
    g.param("dt_bias", h)
    g.param("D", h)
    rows = padded(N, C)
    delta = g.traced("pointwise", "Δ", (b, h, rows), (dt,), attrs={"gain": None}, dtype="fp32",
                     label="Δ ← softplus(dt + dt_bias) (fp32, to whole chunks)")  # fmt: skip
    dA = g.traced("cumsum", "dA", (b, h, rows), (delta,), attrs={"gain": "A"}, dtype="fp32",
                  label="dA ← Σ within each chunk of Δ·A (fp32)")  # fmt: skip
    per = h / G
    Bg, Cg, Xg = _groups(B, 1, N, d_state), _groups(Cq, 1, N, d_state), _groups(X, per, N, d)
    local = g.chunk_matmul("S_c", Bg, Xg, chunk=C, form="states", rowscale=delta, gate="token", gates=(dA,),
                           dtype="fp32", recompute=True, saves=(),
                           label="S_c ← Σ_{j∈c} e^(dA_C − dA_j)Δⱼ·Bⱼxⱼᵀ (chunk_state, fp32)")  # fmt: skip
    states = g.map("cumsum", "S", local, gain="e^dA", label="S_c ← e^(dA)S_{c−1} + S_{c−1}' (state_passing)")
    CB = g.chunk_matmul("CB", Cg, Bg, chunk=C, form="scores", rows=rows, dtype="fp32", recompute=True,
                        attention=True, saves=(), label="CB ← C_cB_cᵀ per chunk and group (bmm_chunk, fp32)")
    Y = g.linear_chunk("Y", Cg, Bg, Xg, chunk=C, gate="token", gates=(delta, dA), states=states, scores=CB,
                       skip=True, saves=(Cq, B, X, delta, dA),
                       label="Y ← e^dA·C·S_c + (CB⊙decay⊙Δ)·X + D·X (chunk_scan)")  # fmt: skip
    return Y.view(b, h, N, d)


def mamba2_step(g: Graph, x: Tensor, B: Tensor, Cq: Tensor, delta: Tensor, S: Tensor) -> Tensor:
    """One token: S ← e^(ΔA)S + (Δx)Bᵀ, y = S·C + D·x (Mamba-2's recurrence, per head, P×d_state state)."""
    per = h / G
    a = g.map("exp", "a", delta, gain="A", label="a ← exp(ΔA)")
    S = g.binary("mul", "S", S, a.view(b, h, 1, 1), inplace=True, label="S ← aS")
    xs = g.binary("mul", "Δx", x, delta.view(b, h, 1), label="Δx ← Δ·x")
    Sg = S.view(b, G, per, d, d_state)
    Sg = g.matmul("S", xs.view(b, G, per, d, 1), B.view(b, G, 1, 1, d_state), into=Sg, label="S ← S + (Δx)Bᵀ")
    y = g.matmul("y", Sg, Cq.view(b, G, 1, d_state, 1), label="y ← S·C")
    return g.binary("add", "y", y.view(b, h, d), x, inplace=True, gain="D", label="y ← y + D·x")


@variant(
    "mamba2-recurrent",
    "Mamba-2 as its recurrence: a d×d_state state per head, decayed by exp(ΔA), one token at a time",
    source=MAMBA2,
    family="linear-rnn",
    causal=True,
    qk_width=d_state,
    qk_heads=G,
    extra_inputs=(("Δ", 1),),
)
def mamba2_recurrent(g: Graph, Cq: Tensor, B: Tensor, X: Tensor, dt: Tensor) -> Tensor:
    g.param("A_log", h)
    g.param("dt_bias", h)
    g.param("D", h)
    delta = g.map("pointwise", "Δ", dt, label="Δ ← softplus(dt + dt_bias)")
    S = g.zeros("S", b, h, d, d_state)
    Y = g.zeros("Y", b, h, N, d, label="Y ← empty output")
    with g.loop(N, "tokens"):
        y = mamba2_step(g, X.select(2, "xₜ"), B.select(2, "Bₜ"), Cq.select(2, "Cₜ"), delta.select(2, "Δₜ"), S)
        g.store(Y.select(2, "Yₜ"), y, label="Yₜ ← y")
    return Y


@decode_step("mamba2", "mamba2-recurrent")
def mamba2_decode(g: Graph) -> None:
    g.param("A_log", h)
    g.param("dt_bias", h)
    g.param("D", h)
    cq, bk = g.input("C", b, G, d_state), g.input("B", b, G, d_state)
    x = g.input("x", b, h, d)
    dt = g.input("Δ", b, h)
    S = g.input("S", b, h, d, d_state)
    g.keep(S)
    delta = g.map("pointwise", "Δ", dt, label="Δ ← softplus(dt + dt_bias)")
    g.output(mamba2_step(g, x, bk, cq, delta, S))
