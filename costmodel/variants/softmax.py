"""Standard scaled dot-product attention: materialised, fused, and their causal forms."""

from __future__ import annotations

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import N, b, d, h
from attn_cost.costmodel.variants import decode_step, variant

VASWANI = "Vaswani et al. 2017; PyTorch scaled_dot_product_attention"


def softmax_core(g: Graph, Q: Tensor, K: Tensor, V: Tensor, causal: bool = False) -> Tensor:
    """Materialised attention; a key padding mask fills the padded keys' scores with −∞ before the softmax, dropout
    acts on the probabilities before P·V (flash-attention's reference attention, in its order)."""
    S = g.matmul("S", Q, K.T)
    S = g.map("scale", "S", S, inplace=True, label="S ← S/√d")
    S = g.pad_scores(S)
    if causal:
        S = g.map("mask", "S", S, inplace=True, label="S ← −∞ above the diagonal")
    P = g.map("softmax", "P", S, label="P ← softmax(S)")
    P = g.attention_dropout(P)
    return g.matmul("Y", P, V)


@variant(
    "softmax",
    "softmax(QKᵀ/√d)V with the N×N score matrix materialised",
    source=VASWANI,
    family="softmax",
    causal_form="softmax-causal",
)
def softmax(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    return softmax_core(g, Q, K, V)


@variant(
    "softmax-causal",
    "softmax attention with a causal mask (same counts: the fill is in place)",
    source=VASWANI,
    family="softmax",
    causal=True,
)
def softmax_causal(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    return softmax_core(g, Q, K, V, causal=True)


@variant(
    "softmax-fused",
    "the same maths without the N×N matrix (FlashAttention / PyTorch SDPA memory)",
    source=VASWANI,
    family="softmax",
    causal_form="softmax-fused-causal",
)
def softmax_fused(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    return g.sdpa("Y", Q, K, V)


@variant("softmax-fused-causal", "fused attention with is_causal=True", source=VASWANI, family="softmax", causal=True)
def softmax_fused_causal(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    return g.sdpa("Y", Q, K, V, causal=True)


def _token_and_cache(g: Graph) -> tuple[Tensor, Tensor, Tensor]:
    """The new token's q, and the K/V caches with its k, v written into row N."""
    q = g.input("q", b, h, 1, d)
    k = g.input("k", b, h, 1, d)
    v = g.input("v", b, h, 1, d)
    Kc = g.input("K_cache", b, h, N + 1, d)
    Vc = g.input("V_cache", b, h, N + 1, d)
    g.keep(Kc, Vc)  # the cache outlives the step
    g.store(Kc.select(2, "K_cache[N]"), k, label="K_cache[N] ← k")
    g.store(Vc.select(2, "V_cache[N]"), v, label="V_cache[N] ← v")
    return q, Kc, Vc


@decode_step("softmax", "softmax-causal")
def softmax_decode(g: Graph) -> None:
    q, Kc, Vc = _token_and_cache(g)
    s = g.matmul("s", q, Kc.T, label="s ← q·K_cacheᵀ")
    s = g.map("scale", "s", s, inplace=True, label="s ← s/√d")
    p = g.map("softmax", "p", s)
    g.output(g.matmul("y", p, Vc, label="y ← p·V_cache"))


@decode_step("softmax-fused", "softmax-fused-causal")
def softmax_fused_decode(g: Graph) -> None:
    q, Kc, Vc = _token_and_cache(g)
    g.output(g.fused_attention("y", q, Kc, Vc, label="y ← SDPA(q, K_cache, V_cache)"))
