"""A runnable case: one variant at one scope and size, with its parameters and a way to make inputs.

The surroundings (projections, head split and merge, LayerNorm, MLP, residuals, the layer loop)
follow `costmodel.scopes` line for line, so every scope can be traced against its op list.
Parameters are created on the first call: run a case once (a warm-up) before measuring it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace

import sympy as sp
import torch
import torch.nn.functional as F  # noqa: N812
from attn_cost.costmodel import dtypes
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.variants import derive, get_variant
from attn_cost.profilers.measure.references import REFERENCES, Reference, stand_in, take
from attn_cost.profilers.measure.references.softmax import softmax
from attn_cost.profilers.measure.sizes import SIZE_FLAGS, Sizes
from torch import Tensor

DTYPES = {name: getattr(torch, dtypes.DTYPES[name].torch) for name in dtypes.ACTIVATION}
"""The torch dtype of each activation dtype (`costmodel.dtypes`)."""


def require_references(names: list[str]) -> None:
    """Refuse, before anything is measured, a variant attn-cost has no runnable implementation of (a user's
    DSL variant: its formulas need none, but there is nothing to time)."""
    missing = [n for n in names if n not in REFERENCES]
    if any(get_variant(n).family == "traced" for n in missing):
        traced = ", ".join(n for n in missing if get_variant(n).family == "traced")
        raise UserError(
            f"{traced} is traced code, not measured here: `attn-cost trace PATH:NAME --check N=..,b=..` runs your "
            "code against its formulas"
        )
    if missing:
        sources = "; ".join(f"{n} ({get_variant(n).source})" for n in missing)
        raise UserError(
            f"no reference implementation to measure for {sources}: attn-cost measures the catalogue's variants; "
            "to measure your own code, trace it (`attn-cost trace PATH:NAME`)"
        )


STORAGE_LIMIT = 2**63 - 1
"""The most bytes one tensor may have: PyTorch computes a storage's size in bytes as a signed 64-bit integer, and
a larger one is a RuntimeError (`Storage size calculation overflowed`) on every device, before any allocator is
asked."""


def check_allocatable(
    variant: str, scope: str, sizes: Sizes, dtype: str, device: str, n_said: str = "--n {:d}"
) -> None:
    """Refuse (UserError, one line naming the options that size it) a case one of whose tensors no device can
    hold: more bytes than PyTorch can describe (`STORAGE_LIMIT`). Read from the op list of what runs here (a
    variant's stand-in where its own kernels cannot run: `references.stand_in`), at these sizes: its inputs and
    parameters (drawn in fp32 before the cast), every op's output and workspace. A case that only does not fit
    this device is measured, and recorded as out of memory; this one would stop the command with PyTorch's
    error instead. `n_said`: how to name N (where a search chose it: the longest --max-n lets it try)."""
    runs = stand_in(variant, sizes, device, scope)
    graph = derive(runs, scope).graph
    at = sizes.symbols()
    width = dtypes.dtype_bytes(dtype)
    drawn = [(t.name, t.shape, max(width, 4)) for t in (*graph.inputs, *(p for p, _ in graph.params))]
    made = [(op.output.name, (op.output.storage.numel,), _bytes(op.output.storage.dtype, width)) for op in graph.ops]
    made += [(f"{op.output.name}'s workspace", (op.workspace,), width) for op in graph.ops if op.workspace != 0]
    for name, shape, each in (*drawn, *made):
        exprs = [sp.sympify(size) for size in shape]
        elements = math.prod(int(e.xreplace(at)) for e in exprs)
        if elements * each > STORAGE_LIMIT:
            used = {str(x) for e in exprs for x in e.free_symbols}
            given = [n_said.format(sizes.N) if k == "N" else f"{flag} {getattr(sizes, k)}"
                     for k, flag in SIZE_FLAGS.items() if k in used]  # fmt: skip
            here = f" (here {runs}'s code runs it)" if runs != variant else ""
            raise UserError(
                f"{', '.join(given)}: {variant}{here} would allocate {name} of {elements:,} elements "
                f"({elements * each:.3g} bytes), over the 2^63 bytes a PyTorch tensor can hold: choose smaller sizes"
            )


def _bytes(storage_dtype: str | None, width: int) -> int:
    return width if storage_dtype is None else dtypes.STORAGE_BYTES.get(storage_dtype, width)


class Params:
    """Deterministic weights, made on first use."""

    def __init__(self, dtype: torch.dtype, device: str, seed: int) -> None:
        self.dtype, self.device = dtype, device
        self.gen = torch.Generator(device="cpu").manual_seed(seed)
        self.cache: dict[str, Tensor] = {}

    def get(self, name: str, *shape: int, std: float | None = None, mean: float = 0.0) -> Tensor:
        if name not in self.cache:
            std = std if std is not None else 1 / math.sqrt(shape[-1])
            w = torch.randn(*shape, generator=self.gen) * std + mean
            self.cache[name] = w.to(device=self.device, dtype=self.dtype)
        return self.cache[name]


@dataclass
class Case:
    """What a profiler needs: `run(inputs)` consumes a list made by `make_inputs()`."""

    variant: str
    scope: str
    sizes: Sizes
    dtype: str
    device: str
    run: Callable[[list[Tensor]], Tensor]
    make_inputs: Callable[[], list[Tensor]]
    params: Params | None = None
    """The weights (made on the first call)."""
    tag: str = ""
    """What else sets its calls apart from another case of the same variant, scope, sizes and dtype (a forced SDPA
    backend): the CUDA timer's caches of kernel counts and of calls that cannot be captured are keyed by it."""


def build_case(variant: str, scope: str, sizes: Sizes, dtype: str = "fp32", device: str = "cpu", seed: int = 0) -> Case:
    """The runnable reference of `variant` at `scope`."""
    v = get_variant(variant)
    if scope not in v.scopes:
        raise UserError(f"{variant} has no {scope} scope (it has: {', '.join(v.scopes)})")
    dtypes.dtype_bytes(dtype)  # an unknown name is bad input
    require_references([variant])
    check_allocatable(variant, scope, sizes, dtype, device)
    ref = REFERENCES[variant]
    s = sizes
    lay = Layout.of(v, s)
    kvh = lay.v_heads
    if s.h % kvh:
        raise UserError(f"--kv-heads {kvh} does not divide --h {s.h}")
    if s.h % lay.q_heads:
        raise UserError(f"--groups {lay.q_heads} does not divide --h {s.h}")
    params = Params(DTYPES[dtype], device, seed)
    core = _bind_core(ref, s, device, params)

    def inputs(*shapes: tuple[int, ...], token_major: bool = False) -> Callable[[], list[Tensor]]:
        """Inputs of these shapes; token_major: (b, h, N, ·) views of [b, N, h, ·] storage (`Implementation`)."""
        drawn = [(sh[0], sh[2], sh[1], *sh[3:]) for sh in shapes] if token_major else list(shapes)

        def make() -> list[Tensor]:
            if device != "cpu":  # drawn on the device itself (seeded): no host draw, no copy, no fp32 temporary
                gen = torch.Generator(device=device).manual_seed(seed + 1)
                out = [torch.randn(*shape, generator=gen, device=device, dtype=DTYPES[dtype]) for shape in drawn]
            else:
                gen = torch.Generator(device="cpu").manual_seed(seed + 1)
                out = [torch.randn(*shape, generator=gen).to(device=device, dtype=DTYPES[dtype]) for shape in drawn]
            return [x.transpose(1, 2) for x in out] if token_major else out

        return make

    if scope == "core":
        tokens = ref.implementation is not None and ref.implementation(s, device).token_major
        make = inputs(*_graph_inputs(variant, scope, s), token_major=tokens)
        return Case(variant, scope, s, dtype, device, core, make, params)
    if scope == "decode":
        step = ref.decode
        if variant.startswith("sliding-window"):  # the rolling buffer: token N goes to slot N mod w
            step = functools.partial(ref.decode, slot=s.N % s.window, valid=min(s.N + 1, s.window))
        return Case(variant, scope, s, dtype, device, step, _decode_inputs(variant, s, inputs), params)
    surround = SURROUNDINGS[scope]

    def run(box: list[Tensor]) -> Tensor:
        token = _BIAS.set(v.bias)  # the projections' biases, as the variant describes them
        try:
            return surround(ref, core, box, params, replace(s, h_kv=kvh), lay)
        finally:
            _BIAS.reset(token)

    return Case(variant, scope, s, dtype, device, run, inputs((s.b, s.N, s.width)), params)


@dataclass(frozen=True)
class Layout:
    """The per-head widths and heads of a variant's core inputs at concrete sizes, as `costmodel.scopes` lays them
    out: queries and keys `qk` wide (d, Latte's L, Mamba-2's d_state) with `q_heads` and `k_heads` heads, values
    `dv` wide with `v_heads`, and the extra per-token inputs (a gate's pre-activation) by name and width."""

    qk: int
    q_heads: int
    k_heads: int
    v_heads: int
    dv: int
    extras: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, v, s: Sizes) -> Layout:
        at = s.symbols()

        def size(e) -> int:
            return int(sp.sympify(e).xreplace(at))

        qh = size(v.qk_heads) if v.qk_heads is not None else s.h
        kh = size(v.qk_heads) if v.qk_heads is not None else size(v.kv_heads)
        return cls(size(v.qk_width), qh, kh, size(v.kv_heads), size(v.v_width),
                   tuple((name, size(w)) for name, w in v.extra_inputs))  # fmt: skip


def _graph_inputs(variant: str, scope: str, s: Sizes) -> list[tuple[int, ...]]:
    """The shapes of the inputs the engine's op list of `variant` at `scope` takes, in its order, at these sizes:
    the reference takes the same (q, k, v, then a gate's or β's pre-activation; a decoding step's state)."""
    at = s.symbols()
    return [tuple(int(x.xreplace(at)) for x in t.shape) for t in derive(variant, scope).graph.inputs]


def _bind_core(ref: Reference, s: Sizes, device: str, params: Params) -> Callable[[list[Tensor]], Tensor] | None:
    if ref.core is None:
        return None
    if ref.constants is not None:
        made: dict = {}

        def with_constants(box: list[Tensor]) -> Tensor:
            if not made:  # on the first call (the warm-up), like the parameters
                made.update(ref.constants(s, params))
            return ref.core(box, **ref.options, **made)

        return with_constants
    if ref.core is softmax and ref.options.get("causal"):
        mask = torch.ones(s.N, s.N, dtype=torch.bool, device=device).triu_(1)  # a constant buffer
        return lambda box: softmax(box, mask=mask)
    return lambda box: ref.core(box, **ref.options)


def _decode_inputs(variant: str, s: Sizes, inputs) -> Callable[[], list[Tensor]]:
    """Inputs of one decoding step with N tokens of context, in the engine's order."""
    b, h, n, d, lat = s.b, s.h, s.N, s.d, s.latents
    if variant.startswith("gqa"):
        kv = s.kv
        return inputs((b, h, 1, d), (b, kv, 1, d), (b, kv, 1, d), (b, kv, n + 1, d), (b, kv, n + 1, d))
    if variant.startswith("softmax"):
        return inputs((b, h, 1, d), (b, h, 1, d), (b, h, 1, d), (b, h, n + 1, d), (b, h, n + 1, d))
    if variant.startswith("sliding-window"):
        w = s.window
        return inputs((b, h, 1, d), (b, h, 1, d), (b, h, 1, d), (b, h, w, d), (b, h, w, d))
    if variant.startswith("linear"):
        make = inputs((b, h, d), (b, h, d), (b, h, d), (b, h, d, d), (b, h, d, 1))

        def state_positive() -> list[Tensor]:  # s and z are sums of φ(k) > 0
            q, k, v, st, z = make()
            return [q, k, v, st.abs_(), z.abs_().add_(1)]

        return state_positive
    if variant.startswith("latte"):
        make = inputs((b, h, lat), (b, h, lat), (b, h, d), (b, h, lat), (b, h, lat), (b, h, lat, d))

        def alpha_positive() -> list[Tensor]:
            q, k, v, m, alpha, vt = make()
            return [q, k, v, m, alpha.abs_().add_(1), vt]

        return alpha_positive
    return inputs(*_graph_inputs(variant, "decode", s))  # the step's own inputs, its state last


# -- the surroundings, as costmodel.scopes writes them ---------------------------------------------

_BIAS: ContextVar[str] = ContextVar("bias", default="all")
"""Which projections carry a bias while a layer runs (`Variant.bias`: all, out, none)."""


def projected(
    core: Callable[[list[Tensor]], Tensor],
    box: list[Tensor],
    params: Params,
    s: Sizes,
    lay: Layout,
    project: str = "QKV",
    values: list[Tensor] | None = None,
) -> Tensor:
    """Project (or slice x for) Q, K, V and the extra per-token inputs; split heads; core; merge heads; output
    projection."""
    (x,) = take(box)
    width = {"Q": lay.qk, "K": lay.qk, "V": lay.dv, **dict(lay.extras)}
    count = {"Q": lay.q_heads, "K": lay.k_heads, "V": lay.v_heads, **{name: lay.v_heads for name, _ in lay.extras}}
    names = ["Q", "K", "V", *(name for name, _ in lay.extras)]
    heads = []
    for name in names:
        out = count[name] * width[name]
        if name == "V" and values:
            (src,) = take(values)
        elif name in project or name not in "QKV":
            w = params.get(f"W_{name}", out, s.width)  # F.linear keeps (out, in)
            bias = params.get(f"b_{name}", out, std=0.02) if _BIAS.get() == "all" else None
            src = F.linear(x, w, bias)
        else:
            src = x  # the head's slice of the input
        if name == names[-1]:
            del x  # its last use
        trailing = () if width[name] == 1 and name not in "QKV" else (width[name],)  # a scalar a token: [B, T, H]
        heads.append(_copied(src.view(s.b, s.N, count[name], *trailing).transpose(1, 2)))
        del src
    y = core(heads)
    merged = _copied(y.transpose(1, 2)).view(s.b, s.N, s.h * lay.dv)
    del y
    bias = params.get("b_O", s.width, std=0.02) if _BIAS.get() in ("all", "out") else None
    return F.linear(merged, params.get("W_O", s.width, s.h * lay.dv), bias)


def _copied(x: Tensor) -> Tensor:
    """x in a new contiguous tensor, as the op list's split and merge of the heads are copies (`scopes.projected`):
    also where one head (or one group of Mamba-2's B and C) makes the transposed view contiguous already, where
    `.contiguous()` would hand back its input."""
    return x.clone(memory_format=torch.contiguous_format)


def attention_layer(ref: Reference, core, box: list[Tensor], params: Params, s: Sizes, lay: Layout) -> Tensor:
    if ref.layer is None:
        return projected(core, box, params, s, lay)
    if ref.layer == "super":
        v = torch.matmul(params.get("W_A", s.N, s.N), box[0])
        v.add_(params.get("b_A", s.N, 1, std=0.02))
        values = [v]
        del v
        return projected(_plain_softmax, box, params, s, lay, project="Q", values=values)
    return projected(_plain_softmax, box, params, s, lay, project=ref.layer)


def _plain_softmax(box: list[Tensor]) -> Tensor:
    return softmax(box)


def layer_norm(x: Tensor, params: Params, name: str) -> Tensor:
    n = x.shape[-1]
    return F.layer_norm(x, (n,), params.get(f"γ_{name}", n, std=0.02, mean=1.0), params.get(f"β_{name}", n, std=0.02))


def block(ref: Reference, core, box: list[Tensor], params: Params, s: Sizes, lay: Layout) -> Tensor:
    (x,) = take(box)
    a = attention_layer(ref, core, [layer_norm(x, params, "LN1")], params, s, lay)
    x = x + a
    del a
    w1, b1 = params.get("W_1", s.r * s.width, s.width), params.get("b_1", s.r * s.width, std=0.02)
    m = F.linear(layer_norm(x, params, "LN2"), w1, b1)
    m = F.gelu(m)
    m = F.linear(m, params.get("W_2", s.width, s.r * s.width), params.get("b_2", s.width, std=0.02))
    return x + m


def model(ref: Reference, core, box: list[Tensor], params: Params, s: Sizes, lay: Layout) -> Tensor:
    """D blocks (sharing one set of weights: weights are never counted) and a final LayerNorm."""
    for _ in range(s.D):
        box = [block(ref, core, box, params, s, lay)]
    return layer_norm(take(box)[0], params, "LN_f")


SURROUNDINGS = {"layer": attention_layer, "block": block, "model": model}
