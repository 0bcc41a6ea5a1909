"""From an attention core to a layer, an encoder block, a whole model, or one decoding step.

The surroundings are written once here, so every variant gets the same projections, norms, MLP
and residuals, and the difference between two models is exactly the difference of their attention.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import sympy as sp
from attn_cost.costmodel.counting import N_kv, causal_graph
from attn_cost.costmodel.errors import ModelError, UserError
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.symbols import D, N, b, d, h, r

SCOPES: dict[str, str] = {
    "core": "the attention mechanism alone: per-head Q, K, V in (b×h×N×d), per-head output out",
    "layer": "a multi-head attention layer: X (b×N×hd) in, Q/K/V projections, heads, output projection",
    "block": "a pre-norm encoder block: LayerNorm, attention layer, residual, LayerNorm, MLP (ratio r), residual",
    "model": "an encoder of depth D: D blocks and a final LayerNorm",
    "decode": "one autoregressive step: the cost of token N+1 with N tokens in a KV cache or a recurrent state",
}
BIASES: dict[str, str] = {
    "all": "a bias on the Q, K, V and output projections (Vaswani et al., timm's ViT with qkv_bias, Hosseini et al.)",
    "out": "a bias on the output projection only (the linformer, performer-pytorch, nystrom-attention packages)",
    "none": "no projection biases (Llama-style layers: q/k/v/o_proj with bias=False)",
}
"""--bias: which projections of an attention layer carry a bias; each variant has its own default."""
_BIAS: ContextVar[str] = ContextVar("bias", default="all")
MODES: dict[str, str] = {
    "inference": "forward pass only; every tensor is freed after its last use",
    "training": "forward + backward FLOPs; tensors that backward needs stay alive to the end of the forward pass",
}


def build_graph(
    variant,
    scope: str,
    mode: str,
    kv: bool = False,
    bias: str | None = None,
    dropout: sp.Expr | None = None,
    padding: bool = False,
    feature_map: str = "elu1",
    normalize: bool = True,
) -> Graph:
    """The op list of `variant` at `scope` in `mode`; kv: keys and values of length N_kv (core scope);
    bias: which projections carry a bias (None: the variant's own); dropout: attention dropout probability p in
    training (refused in inference, where a model's dropout returns its input); padding: a key padding mask;
    feature_map, normalize: a linear attention's φ and whether it divides by its normaliser. A variant applies the
    last four where it has what they act on (`Graph.applied` says which it took)."""
    bias = bias or variant.bias
    if bias not in BIASES:
        raise UserError(f"unknown --bias {bias!r} (known: {', '.join(BIASES)})")
    if dropout and mode != "training":
        raise UserError(DROPOUT_IN_INFERENCE)
    token = _BIAS.set(bias)
    try:
        return _build(variant, scope, mode, kv, dropout or None, padding, feature_map, normalize)
    finally:
        _BIAS.reset(token)


DROPOUT_IN_INFERENCE = (
    "--dropout drops attention probabilities while training; in inference a model runs in eval mode, where "
    "PyTorch's dropout returns its input and costs nothing: give it with --mode training"
)


def _build(
    variant, scope: str, mode: str, kv: bool, dropout: sp.Expr | None, padding: bool, feature_map: str, normalize: bool
) -> Graph:
    if scope not in SCOPES:
        raise UserError(f"unknown scope {scope!r} (known: {', '.join(SCOPES)})")
    if mode not in MODES:
        raise UserError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")
    if scope not in variant.scopes:
        what = "it is defined with its projections: use --scope layer" if scope == "core" else "it has no decoding step"
        raise UserError(f"{variant.name} has no {scope} scope: {what}")
    g = Graph(variant.name, training=mode == "training", dropout=dropout, key_padding_mask=padding,
              feature_map=feature_map, normalize=normalize)  # fmt: skip
    if kv and scope != "core":
        raise UserError(f"--n-kv applies to the attention core (--scope core), not to the {scope} scope")
    if scope == "core":
        keys = N_kv if kv else N
        q = g.input("Q", b, variant.qk_heads or h, N, variant.qk_width)
        k = g.input("K", b, variant.qk_heads or variant.kv_heads, keys, variant.qk_width)
        v = g.input("V", b, variant.kv_heads, keys, variant.v_width)
        extras = [g.input(name, b, variant.kv_heads, keys, *per_token(width)) for name, width in variant.extra_inputs]
        try:
            g.output(variant.core(g, q, k, v, *extras))
        except ModelError:
            if not kv:
                raise
            what = f"{variant.name} is written for equal query and key lengths"
            raise UserError(f"{what}: --n-kv does not apply") from None
        if kv and (g.loops or (variant.causal and not (causal_graph(g.ops) or _fused_causal(g)))):
            raise UserError(f"{variant.name} runs its causal form over the query positions: --n-kv does not apply")
    elif scope == "decode":
        variant.decode(g)
    else:
        x = g.input("X", b, N, h * d)
        g.output(SURROUNDINGS[scope](g, variant, x))
    if not g.ops or not g.outputs:
        raise RuntimeError(f"{variant.name} at scope {scope} produced no ops")
    return g


def _fused_causal(g: Graph) -> bool:
    return any(op.kind == "fused_attention" and op.attrs.get("causal") for op in g.ops)


def per_token(width: sp.Expr) -> tuple[sp.Expr, ...]:
    """The trailing shape of a per-token input of this width per head: none for one scalar a token (a gate's or
    β's, [B, T, H] in flash-linear-attention), else the width."""
    return () if width == 1 else (width,)


def attention_layer(g: Graph, variant, x: Tensor) -> Tensor:
    """The variant's own layer, or standard Q/K/V/O projections around its core."""
    if variant.layer is not None:
        return variant.layer(g, x)
    return projected(g, variant.core, x, qk_width=variant.qk_width, kv_heads=variant.kv_heads,
                     v_width=variant.v_width, qk_heads=variant.qk_heads, extras=variant.extra_inputs)  # fmt: skip


def projected(
    g: Graph,
    core: Callable[..., Tensor],
    x: Tensor,
    *,
    qk_width: sp.Expr = d,
    project: tuple[str, ...] = ("Q", "K", "V"),
    values: Tensor | None = None,
    kv_heads: sp.Expr = h,
    v_width: sp.Expr = d,
    qk_heads: sp.Expr | None = None,
    extras: tuple[tuple[str, sp.Expr], ...] = (),
) -> Tensor:
    """Multi-head attention around a core: project (or slice x for) Q, K and V, split the heads,
    run the core, merge the heads, project out. Biases as `--bias` says (the variant's default: on every
    projection unless it describes an implementation without). Keys and values have `kv_heads` heads
    (grouped-query attention projects to fewer), values `v_width` columns a head (the output projection takes
    h·v_width), queries and keys `qk_heads` where they have fewer (Mamba-2's groups); each extra per-token input
    (a gate's pre-activation) is projected from x as the values are, one width a head (`per_token`)."""
    bias = _BIAS.get()
    width = {"Q": qk_width, "K": qk_width, "V": v_width, **dict(extras)}
    count = {"Q": qk_heads or h, "K": qk_heads or kv_heads, "V": kv_heads, **{name: kv_heads for name, _ in extras}}
    heads = {}
    for name in ("Q", "K", "V", *(name for name, _ in extras)):
        out = count[name] * width[name]
        if name == "V" and values is not None:
            src = values
        elif name in project or name not in ("Q", "K", "V"):
            b_in = g.param(f"b_{name}", out) if bias == "all" else None
            src = g.linear(name, x, g.param(f"W_{name}", h * d, out), b_in)
        else:
            src = x  # sliced per head from the input itself
        split = src.view(b, N, count[name], *per_token(width[name])).swap(1, 2)
        heads[name] = g.copy(f"{name}ₕ", split, label=f"{name}ₕ ← split heads of {src.name}")
    y = core(g, *heads.values())
    merged = g.copy("Yₘ", y.swap(1, 2), label="Yₘ ← merge heads").view(b, N, h * v_width)
    b_out = g.param("b_O", h * d) if bias in ("all", "out") else None
    return g.linear("O", merged, g.param("W_O", h * v_width, h * d), b_out)


def layernorm(g: Graph, name: str, x: Tensor) -> Tensor:
    g.param(f"γ_{name}", x.shape[-1])
    g.param(f"β_{name}", x.shape[-1])
    return g.map("layernorm", name, x, label=f"{name} ← LayerNorm({x.name})")


def block(g: Graph, variant, x: Tensor) -> Tensor:
    """x + Attn(LN(x)), then x + MLP(LN(x)) with a GELU MLP of width r·d_embed."""
    width = h * d
    a = attention_layer(g, variant, layernorm(g, "LN₁", x))
    x = g.binary("add", "x₁", x, a, label="x₁ ← x + Attn")
    m = g.linear("M₁", layernorm(g, "LN₂", x), g.param("W_1", width, r * width), g.param("b_1", r * width))
    m = g.map("gelu", "G", m, label="G ← GELU(M₁)")
    m = g.linear("M₂", m, g.param("W_2", r * width, width), g.param("b_2", width))
    return g.binary("add", "x₂", x, m, label="x₂ ← x₁ + MLP")


def model(g: Graph, variant, x: Tensor) -> Tensor:
    with g.loop(D, "layers", carried=(x,)):
        x = block(g, variant, x)
    return layernorm(g, "LN_f", x)


SURROUNDINGS = {"layer": attention_layer, "block": block, "model": model}
