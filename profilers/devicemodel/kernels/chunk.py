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

from attn_cost.costmodel.graph import CHUNK_GATES, CHUNK_KERNELS, Graph, Tensor
from attn_cost.profilers.devicemodel.kernels.registry import (
    GEMM,
    Kernel,
    Pricer,
    Runner,
    Shape,
    declare,
    register_family,
    shape,
)
from attn_cost.profilers.devicemodel.tunables import Tunables

CHUNKED, LINEAR_RNN, CHUNK_PRODUCTS = "chunk", "linear-rnn", "chunk-product"
CHUNK = "linear-chunk"
"""The fused chunk kernels of causal linear attention."""
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
    from other ops), the scores loaded rather than computed (GLA's and Mamba-2's come from a `chunk_matmul`), and
    Mamba-2's D·x. The gate is the kernel's name (`gated_kernel`)."""
    a = op.attrs
    flags = {"delta": a.get("delta", False), "states": a.get("makes_states", True), "scores": a.get("scores_in", False),
             "skip": a.get("skip", False)}  # fmt: skip
    return {**_features(op), "v": a["dv"], **{k: int(bool(v)) for k, v in flags.items()}}


def gated_kernel(gate: str, delta: bool, makes_states: bool, scores_in: bool) -> str:
    """The kernel of a gated or delta-rule `linear_chunk`, named by what it runs: its gate (`graph.CHUNK_GATES`), the
    delta rule, scores read (`scored`) or states and scores read (`scan`, mamba_ssm's chunk_scan). One kernel each,
    so that the op model fits each from its own timings (a retention kernel is not timed as GLA's)."""
    tail = "scan" if not makes_states else "scored" if scores_in else ""
    return "-".join(x for x in ("linear-chunk", "" if gate == "none" else gate, "delta" if delta else "", tail) if x)


GATED_CONFIGS: dict[str, tuple[str, bool, bool, bool]] = {
    gated_kernel(*c): c
    for c in [(gate, delta, states, scores) for gate in CHUNK_GATES for states, delta, scores in CHUNK_KERNELS]
    if c != ("none", False, True, False)  # the plain chunk kernels: `CHUNK`
}
"""Every gated or delta-rule chunk kernel the engine can emit: (gate, delta, makes its states, scores given)."""
CATALOGUE_CONFIGS = {
    "linear-chunk-head": "retention",
    "linear-chunk-vector-scored": "gla",
    "linear-chunk-delta": "deltanet",
    "linear-chunk-token-delta": "gated-deltanet",
    "linear-chunk-token-scan": "mamba2",
}
"""The gated kernels of the catalogue's variants: the calibration grid times these (`_gated_grid`); the others
(a user's variant) only at the exact shapes of `calibrate --d`."""
GATED_CHUNK = "linear-chunk-vector-scored"
"""GLA's chunk kernels: the gated kernel the tests name."""


def _gated_runner(kernel: Kernel, at: Shape, rand: Callable, dt, device: str) -> Runner:
    """The op's PyTorch code (`references.linear_rnn.chunk_op`) on the inputs its engine op reads (`_gated`), b·h
    heads of one batch: the calibration times the op alone as the chunked forms compute it, where the libraries'
    fused kernels do not run."""
    from attn_cost.profilers.measure.references.linear_rnn import chunk_op

    gate, delta, states, scores = GATED_CONFIGS[kernel.name]
    bt, n, dk, c, dv = (at.get(x) for x in ("batch", "m", "k", "n", "v"))
    skip = bool(at.get("skip", 0))
    chunks = -(-n // c)

    def make() -> list:
        box = [rand(bt, n, dk), rand(bt, n, dk), rand(bt, n, dv)]
        box += [rand(bt, n, dk)] if delta else []
        if gate == "token":  # Δ (Mamba-2, padded to whole chunks) and the gate's in-chunk sum: small, negative
            rows = n if states else chunks * c
            box += ([] if states else [rand(bt, rows, positive=True).view(1, bt, rows)])
            box.append(rand(bt, rows, positive=True).mul_(-0.05).view(1, bt, rows))
        if gate == "vector":
            box.append(rand(bt, n, dk, positive=True).mul_(-0.05))
        box += [rand(bt, chunks, dk, dv)] if not states else []
        box += [rand(bt, chunks * c if not states else n, c)] if scores else []
        return box

    return Runner(lambda box: chunk_op(box, c, gate, delta, states, scores, skip), make)


def _gated(g: Graph, at: Shape) -> Tensor:
    """A gated or delta-rule `linear_chunk` at a shape: b·h = batch heads, N = m, d_k = k, chunks of C = n, d_v = v;
    its gate's tensors, the delta rule's W, Mamba-2's states, scores (padded to whole chunks) and D·x as its name
    says (`GATED_CONFIGS`)."""
    gate, delta, states, scores = GATED_CONFIGS[at.kernel]
    bt, n, dk, c, dv = (at.get(x) for x in ("batch", "m", "k", "n", "v"))
    chunks = -(-n // c)
    q, k = g.input("Q", bt, n, dk), g.input("K", bt, n, dk)
    v = g.input("V", bt, n, dv)
    gates: tuple[Tensor, ...] = ()
    if gate == "token":
        gates = (g.input("Δ", bt, chunks * c), g.input("G", bt, chunks * c)) if not states else (g.input("G", bt, n),)
    elif gate == "vector":
        gates = (g.input("G", bt, n, dk),)
    return g.linear_chunk(
        "Y", q, k, v, chunk=c, gate=gate, gates=gates, w=g.input("W", bt, n, dk) if delta else None,
        states=None if states else g.input("S", bt, chunks, dk, dv),
        scores=g.input("A", bt, chunks * c if not states else n, c) if scores else None,
        skip=bool(at.get("skip", 0)),
    )  # fmt: skip


def _gated_grid(kernels: list[Kernel], llc: int, elem: int, tune: Tunables) -> list[Shape]:
    """The catalogue's gated kernels (`CATALOGUE_CONFIGS`) at one head of `tune.chunk_lengths` tokens, d_k = d_v of
    `tune.chunk_d`, chunks of `tune.chunk_sizes`."""
    return [shape(k.name, batch=1, m=n, k=d, n=c, v=d, delta=int(GATED_CONFIGS[k.name][1]),
                  states=int(GATED_CONFIGS[k.name][2]), scores=int(GATED_CONFIGS[k.name][3]),
                  skip=int(k.name == "linear-chunk-token-scan"))
            for k in kernels for d in tune.chunk_d for c in tune.chunk_sizes for n in tune.chunk_lengths]  # fmt: skip


def _product_features(op) -> dict:
    """A per-chunk product as a batched product: one (m × k)·(k × n) per chunk and head; `tri_solve` as its chunk's
    C × C × C."""
    a = op.attrs
    if op.kind == "tri_solve":
        return {"batch": a["batch"] * a["chunks"], "m": a["chunk"], "k": a["chunk"], "n": a["chunk"]}
    return {"batch": a["batch"] * a["chunks"], "m": a["m"], "k": a["k"], "n": a["n"]}


def _product_price(model: Pricer, kernel: str, f: dict, dtype: str, backward: bool) -> list:
    return [model.product(f, dtype)]


def _product_runner(kernel: Kernel, at: Shape, rand: Callable, dt, device: str) -> Runner:
    """A per-chunk product as the chunked forms run it (`references.linear_rnn`): one batched (m × k)·(k × n)
    product over the chunks and heads; `tri_solve` as `torch.linalg.solve_triangular` of each chunk's unit lower
    triangular I + A against I (their `_wy`)."""
    import torch

    bt, m, k, n = (at.get(x) for x in ("batch", "m", "k", "n"))
    if kernel.name == "tri_solve":
        eye = torch.eye(m, dtype=dt, device=device)

        def solve(box: list):
            return torch.linalg.solve_triangular(box[0], eye.expand_as(box[0]), upper=False, unitriangular=True)

        return Runner(solve, lambda: [rand(bt, m, m).mul_(0.1).tril_(-1).add_(eye)])
    return Runner(lambda box: box[0] @ box[1], lambda: [rand(bt, m, k), rand(bt, k, n)])


def _chunk_product(g: Graph, at: Shape) -> Tensor:
    """A per-chunk product at a shape (batch = chunks × heads of (m × k)·(k × n)), written as the `states` form (a
    chunk of k tokens, one head: the same operands' sizes as every form's); `tri_solve` of batch chunks of C = m."""
    bt, m, k, n = (at.get(x) for x in ("batch", "m", "k", "n"))
    if at.kernel == "tri_solve":
        return g.tri_solve("T", g.input("A", bt * m, m), chunk=m)
    return g.chunk_matmul("P", g.input("A", bt * k, m), g.input("B", bt * k, n), chunk=k, form="states")


def _product_grid(kernels: list[Kernel], llc: int, elem: int, tune: Tunables) -> list[Shape]:
    """Each per-chunk product's three forms (scores C × d × C, apply C × C × d, states d × C × d) and the solve
    (C × C × C) at `tune.chunk_d` and `tune.chunk_sizes`, batches of `tune.batched_products` chunks × heads."""
    shapes: dict[Shape, None] = {}
    for batch in tune.batched_products:
        for c in tune.chunk_sizes:
            shapes[shape("tri_solve", batch=batch, m=c, k=c, n=c)] = None
            for d in tune.chunk_d:
                for m, k, n in ((c, d, c), (c, c, d), (d, c, d)):
                    shapes[shape("chunk_matmul", batch=batch, m=m, k=k, n=n)] = None
    return list(shapes)


register_family(name=CHUNKED, dims=("batch", "m", "k", "n"), flop_bound=True, runner=_runner, price=_price,
                separate=True, triton=True)(_features)  # fmt: skip
register_family(name=LINEAR_RNN, dims=("batch", "m", "k", "n", "v", "delta", "states", "scores", "skip"),
                form=GEMM, flop_bound=True, runner=_gated_runner, price=_price, grid=_gated_grid, separate=True,
                triton=True)(_gated_features)  # fmt: skip
register_family(name=CHUNK_PRODUCTS, dims=("batch", "m", "k", "n"), form=GEMM, flop_bound=True,
                runner=_product_runner, price=_product_price, grid=_product_grid, triton=True,
                stand_ins=("matmul-NN",))(_product_features)  # fmt: skip

declare(
    Kernel(CHUNK, "linear_chunk", CHUNKED, _chunk, causal=True, grid=False),
    *(Kernel(name, "linear_chunk", LINEAR_RNN, _gated, causal=True, grid=name in CATALOGUE_CONFIGS)
      for name in GATED_CONFIGS),
    *(Kernel(kind, kind, CHUNK_PRODUCTS, _chunk_product) for kind in PRODUCT_KINDS),
)
