"""Latte: latent attention for linear-time transformers (Dolga, Cobzarenco, Barber; arXiv 2402.17512v2).

Inputs per head are the latent logits Q = XW_q and K = XW_k (N×L each, L latent states *per head*:
the paper's code splits its L over the H heads, so its L is our h·L) and values V (N×d).
Bidirectional: softmax_L(Q)·softmax_N(K)ᵀ·V. Causal: normalise over s <= t with cumulative sums,
either materialised (O(N·L·d) memory) or one token at a time with a running maximum (the paper's
scan, Listing 1). The vectorised causal form shifts K by its maximum over the whole sequence before
exp (the ratio ṽ/α does not change); the sequential form keeps a running maximum, as the paper does
(updated token by token, where the paper's code precomputes it with cummax).
"""

from __future__ import annotations

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import L, N, b, d, h
from attn_cost.costmodel.variants import decode_step, variant

PAPER = "Dolga et al., Latte, arXiv 2402.17512v2 (Eqs. 5-9, 14-16; Listing 1)"


@variant(
    "latte",
    "Latte, bidirectional: softmax_L(Q)·softmax_N(K)ᵀ·V through L latents per head, O(NLd) time, O(NL + Ld) memory",
    source=PAPER,
    family="latte",
    qk_width=L,
    causal_form="latte-causal",
)
def latte(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    Pk = g.map("softmax", "p(s|l)", K, axis=-2, label="p(s|l) ← softmax over N of K")
    M = g.matmul("M", Pk.T, V, label="M ← p(s|l)ᵀV")
    Pq = g.map("softmax", "p(l|t)", Q, label="p(l|t) ← softmax over L of Q")
    return g.matmul("Y", Pq, M)


@variant(
    "latte-causal",
    "Latte, causal and vectorised: cumulative sums over time materialised, O(NLd) memory",
    source=PAPER,
    family="latte",
    qk_width=L,
    causal=True,
)
def latte_causal(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    m = g.reduce("max", "max K", K, axis=-2, label="m ← maxₜ K")
    E = g.binary("sub", "E", K, m, label="E ← K − m")
    E = g.map("exp", "E", E, inplace=True, label="E ← exp(E)")
    Vt = g.outer("ṽ", E, V, label="ṽₜ ← Eₜ⊗Vₜ")
    Vt = g.map("cumsum", "ṽ", Vt, inplace=True, label="ṽₜ ← Σ_{s≤t} Eₛ⊗Vₛ")
    alpha = g.map("cumsum", "α", E, inplace=True, label="αₜ ← Σ_{s≤t} Eₛ")
    P = g.map("softmax", "γ", Q, label="γ ← softmax over L of Q")
    P = g.binary("div", "γ", P, alpha, inplace=True, label="γ ← γ / α")
    y = g.matmul("Y", P.view(b, h, N, 1, L), Vt.view(b, h, N, L, d), label="Yₜ ← γₜᵀṽₜ")
    return y.view(b, h, N, d)


def scan_step(g: Graph, p: Tensor, k: Tensor, v: Tensor, m: Tensor, alpha: Tensor, Vt: Tensor) -> Tensor:
    """One token of Listing 1: move the sums to the new running maximum, add the token, read out."""
    top = g.binary("maximum", "m'", m, k, label="m' ← max(m, k)")
    back = g.binary("sub", "r", m, top, label="r ← m − m'")
    back = g.map("exp", "r", back, inplace=True, label="r ← exp(r)")
    add = g.binary("sub", "a", k, top, label="a ← k − m'")
    add = g.map("exp", "a", add, inplace=True, label="a ← exp(a)")
    alpha = g.binary("mul", "α", alpha, back, inplace=True, label="α ← α·r")
    alpha = g.binary("add", "α", alpha, add, inplace=True, label="α ← α + a")
    Vt = g.binary("mul", "ṽ", Vt, back.view(b, h, L, 1), inplace=True, label="ṽ ← ṽ·r")
    av = g.outer("a⊗v", add, v)
    Vt = g.binary("add", "ṽ", Vt, av.view(b, h, L, d), inplace=True, label="ṽ ← ṽ + a⊗v")
    g.store(m, top, label="m ← m'")
    gamma = g.binary("div", "γ", p, alpha, label="γ ← p(l|t) / α")
    return g.matmul("y", gamma.view(b, h, 1, L), Vt, label="y ← γᵀṽ")


@variant(
    "latte-recurrent",
    "Latte, causal and sequential (the paper's scan, running maximum for stability): O(NLd) time, O(NL + Ld) memory",
    source=PAPER,
    family="latte",
    qk_width=L,
    causal=True,
)
def latte_recurrent(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    P = g.map("softmax", "p(l|t)", Q, label="p(l|t) ← softmax over L of Q")
    m = g.zeros("m", b, h, L, label="m ← −∞")
    alpha = g.zeros("α", b, h, L)
    Vt = g.zeros("ṽ", b, h, L, d)
    Y = g.zeros("Y", b, h, N, d, label="Y ← empty output")
    with g.loop(N, "tokens"):
        y = scan_step(g, P.select(2, "p(l|t)ₜ"), K.select(2, "kₜ"), V.select(2, "vₜ"), m, alpha, Vt)
        g.store(Y.select(2, "Yₜ"), y, label="Yₜ ← y")
    return Y


@decode_step("latte-causal", "latte-recurrent")
def latte_decode(g: Graph) -> None:
    q = g.input("q", b, h, L)
    k = g.input("k", b, h, L)
    v = g.input("v", b, h, d)
    m = g.input("m", b, h, L)
    alpha = g.input("α", b, h, L)
    Vt = g.input("ṽ", b, h, L, d)
    g.keep(m, alpha, Vt)  # the recurrent state outlives the step
    p = g.map("softmax", "p(l|t)", q)
    g.output(scan_step(g, p, k, v, m, alpha, Vt))
