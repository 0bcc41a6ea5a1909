"""Performer, FAVOR+ (Choromanski et al., ICLR 2021): softmax attention through m positive random features.

φ(x) = exp(ωᵢᵀx̂ − ‖x̂‖²/2) for the m rows ωᵢ of Ω (orthogonal Gaussian), x̂ = x/d^¼, so that
E[φ(q)ᵀφ(k)] = exp(qᵀk/√d); then linear attention φ(Q)(φ(K)ᵀV) / φ(Q)(φ(K)ᵀ1). The factor
1/√m of φ cancels between numerator and denominator and is left out, and so is the stabilising
maximum some implementations subtract (it cancels too). Ω is drawn, not learned: a constant buffer
like a causal mask, outside the parameters and the live set (it is read, so it counts in traffic).
"""

from __future__ import annotations

import sympy as sp
from attn_cost.costmodel.graph import Graph, Storage, Tensor
from attn_cost.costmodel.symbols import d, m
from attn_cost.costmodel.variants import variant

PAPER = "Choromanski et al., Rethinking Attention with Performers, ICLR 2021 (FAVOR+, Lemma 1)"


def constant(name: str, *shape: sp.Expr | int) -> Tensor:
    """A constant buffer that exists before the call (a mask, random features): read, never allocated."""
    return Tensor(name, tuple(sp.sympify(s) for s in shape), Storage(-1, sp.Integer(0), None, -1, name))


def features(g: Graph, X: Tensor, omega: Tensor, name: str) -> Tensor:
    """φ(X) = exp(X̂Ωᵀ − ‖X̂‖²/2), X̂ = X/d^¼ (the scale folded into Ω)."""
    P = g.matmul(f"φ({name})", X, omega.T, label=f"φ({name}) ← {name}Ωᵀ/d^¼ (N×m)")
    sq = g.binary("mul", f"{name}⊙{name}", X, X)
    n = g.reduce("sum", f"‖{name}‖²", sq, axis=-1)
    P = g.binary(
        "sub", f"φ({name})", P, n, inplace=True, gain="1/(2√d)", label=f"φ({name}) ← φ({name}) − ‖{name}‖²/2√d"
    )
    return g.map("exp", f"φ({name})", P, inplace=True)


@variant(
    "performer",
    "FAVOR+: φ(Q)(φ(K)ᵀV) / φ(Q)Σφ(K) with m positive orthogonal random features: O(N m d), no N×N matrix",
    source=PAPER,
    family="linear",
    bias="out",
)
def performer(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    omega = constant("Ω", m, d)
    fK = features(g, K, omega, "K")
    KV = g.matmul("φ(K)ᵀV", fK.T, V, label="φ(K)ᵀV (m×d)")
    z = g.reduce("sum", "Σφ(K)", fK, axis=-2, label="z ← Σⱼ φ(Kⱼ)")
    fQ = features(g, Q, omega, "Q")
    num = g.matmul("num", fQ, KV, label="num ← φ(Q)(φ(K)ᵀV)")
    den = g.matmul("den", fQ, z.T, label="den ← φ(Q)·z")
    return g.binary("div", "Y", num, den, inplace=True, label="Y ← num / den")
