"""From ATen ops to the engine's op kinds: one small rule per ATen op family in `RULES` (the style of
torch.utils.flop_counter's registry), the views, fixed dtypes and the ops skipped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy as sp
import torch
from attn_cost.costmodel.dtypes import DTYPES
from attn_cost.costmodel.graph import Tensor


@dataclass
class RuleNode:
    """What a rule sees: the fx node, its engine tensors and its output."""

    node: Any
    args: list[Any]
    kwargs: dict[str, Any]
    shape: tuple[sp.Expr, ...]


Rule = Callable[[RuleNode], tuple[str, tuple[Tensor, ...], dict[str, Any]]]


RULES: dict[str, Rule] = {}
"""ATen op (overload packet, trailing '_' dropped) -> the rule that maps it onto an engine op kind, its inputs and
attributes. Each rule registers itself for its op family with `@rule(...)`, as torch.utils.flop_counter's
`register_flop_formula` registers a FLOP formula; the families made by a rule factory are registered at the end."""


def rule(*ops: str) -> Callable[[Rule], Rule]:
    """Register the decorated rule for every ATen op named."""

    def add(fn: Rule) -> Rule:
        for op in ops:
            RULES[op] = fn
        return fn

    return add


POINTWISE = (
    "relu", "sigmoid", "tanh", "sqrt", "rsqrt", "log", "log1p", "expm1", "exp2", "abs", "sin", "cos", "erf",
    "silu", "sign", "sgn", "clamp", "clamp_min", "clamp_max", "hardtanh", "leaky_relu", "softplus", "mish",
    "floor", "ceil", "round", "trunc", "frac", "log2", "log10", "nan_to_num", "hardsigmoid", "hardswish", "elu",
    "relu6", "selu", "celu", "logsigmoid", "erfinv", "tan", "atan", "sinh", "cosh",
)  # fmt: skip


"""Element-wise functions of one tensor the engine counts as one op per element (kind `pointwise`)."""

COMPARE = (
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "logical_xor", "bitwise_and",
    "bitwise_or", "bitwise_not", "bitwise_xor", "__and__", "__or__", "__xor__", "__invert__", "isinf", "isnan",
    "isfinite", "isneginf", "isposinf",
)  # fmt: skip


"""Comparisons and logic that build masks (kind `compare`: one op per output element, real memory)."""

GATHER = (
    "index", "index_select", "gather", "embedding", "take_along_dim", "constant_pad_nd", "pad", "repeat",
    "repeat_interleave", "roll", "flip", "to", "_to_copy", "type_as", "masked_select", "tile", "index_put",
    "scatter", "index_copy", "dropout", "native_dropout", "feature_dropout", "alpha_dropout", "diag_embed",
    "expand_copy", "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d", "_pad_enum",
    "scatter_add", "index_add", "scatter_reduce", "index_fill", "masked_scatter", "polar", "complex",
    "view_as_real", "view_as_complex", "_conj", "resolve_conj", "resolve_neg",
)  # fmt: skip


"""Data movement into a new tensor (kind `copy`): indexing, padding, dtype conversion, dropout in eval when it
copies. Every tensor argument (index tensors included) is read."""

FACTORIES = (
    "fill", "zero", "empty", "new_empty", "zeros", "new_zeros", "ones", "new_ones", "full", "new_full", "zeros_like",
    "ones_like", "empty_like", "full_like", "arange", "eye", "scalar_tensor", "empty_strided", "new_empty_strided",
    "linspace", "randn", "rand", "randn_like", "rand_like", "normal", "randint", "tensor", "triu_indices",
    "tril_indices", "empty_permuted",
)  # fmt: skip


"""New tensors from sizes alone (kind `fill`: memory, no arithmetic)."""


def _prod(xs) -> sp.Expr:
    return sp.Mul(*xs) if xs else sp.Integer(1)


def _tensors(n: RuleNode) -> tuple[Tensor, ...]:
    """The tensor arguments, those inside a list (torch.cat's) included: every one is read."""
    flat = [x for a in n.args for x in (a if isinstance(a, (list, tuple)) else [a])]
    return tuple(a for a in flat if isinstance(a, Tensor))


def _elementwise(kind: str, scalar_kind: str | None = None) -> Rule:
    """Element-wise op: with two tensors `kind`, with one tensor and a number `scalar_kind`."""

    def rule(n: RuleNode):
        ts = _tensors(n)
        gain = "α" if n.kwargs.get("alpha", 1) != 1 else None
        if len(ts) >= 2:
            return kind, ts, {"gain": gain}
        return scalar_kind or kind, ts, {"gain": gain}

    return rule


def _unary(kind: str) -> Rule:
    return lambda n: (kind, _tensors(n)[:1], {"gain": None})


def _reduce(kind: str, dim_at: int = 1) -> Rule:
    """A reduction (over an axis, or over everything); with two tensors, the element-wise form (max.other).
    `dim_at`: the position of the dims argument (2 for norms, whose second argument is the order)."""

    def rule(n: RuleNode):
        ts = _tensors(n)
        if len(ts) >= 2:
            return "maximum", ts[:2], {"gain": None}
        dims = n.args[dim_at] if len(n.args) > dim_at else n.kwargs.get("dim")
        if isinstance(dims, (list, tuple)):
            dims = dims[0] if len(dims) == 1 else None  # several axes at once: no one axis to name
        return kind, ts[:1], {"gain": None, "axis": dims if isinstance(dims, int) else None}

    return rule


@rule("pow")
def _pow(n: RuleNode):
    exponent = n.args[1] if len(n.args) > 1 else None
    if exponent == 2:
        return "mul", _tensors(n)[:1], {"gain": None}
    return "pointwise", _tensors(n)[:1], {"gain": None}


def _mm(n: RuleNode, a: Tensor, c: Tensor, accumulate: bool, gain: str | None = None) -> dict[str, Any]:
    m = sp.Integer(1) if len(a.shape) == 1 else a.shape[-2]
    k = a.shape[-1]
    cols = sp.Integer(1) if len(c.shape) == 1 else c.shape[-1]
    batch = sp.cancel(_prod(n.shape) / (m * cols))
    return {"m": m, "k": k, "n": cols, "batch": batch, "gain": gain, "accumulate": accumulate}


@rule("matmul", "mm", "bmm")
def _matmul(n: RuleNode):
    a, c = _tensors(n)[:2]
    return "matmul", (a, c), _mm(n, a, c, False)


@rule("baddbmm")
def _baddbmm(n: RuleNode):
    """beta·input + alpha·(b1 @ b2): a product accumulated into the first argument."""
    acc, a, c = _tensors(n)[:3]
    gain = "α" if n.kwargs.get("alpha", 1) != 1 else None
    return "matmul", (acc, a, c), _mm(n, a, c, True, gain)


@rule("addmm", "linear")
def _addmm_or_linear(n: RuleNode):
    """aten.linear(x, W, bias) and aten.addmm(bias, x, Wᵀ): a projection when W is a weight."""
    name = n.node.target.__name__
    if name.startswith("linear"):
        x, w = n.args[0], n.args[1]
        bias = n.args[2] if len(n.args) > 2 else None
        k, cols = w.shape[-1], w.shape[0]
    else:
        bias, x, w = n.args[0], n.args[1], n.args[2]
        k, cols = w.shape[0], w.shape[-1]
    attrs = {"m": _prod(x.shape[:-1]), "k": k, "n": cols, "batch": sp.Integer(1), "bias": bias is not None}
    if w.storage.producer == -1 and w.storage.numel == 0:  # a parameter or a buffer
        return "linear", (x,), attrs
    ins = (bias, x, w) if bias is not None else (x, w)
    mm = {"m": attrs["m"], "k": k, "n": cols, "batch": sp.Integer(1), "gain": None, "accumulate": bias is not None}
    return "matmul", ins, mm


@rule("einsum")
def _einsum(n: RuleNode):
    """A two-operand contraction 'ij,jk->ik' ('...' stands for the leading dims): batch, m, k and n from the
    letters. More operands are contracted left to right by eager torch.einsum (the as-written run sees each
    product); the exported graph keeps one node, which is refused here."""
    equation, operands = n.args[0], n.args[1]
    if len(operands) != 2:
        raise UnmappedError(f"einsum {equation!r} with {len(operands)} operands in the exported graph")
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    spare = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation)
    dots = "".join(next(spare) for _ in range(max(len(t.shape) for t in operands)))
    terms = [x.replace("...", dots[len(dots) - (len(t.shape) - len(x.replace("...", ""))):]) for x, t in
             zip(terms, operands, strict=True)]  # fmt: skip
    if not arrow:
        out = ("" if "..." not in lhs else dots) + "".join(sorted(c for c in "".join(terms)
                                                                   if "".join(terms).count(c) == 1 and c not in dots))
    out = out.replace("...", dots[len(dots) - (len(n.shape) - len(out.replace("...", ""))):])
    left, right = terms
    size: dict[str, sp.Expr] = {}
    for letters, t in ((left, operands[0]), (right, operands[1])):
        for c, s in zip(letters, t.shape, strict=True):
            if c not in size or size[c] == 1:
                size[c] = s
    if any(ch not in right + out for ch in left) or any(ch not in left + out for ch in right):
        raise UnmappedError(f"einsum {equation!r} sums a letter over one operand only")
    pick = lambda keep: _prod([size[c] for c in size if keep(c)])  # noqa: E731
    attrs = {
        "batch": pick(lambda c: c in left and c in right and c in out),
        "m": pick(lambda c: c in left and c not in right),
        "k": pick(lambda c: c in left and c in right and c not in out),
        "n": pick(lambda c: c in right and c not in left),
        "gain": None,
        "accumulate": False,
    }
    return "matmul", tuple(operands), attrs


@rule(
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
)
def _sdpa(n: RuleNode):
    """SDPA (the exported node, or the CPU kernel eager PyTorch runs): q, k, v and the mask it reads."""
    q, k, v = n.args[:3]
    mask = n.kwargs.get("attn_mask")
    if mask is None and len(n.args) > 3 and isinstance(n.args[3], Tensor):
        mask = n.args[3]
    causal = n.kwargs.get("is_causal", n.args[5] if len(n.args) > 5 and isinstance(n.args[5], bool) else False)
    if n.node.target.__name__.startswith("_scaled_dot_product"):
        causal = n.args[4] if len(n.args) > 4 else n.kwargs.get("is_causal", False)
    return "fused_attention", (q, k, v), {"causal": bool(causal), "mask": mask if isinstance(mask, Tensor) else None}


@rule("convolution", "conv1d", "conv2d", "conv3d")
def _conv(n: RuleNode):
    """A convolution as a product: each output element is a dot product over c_in/groups × kernel values
    (what FlopCounterMode counts: 2 per multiply-add)."""
    x, w = n.args[0], n.args[1]
    bias = n.args[2] if len(n.args) > 2 and isinstance(n.args[2], Tensor) else None
    if len(n.args) > 6 and n.args[6] is True:
        raise UnmappedError("transposed convolution")
    cols = w.shape[0]
    attrs = {"m": sp.cancel(_prod(n.shape) / cols), "k": _prod(w.shape[1:]), "n": cols, "batch": sp.Integer(1),
             "bias": bias is not None}  # fmt: skip
    if w.storage.producer == -1 and w.storage.numel == 0:
        return "linear", (x,), attrs
    raise UnmappedError("a convolution whose weight is computed in the forward")


@rule(*FACTORIES)
def _fill(n: RuleNode):
    return "fill", (), {"gain": None}


@rule("copy", "clone", "contiguous", "cat", "stack", *GATHER)
def copy_rule(n: RuleNode):
    """A copy into a fresh or an existing tensor (`copy_` reads its source only): the rule of every op that copies."""
    ts = _tensors(n)
    return "copy", ts[1:] if n.node.target.__name__.startswith("copy_") else ts, {"gain": None, "overwrite": True}


@rule("masked_fill", "tril", "triu", "where")
def _mask(n: RuleNode):
    return "mask", _tensors(n), {"gain": None}


@rule(*COMPARE, "bucketize", "searchsorted")
def _compare(n: RuleNode):
    return "compare", _tensors(n), {"gain": None}


# element-wise, row-wise and reductions: one rule made by its factory per engine op kind
rule("add", "lerp", "hypot")(_elementwise("add"))
rule("sub", "rsub", "diff")(_elementwise("sub"))
rule("mul")(_elementwise("mul", "scale"))
rule("div", "floor_divide", "remainder", "fmod")(_elementwise("div", "scale"))
rule("maximum", "minimum")(_elementwise("maximum"))
rule("neg")(_unary("scale"))
rule("reciprocal")(_unary("div"))
rule("square")(_unary("mul"))
rule("exp")(_unary("exp"))
rule("gelu")(_unary("gelu"))
rule(*POINTWISE)(_unary("pointwise"))
rule("elu")(_unary("elu1"))  # in POINTWISE too: its own rule, registered after
rule("softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax")(_unary("softmax"))
rule(
    "layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm", "native_group_norm", "native_batch_norm",
    "_native_batch_norm_legit_no_training",
)(_unary("layernorm"))
rule("sum", "mean", "logsumexp", "prod", "var", "std", "var_mean", "std_mean")(_reduce("sum"))
rule("linalg_vector_norm", "norm")(_reduce("norm", dim_at=2))
rule("amax", "amin", "max", "min", "argmax", "argmin", "topk", "sort", "argsort", "kthvalue")(_reduce("max"))
rule("cumsum", "cumprod")(_unary("cumsum"))
rule("addcmul", "xlogy")(_elementwise("mul"))
rule("addcdiv", "atan2")(_elementwise("div"))


VIEWS = {
    "view", "_unsafe_view", "reshape", "transpose", "t", "permute", "unsqueeze", "squeeze", "expand", "slice",
    "select", "flatten", "unflatten", "alias", "narrow", "as_strided", "split", "split_with_sizes", "chunk",
    "unbind", "detach", "contiguous", "clone", "movedim", "swapaxes", "expand_as", "view_as", "reshape_as",
    "lift_fresh_copy", "lift_fresh", "_reshape_alias", "diagonal", "unfold", "view_as_real", "view_as_complex",
    "real", "imag", "tensor_split", "unsafe_split", "_unsafe_index", "dropout", "transpose_copy", "permute_copy",
    "alias_copy", "t_copy", "swapdims", "mT", "mH", "adjoint", "align_as", "type_as", "to", "_to_copy",
}  # fmt: skip


"""Ops that return their input (or a view of it) when they can; when their output has its own storage, the
op's rule (or a copy) applies."""


SAME_BYTES = {torch.uint8: "bool", torch.int8: "bool", torch.int16: "fp16", torch.complex64: "fp64"}
"""torch dtypes the engine has no name of, by the name of a dtype of the same bytes."""
FIXED_DTYPES = {**{getattr(torch, t.torch): name for name, t in DTYPES.items() if t.storage and name != "fp32"},
                **SAME_BYTES}  # fmt: skip


"""dtypes other than the activation's (float32 in the run) and their engine names, by their bytes (one-byte
integers count as bool's byte, complex64 as fp64's 8); float32 tensors follow the activation dtype, --dtype."""


SKIP = {"sym_size", "_assert_scalar", "_assert_tensor_metadata", "sym_constrain_range_for_size", "sym_numel",
        "sym_stride", "sym_storage_offset", "_assert_async", "_functional_assert_async"}  # fmt: skip


"""Nodes that are not tensor work (sizes, asserts). Dropout is not here: in eval it returns its input."""


class UnmappedError(Exception):
    """An ATen node no rule can map (the message says why)."""
