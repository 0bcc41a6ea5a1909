"""Reference implementations of retention, GLA, DeltaNet, Gated DeltaNet and Mamba-2 (`costmodel/variants/
linear_rnn.py`), in two forms that compute the same function:

- the recurrence, one token at a time (`<name>-recurrent`, and each decoding step), written line by line as its op
  list so that the live-tensor tracer measures the modelled peak and FlopCounterMode the modelled products;
- the chunked form in plain PyTorch (`CHUNKED`): chunks of C tokens, quadratic inside a chunk, the state carried
  between chunks, with exactly the products the chunk kernels' op list counts (the tests check both against the
  recurrence in float64, and FlopCounterMode against the engine's `matmul` count of the chunked variant). It keeps
  in memory what the kernels keep on chip, so its memory is not the kernels'.

The chunked variants run their library's kernels where those run (flash-linear-attention's chunk_retention,
chunk_gla, chunk_delta_rule and chunk_gated_delta_rule, mamba_ssm's mamba_chunk_scan_combined: CUDA, the chunk 64
they are built for); everywhere else their recurrence runs in their place (`stands_in`), and the record says which.
Every function takes the pre-activations the op lists take (a gate's, β's, Δ's) and applies the activations
itself: logsigmoid(α)/16 (GLA), sigmoid(β), −A·softplus(a + dt_bias) (Gated DeltaNet), softplus(Δ + dt_bias)
(Mamba-2), Q and K normalised to unit length (the delta rule). The per-head constants (retention's γ, A, dt_bias,
D) are made once per head count, dtype and device (`constants`), before any traced call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from attn_cost.profilers.measure.references import (
    Implementation,
    decode_reference,
    l2normalize,
    library_function,
    reference,
    take,
)
from torch import Tensor

GATE_NORMALIZER = 16.0
"""GLA's gate: logsigmoid(α)/16 (fla's GatedLinearAttention, gate_logit_normalizer=16)."""


@functools.cache
def constants(heads: int, dtype: torch.dtype, device: str) -> dict[str, Tensor]:
    """Per-head constants, made once (before any traced call: the warm-up makes them): retention's decay
    γ_i = 1 − 2^(−5−i) (fla's chunk_retention), and for the decay of Gated DeltaNet and Mamba-2 A_i = 1 + i/2 (the
    decay rate: −A the log decay per unit of Δ), dt_bias and Mamba-2's skip D."""
    i = torch.arange(heads, dtype=torch.float64)
    a = 1 + i / 2
    made = {"γ": 1 - 2.0 ** (-5 - i), "A": a, "−A": -a, "dt_bias": -1 - i / 4, "D": 1 - i / (2 * heads)}
    return {k: v.to(device=device, dtype=dtype) for k, v in made.items()}


def _c(x: Tensor) -> dict[str, Tensor]:
    return constants(x.shape[1], x.dtype, x.device.type)


def _per_head(x: Tensor) -> tuple[int, ...]:
    """The shape that lays one value a head along axis 1 of x."""
    return (1, -1) + (1,) * (x.dim() - 2)


def _gla_gate(alpha: Tensor) -> Tensor:
    """logsigmoid(α)/16 as log(sigmoid(α))/16: one tensor (F.logsigmoid also makes a buffer on the CPU)."""
    return torch.sigmoid(alpha).log_().div_(GATE_NORMALIZER)


def _softplus_biased(x: Tensor, bias: Tensor) -> Tensor:
    """softplus(x + bias) per head as log(1 + exp(x + bias)): one tensor."""
    return torch.add(x, bias.view(_per_head(x))).exp_().log1p_()


def _decay(a: Tensor) -> Tensor:
    """Gated DeltaNet's log decay g = −A·softplus(a + dt_bias): one tensor."""
    c = _c(a)
    return _softplus_biased(a, c["dt_bias"]).mul_(c["−A"].view(_per_head(a)))


# -- the recurrences, token by token -----------------------------------------------------------------------------
# Each step takes its token's inputs as a list it empties (`take`) and drops each after its last use, as the op
# list frees them: the live-tensor tracer then measures the modelled peak of a decoding step.


def _read(q: Tensor, flat: Tensor, shape: tuple[int, ...]) -> Tensor:
    """y = sᵀq/√d for one token: q (b, h, d), the state as (b·h, d, d_v)."""
    d = q.shape[-1]
    return torch.bmm(q.reshape(-1, 1, d), flat).mul_(d**-0.5).view(shape)


def retention_step(token: list[Tensor], s: Tensor) -> Tensor:
    """One token [q, k, v] (b, h, d and d_v), state s (b, h, d, d_v): s ← γs + kvᵀ, y = sᵀq/√d."""
    q, k, v = take(token)
    b, h, d, dv = s.shape
    s.mul_(_c(q)["γ"].view(1, h, 1, 1))
    flat = s.view(b * h, d, dv)
    torch.baddbmm(flat, k.reshape(b * h, d, 1), v.reshape(b * h, 1, dv), out=flat)
    del k, v
    return _read(q, flat, (b, h, 1, dv))


def gla_step(token: list[Tensor], s: Tensor) -> Tensor:
    """One token [q, k, v, g] with its log gate g (b, h, d): s ← diag(exp g)s + kvᵀ, y = sᵀq/√d."""
    q, k, v, g = take(token)
    b, h, d, dv = s.shape
    a = g.exp()
    del g
    s.mul_(a.unsqueeze(-1))
    del a
    flat = s.view(b * h, d, dv)
    torch.baddbmm(flat, k.reshape(b * h, d, 1), v.reshape(b * h, 1, dv), out=flat)
    del k, v
    return _read(q, flat, (b, h, 1, dv))


def delta_step(token: list[Tensor], s: Tensor) -> Tensor:
    """One token [q, k, v, β] of the delta rule (β: (b, h)): s ← s + k·β(v − sᵀk)ᵀ, y = sᵀq/√d."""
    q, k, v, beta = take(token)
    b, h, d, dv = s.shape
    flat = s.view(b * h, d, dv)
    old = torch.bmm(k.reshape(b * h, 1, d), flat)
    u = v.reshape(b * h, 1, dv) - old
    del v, old
    u.mul_(beta.reshape(b * h, 1, 1))
    del beta
    torch.baddbmm(flat, k.reshape(b * h, d, 1), u, out=flat)
    del k, u
    return _read(q, flat, (b, h, 1, dv))


def mamba2_step(token: list[Tensor], s: Tensor) -> Tensor:
    """One token [x, B, C, Δ], x (b, h, d), B and C (b, G, d_state), Δ (b, h), state s (b, h, d, d_state):
    s ← e^(−ΔA)s + (Δx)Bᵀ, y = s·C + D·x."""
    x, bk, cq, delta = take(token)
    b, h, d, ds = s.shape
    groups = bk.shape[1]
    c = _c(x)
    a = torch.mul(delta, c["−A"]).exp_()
    s.mul_(a.view(b, h, 1, 1))
    del a
    xs = x * delta.unsqueeze(-1)
    del delta
    flat = s.view(b * groups, h // groups * d, ds)
    torch.baddbmm(flat, xs.view(b * groups, h // groups * d, 1), bk.reshape(b * groups, 1, ds), out=flat)
    del xs, bk
    y = torch.bmm(flat, cq.reshape(b * groups, ds, 1)).view(b, h, d)
    del cq
    return y.addcmul_(x, c["D"].view(1, h, 1))


def _loop(step: Callable[[list[Tensor], Tensor], Tensor], y: Tensor, s: Tensor, *per_token: Tensor) -> Tensor:
    """Run `step` over the tokens (axis 2 of each per-token input: views, no copies), writing row t of y."""
    for t in range(y.shape[2]):
        y[:, :, t] = step([x[:, :, t] for x in per_token], s).view(y[:, :, t].shape)
    return y


@reference("retention-recurrent")
def retention_recurrent(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    s = q.new_zeros(b, h, d, v.shape[-1])
    return _loop(retention_step, q.new_empty(b, h, n, v.shape[-1]), s, q, k, v)


@reference("gla-recurrent")
def gla_recurrent(inputs: list[Tensor]) -> Tensor:
    q, k, v, alpha = take(inputs)
    b, h, n, d = q.shape
    g = _gla_gate(alpha)
    del alpha
    s = q.new_zeros(b, h, d, v.shape[-1])
    return _loop(gla_step, q.new_empty(b, h, n, v.shape[-1]), s, q, k, v, g)


def _unit(q: Tensor, k: Tensor, beta: Tensor) -> list[Tensor]:
    """Q and K to unit length, β = sigmoid(β logits), in the op list's order (each input dropped by the caller)."""
    return [l2normalize(q, 1.0), l2normalize(k, 1.0), torch.sigmoid(beta)]


@reference("deltanet-recurrent")
def deltanet_recurrent(inputs: list[Tensor]) -> Tensor:
    q, k, v, beta = take(inputs)
    b, h, n, d = q.shape
    qn = l2normalize(q, 1.0)
    del q
    kn = l2normalize(k, 1.0)
    del k
    beta = torch.sigmoid(beta)
    s = qn.new_zeros(b, h, d, v.shape[-1])
    return _loop(delta_step, qn.new_empty(b, h, n, v.shape[-1]), s, qn, kn, v, beta)


@reference("gated-deltanet-recurrent")
def gated_deltanet_recurrent(inputs: list[Tensor]) -> Tensor:
    q, k, v, a, beta = take(inputs)
    b, h, n, d = q.shape
    qn = l2normalize(q, 1.0)
    del q
    kn = l2normalize(k, 1.0)
    del k
    beta = torch.sigmoid(beta)
    g = _decay(a)
    del a
    s = qn.new_zeros(b, h, d, v.shape[-1])
    y = qn.new_empty(b, h, n, v.shape[-1])
    for t in range(n):
        s.mul_(g[:, :, t].exp().view(b, h, 1, 1))
        y[:, :, t] = delta_step([qn[:, :, t], kn[:, :, t], v[:, :, t], beta[:, :, t]], s).view(b, h, -1)
    return y


@reference("mamba2-recurrent")
def mamba2_recurrent(inputs: list[Tensor]) -> Tensor:
    cq, bk, x, dt = take(inputs)
    b, h, n, d = x.shape
    delta = _softplus_biased(dt, _c(x)["dt_bias"])
    del dt
    s = x.new_zeros(b, h, d, bk.shape[-1])
    return _loop(mamba2_step, x.new_empty(b, h, n, d), s, x, bk, cq, delta)


# -- the chunked forms in PyTorch ----------------------------------------------------------------------------------


def _chunked(x: Tensor, chunk: int) -> Tensor:
    """x (b, h, N, ...) padded with zero rows to whole chunks and viewed (b, h, ⌈N/C⌉, C, ...)."""
    pad = -x.shape[2] % chunk
    if pad:
        x = torch.cat([x, x.new_zeros(*x.shape[:2], pad, *x.shape[3:])], dim=2)
    return x.view(*x.shape[:2], x.shape[2] // chunk, chunk, *x.shape[3:])


def _causal(chunk: int, device, strict: bool = False) -> Tensor:
    return torch.ones(chunk, chunk, dtype=torch.bool, device=device).tril_(-1 if strict else 0)


def _scan(local: Tensor, decay: Tensor) -> Tensor:
    """The states entering each chunk, S_0 = 0, S_{c+1} = decay_c ⊙ S_c + local_c: local (b, h, n, ...), decay
    broadcastable to one chunk's state (element-wise: no product)."""
    out = torch.zeros_like(local)
    for c in range(1, local.shape[2]):
        out[:, :, c] = decay[:, :, c - 1] * out[:, :, c - 1] + local[:, :, c - 1]
    return out


def _unchunk(y: Tensor, n: int) -> Tensor:
    return y.reshape(*y.shape[:2], -1, y.shape[-1])[:, :, :n]


def retention_chunked(inputs: list[Tensor], chunk: int) -> Tensor:
    """Retention by chunks: A = (Q_cK_cᵀ ⊙ γ^(i−j)) masked, Y_c = A·V_c + (Q_c ⊙ γ^(i+1))·S_c, the chunk's state
    (K_c ⊙ γ^(C−1−j))ᵀV_c, S_{c+1} = γ^C·S_c + it (RetNet's chunkwise form, Eq. 7)."""
    q, k, v = take(inputs)
    n, d = q.shape[2], q.shape[3]
    gamma = _c(q)["γ"].view(1, -1, 1, 1)
    pos = torch.arange(chunk, device=q.device, dtype=q.dtype)
    qc, kc, vc = (_chunked(x, chunk) for x in (q, k, v))
    rel = pos[:, None] - pos[None, :]
    decay = torch.where(rel >= 0, gamma.unsqueeze(-1) ** rel.clamp(min=0), 0)  # (1, h, 1, C, C)
    a = (qc @ kc.transpose(-1, -2)) * decay
    local = (kc * gamma.unsqueeze(-1) ** (chunk - 1 - pos)[:, None]).transpose(-1, -2) @ vc
    states = _scan(local, (gamma**chunk).view(1, -1, 1, 1, 1).expand(local.shape[0], -1, local.shape[2], 1, 1))
    y = a @ vc + (qc * gamma.unsqueeze(-1) ** (pos + 1)[:, None]) @ states
    return _unchunk(y, n).mul_(d**-0.5)


def gla_chunked(inputs: list[Tensor], chunk: int) -> Tensor:
    """GLA by chunks (its Sec. 4.1 form): G the gate's cumulative sum inside each chunk, A = (Q⊙e^G)(K⊙e^−G)ᵀ
    masked, Y_c = A·V_c + (Q⊙e^G)·S_c, the chunk's state (K⊙e^(G_C − G))ᵀV_c, S_{c+1} = diag(e^(G_C))S_c + it."""
    q, k, v, alpha = take(inputs)
    n, d = q.shape[2], q.shape[3]
    qc, kc, vc, gc = (_chunked(x, chunk) for x in (q, k, v, _gla_gate(alpha)))
    big = gc.cumsum(3)
    last = big[:, :, :, -1:]
    a = ((qc * big.exp()) @ (kc * (-big).exp()).transpose(-1, -2)).masked_fill_(~_causal(chunk, q.device), 0)
    local = (kc * (last - big).exp()).transpose(-1, -2) @ vc
    states = _scan(local, last.exp().transpose(-1, -2))
    y = a @ vc + (qc * big.exp()) @ states
    return _unchunk(y, n).mul_(d**-0.5)


def _wy(kn: Tensor, v: Tensor, beta: Tensor, chunk: int, gate: Tensor | None) -> tuple[Tensor, Tensor]:
    """W = T(β⊙K⊙e^G), U = T(β⊙V), T = (I + A)⁻¹, A = (β⊙K)Kᵀ ⊙ e^(G_i − G_j) strictly below the diagonal."""
    a = (kn * beta.unsqueeze(-1)) @ kn.transpose(-1, -2)
    if gate is not None:
        a = a * (gate.unsqueeze(-1) - gate.unsqueeze(-2)).exp()
    a = a.masked_fill(~_causal(chunk, kn.device, strict=True), 0)
    eye = torch.eye(chunk, dtype=kn.dtype, device=kn.device)
    t = torch.linalg.solve_triangular(eye + a, eye.expand_as(a), upper=False, unitriangular=True)
    scaled = kn * beta.unsqueeze(-1) * (gate.exp().unsqueeze(-1) if gate is not None else 1)
    return t @ scaled, t @ (v * beta.unsqueeze(-1))


def _delta_chunks(qn: Tensor, kn: Tensor, v: Tensor, beta: Tensor, chunk: int, g: Tensor | None) -> Tensor:
    """The delta rule by chunks with the WY representation (DeltaNet's parallel form, Gated DeltaNet's with its
    decay): per chunk v_new = U − W·S, Y = (Q⊙e^G)·S + (Q̂K̂ᵀ ⊙ e^(G_i − G_j), masked)·v_new, S ← e^(G_C)S +
    (K⊙e^(G_C − G))ᵀv_new."""
    n, d = qn.shape[2], qn.shape[3]
    qc, kc, vc, bc = (_chunked(x, chunk) for x in (qn, kn, v, beta))
    gate = _chunked(g, chunk).cumsum(3) if g is not None else None
    w, u = _wy(kc, vc, bc, chunk, gate)
    mask = _causal(chunk, qn.device)
    s = qn.new_zeros(*qn.shape[:2], d, v.shape[-1])
    ys = []
    for c in range(qc.shape[2]):
        q_, k_, w_, u_ = qc[:, :, c], kc[:, :, c], w[:, :, c], u[:, :, c]
        a = q_ @ k_.transpose(-1, -2)
        if gate is not None:
            gt = gate[:, :, c]
            a = a * (gt.unsqueeze(-1) - gt.unsqueeze(-2)).exp()
            q_ = q_ * gt.exp().unsqueeze(-1)
            k_ = k_ * (gt[..., -1:] - gt).exp().unsqueeze(-1)
        v_new = u_ - w_ @ s
        ys.append(q_ @ s + a.masked_fill(~mask, 0) @ v_new)
        if gate is not None:
            s = s * gate[:, :, c, -1].exp()[..., None, None]
        s = s + k_.transpose(-1, -2) @ v_new
    return _unchunk(torch.stack(ys, 2), n).mul_(d**-0.5)


def deltanet_chunked(inputs: list[Tensor], chunk: int) -> Tensor:
    q, k, v, beta = take(inputs)
    qn, kn, beta = _unit(q, k, beta)
    return _delta_chunks(qn, kn, v, beta, chunk, None)


def gated_deltanet_chunked(inputs: list[Tensor], chunk: int) -> Tensor:
    q, k, v, a, beta = take(inputs)
    qn, kn, beta = _unit(q, k, beta)
    return _delta_chunks(qn, kn, v, beta, chunk, _decay(a))


def mamba2_chunked(inputs: list[Tensor], chunk: int) -> Tensor:
    """Mamba-2's SSD by chunks (its Sec. 6, as mamba_ssm's kernels run it): Δ = softplus(dt + dt_bias), dA the
    cumulative sum of −A·Δ inside each chunk; CB = C_cB_cᵀ per group; each chunk's state Σⱼ e^(dA_C − dA_j)Δⱼ·Bⱼxⱼᵀ;
    the states entering the chunks by a decayed running sum; Y = e^(dA_i)·C_i·S_c + (CB ⊙ e^(dA_i − dA_j)Δⱼ,
    masked)·X + D·X."""
    cq, bk, x, dt = take(inputs)
    b, h, n, d = x.shape
    groups = bk.shape[1]
    c = _c(x)
    delta = _chunked(_softplus_biased(dt, c["dt_bias"]), chunk)  # (b, h, n, C)
    da = (delta * c["−A"].view(1, h, 1, 1)).cumsum(3)
    xc = _chunked(x, chunk).view(b, groups, h // groups, -1, chunk, d)
    bc, cc = (_chunked(t, chunk).unsqueeze(2) for t in (bk, cq))  # (b, G, 1, n, C, d_state)
    da_g, delta_g = (t.view(b, groups, h // groups, -1, chunk) for t in (da, delta))
    cb = cc @ bc.transpose(-1, -2)
    weight = (delta_g * (da_g[..., -1:] - da_g).exp()).unsqueeze(-1)
    local = bc.transpose(-1, -2) @ (xc * weight)  # (b, G, h/G, n, d_state, d)
    states = _scan(local.view(b, h, -1, *local.shape[-2:]), da[:, :, :, -1].exp()[..., None, None])
    states = states.view(local.shape)
    decay = (da_g.unsqueeze(-1) - da_g.unsqueeze(-2)).exp() * delta_g.unsqueeze(-2)
    intra = (cb * decay).masked_fill_(~_causal(chunk, x.device), 0) @ xc
    y = intra + (cc @ states) * da_g.exp().unsqueeze(-1)
    y = y.view(b, h, -1, d)[:, :, :n]
    return y + x * c["D"].view(1, h, 1, 1)


def chunk_op(inputs: list[Tensor], chunk: int, gate: str, delta: bool, makes_states: bool, scores_in: bool,
             skip: bool = False) -> Tensor:  # fmt: skip
    """One gated or delta-rule `linear_chunk` op of the engine (`Graph.linear_chunk`) as PyTorch code, on (b, h, N, ·)
    tensors in the op's input order [q, k, v, (W), *gates, (states), (scores)]: the state kernel (the states entering
    each chunk; with the delta rule v_new = U − W·S, chunk after chunk) and the output kernel, by the chunked forms'
    algebra above. Gates are the op's: a head gate is rebuilt from γ (`constants`); a token gate is its in-chunk
    cumulative sum G (Mamba-2: Δ then dA, Δ weighting the keys); a vector gate G per key dimension. Scores given are
    the C×C blocks another op made (GLA's already gated; Mamba-2's CB, gated here). What `calibrate` times for the
    op where the libraries' kernels do not run."""
    q, k, v, *rest = inputs
    n, dk = q.shape[2], q.shape[3]
    w = rest.pop(0) if delta else None
    scores = rest.pop() if scores_in else None
    given = rest.pop() if not makes_states else None
    pos = torch.arange(chunk, device=q.device, dtype=q.dtype)
    qc, kc, vc = (_chunked(x, chunk) for x in (q, k, v))
    if gate == "head":
        big = _c(q)["γ"].log().view(1, -1, 1, 1) * (pos + 1)  # (1, h, 1, C)
    elif gate in ("token", "vector"):
        big = _chunked(rest[-1], chunk)
    else:
        big = None
    mask = _causal(chunk, q.device)
    if scores is not None:
        a = _chunked(scores, chunk)
        if gate in ("token", "head") and big is not None:
            a = a * (big.unsqueeze(-1) - big.unsqueeze(-2)).exp()
        if gate == "token" and len(rest) > 1:  # Mamba-2: Δⱼ weights key j
            a = a * _chunked(rest[0], chunk).unsqueeze(-2)
    elif gate == "vector" and big is not None:
        a = (qc * big.exp()) @ (kc * (-big).exp()).transpose(-1, -2)
    else:
        a = qc @ kc.transpose(-1, -2)
        if big is not None:
            a = a * (big.unsqueeze(-1) - big.unsqueeze(-2)).exp()
    a = a.masked_fill(~mask, 0)
    if big is None:
        qg, kg, last = qc, kc, None
    else:
        lead = big if gate == "vector" else big.unsqueeze(-1)
        last = lead[..., -1:, :]
        qg, kg = qc * lead.exp(), kc * (last - lead).exp()
    if given is not None:
        y = a @ vc + qg @ given
    elif w is not None:
        wc = _chunked(w, chunk)
        s = q.new_zeros(*q.shape[:2], dk, v.shape[-1])
        ys = []
        for c in range(qc.shape[2]):
            v_new = vc[:, :, c] - wc[:, :, c] @ s
            ys.append(qg[:, :, c] @ s + a[:, :, c] @ v_new)
            if last is not None:
                s = s * last[:, :, c].exp().transpose(-1, -2)
            s = s + kg[:, :, c].transpose(-1, -2) @ v_new
        y = torch.stack(ys, 2)
    else:
        local = kg.transpose(-1, -2) @ vc
        decay = last.exp().transpose(-1, -2) if last is not None else torch.ones_like(local[..., :1, :1])
        y = a @ vc + qg @ _scan(local, decay.expand(*local.shape[:3], *decay.shape[-2:]))
    y = _unchunk(y, n)
    if skip:
        return y + v * _c(v)["D"].view(1, -1, 1, 1)
    return y if given is not None else y.mul_(dk**-0.5)


CHUNKED: dict[str, Callable[[list[Tensor], int], Tensor]] = {
    "retention": retention_chunked,
    "gla": gla_chunked,
    "deltanet": deltanet_chunked,
    "gated-deltanet": gated_deltanet_chunked,
    "mamba2": mamba2_chunked,
}
"""The chunked form of each variant in PyTorch: its products are the chunk kernels' (`costmodel` op list)."""


# -- the libraries' kernels, where they run ------------------------------------------------------------------------


LIBRARY_CHUNK = 64
"""The chunk length the libraries' kernels run here (fla's chunk functions' default; mamba's chunk_size given)."""
LIBRARY_DEVICE = "cuda"

LIBRARIES: dict[str, tuple[str, str, str]] = {
    "retention": ("fla-core", "fla.ops.retention", "chunk_retention"),
    "gla": ("fla-core", "fla.ops.gla", "chunk_gla"),
    "deltanet": ("fla-core", "fla.ops.delta_rule", "chunk_delta_rule"),
    "gated-deltanet": ("fla-core", "fla.ops.gated_delta_rule", "chunk_gated_delta_rule"),
    "mamba2": ("mamba-ssm", "mamba_ssm.ops.triton.ssd_combined", "mamba_chunk_scan_combined"),
}
"""The library function each chunked variant models: (distribution, module, function)."""


def library_kernel(variant: str) -> tuple[Callable | None, str]:
    """The variant's library function and its version, or None and why it cannot run here."""
    return library_function(*LIBRARIES[variant])


def implementation(variant: str, chunk: int, device: str) -> Implementation:
    """The library's kernels on CUDA where the library imports and the chunk is the one they run (64); the variant's
    recurrence in PyTorch everywhere else."""
    fn, version = library_kernel(variant)
    if device == LIBRARY_DEVICE and fn is not None and chunk == LIBRARY_CHUNK:
        return Implementation(LIBRARIES[variant][0].split("-")[0], f"{LIBRARIES[variant][2]}", version,
                              token_major=True)  # fmt: skip
    return Implementation("pytorch", f"pytorch recurrence ({variant}-recurrent's reference)", f"torch "
                          f"{torch.__version__}", native=False)  # fmt: skip


def _library_call(variant: str, inputs: list[Tensor], chunk: int) -> Tensor:
    """The library's function on [B, T, H, K] views of the (b, h, N, ·) inputs (drawn token-major: no copy), with the
    activations the op list applies first: the chunked variant's op list as the library runs it."""
    fn = library_kernel(variant)[0]
    assert fn is not None  # implementation() chose it
    tok = [x.transpose(1, 2) for x in take(inputs)]
    if variant == "retention":
        q, k, v = tok
        return fn(q, k, v, scale=q.shape[-1] ** -0.5)[0].transpose(1, 2)
    if variant == "gla":
        q, k, v, alpha = tok
        return fn(q, k, v, _gla_gate(alpha), scale=q.shape[-1] ** -0.5)[0].transpose(1, 2)
    if variant in ("deltanet", "gated-deltanet"):
        q, k, v, *gates, beta = tok
        extra = [_decay(gates[0].transpose(1, 2)).transpose(1, 2).contiguous()] if gates else []  # [B, T, H]
        beta = torch.sigmoid(beta)
        return fn(q, k, v, *extra, beta, scale=q.shape[-1] ** -0.5, use_qk_l2norm_in_kernel=True)[0].transpose(1, 2)
    cq, bk, x, dt = tok
    c = _c(x.transpose(1, 2))
    return fn(x, dt, c["−A"].float(), bk, cq, chunk, D=c["D"].float(), dt_bias=c["dt_bias"].float(),
              dt_softplus=True).transpose(1, 2)  # fmt: skip


RECURRENT: dict[str, Callable[[list[Tensor]], Tensor]] = {
    "retention": retention_recurrent,
    "gla": gla_recurrent,
    "deltanet": deltanet_recurrent,
    "gated-deltanet": gated_deltanet_recurrent,
    "mamba2": mamba2_recurrent,
}


def _register(variant: str) -> None:
    def _chunk(s, p) -> dict:
        return {"chunk": s.chunk}

    def core(inputs: list[Tensor], chunk: int) -> Tensor:
        if not implementation(variant, chunk, inputs[0].device.type).native:
            return RECURRENT[variant](inputs)
        return _library_call(variant, inputs, chunk)

    core.__doc__ = (f"{variant} by its library's chunk kernels ({LIBRARIES[variant][2]}) where they run; its "
                    "recurrence elsewhere (the record says which ran).")  # fmt: skip
    reference(variant, constants=_chunk, implementation=lambda s, device: implementation(variant, s.chunk, device),
              stands_in=f"{variant}-recurrent", chunked=CHUNKED[variant])(core)  # fmt: skip


for _name in CHUNKED:
    _register(_name)


# -- the decoding steps: one token against the state ---------------------------------------------------------------


@decode_reference("retention", "retention-recurrent")
def retention_decode(inputs: list[Tensor]) -> Tensor:
    """inputs = [q, k, v, s]; the token's q, k, v are handed on to the step."""
    s = inputs.pop()
    return retention_step(inputs, s)


@decode_reference("gla", "gla-recurrent")
def gla_decode(inputs: list[Tensor]) -> Tensor:
    s, alpha = inputs.pop(), inputs.pop()
    inputs.append(_gla_gate(alpha))
    del alpha
    return gla_step(inputs, s)


def _delta_token(inputs: list[Tensor]) -> list[Tensor]:
    """[q, k, v, β] of a decoding step from its inputs [q, k, v, (a,) β] (emptied): unit q and k, sigmoid(β)."""
    beta = inputs.pop()
    q, k, v = take(inputs[:3])
    del inputs[:3]
    token = [l2normalize(q, 1.0)]
    del q
    token.append(l2normalize(k, 1.0))
    del k
    token += [v, torch.sigmoid(beta)]
    del v, beta
    return token


@decode_reference("deltanet", "deltanet-recurrent")
def deltanet_decode(inputs: list[Tensor]) -> Tensor:
    s = inputs.pop()
    return delta_step(_delta_token(inputs), s)


@decode_reference("gated-deltanet", "gated-deltanet-recurrent")
def gated_deltanet_decode(inputs: list[Tensor]) -> Tensor:
    s = inputs.pop()
    a = inputs.pop(3)
    token = _delta_token(inputs)
    g = _decay(a)
    del a
    s.mul_(g.exp_().view(*s.shape[:2], 1, 1))
    del g
    return delta_step(token, s)


@decode_reference("mamba2", "mamba2-recurrent")
def mamba2_decode(inputs: list[Tensor]) -> Tensor:
    cq, bk, x, dt, s = take(inputs)
    token = [x, bk, cq, _softplus_biased(dt, _c(x)["dt_bias"])]
    del cq, bk, x, dt
    return mamba2_step(token, s)
