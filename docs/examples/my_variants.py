"""Two attention variants written with attn-cost's DSL (see docs/variants.md).

attn-cost variants --variants docs/examples/my_variants.py
attn-cost formula cosine --variants docs/examples/my_variants.py --json
attn-cost crossover --variants docs/examples/my_variants.py --pair softmax:cosine --d 64
"""

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import N, b, d, h
from attn_cost.costmodel.variants import decode_step, variant

SWIN_V2 = "Liu et al., Swin Transformer V2, arXiv 2111.09883 (scaled cosine attention)"


@variant(
    "cosine",
    "scaled cosine attention: softmax(τ·cos(q, k))V, unit-norm Q and K, N×N matrix materialised",
    source=SWIN_V2,
    family="cosine",
)
def cosine(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    g.param("τ", h)  # one learned temperature per head
    Q = g.map("l2normalize", "Q", Q, gain="τ", label="Q ← τ·Q/‖Q‖")
    K = g.map("l2normalize", "K", K, label="K ← K/‖K‖")
    S = g.matmul("S", Q, K.T)
    P = g.map("softmax", "P", S, label="P ← softmax(S)")
    return g.matmul("Y", P, V)


@variant(
    "cosine-inplace",
    "scaled cosine attention that frees the scores before the value product (softmax in place)",
    source=SWIN_V2,
    family="cosine",
)
def cosine_inplace(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    g.param("τ", h)
    Q = g.map("l2normalize", "Q", Q, gain="τ", label="Q ← τ·Q/‖Q‖")
    K = g.map("l2normalize", "K", K, label="K ← K/‖K‖")
    S = g.matmul("S", Q, K.T)
    S = g.map("softmax", "S", S, inplace=True, label="S ← softmax(S), in place")
    return g.matmul("Y", S, V)


@decode_step("cosine", "cosine-inplace")
def cosine_decode(g: Graph) -> None:
    """Token N+1 against a cache of N+1 unit-norm keys (normalised once, when they were written)."""
    q = g.input("q", b, h, 1, d)
    Kc = g.input("K_cache", b, h, N + 1, d)
    Vc = g.input("V_cache", b, h, N + 1, d)
    g.keep(Kc, Vc)
    q = g.map("l2normalize", "q", q, gain="τ", label="q ← τ·q/‖q‖")
    s = g.matmul("s", q, Kc.T, label="s ← q·K_cacheᵀ")
    p = g.map("softmax", "p", s)
    g.output(g.matmul("y", p, Vc, label="y ← p·V_cache"))
