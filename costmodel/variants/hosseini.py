"""Optimized, Efficient and Super attention (Hosseini et al., "Cost-Effective Attention Mechanisms").

Each is a whole layer: the point of the paper is which projections are dropped. Per head,
d_k = d_v = d = d_m / h; a dropped projection is replaced by the head's slice of the input
columns. Biases on every linear layer (they reproduce the paper's parameter tables). Scores are
scaled by 1/√d_k. Super attention's alignment kernel W_A (ℓ×ℓ, ℓ = N: a fixed context length)
multiplies the input from the left once, shared by all heads (the same FLOPs as one product per head).
"""

from __future__ import annotations

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.scopes import projected
from attn_cost.costmodel.symbols import N
from attn_cost.costmodel.variants import layer_variant
from attn_cost.costmodel.variants.softmax import softmax_core

PAPER = "Hosseini et al., Cost-Effective Attention Mechanisms (Sec. 3; Tables of parameters; Eq. 24)"


@layer_variant(
    "optimized-attention",
    "Optimized attention: no W_V (values are the head's slice of X): 3 of the 4 projections, −25% parameters",
    source=PAPER,
    family="hosseini",
)
def optimized(g: Graph, x: Tensor) -> Tensor:
    return projected(g, softmax_core, x, project=("Q", "K"))


@layer_variant(
    "efficient-attention",
    "Efficient attention: no W_V, no W_K (keys and values are slices of X): −50% parameters",
    source=PAPER,
    family="hosseini",
)
def efficient(g: Graph, x: Tensor) -> Tensor:
    return projected(g, softmax_core, x, project=("Q",))


@layer_variant(
    "super-attention",
    "Super attention: Efficient plus a learned ℓ×ℓ alignment kernel W_A applied to the values (ℓ = N fixed)",
    source=PAPER,
    family="hosseini",
)
def super_attention(g: Graph, x: Tensor) -> Tensor:
    W_A = g.param("W_A", N, N)
    b_A = g.param("b_A", N, 1)
    v = g.matmul("V'", W_A, x, label="V' ← W_A·X")
    v = g.binary("add", "V'", v, b_A, inplace=True, label="V' ← V' + b_A")
    return projected(g, softmax_core, x, project=("Q",), values=v)
