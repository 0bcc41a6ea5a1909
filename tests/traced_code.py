"""attn-cost's own reference cores written as (q, k, v) -> y functions, for `attn-cost trace`.

Each `ref_*` function hands its inputs to the reference implementation (profilers/measure/references/) in a
list the reference empties, so the exported graph and a live-tensor measurement of `BOXES[name]` run
the same code. The causal softmax makes its mask inside the call (the profiler's case makes it outside).
"""

import math

import torch
from attn_cost.profilers.measure.references import latte, linear, softmax, take, taylorshift


def softmax_causal_box(box: list) -> torch.Tensor:
    """softmax.softmax with its mask made inside the call and dropped as soon as it is applied (softmax.softmax
    takes the mask as an argument and would hold it to the end)."""
    q, k, v = take(box)
    n = q.shape[-2]
    s = q @ k.transpose(-1, -2)
    del q, k
    s.mul_(1 / math.sqrt(v.shape[-1]))
    s.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=s.device).triu_(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    del s
    return p @ v


BOXES = {
    "softmax": softmax.softmax,
    "softmax-causal": softmax_causal_box,
    "softmax-fused": softmax.softmax_fused,
    "softmax-fused-causal": lambda box: softmax.softmax_fused(box, causal=True),
    "taylorshift-direct": taylorshift.taylorshift_direct,
    "taylorshift-efficient": taylorshift.taylorshift_efficient,
    "linear": linear.linear,
    "linear-causal": linear.linear_causal,
    "latte": latte.latte,
    "latte-causal": latte.latte_causal,
}
"""Every core of the catalogue without a Python loop over N, in the reference's list protocol."""


def ref_softmax(q, k, v):
    return BOXES["softmax"]([q, k, v])


def ref_softmax_causal(q, k, v):
    return BOXES["softmax-causal"]([q, k, v])


def ref_softmax_fused(q, k, v):
    return BOXES["softmax-fused"]([q, k, v])


def ref_softmax_fused_causal(q, k, v):
    return BOXES["softmax-fused-causal"]([q, k, v])


def ref_taylorshift_direct(q, k, v):
    return BOXES["taylorshift-direct"]([q, k, v])


def ref_taylorshift_efficient(q, k, v):
    return BOXES["taylorshift-efficient"]([q, k, v])


def ref_linear(q, k, v):
    return BOXES["linear"]([q, k, v])


def ref_linear_causal(q, k, v):
    return BOXES["linear-causal"]([q, k, v])


def ref_latte(q, k, v):
    return BOXES["latte"]([q, k, v])


def ref_latte_causal(q, k, v):
    return BOXES["latte-causal"]([q, k, v])


def ref_linear_recurrent(q, k, v):
    """A Python loop over the tokens: cannot be traced with a symbolic N."""
    return linear.linear_recurrent([q, k, v])
