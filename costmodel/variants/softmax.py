"""Standard scaled dot-product attention, materialised and fused."""

from __future__ import annotations

from costmodel.graph import Graph
from costmodel.variants import qkv, variant

VASWANI = "Vaswani et al. 2017; PyTorch scaled_dot_product_attention"


@variant("softmax", "softmax(QKᵀ/√d)V with the N×N score matrix materialised", source=VASWANI, family="softmax")
def softmax(g: Graph) -> None:
    Q, K, V = qkv(g)
    S = g.matmul("S", Q, K.T)
    S = g.map("scale", "S", S, inplace=True, label="S ← S/√d")
    P = g.map("softmax", "P", S, label="P ← softmax(S)")
    g.output(g.matmul("Y", P, V))


@variant(
    "softmax-fused",
    "the same maths without the N×N matrix (FlashAttention / PyTorch SDPA memory)",
    source=VASWANI,
    family="softmax",
)
def softmax_fused(g: Graph) -> None:
    Q, K, V = qkv(g)
    g.output(g.fused_attention("Y", Q, K, V))
