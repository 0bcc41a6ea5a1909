"""Sliding-window (local) attention: query i attends the w keys i−w+1 … i (Mistral 7B; Longformer's
local band is the bidirectional counterpart).

Edges: keys before the first token are zero padding, masked to −∞; every query is charged its
full window, so the two products cost 4·N·w·d, exact when masked padding counts (for N ≥ w the
triangle of w(w−1)/2 padded slots is the over-count). K and V are padded once ((N+w−1)·d each).
Two forms: `sliding-window` materialises the N×w score band (and copies the K and V windows, as
torch.matmul does for an unfolded view); `sliding-window-fused` walks the queries with only one
row of w scores alive (the memory of a fused local kernel).
"""

from __future__ import annotations

from attn_cost.costmodel.errors import ModelError
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import N, b, d, h, w
from attn_cost.costmodel.variants import variant

PAPER = "Jiang et al., Mistral 7B, 2023 (sliding-window attention); Beltagy et al., Longformer, 2020"


def padded(g: Graph, X: Tensor) -> Tensor:
    """X with w−1 rows of zeros in front: row i + w − 1 of the result is token i."""
    if X.shape[-2] != N:
        raise ModelError(f"{g.name}: the window slides over the query positions; keys and values need N rows")
    Xp = g.zeros(f"{X.name}_pad", b, h, N + w - 1, d, label=f"{X.name}_pad ← 0 (w−1 rows of padding)")
    g.store(Tensor(f"{X.name}_pad[w−1:]", X.shape, Xp.storage), X, label=f"{X.name}_pad[w−1:] ← {X.name}")
    return Xp


@variant(
    "sliding-window",
    "causal local attention over the last w keys, N×w score band materialised",
    source=PAPER,
    family="softmax",
    causal=True,
)
def sliding_window(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    Kp = padded(g, K)
    Kw = g.copy("K_win", Tensor("unfold(K_pad)", (b, h, N, d, w), Kp.storage), label="K_win ← windows of K_pad")
    S = g.matmul("S", Q.view(b, h, N, 1, d), Kw, label="Sᵢ ← qᵢ·K_winᵢ (N×w)")
    S = g.map("scale", "S", S, inplace=True, label="S ← S/√d")
    S = g.map("mask", "S", S, inplace=True, label="S ← −∞ on the padding")
    P = g.map("softmax", "P", S, label="P ← softmax(S) over the window")
    Vp = padded(g, V)
    Vw = g.copy("V_win", Tensor("unfold(V_pad)", (b, h, N, w, d), Vp.storage), label="V_win ← windows of V_pad")
    return g.matmul("Y", P, Vw, label="Yᵢ ← Pᵢ·V_winᵢ").view(b, h, N, d)


@variant(
    "sliding-window-fused",
    "causal local attention over the last w keys, one query at a time: no N×w band (fused-kernel memory)",
    source=PAPER,
    family="softmax",
    causal=True,
)
def sliding_window_fused(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    Kp = padded(g, K)
    Vp = padded(g, V)
    Y = g.zeros("Y", b, h, N, d, label="Y ← empty output")
    with g.loop(N, "queries"):
        q = Q.select(2, "qᵢ").view(b, h, 1, d)
        s = g.matmul("s", q, Tensor("K_pad[i:i+w]", (b, h, w, d), Kp.storage).T, label="s ← qᵢ·K_pad[i:i+w]ᵀ")
        s = g.map("scale", "s", s, inplace=True, label="s ← s/√d")
        s = g.map("mask", "s", s, inplace=True, label="s ← −∞ on the padding")
        p = g.map("softmax", "p", s)
        y = g.matmul("y", p, Tensor("V_pad[i:i+w]", (b, h, w, d), Vp.storage), label="y ← p·V_pad[i:i+w]")
        g.store(Y.select(2, "Yᵢ"), y, label="Yᵢ ← y")
    return Y
