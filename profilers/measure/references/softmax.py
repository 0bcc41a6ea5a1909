"""Reference implementations of softmax attention (`costmodel/variants/softmax.py`): materialised and fused
(scaled_dot_product_attention), bidirectional and causal, and their decoding steps over a KV cache."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812
from attn_cost.profilers.measure.references import decode_reference, reference, take, write_token
from torch import Tensor


@reference("softmax-causal", options={"causal": True})
@reference("softmax")
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


@reference("softmax-fused-causal", options={"causal": True})
@reference("softmax-fused")
def softmax_fused(inputs: list[Tensor], causal: bool = False) -> Tensor:
    q, k, v = take(inputs)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


@decode_reference("softmax", "softmax-causal")
def softmax_decode(inputs: list[Tensor]) -> Tensor:
    q, k, v, k_cache, v_cache = take(inputs)
    write_token(k, v, k_cache, v_cache)
    del k, v
    s = q @ k_cache.transpose(-1, -2)
    del q
    s.mul_(1 / math.sqrt(v_cache.shape[-1]))
    p = torch.softmax(s, dim=-1)
    del s
    return p @ v_cache


@decode_reference("softmax-fused", "softmax-fused-causal")
def softmax_fused_decode(inputs: list[Tensor]) -> Tensor:
    q, k, v, k_cache, v_cache = take(inputs)
    write_token(k, v, k_cache, v_cache)
    del k, v
    return F.scaled_dot_product_attention(q, k_cache, v_cache)
