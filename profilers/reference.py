"""PyTorch reference implementations of every variant, in the op order of the engine's descriptions.

Each function takes its inputs as a list and empties it (`take`): the variant owns its inputs and
drops each one after its last use, exactly as the engine's liveness walk assumes. Every line
allocates what the matching engine op allocates and nothing else (in-place steps where the engine
says "in place", `out=` where it writes into an existing buffer), so the live-tensor tracer measures
the modelled peak. What a measurement counts: the inputs until their last use, every intermediate,
and the outputs; never the parameters or constant buffers (a causal mask), which exist before the call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor


def take(inputs: list[Tensor]) -> list[Tensor]:
    """Move the tensors out of the caller's list, so that dropping them frees them."""
    out = list(inputs)
    inputs.clear()
    return out


# -- building blocks shared by several variants -------------------------------------------------


def l2normalize(x: Tensor, gain: float) -> Tensor:
    """gain · x / ‖x‖ row-wise; one row vector of scratch (the norms), one output."""
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    norm.reciprocal_().mul_(gain)
    return x * norm


def outer(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise tensor product a ⊠ b: (…, p), (…, q) -> (…, p·q)."""
    return (a.unsqueeze(-1) * b.unsqueeze(-2)).flatten(-2)


def elu1(x: Tensor) -> Tensor:
    return F.elu(x).add_(1)


# -- softmax ------------------------------------------------------------------------------------


def softmax(inputs: list[Tensor], mask: Tensor | None = None) -> Tensor:
    q, k, v = take(inputs)
    s = q @ k.transpose(-1, -2)
    del q, k
    s.mul_(1 / math.sqrt(v.shape[-1]))
    if mask is not None:
        s.masked_fill_(mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    del s
    return p @ v


def softmax_fused(inputs: list[Tensor], causal: bool = False) -> Tensor:
    q, k, v = take(inputs)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


# -- TaylorShift --------------------------------------------------------------------------------


def taylorshift_direct(inputs: list[Tensor], tau: float = 1.0) -> Tensor:
    q, k, v = take(inputs)
    n, d = q.shape[-2], q.shape[-1]
    q = l2normalize(q, tau)
    k = l2normalize(k, 1.0)
    s = q @ k.transpose(-1, -2)
    del q, k
    p = s * s  # x²/2 + x + 1 with one new N×N tensor: the original x is still needed
    p.mul_(0.5).add_(s).add_(1)
    del s
    rows = p.sum(-1, keepdim=True)
    rows.mul_(math.sqrt(d / n))
    p.div_(rows)
    del rows
    return p @ v


def taylorshift_efficient(inputs: list[Tensor], tau: float = 1.0) -> Tensor:
    """Algorithm 1 of the paper."""
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    alpha = d**0.25
    v1 = v.new_empty(b, h, n, d + 1)  # V ← [√(d/N)·1, V] / N
    v1[..., :1].fill_(math.sqrt(d / n) / n)
    torch.mul(v, 1 / n, out=v1[..., 1:])
    del v
    q = l2normalize(q, alpha * tau)
    k = l2normalize(k, alpha)
    kk = outer(k, k)
    a_mod = kk.transpose(-1, -2) @ v1
    del kk
    kv = k.transpose(-1, -2) @ v1
    del k
    col = v1.sum(-2, keepdim=True)
    del v1
    qq = outer(q, q)
    y = qq @ a_mod
    del qq, a_mod
    y.mul_(0.5)
    y3 = y.view(b * h, n, d + 1)  # y += α²·q(kᵀv), in place (out= keeps it visible to FlopCounterMode)
    torch.baddbmm(y3, q.view(b * h, n, d), kv.view(b * h, d, d + 1), alpha=alpha**2, out=y3)
    del y3
    del q, kv
    y.add_(col, alpha=alpha**4)
    del col
    return y[..., 1:] / y[..., :1]


# -- linear attention ---------------------------------------------------------------------------


def linear(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    fk = elu1(k)
    del k
    kv = fk.transpose(-1, -2) @ v
    del v
    z = fk.sum(-2, keepdim=True)
    del fk
    fq = elu1(q)
    del q
    num = fq @ kv
    del kv
    den = fq @ z.transpose(-1, -2)
    del fq, z
    return num.div_(den)


def linear_causal(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    fk = elu1(k)
    del k
    s = outer(fk, v)
    del v
    s.cumsum_(-2)
    z = fk.cumsum_(-2)
    del fk
    fq = elu1(q).unsqueeze(-2)
    del q
    num = fq @ s.view(b, h, n, d, d)
    del s
    den = fq @ z.unsqueeze(-1)
    del fq, z
    return num.div_(den).view(b, h, n, d)


def linear_step(token: list[Tensor], s: Tensor, z: Tensor) -> Tensor:
    """One token [q, k, v] of the recurrence: s += φ(k)vᵀ, z += φ(k), y = φ(q)ᵀs / φ(q)ᵀz."""
    q, k, v = take(token)
    fk = elu1(k)
    del k
    kv = outer(fk, v)
    del v
    s.add_(kv.view(s.shape))
    del kv
    z.add_(fk.view(z.shape))
    del fk
    fq = elu1(q).unsqueeze(-2)
    del q
    num = fq @ s
    den = fq @ z
    del fq
    return num.div_(den)


def linear_recurrent(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    s = q.new_zeros(b, h, d, d)
    z = q.new_zeros(b, h, d, 1)
    y = q.new_empty(b, h, n, d)
    for t in range(n):
        y[:, :, t] = linear_step([q[:, :, t], k[:, :, t], v[:, :, t]], s, z).squeeze(-2)
    return y


# -- Latte --------------------------------------------------------------------------------------


def latte(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    pk = torch.softmax(k, dim=-2)
    del k
    m = pk.transpose(-1, -2) @ v
    del pk, v
    pq = torch.softmax(q, dim=-1)
    del q
    return pq @ m


def latte_causal(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, latents = q.shape
    d = v.shape[-1]
    top = k.amax(dim=-2, keepdim=True)
    e = k - top
    del k, top
    e.exp_()
    vt = outer(e, v)
    del v
    vt.cumsum_(-2)
    alpha = e.cumsum_(-2)
    del e
    gamma = torch.softmax(q, dim=-1)
    del q
    gamma.div_(alpha)
    del alpha
    return (gamma.unsqueeze(-2) @ vt.view(b, h, n, latents, d)).view(b, h, n, d)


def latte_step(token: list[Tensor], m: Tensor, alpha: Tensor, vt: Tensor) -> Tensor:
    """One token [p(l|t), k, v] of the scan: move the sums to the new running maximum, add the
    token, read out."""
    p, k, v = take(token)
    top = torch.maximum(m, k)
    back = (m - top).exp_()
    add = (k - top).exp_()
    del k
    alpha.mul_(back).add_(add)
    vt.mul_(back.unsqueeze(-1))
    del back
    vt.add_(outer(add, v).view(vt.shape))
    del add, v
    m.copy_(top)
    del top
    gamma = p / alpha
    del p
    return gamma.unsqueeze(-2) @ vt


def latte_recurrent(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, latents = q.shape
    d = v.shape[-1]
    p = torch.softmax(q, dim=-1)
    del q
    m = p.new_full((b, h, latents), float("-inf"))
    alpha = p.new_zeros(b, h, latents)
    vt = p.new_zeros(b, h, latents, d)
    y = p.new_empty(b, h, n, d)
    for t in range(n):
        y[:, :, t] = latte_step([p[:, :, t], k[:, :, t], v[:, :, t]], m, alpha, vt).squeeze(-2)
    return y


# -- decoding steps -----------------------------------------------------------------------------


def _write_token(k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor) -> None:
    k_cache[:, :, -1] = k.squeeze(-2)
    v_cache[:, :, -1] = v.squeeze(-2)


def softmax_decode(inputs: list[Tensor]) -> Tensor:
    q, k, v, k_cache, v_cache = take(inputs)
    _write_token(k, v, k_cache, v_cache)
    del k, v
    s = q @ k_cache.transpose(-1, -2)
    del q
    s.mul_(1 / math.sqrt(v_cache.shape[-1]))
    p = torch.softmax(s, dim=-1)
    del s
    return p @ v_cache


def softmax_fused_decode(inputs: list[Tensor]) -> Tensor:
    q, k, v, k_cache, v_cache = take(inputs)
    _write_token(k, v, k_cache, v_cache)
    del k, v
    return F.scaled_dot_product_attention(q, k_cache, v_cache)


def linear_decode(inputs: list[Tensor]) -> Tensor:
    """inputs = [q, k, v, s, z]; the token's q, k, v are handed on to the step."""
    s, z = inputs[3:]
    del inputs[3:]
    return linear_step(inputs, s, z)


def latte_decode(inputs: list[Tensor]) -> Tensor:
    """inputs = [q, k, v, m, α, ṽ]; q is replaced by p(l|t) = softmax(q) before the step."""
    m, alpha, vt = inputs[3:]
    del inputs[3:]
    inputs[0] = torch.softmax(inputs[0], dim=-1)
    return latte_step(inputs, m, alpha, vt)


# -- the registry: which function implements which variant ---------------------------------------


@dataclass(frozen=True)
class Reference:
    """How to run one variant: its core (per-head q, k, v), its own layer, its decoding step."""

    core: Callable[..., Tensor] | None = None
    layer: str | None = None
    """Which projections a Hosseini layer keeps ('Q', 'K'), or 'super'."""
    decode: Callable[[list[Tensor]], Tensor] | None = None
    options: dict = field(default_factory=dict)
    """Extra keyword arguments of `core`: 'causal' asks for the causal mask or is_causal."""


REFERENCES: dict[str, Reference] = {
    "softmax": Reference(softmax, decode=softmax_decode),
    "softmax-causal": Reference(softmax, decode=softmax_decode, options={"causal": True}),
    "softmax-fused": Reference(softmax_fused, decode=softmax_fused_decode),
    "softmax-fused-causal": Reference(softmax_fused, decode=softmax_fused_decode, options={"causal": True}),
    "taylorshift-direct": Reference(taylorshift_direct),
    "taylorshift-efficient": Reference(taylorshift_efficient),
    "linear": Reference(linear),
    "linear-causal": Reference(linear_causal, decode=linear_decode),
    "linear-recurrent": Reference(linear_recurrent, decode=linear_decode),
    "latte": Reference(latte),
    "latte-causal": Reference(latte_causal, decode=latte_decode),
    "latte-recurrent": Reference(latte_recurrent, decode=latte_decode),
    "optimized-attention": Reference(layer="QK"),
    "efficient-attention": Reference(layer="Q"),
    "super-attention": Reference(layer="super"),
}
