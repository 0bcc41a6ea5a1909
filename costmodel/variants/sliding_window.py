"""Sliding-window (local) attention: query i attends the w keys i−w+1 … i (Mistral 7B; Longformer's
local band is the bidirectional counterpart).

Which implementation each form describes:

- `sliding-window`: a banded kernel. K and V are padded once ((N+w−1)·d each, w−1 rows of zeros
  in front); query i reads rows i … i+w−1 of the padded K and V through a strided view (a window
  per query, overlapping, never copied: `torch.bmm` over `as_strided` windows, as the reference
  does). The N×w score band and its softmax are materialised. Peak ≈ N(2w + a few d) per head:
  it crosses fully materialised causal softmax (2N² scores) near N ≈ w. Traffic charges the padded
  K and V once each (a band kernel's reads), not N·w·d elements of overlapping windows.
- `sliding-window-fused`: one query at a time, one row of w scores alive (the memory of a fused
  local kernel); it pads K and V as the banded form does.

No package on PyPI runs the exact band; profilers/measure/references/ holds the banded reference the
tracer checks. The public blocked implementation, lucidrains' `local-attention`, is described op by
op in docs/examples/local_attention.py (`sliding-window-local`, loaded with --variants), and its
traced peak and FlopCounterMode equal that description.

FLOPs: every query is charged its full window (padding slots are masked to −∞), so the two
products cost 4·N·w·d per head: the exact band plus, for N ≥ w, a triangle of w(w−1)/2 padded
slots. A blocked implementation such as lucidrains' `local-attention` (query blocks of w, each
scoring its own and the previous block) computes 2w keys per query: 8·N·w·d. Mistral's text counts
W + 1 keys (i − W … i), its Figure 1 W keys; attn-cost's w is the number of keys a query sees.

Decoding (`--scope decode`): Mistral's rolling buffer: the cache holds the last w keys and values
(slot N mod w is overwritten by the new token), so a step costs the same at every N ≥ w − 1;
below that the buffer is not yet full (the empty slots are masked, not modelled).
"""

from __future__ import annotations

from attn_cost.costmodel.errors import ModelError
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import N, b, d, h, w
from attn_cost.costmodel.variants import decode_step, variant

PAPER = "Jiang et al., Mistral 7B, 2023 (sliding-window attention); Beltagy et al., Longformer, 2020"


def padded(g: Graph, X: Tensor) -> Tensor:
    """X with w−1 rows of zeros in front: row i + w − 1 of the result is token i."""
    if X.shape[-2] != N:
        raise ModelError(f"{g.name}: the window slides over the query positions; keys and values need N rows")
    Xp = g.zeros(f"{X.name}_pad", b, h, N + w - 1, d, label=f"{X.name}_pad ← 0 (w−1 rows of padding)")
    g.store(Tensor(f"{X.name}_pad[w−1:]", X.shape, Xp.storage), X, label=f"{X.name}_pad[w−1:] ← {X.name}")
    return Xp


def windows(X: Tensor) -> Tensor:
    """The N overlapping windows of w rows of a padded tensor: a strided view (b, h, N, w, d), no copy."""
    return Tensor(f"windows({X.name})", (b, h, N, w, d), X.storage)


@variant(
    "sliding-window",
    "causal local attention over the last w keys: banded kernel, N×w score band, K/V windows as strided views",
    source=PAPER,
    family="softmax",
    causal=True,
)
def sliding_window(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    Kp = padded(g, K)
    Kw = windows(Kp).T
    S = g.matmul("S", Q.view(b, h, N, 1, d), Kw, label="Sᵢ ← qᵢ·K_pad[i:i+w]ᵀ (N×w band)")
    g.ops[-1].attrs["read_once"] = (Kw,)  # a band kernel reads the padded K once, not N·w·d elements
    S = g.map("scale", "S", S, inplace=True, label="S ← S/√d")
    S = g.map("mask", "S", S, inplace=True, label="S ← −∞ on the padding")
    P = g.map("softmax", "P", S, label="P ← softmax(S) over the window")
    Vp = padded(g, V)
    Vw = windows(Vp)
    Y = g.matmul("Y", P, Vw, label="Yᵢ ← Pᵢ·V_pad[i:i+w]")
    g.ops[-1].attrs["read_once"] = (Vw,)
    return Y.view(b, h, N, d)


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


@decode_step("sliding-window", "sliding-window-fused")
def sliding_window_decode(g: Graph) -> None:
    """One token with a rolling buffer of the last w keys and values (Mistral 7B, Sec. 2)."""
    q = g.input("q", b, h, 1, d)
    k = g.input("k", b, h, 1, d)
    v = g.input("v", b, h, 1, d)
    Kc = g.input("K_cache", b, h, w, d)
    Vc = g.input("V_cache", b, h, w, d)
    g.keep(Kc, Vc)  # the buffer outlives the step
    g.store(Kc.select(2, "K_cache[N mod w]"), k, label="K_cache[N mod w] ← k")
    g.store(Vc.select(2, "V_cache[N mod w]"), v, label="V_cache[N mod w] ← v")
    s = g.matmul("s", q, Kc.T, label="s ← q·K_cacheᵀ (w keys)")
    s = g.map("scale", "s", s, inplace=True, label="s ← s/√d")
    p = g.map("softmax", "p", s)
    g.output(g.matmul("y", p, Vc, label="y ← p·V_cache"))
