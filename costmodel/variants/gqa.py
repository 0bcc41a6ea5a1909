"""Grouped-query attention (Ainslie et al., GQA, EMNLP 2023; multi-query: Shazeer 2019).

h query heads share h_kv key/value heads (h_kv divides h; h_kv = 1 is multi-query attention).
The kernel is fused SDPA; the query heads of one group are stacked along the sequence axis, a
view, so each key/value head is read once for its h/h_kv query heads and never copied. The causal
form cannot stack (the mask would cross the stacked rows): it runs SDPA with enable_gqa, which
PyTorch's kernels also serve without repeating K and V. What GQA
saves is the key/value side: the K/V projections (layer scope) and the KV cache of decoding,
2·N·h_kv·d elements instead of 2·N·h·d.
"""

from __future__ import annotations

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import N, b, d, h, h_kv
from attn_cost.costmodel.variants import decode_step, variant

PAPER = "Ainslie et al., GQA, EMNLP 2023; Shazeer, Fast Transformer Decoding (multi-query), 2019"


@variant(
    "gqa",
    "grouped-query attention: h query heads share h_kv key/value heads (fused SDPA); --kv-heads 1 is multi-query",
    source=PAPER,
    family="softmax",
    kv_heads=h_kv,
    causal_form="gqa-causal",
    bias="none",
)
def gqa(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    grouped = Q.view(b, h_kv, (h / h_kv) * N, d, name="Q_g")
    Y = g.sdpa("Y", grouped, K, V, label="Y ← SDPA(Q grouped by key/value head, K, V)")
    return Y.view(b, h, N, d)


@variant(
    "gqa-causal",
    "grouped-query attention with a causal mask (SDPA is_causal with enable_gqa: no repeated K/V)",
    source=PAPER,
    family="softmax",
    kv_heads=h_kv,
    causal=True,
    bias="none",
)
def gqa_causal(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    return g.sdpa("Y", Q, K, V, causal=True, label="Y ← SDPA(Q, K, V, is_causal, enable_gqa)")


@decode_step("gqa", "gqa-causal")
def gqa_decode(g: Graph) -> None:
    """Token N+1: its h query heads attend over a cache of h_kv key/value heads."""
    q = g.input("q", b, h, 1, d)
    k = g.input("k", b, h_kv, 1, d)
    v = g.input("v", b, h_kv, 1, d)
    Kc = g.input("K_cache", b, h_kv, N + 1, d)
    Vc = g.input("V_cache", b, h_kv, N + 1, d)
    g.keep(Kc, Vc)  # the cache outlives the step
    g.store(Kc.select(2, "K_cache[N]"), k, label="K_cache[N] ← k")
    g.store(Vc.select(2, "V_cache[N]"), v, label="V_cache[N] ← v")
    grouped = q.view(b, h_kv, h / h_kv, d, name="q_g")
    y = g.fused_attention("y", grouped, Kc, Vc, label="y ← SDPA(q grouped, K_cache, V_cache)")
    g.output(y.view(b, h, 1, d))
