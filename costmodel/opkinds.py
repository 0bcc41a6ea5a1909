"""The op kinds the engine emits, and what autograd keeps of each for backward.

Facts about op kinds, not about costs: the IR (`graph.py`) checks kinds against this table, the FLOP
conventions (`conventions.py`) give each kind its rules, and the op model (`profilers/devicemodel/kernels.py`) a kernel.
"""

from __future__ import annotations

KINDS: dict[str, str] = {
    "matmul": "matrix product (m×k)(k×n) = 2mkn; accumulating into an existing tensor adds mn",
    "linear": "projection x·W (+ bias): 2mkn (+ mn)",
    "outer": "row-wise tensor product A⊠B (one multiply per output element)",
    "poly2": "Taylor polynomial x²/2 + x + 1 (4 ops per element)",
    "softmax": "row softmax: max, subtract, exp, sum, divide (5 ops per element)",
    "normalize_rows": "divide each row by its sum (2 ops per element)",
    "l2normalize": "row-wise x/‖x‖₂ (3 ops per element + 2 per row)",
    "augment": "prepend a constant column [c·1, x] (no arithmetic besides its gain)",
    "scale": "multiply by a constant (1 op per element)",
    "add": "element-wise / broadcast addition (1 op per output element)",
    "mul": "element-wise / broadcast product (1 op per output element)",
    "div": "element-wise / broadcast division (1 op per output element)",
    "sum": "sum over one axis (1 op per input element)",
    "exp": "element-wise exponential (1 op per element)",
    "elu1": "elu(x) + 1 (2 ops per element: a compare and an exp or add)",
    "cumsum": "cumulative sum along the sequence (1 op per element)",
    "sub": "element-wise / broadcast subtraction (1 op per output element)",
    "max": "maximum over one axis (1 compare per input element)",
    "maximum": "element-wise maximum of two tensors (1 compare per output element)",
    "layernorm": "layer normalisation: mean, centre, variance, scale, affine (7 ops per element + 2 per row)",
    "gelu": "GELU activation, 0.5x(1 + erf(x/√2)) (5 ops per element)",
    "pointwise": "another element-wise function of one tensor (relu, sigmoid, tanh, sqrt, log, ...: 1 op per element)",
    "norm": "vector 2-norm over one axis (a square and an add per input element, a square root per output)",
    "mask": "causal mask fill (selection, no arithmetic)",
    "compare": "element-wise comparison or logic building a mask in traced code (1 op per output element)",
    "copy": "copy of a view into a new or existing tensor (data movement only)",
    "fill": "allocate a buffer (zeros or to be written; no arithmetic)",
    "fused_attention": "softmax(QKᵀ/√d)V without the N×N matrix (SDPA / FlashAttention)",
    "linear_chunk": "causal linear attention Σⱼ≤ᵢ(qᵢ·kⱼ)·decay·vⱼ by chunk kernels: C×C scores and the running state "
    "on chip, one d_k×d_v state per chunk to memory (flash-linear-attention's chunk_fwd_h and chunk_fwd_o; the "
    "delta-rule kernel chunk_gated_delta_rule_fwd_h; mamba_ssm's chunk_scan)",
    "chunk_matmul": "a product inside each chunk of C tokens, written to memory: a C×C block of scores (βKKᵀ, GLA's "
    "gated QKᵀ, Mamba-2's CB), a block times the chunk's rows (W, U), or each chunk's own state",
    "tri_solve": "(I + A)⁻¹ of each chunk's strictly lower triangular C×C block by forward substitution (fla's "
    "solve_tril: the WY representation of delta-rule updates)",
}

SAVES: dict[str, tuple] = {
    # what autograd keeps for backward: input positions, and "out" for the result
    "matmul": (0, 1),
    "linear": (0,),
    "outer": (0, 1),
    "poly2": (0,),
    "softmax": ("out",),
    "normalize_rows": ("out",),
    "l2normalize": (0,),
    "mul": (0, 1),
    "div": (0, 1),
    "exp": ("out",),
    "elu1": (0,),
    "layernorm": (0,),
    "gelu": (0,),
    "pointwise": (0,),
    "norm": (0, "out"),
    "fused_attention": (0, 1, 2, 3, "out"),  # 3: an attn_mask, where there is one
    "linear_chunk": (0, 1, 2),  # each chunk op states what its library keeps (`Graph.linear_chunk`, ...)
    "chunk_matmul": (0, 1),
    "tri_solve": ("out",),
}
"""Training mode keeps these tensors alive to the end of the forward pass."""
