"""The chunk kernels of linear attention.

- chunk: flash-linear-attention's fused chunk kernels of causal linear attention (one engine op, `linear_chunk`:
  chunk_fwd_h and chunk_fwd_o), timed at their exact shapes only (`calibrate --d`): the kernels where
  flash-linear-attention runs (CUDA), the PyTorch chunk form in their place elsewhere
  (`references.linear.chunk_kernel`); a calibration without them prices the op as a copy of its bytes, with a
  warning. The datasheet model prices them as their several Triton kernels, each by its blocks.
- linear-rnn: the gated and delta-rule chunk kernels (retention, gla, deltanet, gated-deltanet, mamba2: a
  `linear_chunk` with a gate, the delta rule, or states or scores from other ops). The datasheet model prices them
  as fla's kernels of the same grids (docs/linear-kernels.md 1.1-1.4): the state kernel walking the chunks in
  sequence (the delta rule's with K untiled and its v_new = u - W·h product), the output kernel (loading the
  intra-chunk scores where another op made them), and the backward's four; a gate's element-wise work is not priced.
  Not timed by the op model: a calibration prices them as a copy of their bytes, with a warning.
- chunk-product: the per-chunk products those layers run beside the state kernels (`chunk_matmul`: βKKᵀ, W and U
  of the WY form, GLA's gated QKᵀ, Mamba-2's CB and chunk states; `tri_solve`: (I + A)⁻¹ per chunk), each a batch of
  one small product per chunk and head, as fla's kernels of grid (chunks, b·h) run them: priced as a batched
  product. `tri_solve` as a product of its chunk's C × C × C (fla's solve_tril merges 16 × 16 blocks with tensor-core
  dots and substitutes row by row in fp32: a simplification of the same order).
"""

from __future__ import annotations

from collections.abc import Callable

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.profilers.devicemodel.kernels.registry import Kernel, Pricer, Runner, Shape, declare, register_family

CHUNKED, LINEAR_RNN, CHUNK_PRODUCTS = "chunk", "linear-rnn", "chunk-product"
CHUNK = "linear-chunk"
"""The fused chunk kernels of causal linear attention."""
GATED_CHUNK = "linear-chunk-gated"
"""A `linear_chunk` op with a gate, the delta rule, or states or scores from other ops."""
PRODUCT_KINDS = ("chunk_matmul", "tri_solve")
"""Op kinds of the gated and delta-rule layers' per-chunk products, each its own kernel."""


def _features(op) -> dict:
    """Heads, length, head dim and chunk (`_chunk` builds them back)."""
    a = op.attrs
    return {"batch": a["batch"], "m": a["n"], "k": a["dk"], "n": a["chunk"]}


def _price(model: Pricer, kernel: str, f: dict, dtype: str, backward: bool) -> list:
    return model.chunk(f, dtype, backward)


def _runner(kernel: Kernel, at: Shape, rand: Callable, dt, device: str) -> Runner:
    """flash-linear-attention's kernels on CUDA, the PyTorch chunk form elsewhere, on the storage the variant
    hands them (fla's token-major [B, T, H, K] where it runs)."""
    from attn_cost.profilers.measure.references.linear import chunk_implementation, chunk_kernel

    bt, n, d, c = (at.get(x) for x in ("batch", "m", "k", "n"))
    run_chunk = chunk_kernel(c, device)
    if chunk_implementation(c, device).token_major:
        return Runner(lambda box: run_chunk(*box), lambda: [rand(n, bt, d).transpose(1, 2) for _ in range(3)])
    return Runner(lambda box: run_chunk(*box), lambda: [rand(bt, n, d) for _ in range(3)])


def _chunk(g: Graph, at: Shape) -> Tensor:
    """The fused chunk kernels of linear attention on (batch, N = m, d = k) inputs in chunks of C = n tokens."""
    q, k, v = (g.input(x, at.get("batch"), at.get("m"), at.get("k")) for x in "QKV")
    return g.linear_chunk("Y", q, k, v, chunk=at.get("n"))


def plain_chunk(op) -> bool:
    """Whether a `linear_chunk` op is the plain causal one the chunk kernels run."""
    a = op.attrs
    return (a.get("gate", "none") == "none" and not a.get("delta") and a.get("makes_states", True)
            and not a.get("scores_in"))  # fmt: skip


def _gated_features(op) -> dict:
    """A gated or delta-rule `linear_chunk`: the chunk kernels' features (`_features`), the value head dim, and
    which of fla's kernels run (1 or 0): the delta rule's state kernel, a state kernel at all (Mamba-2's states come
    from other ops), the scores loaded rather than computed (GLA's and Mamba-2's come from a `chunk_matmul`)."""
    a = op.attrs
    flags = {"delta": a.get("delta", False), "states": a.get("makes_states", True), "scores": a.get("scores_in", False)}
    return {**_features(op), "v": a["dv"], **{k: int(bool(v)) for k, v in flags.items()}}


def _product_features(op) -> dict:
    """A per-chunk product as a batched product: one (m × k)·(k × n) per chunk and head; `tri_solve` as its chunk's
    C × C × C."""
    a = op.attrs
    if op.kind == "tri_solve":
        return {"batch": a["batch"] * a["chunks"], "m": a["chunk"], "k": a["chunk"], "n": a["chunk"]}
    return {"batch": a["batch"] * a["chunks"], "m": a["m"], "k": a["k"], "n": a["n"]}


def _product_price(model: Pricer, kernel: str, f: dict, dtype: str, backward: bool) -> list:
    return [model.product(f, dtype)]


register_family(name=CHUNKED, dims=("batch", "m", "k", "n"), flop_bound=True, runner=_runner, price=_price,
                separate=True, triton=True)(_features)  # fmt: skip
register_family(name=LINEAR_RNN, dims=("batch", "m", "k", "n", "v", "delta", "states", "scores"), flop_bound=True,
                price=_price, separate=True, triton=True)(_gated_features)  # fmt: skip
register_family(name=CHUNK_PRODUCTS, dims=("batch", "m", "k", "n"), flop_bound=True, price=_product_price,
                triton=True)(_product_features)  # fmt: skip

declare(
    Kernel(CHUNK, "linear_chunk", CHUNKED, _chunk, causal=True, grid=False),
    Kernel(GATED_CHUNK, "linear_chunk", LINEAR_RNN, grid=False),
    *(Kernel(kind, kind, CHUNK_PRODUCTS, grid=False) for kind in PRODUCT_KINDS),
)
