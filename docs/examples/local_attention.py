"""Sliding-window attention as lucidrains' `local-attention` package computes it (LocalAttention, causal,
look_backward = 1, exact_windowsize = True, no rotary embedding, eval mode), written in attn-cost's op DSL.

    attn-cost formula sliding-window-local --variants docs/examples/local_attention.py --window 128
    attn-cost crossover --variants docs/examples/local_attention.py \
        --pair softmax-causal:sliding-window-local --pair sliding-window:sliding-window-local --window 256

A blocked kernel, not a band: the sequence is cut into N/w blocks of w queries; each block scores its own
and the previous block (2w keys, the first block against w rows of padding), so the two products cost
8·N·w·d per head, twice the exact band of the catalogue's `sliding-window`. The masks (positions,
padding, causal and window) are built in the forward pass as int64 and bool tensors; `masked_fill` is
out of place; the function's locals hold q, k, v (copied by einops' pack), the padded K and V, the scaled
queries, the last score tensor and the positions until it returns, so they are kept to the end here.
The look-around windows of K and V (2w rows per block) are views of the padded tensors, but with more
than one batch-head (b·h > 1) their batch dims cannot be merged into one stride and `einsum` copies
them (2·N·d each, for the duration of the product); with b·h = 1 PyTorch skips the copy and the peak
is 2·N·d·4 bytes lower than derived here. N must be a multiple of w (the package asserts it unless
autopad pads N up).

tests/test_new_variants.py checks this description against the installed package: the live-tensor
tracer's peak and FlopCounterMode equal what attn-cost derives from these ops, byte for byte.
"""

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import N, b, d, h, w
from attn_cost.costmodel.variants import variant

SOURCE = "lucidrains/local-attention (LocalAttention.forward, causal, look_backward=1, exact_windowsize=True)"


@variant(
    "sliding-window-local",
    "sliding window as the local-attention package runs it: blocks of w queries over 2w keys, masks built per call",
    source=SOURCE,
    family="softmax",
    causal=True,
)
def local_attention(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    blocks = N / w
    g.keep(Q, K, V)  # einops' pack copies q, k, v; the copies live in the function's locals to the end
    pos = g.traced("fill", "t", (N,), (), label="t ← arange(N)", dtype="int64")
    bq = g.map("scale", "bq", Q, label="bq ← q·d^−½")
    Kp = g.traced("copy", "K_pad", (b, h, N + w, d), (K,), label="K_pad ← one block of padding, K")
    Vp = g.traced("copy", "V_pad", (b, h, N + w, d), (V,), label="V_pad ← one block of padding, V")
    tk = g.traced("copy", "t_k", (N + w,), (pos,), label="t_k ← padded positions", dtype="int64")
    pad = g.traced("pointwise", "pad_mask", (2 * N,), (tk,), label="pad_mask ← t_k = −1", dtype="bool")
    g.keep(pos, bq, Kp, Vp, tk, pad)
    around_k = Tensor("look_around(K_pad)", (b, h, blocks, 2 * w, d), Kp.storage)
    around_k = g.copy("K_around", around_k, label="K_around ← look_around(K_pad) (bmm needs one batch stride)")
    S = g.matmul("S", bq.view(b, h, blocks, w, d), around_k.T, label="S ← bq·K_aroundᵀ (w × 2w per block)")
    lt = g.traced("pointwise", "future", (blocks, w, 2 * w), (pos, tk), label="future ← t < t_k", dtype="bool")
    far = g.traced("pointwise", "t_k + w", (2 * N,), (tk,), label="t_k + w", dtype="int64")
    gt = g.traced("pointwise", "too_far", (blocks, w, 2 * w), (pos, far), label="too_far ← t > t_k + w", dtype="bool")
    causal = g.traced(
        "pointwise", "causal", (blocks, w, 2 * w), (lt, gt), label="causal ← future | too_far", dtype="bool"
    )
    S = g.traced("mask", "S", S.shape, (S, causal), label="S ← masked_fill(S, causal) (a new tensor)")
    S = g.traced("mask", "S", S.shape, (S, pad), label="S ← masked_fill(S, pad_mask) (a new tensor)")
    g.keep(S)  # the local `sim` still holds it after the softmax
    P = g.map("softmax", "P", S, label="P ← softmax(S)")
    around_v = Tensor("look_around(V_pad)", (b, h, blocks, 2 * w, d), Vp.storage)
    around_v = g.copy("V_around", around_v, label="V_around ← look_around(V_pad) (bmm needs one batch stride)")
    return g.matmul("Y", P, around_v, label="Y ← P·V_around").view(b, h, N, d)
