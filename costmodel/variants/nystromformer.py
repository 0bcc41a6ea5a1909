"""Nyströmformer (Xiong et al., AAAI 2021): softmax attention through c landmarks.

Landmarks Q̃, K̃ are means of c consecutive segments of the queries and keys (segments of
⌊(i+1)N/c⌋ − ⌊iN/c⌋ tokens, so any N works: a cumulative sum, c+1 boundary rows, differences);
then F̃ = softmax(QK̃ᵀ/√d) (N×c), Ã = softmax(Q̃K̃ᵀ/√d) (c×c), B̃ = softmax(Q̃Kᵀ/√d) (c×N) and
Y = (F̃·Ã⁺)·(B̃V), with Ã⁺ from the authors' 6 iterations Z ← ¼Z(13I − ÃZ(15I − ÃZ(7I − ÃZ)))
started at Z = Ãᵀ / max column sum (per head). Products in the authors' order; the optional
depthwise convolution on V of their code is left out.
"""

from __future__ import annotations

from attn_cost.costmodel.errors import ModelError
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import N, b, c, d, h
from attn_cost.costmodel.variants import variant
from attn_cost.costmodel.variants.performer import constant

PAPER = "Xiong et al., Nyströmformer, AAAI 2021 (Eqs. 13-16, Alg. 1; the authors' code for the order)"
PINV_ITERATIONS = 6


def landmarks(g: Graph, X: Tensor, name: str) -> Tensor:
    """Segment means of X: cumulative sum with a zero row in front, its c+1 segment boundaries, differences."""
    C = g.zeros(f"cumsum({X.name})", b, h, N + 1, d, label="C ← 0 ((N+1)×d)")
    g.store(Tensor("C[1:]", X.shape, C.storage), X, label=f"C[1:] ← {X.name}")
    C = g.map("cumsum", C.name, C, inplace=True, label="C ← cumsum(C)")
    B = g.copy(
        f"bounds({X.name})",
        Tensor("C[boundaries]", (b, h, c + 1, d), C.storage),
        label="B ← C at the c+1 segment boundaries",
    )
    ends = Tensor("B[1:]", (b, h, c, d), B.storage)
    starts = Tensor("B[:-1]", (b, h, c, d), B.storage)
    Xl = g.binary("sub", name, ends, starts, label=f"{name} ← B[1:] − B[:-1]")
    return g.binary(
        "div", name, Xl, constant("lengths", c, 1), inplace=True, label=f"{name} ← {name} / segment lengths"
    )


def kernel(g: Graph, name: str, a: Tensor, bt: Tensor) -> Tensor:
    S = g.matmul(name, a, bt, label=f"{name} ← {a.name}·{bt.name}")
    S = g.map("scale", name, S, inplace=True, label=f"{name} ← {name}/√d")
    return g.map("softmax", name, S, label=f"{name} ← softmax({name})")


def pinv(g: Graph, A: Tensor) -> Tensor:
    """The authors' iterative Moore-Penrose inverse of the c×c kernel."""
    col = g.reduce("sum", "colsum(Ã)", A, axis=-2, label="colsum(Ã)")
    top = g.reduce("max", "max colsum", col, axis=-1, label="max colsum")
    Z = g.binary("div", "Z", A.T, top, label="Z ← Ãᵀ / max colsum")
    eye = {n: constant(f"{n}I", c, c) for n in (7, 15, 13)}
    with g.loop(PINV_ITERATIONS, "pinv iterations", carried=(Z,)):
        AZ = g.matmul("ÃZ", A, Z)
        T = g.binary("sub", "T", eye[7], AZ, label="T ← 7I − ÃZ")
        T = g.matmul("T", AZ, T, label="T ← ÃZ·T")
        T = g.binary("sub", "T", T, eye[15], inplace=True, label="T ← 15I − T")
        T = g.matmul("T", AZ, T, label="T ← ÃZ·T")
        T = g.binary("sub", "T", T, eye[13], inplace=True, label="T ← 13I − T")
        Z = g.matmul("Z", Z, T, label="Z ← Z·T")
        Z = g.map("scale", "Z", Z, inplace=True, label="Z ← Z/4")
    return Z


@variant(
    "nystromformer",
    "Nyström approximation of softmax attention with c landmarks (segment means) and an iterative pseudo-inverse",
    source=PAPER,
    family="low-rank",
    bias="out",
)
def nystromformer(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    if K.shape[-2] != N:
        raise ModelError(f"{g.name}: one set of segments serves queries and keys; they need the same length N")
    Ql = landmarks(g, Q, "Q̃")
    Kl = landmarks(g, K, "K̃")
    Bk = kernel(g, "B̃", Ql, K.T)
    BV = g.matmul("B̃V", Bk, V)
    Ak = kernel(g, "Ã", Ql, Kl.T)
    Fk = kernel(g, "F̃", Q, Kl.T)
    Z = pinv(g, Ak)
    W = g.matmul("F̃Ã⁺", Fk, Z)
    return g.matmul("Y", W, BV)
