"""Reference implementations of TaylorShift (`costmodel/variants/taylorshift.py`): direct O(N²d) and efficient
O(Nd³), Algorithm 1 of the paper, normalisation included."""

from __future__ import annotations

import math

import torch
from attn_cost.profilers.measure.references import l2normalize, outer, reference, take
from torch import Tensor


@reference("taylorshift-direct")
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


@reference("taylorshift-efficient")
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
