"""Linformer (Wang et al., 2020): keys and values projected along the sequence from N to k rows.

K̃ = E·K and Ṽ = F·V with learned E, F of shape k×N, shared by the heads of a layer (the paper's
headwise sharing, which it reports loses nothing); then softmax(QK̃ᵀ/√d)Ṽ with an N×k score
matrix. The parameters depend on N: a Linformer is built for one sequence length.
"""

from __future__ import annotations

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import N, k
from attn_cost.costmodel.variants import variant

PAPER = "Wang et al., Linformer: Self-Attention with Linear Complexity, 2020 (Eq. 7, headwise sharing)"


@variant(
    "linformer",
    "softmax(Q(EK)ᵀ/√d)(FV): keys and values projected from N to k rows (learned E, F: k×N)",
    source=PAPER,
    family="low-rank",
    bias="out",
)
def linformer(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    """A key padding mask zeroes the padded tokens' keys and values before E and F mix them (every projected key
    holds some of each token, so no score can be masked afterwards); dropout acts on the N×k probabilities, as in
    the linformer package (`self.dropout(attn)`)."""
    E = g.param("E", k, N)
    F = g.param("F", k, N)
    K = g.zero_padded(K)
    Kp = g.matmul("K̃", E, K, label="K̃ ← E·K (k×d)")
    S = g.matmul("S", Q, Kp.T, label="S ← QK̃ᵀ (N×k)")
    S = g.map("scale", "S", S, inplace=True, label="S ← S/√d")
    P = g.map("softmax", "P", S, label="P ← softmax(S)")
    P = g.attention_dropout(P)
    V = g.zero_padded(V)
    Vp = g.matmul("Ṽ", F, V, label="Ṽ ← F·V (k×d)")
    return g.matmul("Y", P, Vp)
