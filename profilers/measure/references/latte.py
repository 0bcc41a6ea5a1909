"""Reference implementations of Latte (`costmodel/variants/latte.py`): bidirectional, causal vectorised (O(NLd)
memory), causal sequential with a running maximum, and the decoding step."""

from __future__ import annotations

import torch
from attn_cost.profilers.measure.references import decode_reference, outer, reference, take
from torch import Tensor


@reference("latte")
def latte(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    pk = torch.softmax(k, dim=-2)
    del k
    m = pk.transpose(-1, -2) @ v
    del pk, v
    pq = torch.softmax(q, dim=-1)
    del q
    return pq @ m


@reference("latte-causal")
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


@reference("latte-recurrent")
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


@decode_reference("latte-causal", "latte-recurrent")
def latte_decode(inputs: list[Tensor]) -> Tensor:
    """inputs = [q, k, v, m, α, ṽ]; q is replaced by p(l|t) = softmax(q) before the step."""
    m, alpha, vt = inputs[3:]
    del inputs[3:]
    inputs[0] = torch.softmax(inputs[0], dim=-1)
    return latte_step(inputs, m, alpha, vt)
