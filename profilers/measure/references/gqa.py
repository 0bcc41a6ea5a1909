"""Reference implementations of grouped-query attention (`costmodel/variants/gqa.py`): fused SDPA over the shared
key/value heads, bidirectional and causal, and the decoding step."""

from __future__ import annotations

import torch.nn.functional as F  # noqa: N812
from attn_cost.profilers.measure.references import decode_reference, reference, take, write_token
from torch import Tensor


@reference("gqa")
def gqa(inputs: list[Tensor]) -> Tensor:
    """The query heads of a group stacked along the sequence (a view): one SDPA per key/value head."""
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    kv = k.shape[1]
    y = F.scaled_dot_product_attention(q.view(b, kv, (h // kv) * n, d), k, v)
    return y.view(b, h, n, d)


@reference("gqa-causal")
def gqa_causal(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


@decode_reference("gqa", "gqa-causal")
def gqa_decode(inputs: list[Tensor]) -> Tensor:
    q, k, v, k_cache, v_cache = take(inputs)
    write_token(k, v, k_cache, v_cache)
    del k, v
    b, h, _, d = q.shape
    kv = k_cache.shape[1]
    return F.scaled_dot_product_attention(q.view(b, kv, h // kv, d), k_cache, v_cache).view(b, h, 1, d)
