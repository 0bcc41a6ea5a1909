"""The chunk kernels of linear attention.

- chunk: flash-linear-attention's fused chunk kernels of causal linear attention (one engine op, `linear_chunk`:
  chunk_fwd_h and chunk_fwd_o), timed at their exact shapes only (`calibrate --d`): the kernels where
  flash-linear-attention runs (CUDA), the PyTorch chunk form in their place elsewhere
  (`references.linear.chunk_kernel`); a calibration without them prices the op as a copy of its bytes, with a
  warning. The datasheet model prices them as their several Triton kernels, each by its blocks.
- linear-rnn: the gated and delta-rule chunk kernels (retention, gla, deltanet, gated-deltanet, mamba2: a
  `linear_chunk` with a gate, the delta rule or states or scores from other ops, and the `chunk_matmul` and
  `tri_solve` ops). No device model prices them yet: the family has no price, and their ops are refused in one
  line rather than priced as another kernel.
"""

from __future__ import annotations

from collections.abc import Callable

from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.profilers.devicemodel.kernels.registry import Kernel, Pricer, Runner, Shape, declare, register_family

CHUNKED, LINEAR_RNN = "chunk", "linear-rnn"
CHUNK = "linear-chunk"
"""The fused chunk kernels of causal linear attention."""
GATED_CHUNK = "linear-chunk-gated"
"""A `linear_chunk` op with a gate, the delta rule, or states or scores from other ops."""
UNPRICED_KINDS = ("chunk_matmul", "tri_solve")
"""Op kinds of the gated and delta-rule chunk kernels, each its own (unpriced) kernel."""


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


register_family(name=CHUNKED, dims=("batch", "m", "k", "n"), flop_bound=True, runner=_runner, price=_price,
                separate=True, triton=True)(_features)  # fmt: skip
register_family(name=LINEAR_RNN, dims=(), unpriced="the gated and delta-rule chunk kernels")(lambda op: {})

declare(
    Kernel(CHUNK, "linear_chunk", CHUNKED, _chunk, causal=True, grid=False),
    Kernel(GATED_CHUNK, "linear_chunk", LINEAR_RNN, grid=False),
    *(Kernel(kind, kind, LINEAR_RNN, grid=False) for kind in UNPRICED_KINDS),
)
