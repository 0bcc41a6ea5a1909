"""TaylorShift (Nauen, Palacio, Dengel; arXiv 2403.02920): direct and efficient forms.

Both include the normalisation of Sec. 3.3 / Algorithm 1 (unit-norm Q and K with temperature τ,
V scaled by 1/N, output scaled by √(N/d)), so their outputs are interchangeable.
"""

from __future__ import annotations

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import h
from attn_cost.costmodel.variants import variant

PAPER = "Nauen et al., TaylorShift, arXiv 2403.02920v1 (Eqs. 1, 3; Algorithm 1)"


@variant(
    "taylorshift-direct",
    "TaylorShift, direct O(N²d) form: T-SM(QKᵀ)V with the N×N matrix materialised",
    source=PAPER,
    family="taylorshift",
)
def direct(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    g.param("τ", h)
    Q = g.map("l2normalize", "Q", Q, gain="τ", label="Q ← τ·Q/‖Q‖")
    K = g.map("l2normalize", "K", K, label="K ← K/‖K‖")
    S = g.matmul("S", Q, K.T)
    P = g.map("poly2", "P", S, label="P ← S²/2 + S + 1")
    P = g.map("normalize_rows", "P", P, inplace=True, gain="√(d/N)", label="P ← P / (√(d/N)·rowsum P)")
    return g.matmul("Y", P, V)


@variant(
    "taylorshift-efficient",
    "TaylorShift, efficient O(Nd³) form via the row-wise tensor product (Algorithm 1)",
    source=PAPER,
    family="taylorshift",
)
def efficient(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    g.param("τ", h)
    V = g.augment("V", V, gain="1/N", label="V ← [√(d/N)·1, V]/N")
    Q = g.map("l2normalize", "Q", Q, gain="α·τ", label="Q ← α·τ·Q/‖Q‖")
    K = g.map("l2normalize", "K", K, gain="α", label="K ← α·K/‖K‖")
    KK = g.outer("K⊠K", K, K)
    A = g.matmul("A_mod", KK.T, V, label="A_mod ← (K⊠K)ᵀV")
    KV = g.matmul("KᵀV", K.T, V)
    s = g.reduce("sum", "ΣV", V, axis=-2, label="ΣV ← Σᵢ Vᵢ")
    QQ = g.outer("Q⊠Q", Q, Q)
    Y = g.matmul("Ŷ", QQ, A, label="Ŷ ← (Q⊠Q)A_mod")
    Y = g.map("scale", "Ŷ", Y, inplace=True, label="Ŷ ← Ŷ/2")
    Y = g.matmul("Ŷ", Q, KV, into=Y, gain="α²", label="Ŷ ← Ŷ + α²·Q(KᵀV)")
    Y = g.binary("add", "Ŷ", Y, s, inplace=True, gain="α⁴", label="Ŷ ← Ŷ + α⁴·ΣV")
    return g.binary("div", "Y", Y.cols(1), Y.cols(0, 1), label="Y ← Ŷ[:, 1:] / Ŷ[:, :1]")
