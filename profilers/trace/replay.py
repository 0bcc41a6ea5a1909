"""Replay a recording or an exported graph onto an engine `Graph`: each ATen op through its rule in `aten.RULES`,
every storage freed where the code (or, exported, the last use) freed it."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sympy as sp
import torch
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.graph import Graph, Storage, Tensor
from attn_cost.costmodel.symbols import Pads, padded
from attn_cost.profilers.trace.aten import FIXED_DTYPES, RULES, SKIP, VIEWS, RuleNode, UnmappedError, copy_rule
from attn_cost.profilers.trace.load import CORE_DIMS, LAYER_DIMS
from attn_cost.profilers.trace.record import Meta, transposed_view, where
from attn_cost.profilers.trace.symbolic import FLOAT_FUNCTIONS, Subs, engine_expr, plain_float
from torch.export.graph_signature import InputKind
from torch.multiprocessing.reductions import StorageWeakRef

if TYPE_CHECKING:
    from attn_cost.profilers.trace.aten import Rule
    from attn_cost.profilers.trace.register import Traced


def _aten_name(node: Any) -> str:
    target = node.target
    return (
        f"aten.{target.__name__}"
        if isinstance(target, torch._ops.OpOverload)
        else str(getattr(target, "__name__", target))
    )


def _skey(v: Any) -> Any:
    """A hashable identity of an output's storage (fake tensors of torch.export, or a recorded Meta)."""
    return ("eager", v.storage) if isinstance(v, Meta) else StorageWeakRef(v.untyped_storage())


def _is_tensor(v: Any) -> bool:
    return isinstance(v, (torch.Tensor, Meta))


def replay_export(t: Traced, g: Graph, inputs: list[Tensor], program: Any = None) -> Tensor:
    """Write the exported program's ops into an engine graph, starting from `inputs` (q, k, v, or x)."""
    ep = program if program is not None else t.exported.program

    kinds = {spec.arg.name: spec.kind for spec in ep.graph_signature.input_specs}
    targets = {spec.arg.name: spec.target for spec in ep.graph_signature.input_specs}
    subs = Subs(t.recording.pads)
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
                if not isinstance(size, torch.SymInt):
                    continue
                expr = size.node.expr
                m = t.recording.divisors.get(str(engine), 1)
                if m > 1 and isinstance(engine, sp.Symbol):  # the code requires N % m == 0, as in the run
                    whole = sp.Symbol(f"{engine}_per_{m}", integer=True, positive=True)
                    subs.post = {**subs.post, whole: engine / m}
                    engine = m * whole
                if isinstance(expr, sp.Symbol):
                    subs.setdefault(expr, engine)
                elif isinstance(expr, sp.Mul) and len(expr.args) == 2 and expr.args[0].is_Integer:
                    subs.setdefault(expr.args[1], engine / expr.args[0])  # N = 4·K exported as a derived dim
            env[node] = given
        else:
            shape = tuple(engine_expr(s, subs) for s in val.shape)
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
            if t.recording.pads:
                _padding(g, node, env[node], env, t.recording.pads)
        elif node.op == "output":
            results = [env.get(a) for a in node.args[0] if a is not None]
            tensors = [r for r in results if isinstance(r, Tensor)]
            if not tensors:
                raise UserError(f"{t.path}:{t.name} returns no tensor")
            out = tensors[0]
    if g.ops:  # the caller holds the arguments: eager PyTorch cannot free them before the call returns
        g.ops[-1].attrs.setdefault("holds", []).extend(inputs)
    assert out is not None, "an exported graph ends in its output node"
    return out


def replay_eager(t: Traced, g: Graph, inputs: list[Tensor]) -> Tensor:
    """Write the recorded eager ops into an engine graph; every storage lives until the op after which the
    run saw it die (a Python name holds it), so the engine's liveness walk is the run's."""
    rec = t.recording
    subs = Subs(rec.pads)
    env: dict[Any, Any] = {}
    storages: dict[Any, Storage] = {}
    inverse = {k: s for s, k in rec.symbols.items()}
    for sid, (kind, label) in rec.leaves.items():
        ref = rec.refs[sid]
        if kind == "input":
            env[ref] = inputs[label]
            storages[("eager", sid)] = env[ref].storage
    dims = CORE_DIMS if t.kind == "core" else LAYER_DIMS
    for k, given in zip(dims, inputs[0].shape if t.kind == "core" else (inputs[0].shape[0], inputs[0].shape[1]),
                        strict=False):  # fmt: skip
        if k in inverse and k in rec.fixed:  # the code fixed it: its value, in the run's sizes too
            subs[inverse[k]] = sp.Integer(rec.fixed[k])
        elif k in inverse:
            m = rec.divisors.get(k, 1)
            if m > 1 and isinstance(given, sp.Symbol):
                whole = sp.Symbol(f"{given}_per_{m}", integer=True, positive=True)
                subs[inverse[k]] = m * whole
                subs.post = {**subs.post, whole: given / m}
            else:
                subs[inverse[k]] = given
    for sid, (kind, label) in rec.leaves.items():
        if kind == "input":
            continue
        ref = rec.refs[sid]
        shape = tuple(engine_expr(s, subs) for s in rec.shapes[sid])
        if kind == "param":
            env[ref] = g.param(str(label), *shape)
        else:  # a buffer or a constant: exists before the call, owns no activation memory
            env[ref] = Tensor(str(label), shape, Storage(-1, sp.Integer(0), None, -1, str(label)))
        storages[("eager", sid)] = env[ref].storage
    by_sid: dict[int, Storage] = {}
    for i, node in enumerate(rec.nodes):
        result = _replay_node(t, g, node, env, storages, subs)
        if rec.pads:
            _padding(g, node, result, env, rec.pads)
        outs = result if isinstance(result, list) else [result]
        for ref, value in zip(node.outs, outs, strict=False):
            env[ref] = value
        for meta in node.meta["val"] if isinstance(node.meta["val"], list) else [node.meta["val"]]:
            s = storages.get(("eager", meta.storage))
            if s is not None:
                by_sid[meta.storage] = s
        for sid in rec.deaths.get(i, ()):
            s = by_sid.get(sid)
            if s is not None and s.producer >= 0 and g.ops:
                g.ops[-1].attrs.setdefault("holds", []).append(Tensor(s.name, (), s))
    out = env.get(rec.output)
    if not isinstance(out, Tensor):
        raise UserError(f"{t.path}:{t.name} returns no tensor")
    alive = set(by_sid) - {sid for v in rec.deaths.values() for sid in v}
    if g.ops:  # alive at the return (results the caller drops, tuples): through the last op
        g.ops[-1].attrs.setdefault("holds", []).extend(Tensor(by_sid[s].name, (), by_sid[s]) for s in sorted(alive)
                                                       if by_sid[s].producer >= 0)  # fmt: skip
        g.ops[-1].attrs["holds"].extend(inputs)
    return out


def _padding(g: Graph, node: Any, out: Any, env: dict, m: int) -> None:
    """Code that pads a length n up to m·⌈n/m⌉ rows runs only where n is not a multiple of m: elsewhere it goes
    on with the tensor itself (`Graph.padding`). The run shows it as constant_pad_nd (F.pad) of x, torch.cat of x
    and zeros, x copied into the first n rows of a zeros tensor of the padded length (copy_ in the as-written
    run, slice_scatter in the exported graph)."""
    if not isinstance(out, Tensor) or not isinstance(node.target, torch._ops.OpOverload):
        return
    name = node.target.overloadpacket.__name__
    args = [_lookup(a, env) for a in node.args]
    whole, bases = out, []
    if name == "constant_pad_nd":
        sources = args[:1]
    elif name == "cat":
        sources = list(args[0])
    elif name in ("copy_", "slice_scatter") and len(args) > 1:
        sources = [args[1]]
        if name == "copy_" and out.storage.producer >= 0:
            whole = g.ops[out.storage.producer].output  # the tensor written into, as it was made
        elif isinstance(args[0], Tensor) and args[0].shape == out.shape and args[0].storage.producer >= 0:
            bases = [args[0]]  # the zeros tensor the exported graph scatters into
    else:
        return
    for x in sources:
        if not isinstance(x, Tensor) or len(x.shape) != len(whole.shape) or whole.storage.stands_for is not None:
            continue
        grown = [i for i, (a, c) in enumerate(zip(x.shape, whole.shape, strict=True)) if sp.expand(a - c) != 0]
        if len(grown) == 1 and sp.expand(whole.shape[grown[0]] - padded(x.shape[grown[0]], m)) == 0:
            for t in (whole, *bases):
                g.padding(t, x, Pads(x.shape[grown[0]], m))
            return


def _replay_node(t: Traced, g: Graph, node: Any, env: dict, storages: dict, subs: dict) -> Any:
    val = node.meta.get("val")
    target = node.target
    if target is operator.getitem:
        return env[node.args[0]][node.args[1]]
    if not isinstance(target, torch._ops.OpOverload):
        return _Scalar(node.name)  # arithmetic on sizes and scalars (sym_size, sqrt, ...): no tensor work
    base = target.overloadpacket.__name__
    short = base if base.startswith("__") else base.rstrip("_")
    if short in SKIP or base in SKIP:
        return _Scalar(node.name)
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    if not vals or not all(_is_tensor(v) for v in vals):
        return _Scalar(node.name)
    for v in vals:
        if v.dtype != torch.float32 and v.dtype not in FIXED_DTYPES:
            loc, code = where(node)
            raise UserError(
                f"{loc}: {_aten_name(node)} makes a {str(v.dtype).replace('torch.', '')} tensor (in `{code}`): "
                "only floating-point, complex, bool and integer tensors are modelled"
            )
    args = [_lookup(a, env) for a in node.args]
    kwargs = {k: _lookup(a, env) for k, a in node.kwargs.items()}
    outs = []
    first: Tensor | None = None
    for i, v in enumerate(vals):
        shape = tuple(engine_expr(s, subs) for s in v.shape)
        key = _skey(v)
        label_name = node.name if len(vals) == 1 else f"{node.name}[{i}]"
        known = storages.get(key)
        mutating = target._schema.is_mutable
        if known is not None and not mutating:  # a view, or an op that returned its input (dropout in eval)
            outs.append(Tensor(label_name, shape, known, transposed_view(v)))
            continue
        dtype = None if v.dtype == torch.float32 else FIXED_DTYPES[v.dtype]
        if i > 0 and first is not None:  # a second output of one kernel: SDPA's log-sum-exp, LayerNorm's stats
            lse = g.ops[-1].attrs.get("lse") if g.ops and g.ops[-1].kind == "fused_attention" else None
            if lse is not None and i == 1:
                storages[key] = lse.storage
                outs.append(lse)
                continue
            side = g.traced("fill", label_name, shape, (), label=f"{label_name} ← {_aten_name(node)}, output {i}",
                            dtype=dtype)  # fmt: skip
            storages[key] = side.storage
            outs.append(side)
            continue
        rule: Rule | None = RULES.get(short)
        if rule is None and short in VIEWS:
            rule = copy_rule
        if rule is None:
            loc, code = where(node)
            raise UserError(
                f"{loc}: cannot map {_aten_name(node)} onto an engine op kind (in `{code}`); "
                "see docs/tracing.md for the ops attn-cost maps"
            )
        n = RuleNode(node, args, kwargs, shape)
        try:
            kind, ins, attrs = rule(n)
        except UnmappedError as e:
            loc, code = where(node)
            raise UserError(f"{loc}: cannot map {_aten_name(node)}: {e} (in `{code}`)") from None
        label = f"{label_name} ← {_aten_name(node)}({', '.join(_arg_label(a, subs) for a in args)})"
        if kind == "fused_attention":
            result = g.fused_attention(label_name, *ins, causal=attrs["causal"], mask=attrs["mask"], label=label)
        elif known is not None:  # in place, or out=: writes into an existing storage
            into = kwargs.get("out") if isinstance(kwargs.get("out"), Tensor) else args[0]
            assert into is not None, "an op in place writes into its first argument"
            others = tuple(x for x in ins if x is not into)
            if (kwargs.get("out") is not None and into is not args[0]) or kind in ("fill", "copy"):
                attrs = {**attrs, "overwrite": True}
            result = g.traced(kind, label_name, shape, others, into=Tensor(into.name, shape, known), attrs=attrs,
                              label=label)  # fmt: skip
        else:
            attrs.pop("overwrite", None)
            result = g.traced(kind, label_name, shape, ins, attrs=attrs, label=label, dtype=dtype)
        storages[key] = result.storage
        first = result
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


def _arg_label(a: Any, subs: dict | None = None) -> str:
    """An argument in an op's label: a tensor by name, a size-derived number in b, h, N, d (d**0.5, not s40)."""
    if isinstance(a, list):
        return "[" + ", ".join(_arg_label(x, subs) for x in a) + "]"
    if isinstance(a, (torch.SymInt, torch.SymFloat)) and subs is not None:
        try:
            e = sp.sympify(a.node.expr).xreplace(subs)
            return str(e.replace(lambda f: type(f).__name__ in FLOAT_FUNCTIONS, plain_float))
        except Exception:
            return str(a)
    return a.name if isinstance(a, Tensor) else str(a)
