"""A variant from the user's own PyTorch code: torch.export with symbolic sizes, mapped onto the engine's ops.

`attn-cost trace PATH:NAME` exports NAME from PATH with `torch.export` and dynamic shapes: a function
`(q, k, v) -> y` over per-head tensors (b, h, N, d) becomes an attention core, an `nn.Module` subclass
constructible without arguments whose `forward(x)` takes (b, N, d_embed) becomes a layer (its widths are
the module's own). Every ATen node is mapped onto one of the engine's op kinds by a small rule in `RULES`
(the style of torch.utils.flop_counter's registry): products (matmul, mm, bmm, baddbmm, addmm, linear,
two-operand einsum), element-wise ops, reductions, softmax, SDPA; views and in-place ops are recognised from
the exported tensors' storages, so the liveness walk sees the code's real allocations. The result is a
`Variant` in the registry, and every command derives its FLOPs, peak memory, traffic and crossovers.

What a traced graph models: the arguments (q, k, v or x) stay alive for the whole call, since the caller
holds them; every tensor made inside is freed after the last op that reads it (a Python name that keeps
one alive longer is not seen: `del` it, as eager PyTorch frees on the last reference). Parameters and
buffers exist before the call and are not counted in the live set, as in the live-tensor tracer.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import operator
import re
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sympy as sp
import torch
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.graph import Graph, Storage, Tensor
from attn_cost.costmodel.symbols import N, b, d, h
from torch.multiprocessing.reductions import StorageWeakRef

aten = torch.ops.aten

EXAMPLE = {"b": 2, "h": 3, "N": 13, "d": 8}
"""Sizes of the example inputs handed to torch.export (distinct, so that no two dims are confused)."""
SYMBOLS = {"b": b, "h": h, "N": N, "d": d}
CORE_DIMS = ("b", "h", "N", "d")
LAYER_DIMS = ("b", "N")


@dataclass(frozen=True)
class Traced:
    """An exported program and what it stands for."""

    name: str
    path: Path
    kind: str
    """'core' (q, k, v) or 'layer' (x)."""
    program: Any
    """The torch.export.ExportedProgram."""
    symbolic: tuple[str, ...]
    """Dims that stayed symbolic (N always; b, h, d where the code allows)."""
    width: int | None = None
    """A layer's embedding width (fixed by its weights)."""


# -- loading and exporting ----------------------------------------------------------------------------


def split_spec(spec: str) -> tuple[Path, str]:
    """'path/to/file.py:name' -> (path, name)."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise UserError(f"--trace takes PATH:NAME (a Python file and a function or nn.Module in it), got {spec!r}")
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"trace {spec}: no such file {path}")
    return p, name


def load_object(path: Path, name: str) -> tuple[Any, Any]:
    """Import the user's file and return (module, the named object)."""
    from attn_cost.costmodel.plugins import located

    module_name = f"attn_cost_traced_{path.stem}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"trace {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise UserError(located(e, [path])) from None
    if not hasattr(module, name):
        found = [k for k, v in vars(module).items() if callable(v) and getattr(v, "__module__", None) == module_name]
        raise UserError(f"{path} has no {name!r} (it defines: {', '.join(found) or 'nothing callable'})")
    return module, getattr(module, name)


def trace(spec: str) -> Traced:
    """Export PATH:NAME with symbolic sizes."""
    path, name = split_spec(spec)
    module, obj = load_object(path, name)
    _anchor_stack_traces(module, path)
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        try:
            layer = obj()
        except Exception as e:
            raise UserError(
                f"{path}:{name}: an nn.Module traced as a layer must build without arguments ({e})"
            ) from None
        width = _embed_width(layer, path, name)
        return _export(name, path, "layer", layer.eval(), width)
    if isinstance(obj, torch.nn.Module):
        raise UserError(f"{path}:{name} is a module instance: name its class (constructible without arguments)")
    if not callable(obj):
        raise UserError(f"{path}:{name} is neither a function (q, k, v) -> y nor an nn.Module subclass")
    return _export(name, path, "core", _Core(obj), None)


class _Core(torch.nn.Module):
    """Wraps a function (q, k, v) -> y for torch.export."""

    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, q, k, v):
        return self.fn(q, k, v)


def _embed_width(layer: torch.nn.Module, path: Path, name: str) -> int:
    for attr in ("d_embed", "embed_dim", "dim", "d_model"):
        value = getattr(layer, attr, None)
        if isinstance(value, int):
            return value
    for m in layer.modules():
        if isinstance(m, torch.nn.Linear):
            return m.in_features
    raise UserError(f"{path}:{name}: cannot tell the module's embedding width: give it an attribute d_embed")


def _anchor_stack_traces(module: Any, path: Path) -> None:
    """Ask torch.export to keep the frames of the user's own functions in each node's stack trace (it
    keeps only `forward` frames otherwise), so an op it cannot map is named with its line."""
    register = getattr(torch.fx.proxy, "_register_stack_trace_anchor", None)
    if register is None:
        return
    where = str(path.resolve())
    for value in list(vars(module).values()):
        fns = list(vars(value).values()) if isinstance(value, type) else [value]
        for fn in fns:
            code = getattr(fn, "__code__", None)
            if code is not None and str(Path(code.co_filename).resolve()) == where:
                register(fn)


@contextmanager
def _symbolic_math():
    """math.sqrt on a symbolic size would fix that size to the example's value: use torch's symbolic sqrt."""
    sqrt = math.sqrt

    def symbolic_sqrt(x):
        return torch._sym_sqrt(x) if isinstance(x, (torch.SymInt, torch.SymFloat)) else sqrt(x)

    math.sqrt = symbolic_sqrt
    quiet = logging.getLogger("torch")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # torch's warnings while it fails over to fewer symbolic dims
    try:
        yield
    finally:
        math.sqrt = sqrt
        quiet.setLevel(level)


def _export(name: str, path: Path, kind: str, module: torch.nn.Module, width: int | None) -> Traced:
    """Export with as many symbolic dims as the code allows; N must stay symbolic."""
    from torch.export import Dim, export

    symbolic = list(CORE_DIMS if kind == "core" else LAYER_DIMS)
    gen = torch.Generator().manual_seed(0)
    if kind == "core":
        shape = tuple(EXAMPLE[k] for k in CORE_DIMS)
        args = tuple(torch.randn(*shape, generator=gen) for _ in range(3))
        axes = dict(enumerate(CORE_DIMS))
    else:
        args = (torch.randn(EXAMPLE["b"], EXAMPLE["N"], width, generator=gen),)
        axes = {0: "b", 1: "N"}
    while True:  # drop the dims the code fixes, one export at a time; N must stay
        dims = {k: Dim(k, min=2 if k == "N" else 1) for k in symbolic}
        dynamic = tuple({ax: dims[k] for ax, k in axes.items() if k in dims} for _ in args)
        try:
            with _symbolic_math(), torch.no_grad():
                program = export(module, args, dynamic_shapes=dynamic, prefer_deferred_runtime_asserts_over_guards=True)
        except Exception as e:
            if "Constraints violated" not in str(e) and "specialized" not in str(e):
                hint = ADVICE.get(next((k for k in ADVICE if k in str(e)), ""), "")
                raise UserError(f"torch.export could not trace {path}:{name}: {_first_line(e)}{hint}") from None
            named = re.search(r"Constraints violated \(([^)]*)\)", str(e))
            fixed = {x.strip() for x in named.group(1).split(",")} if named else set(symbolic) - {"N"}
            if "N" in fixed or not fixed & set(symbolic):
                raise UserError(
                    f"{path}:{name}: the sequence length N cannot stay symbolic: the code fixes it "
                    f"({_first_line(e)}). A Python loop or branch over N cannot be traced symbolically: write it "
                    "with tensor ops (cumsum, matmul), or describe it with the op DSL (g.loop, docs/variants.md)"
                ) from None
            symbolic = [k for k in symbolic if k not in fixed]
            continue
        return Traced(name, path, kind, program, tuple(symbolic), width)


ADVICE = {
    "cannot be used as inputs to control flow": " (a power of a size-dependent float, e.g. (d / n) ** 0.5, "
    "branches on its sign: write math.sqrt(d / n))",
}
"""What to do about torch.export errors that sizes used as numbers cause."""


def _first_line(e: BaseException | None) -> str:
    text = str(e).strip().splitlines()
    lines = [x.strip(" -") for x in text if x.strip() and "For more information" not in x]
    return lines[1] if len(lines) > 1 and lines[0].startswith("Constraints violated") else (lines[0] if lines else "")


# -- from the ATen graph to engine ops -----------------------------------------------------------------


@dataclass
class _Node:
    """What a rule sees: the fx node, its engine tensors and its output."""

    node: Any
    args: list[Any]
    kwargs: dict[str, Any]
    shape: tuple[sp.Expr, ...]


Rule = Callable[[_Node], tuple[str, tuple[Tensor, ...], dict[str, Any]]]


def _prod(xs) -> sp.Expr:
    return sp.Mul(*xs) if xs else sp.Integer(1)


def _tensors(n: _Node) -> tuple[Tensor, ...]:
    return tuple(a for a in n.args if isinstance(a, Tensor))


def _elementwise(kind: str, scalar_kind: str | None = None) -> Rule:
    """Element-wise op: with two tensors `kind`, with one tensor and a number `scalar_kind`."""

    def rule(n: _Node):
        ts = _tensors(n)
        gain = "α" if n.kwargs.get("alpha", 1) != 1 else None
        if len(ts) >= 2:
            return kind, ts, {"gain": gain}
        return scalar_kind or kind, ts, {"gain": gain}

    return rule


def _unary(kind: str) -> Rule:
    return lambda n: (kind, _tensors(n)[:1], {"gain": None})


def _reduce(kind: str) -> Rule:
    def rule(n: _Node):
        (x,) = _tensors(n)[:1]
        return kind, (x,), {"gain": None, "axis": n.args[1] if len(n.args) > 1 else None}

    return rule


def _pow(n: _Node):
    exponent = n.args[1] if len(n.args) > 1 else None
    if exponent == 2:
        return "mul", _tensors(n)[:1], {"gain": None}
    return "pointwise", _tensors(n)[:1], {"gain": None}


def _mm(n: _Node, a: Tensor, c: Tensor, accumulate: bool, gain: str | None = None) -> dict[str, Any]:
    m = sp.Integer(1) if len(a.shape) == 1 else a.shape[-2]
    k = a.shape[-1]
    cols = sp.Integer(1) if len(c.shape) == 1 else c.shape[-1]
    batch = sp.cancel(_prod(n.shape) / (m * cols))
    return {"m": m, "k": k, "n": cols, "batch": batch, "gain": gain, "accumulate": accumulate}


def _matmul(n: _Node):
    a, c = _tensors(n)[:2]
    return "matmul", (a, c), _mm(n, a, c, False)


def _baddbmm(n: _Node):
    """beta·input + alpha·(b1 @ b2): a product accumulated into the first argument."""
    acc, a, c = _tensors(n)[:3]
    gain = "α" if n.kwargs.get("alpha", 1) != 1 else None
    return "matmul", (acc, a, c), _mm(n, a, c, True, gain)


def _addmm_or_linear(n: _Node):
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


def _einsum(n: _Node):
    """A two-operand contraction 'ij,jk->ik': batch, m, k and n from the letters."""
    equation, operands = n.args[0], n.args[1]
    if len(operands) != 2 or "->" not in equation or "..." in equation:
        raise _UnmappedError(f"einsum {equation!r} (only explicit two-operand contractions)")
    lhs, out = equation.replace(" ", "").split("->")
    left, right = lhs.split(",")
    size: dict[str, sp.Expr] = {}
    for letters, t in ((left, operands[0]), (right, operands[1])):
        size.update(zip(letters, t.shape, strict=True))
    if any(ch not in right + out for ch in left) or any(ch not in left + out for ch in right):
        raise _UnmappedError(f"einsum {equation!r} sums a letter over one operand only")
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


def _sdpa(n: _Node):
    q, k, v = n.args[:3]
    if n.kwargs.get("attn_mask") is not None or (len(n.args) > 3 and n.args[3] is not None):
        raise _UnmappedError("scaled_dot_product_attention with an attn_mask (use is_causal)")
    return "fused_attention", (q, k, v), {"causal": bool(n.kwargs.get("is_causal", False))}


def _fill(n: _Node):
    return "fill", (), {"gain": None}


def _copy(n: _Node):
    ts = _tensors(n)
    return "copy", ts[1:] if n.node.target.__name__.startswith("copy_") else ts, {"gain": None, "overwrite": True}


def _mask(n: _Node):
    return "mask", _tensors(n), {"gain": None}


POINTWISE = (
    "relu", "sigmoid", "tanh", "sqrt", "rsqrt", "log", "log1p", "expm1", "exp2", "abs", "sin", "cos", "erf",
    "silu", "sign", "sgn", "clamp", "clamp_min", "clamp_max", "hardtanh", "leaky_relu", "softplus", "mish",
)  # fmt: skip
"""Element-wise functions of one tensor the engine counts as one op per element (kind `pointwise`)."""

RULES: dict[str, Rule] = {
    # products
    "matmul": _matmul,
    "mm": _matmul,
    "bmm": _matmul,
    "baddbmm": _baddbmm,
    "addmm": _addmm_or_linear,
    "linear": _addmm_or_linear,
    "einsum": _einsum,
    "scaled_dot_product_attention": _sdpa,
    # element-wise
    "add": _elementwise("add"),
    "sub": _elementwise("sub"),
    "rsub": _elementwise("sub"),
    "mul": _elementwise("mul", "scale"),
    "div": _elementwise("div", "scale"),
    "maximum": _elementwise("maximum"),
    "neg": _unary("scale"),
    "reciprocal": _unary("div"),
    "square": _unary("mul"),
    "pow": _pow,
    "exp": _unary("exp"),
    "elu": _unary("elu1"),
    "gelu": _unary("gelu"),
    **{op: _unary("pointwise") for op in POINTWISE},
    "masked_fill": _mask,
    "tril": _mask,
    "triu": _mask,
    "where": _mask,
    # row-wise and reductions
    "softmax": _unary("softmax"),
    "_softmax": _unary("softmax"),
    "layer_norm": _unary("layernorm"),
    "sum": _reduce("sum"),
    "mean": _reduce("sum"),
    "linalg_vector_norm": _reduce("norm"),
    "norm": _reduce("norm"),
    "amax": _reduce("max"),
    "cumsum": _unary("cumsum"),
    # data movement and allocation
    "copy": _copy,
    "clone": _copy,
    "contiguous": _copy,
    "cat": _copy,
    "stack": _copy,
    "fill": _fill,
    "zero": _fill,
    "empty": _fill,
    "new_empty": _fill,
    "zeros": _fill,
    "new_zeros": _fill,
    "ones": _fill,
    "new_ones": _fill,
    "full": _fill,
    "new_full": _fill,
    "zeros_like": _fill,
    "ones_like": _fill,
    "empty_like": _fill,
    "full_like": _fill,
}
"""ATen op (overload packet, trailing '_' dropped) -> engine op kind, inputs and attributes."""

VIEWS = {
    "view", "_unsafe_view", "reshape", "transpose", "t", "permute", "unsqueeze", "squeeze", "expand", "slice",
    "select", "flatten", "unflatten", "alias", "narrow", "as_strided", "split", "split_with_sizes", "chunk",
    "unbind", "detach", "contiguous", "clone", "movedim", "swapaxes", "expand_as", "view_as", "reshape_as",
    "lift_fresh_copy",
}  # fmt: skip
"""Ops that return a view when they can; when their output has its own storage they are a copy."""

FIXED_DTYPES = {torch.bool: "bool", torch.int32: "int32", torch.int64: "int64"}
"""Non-floating dtypes and their engine names (floating tensors follow the activation dtype, --dtype)."""

SKIP = {"sym_size", "_assert_scalar", "_assert_tensor_metadata", "sym_constrain_range_for_size", "dropout"}


class _UnmappedError(Exception):
    """An ATen node no rule can map (the message says why)."""


def _engine_expr(value: Any, subs: dict[sp.Symbol, sp.Expr]) -> sp.Expr:
    """A size from the exported program in the engine's symbols."""
    if isinstance(value, torch.SymInt):
        expr = value.node.expr
    else:
        return sp.Integer(int(value))
    expr = sp.sympify(expr).xreplace(subs)
    if any(type(f).__name__ in ("FloorDiv", "CeilDiv", "CleanDiv", "Mod") for f in sp.preorder_traversal(expr)):
        expr = sp.simplify(
            expr.replace(
                lambda f: type(f).__name__ in ("FloorDiv", "CleanDiv"), lambda f: sp.floor(f.args[0] / f.args[1])
            )
        )
    return sp.expand(expr)


def where(node: Any) -> tuple[str, str]:
    """The innermost user frame of a node's stack trace: ('file.py:12', 'source line')."""
    trace_text = node.meta.get("stack_trace") or ""
    lines = trace_text.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i].strip()
        if line.startswith('File "'):
            file = line.split('"')[1]
            lineno = line.split(", line ")[1].split(",")[0]
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return f"{file}:{lineno}", code
    return "(unknown location)", ""


def _aten_name(node: Any) -> str:
    target = node.target
    return (
        f"aten.{target.__name__}"
        if isinstance(target, torch._ops.OpOverload)
        else str(getattr(target, "__name__", target))
    )


def replay(t: Traced, g: Graph, inputs: list[Tensor]) -> Tensor:
    """Write the exported program's ops into an engine graph, starting from `inputs` (q, k, v, or x)."""
    ep = t.program
    from torch.export.graph_signature import InputKind

    kinds = {spec.arg.name: spec.kind for spec in ep.graph_signature.input_specs}
    targets = {spec.arg.name: spec.target for spec in ep.graph_signature.input_specs}
    subs: dict[sp.Symbol, sp.Expr] = {}
    env: dict[Any, Any] = {}
    storages: dict[Any, Storage] = {}
    user = iter(inputs)
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta["val"]
        if kinds[node.name] == InputKind.USER_INPUT:
            given = next(user)
            for size, engine in zip(val.shape, given.shape, strict=True):
                if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sp.Symbol):
                    subs.setdefault(size.node.expr, engine)
            env[node] = given
        else:
            shape = tuple(_engine_expr(s, subs) for s in val.shape)
            name = str(targets[node.name] or node.name)
            if kinds[node.name] == InputKind.PARAMETER:
                env[node] = g.param(name, *shape)
            else:  # a buffer or a constant: exists before the call, owns no activation memory
                env[node] = Tensor(name, shape, Storage(-1, sp.Integer(0), None, -1, name))
        storages[StorageWeakRef(val.untyped_storage())] = env[node].storage
    out = None
    for node in ep.graph.nodes:
        if node.op == "call_function":
            env[node] = _replay_node(t, g, node, env, storages, subs)
        elif node.op == "output":
            results = [env.get(a) for a in node.args[0] if a is not None]
            tensors = [r for r in results if isinstance(r, Tensor)]
            if not tensors:
                raise UserError(f"{t.path}:{t.name} returns no tensor")
            out = tensors[0]
    if g.ops:  # the caller holds the arguments: eager PyTorch cannot free them before the call returns
        g.ops[-1].attrs.setdefault("holds", []).extend(inputs)
    return out


def _replay_node(t: Traced, g: Graph, node: Any, env: dict, storages: dict, subs: dict) -> Any:
    val = node.meta.get("val")
    target = node.target
    if target is operator.getitem:
        return env[node.args[0]][node.args[1]]
    if not isinstance(target, torch._ops.OpOverload):
        return _Scalar(node.name)  # arithmetic on sizes and scalars (sym_size, sqrt, ...): no tensor work
    base = target.overloadpacket.__name__
    short = base.rstrip("_") if base not in ("_softmax",) else base
    if short in SKIP or base in SKIP:
        return _Scalar(node.name)
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    if not all(isinstance(v, torch.Tensor) for v in vals):
        return _Scalar(node.name)
    for v in vals:
        if not v.dtype.is_floating_point and v.dtype not in FIXED_DTYPES:
            loc, code = where(node)
            raise UserError(
                f"{loc}: {_aten_name(node)} makes a {str(v.dtype).replace('torch.', '')} tensor (in `{code}`): "
                "only floating-point, bool and integer tensors are modelled"
            )
    args = [_lookup(a, env) for a in node.args]
    kwargs = {k: _lookup(a, env) for k, a in node.kwargs.items()}
    outs = []
    for i, v in enumerate(vals):
        shape = tuple(_engine_expr(s, subs) for s in v.shape)
        key = StorageWeakRef(v.untyped_storage())
        label_name = node.name if len(vals) == 1 else f"{node.name}[{i}]"
        known = storages.get(key)
        mutating = target._schema.is_mutable
        if known is not None and not mutating and short in VIEWS | {"expand"}:
            outs.append(Tensor(label_name, shape, known))
            continue
        if known is not None and not mutating:  # e.g. a no-op contiguous() or reshape of a contiguous tensor
            outs.append(Tensor(label_name, shape, known))
            continue
        if short in VIEWS and short not in RULES:
            rule: Rule = _copy
        else:
            rule = RULES.get(short)
        if rule is None:
            loc, code = where(node)
            raise UserError(
                f"{loc}: cannot map {_aten_name(node)} onto an engine op kind (in `{code}`); "
                f"mapped ops: {', '.join(sorted(RULES))}"
            )
        n = _Node(node, args, kwargs, shape)
        try:
            kind, ins, attrs = rule(n)
        except _UnmappedError as e:
            loc, code = where(node)
            raise UserError(f"{loc}: cannot map {_aten_name(node)}: {e} (in `{code}`)") from None
        label = (
            f"{label_name} ← {_aten_name(node)}({', '.join(_arg_label(a) for a in args if not isinstance(a, list))})"
        )
        if kind == "fused_attention":
            result = g.fused_attention(label_name, *ins, causal=attrs["causal"], label=label)
        elif known is not None:  # in place, or out=: writes into an existing storage
            into = kwargs.get("out") if isinstance(kwargs.get("out"), Tensor) else args[0]
            others = tuple(x for x in ins if x is not into)
            if (kwargs.get("out") is not None and into is not args[0]) or kind in ("fill", "copy"):
                attrs = {**attrs, "overwrite": True}
            result = g.traced(kind, label_name, shape, others, into=Tensor(into.name, shape, known), attrs=attrs,
                              label=label)  # fmt: skip
        else:
            attrs.pop("overwrite", None)
            dtype = None if v.dtype.is_floating_point else FIXED_DTYPES[v.dtype]
            result = g.traced(kind, label_name, shape, ins, attrs=attrs, label=label, dtype=dtype)
        storages[key] = result.storage
        outs.append(result)
    return outs[0] if len(vals) == 1 and not isinstance(val, (tuple, list)) else outs


@dataclass(frozen=True)
class _Scalar:
    """A number computed from sizes (a scale factor): no tensor, no cost."""

    name: str

    def __str__(self) -> str:
        return self.name


def _lookup(a: Any, env: dict) -> Any:
    if isinstance(a, (list, tuple)):
        return [_lookup(x, env) for x in a]
    return env.get(a, a) if hasattr(a, "op") else a


def _arg_label(a: Any) -> str:
    return a.name if isinstance(a, Tensor) else str(a)


# -- registration -------------------------------------------------------------------------------------


def register(spec: str) -> str:
    """Trace PATH:NAME and register it as a variant named NAME; returns the name."""
    from attn_cost.costmodel.plugins import check
    from attn_cost.costmodel.variants import REGISTRY, Variant, _add, all_variants

    all_variants()
    path, name = split_spec(spec)
    canonical = name
    if canonical in REGISTRY:
        if getattr(REGISTRY[canonical], "source", "").startswith(f"traced from {path}"):
            return canonical
        raise UserError(f"traced variant {canonical!r} clashes with a registered variant: rename {name} in {path}")
    t = trace(spec)
    source = f"traced from {path}:{name} with torch.export (symbolic: {', '.join(t.symbolic)})"
    fixed = [k for k in (CORE_DIMS if t.kind == "core" else LAYER_DIMS) if k not in t.symbolic]
    if fixed:  # the formulas hold at the example's sizes only: say so once, on stderr (stdout may be JSON)
        sizes = ", ".join(f"{k} = {EXAMPLE[k]}" for k in fixed)
        sys.stderr.write(f"attn-cost: note: {path}:{name} fixes {sizes} (torch.export could not keep "
                         "them symbolic); its formulas hold at these sizes only\n")  # fmt: skip
        source += f"; fixed: {sizes}"
    if t.kind == "core":
        core = lambda g, q, k, v: replay(t, g, [q, k, v])  # noqa: E731
        v = Variant(canonical, f"{name} as written in {path.name} (traced)", source, "traced", core=core)
    else:
        v = Variant(canonical, f"{name} as written in {path.name} (traced; d_embed = {t.width})", source, "traced",
                    layer=lambda g, x: _replay_layer(t, g, x))  # fmt: skip
    _add(v)
    try:
        check(v)
    except UserError:
        del REGISTRY[canonical]
        raise
    return canonical


def _replay_layer(t: Traced, g: Graph, x: Tensor) -> Tensor:
    """A module's widths are its own: its input is (b, N, d_embed) with the module's d_embed."""
    if x.storage.producer != -1 or x not in g.inputs:
        raise UserError(f"{t.name} is a traced module with a fixed width: it has the layer scope only")
    g.inputs.remove(x)
    own = g.input("X", b, N, t.width)
    return replay(t, g, [own])
