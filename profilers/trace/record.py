"""The code as written: an eager run on fake tensors with symbolic sizes (FakeTensorMode, ShapeEnv), every ATen op
and every storage's death recorded by a TorchDispatchMode, and the conditions on the sizes the code branched on."""

from __future__ import annotations

import math
import os
import sys
import traceback
import weakref
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from itertools import product
from typing import Any

import sympy as sp
import torch
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import N, padded
from attn_cost.profilers.trace.load import (
    CORE_DIMS,
    LAYER_DIMS,
    LIBRARY_DIRS,
    PLUMBING,
    SYMBOLS,
    first_line,
    user_code,
    user_line,
)
from attn_cost.profilers.trace.symbolic import (
    FLOAT_FUNCTIONS,
    INTEGER_FUNCTIONS,
    Subs,
    ceil_symbol,
    engine_expr,
    on_padding_branch,
    plain_float,
    plain_integer,
)
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, statically_known_true
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

aten = torch.ops.aten


@dataclass(frozen=True)
class Meta:
    """What a recorded op's output looked like: its symbolic shape, dtype and storage (by number)."""

    shape: tuple[Any, ...]
    dtype: torch.dtype
    storage: int
    transposed: bool = False
    """Its last two dimensions swapped against row-major order (`transposed_view`)."""


@dataclass(eq=False)
class _Ref:
    """An argument of a recorded op: output `index` of an earlier op, or a leaf (input, parameter, constant)."""

    owner: Any
    index: int
    op: str = "ref"


@dataclass(eq=False)
class _EagerNode:
    """One ATen op of the eager run, in the shape of an fx node (target, args, kwargs, meta)."""

    name: str
    target: Any
    args: tuple
    kwargs: dict
    meta: dict
    outs: list[_Ref] = field(default_factory=list)
    op: str = "call_function"


@dataclass
class Recording:
    """The ops of one eager run and the storages that died after each."""

    nodes: list[_EagerNode]
    deaths: dict[int, list[int]]
    """Node index -> storages (by number) that died after it and before the next op."""
    leaves: dict[int, tuple[str, Any]]
    """Storage number -> ('input', position) | ('param', name) | ('const', name)."""
    shapes: dict[int, tuple[Any, ...]]
    """Leaf storage number -> the shape of the leaf tensor."""
    refs: dict[int, _Ref]
    """Leaf storage number -> the _Ref standing for it in the nodes' arguments."""
    output: Any
    """The _Ref of the returned tensor."""
    symbols: dict[Any, str]
    """ShapeEnv symbol -> dim name ('N', 'b', ...)."""
    guards: list[str]
    """Conditions on the sizes the code branched on, in the engine's symbols."""
    fixed: dict[str, int]
    """Dims the code fixed to their example value."""
    divisors: dict[str, int] = field(default_factory=dict)
    """Dim -> m where the code requires dim % m == 0 (the formulas then hold for multiples of m)."""
    pads: int = 0
    """m where the run took the branch of code that pads N up to a multiple of m (N % m > 0): its sizes are
    written in ⌈N/m⌉, and its padding copies exist only where N is not a multiple (`Graph.padding`)."""
    pinned_at: str = ""
    """Where N became a constant (the op and the line), if it did."""
    whole: Recording | None = None
    """With `pads`: the run at a multiple of m, where the code pads nothing (the padded formulas are checked
    against it, and its conditions join this run's)."""
    exprs: list = field(default_factory=list)
    """The ShapeEnv's guards in the engine's symbols (`guards` reads them)."""
    example: dict[str, int] = field(default_factory=dict)
    """The sizes the run was made at."""

    def unpadded(self) -> None:
        """Take the run as it is (its sizes as recorded, its guards as they read at every N), not as padding."""
        self.pads, self.whole = 0, None
        self.guards = guard_texts(self.exprs, self.divisors, self.example)


def _recorder(fake: Any) -> Any:
    """A TorchDispatchMode recording ops and deaths (its class made lazily: torch.utils._python_dispatch is heavy)."""

    class Mode(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.fake = fake
            self.nodes: list[_EagerNode] = []
            self.alive: dict[int, tuple[StorageWeakRef, int]] = {}
            self.count = 0
            self.deaths: dict[int, list[int]] = {}
            self.by_tensor: dict[int, tuple[Any, _Ref]] = {}
            self.leaves: dict[int, tuple[str, Any]] = {}
            self.leaf_refs: dict[int, _Ref] = {}
            self.shapes: dict[int, tuple[Any, ...]] = {}
            self.watch: tuple[Any, Any] | None = None
            self.pinned_at = ""

        def storage(self, t: torch.Tensor) -> tuple[int, bool]:
            s = t.untyped_storage()
            key = s._cdata
            known = self.alive.get(key)
            if known is not None and not known[0].expired():
                return known[1], False
            if known is not None:
                self.deaths.setdefault(len(self.nodes) - 1, []).append(known[1])
            self.count += 1
            self.alive[key] = (StorageWeakRef(s), self.count)
            return self.count, True

        def leaf(self, t: torch.Tensor, kind: str, label: Any) -> _Ref:
            sid, _ = self.storage(t)
            ref = _Ref(("leaf", sid), 0, "leaf")
            self.leaves.setdefault(sid, (kind, label))
            self.shapes.setdefault(sid, tuple(t.shape))
            self.leaf_refs.setdefault(sid, ref)
            self.by_tensor[id(t)] = (weakref.ref(t), ref)
            return ref

        def sweep(self) -> None:
            for key in [k for k, (r, _) in self.alive.items() if r.expired()]:
                self.deaths.setdefault(len(self.nodes) - 1, []).append(self.alive.pop(key)[1])

        def ref_of(self, t: torch.Tensor) -> _Ref:
            known = self.by_tensor.get(id(t))
            if known is not None and known[0]() is t:
                return known[1]
            return self.leaf(t, "const", f"constant{len(self.leaf_refs)}")

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):

            kwargs = kwargs or {}
            self.sweep()

            def fake(a):
                if isinstance(a, torch.Tensor) and not isinstance(a, FakeTensor):
                    f = self.fake.from_tensor(a, static_shapes=True)
                    self.leaf(f, "const", f"constant{len(self.leaf_refs)}")
                    return f
                return a

            args, kwargs = tree_map(fake, (args, kwargs))
            special = SYMBOLIC_FAKES.get(func)
            out = special(*args, **kwargs) if special is not None else func(*args, **kwargs)
            if self.watch is not None and not self.pinned_at and self.watch[1] in self.watch[0].replacements:
                loc, code = where(_EagerNode("", func, (), {}, {"stack_trace": _stack()}))
                known = loc != "(unknown location)"
                self.pinned_at = f" at {loc} (`{code}`, aten.{func.__name__})" if known else " "
            outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            if not outs:
                return out
            node = _EagerNode(f"op{len(self.nodes)}", func, tree_map(self._arg, args), tree_map(self._arg, kwargs),
                              {"stack_trace": _stack()})  # fmt: skip
            metas = []
            for i, t in enumerate(outs):
                sid, _ = self.storage(t)
                metas.append(Meta(tuple(t.shape), t.dtype, sid, transposed_view(t)))
                ref = _Ref(node, i)
                node.outs.append(ref)
                self.by_tensor[id(t)] = (weakref.ref(t), ref)
            multi = isinstance(out, (tuple, list))
            node.meta["val"] = metas if multi else metas[0]
            self.nodes.append(node)
            return out

        def _arg(self, a):
            return self.ref_of(a) if isinstance(a, torch.Tensor) else a

    return Mode()


def _pad(x: torch.Tensor, pad: list, value: float = 0.0) -> torch.Tensor:
    """constant_pad_nd on fake tensors with symbolic sizes (torch's fake kernel fixes every size to its example
    value): a new tensor of the padded shape; its values do not matter."""
    shape = list(x.shape)
    for i in range(len(pad) // 2):
        shape[-1 - i] = shape[-1 - i] + pad[2 * i] + pad[2 * i + 1]
    return x.new_empty(shape)


def _polar(magnitude: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """polar on fake tensors (its fake kernel fixes the sizes): a complex tensor of the broadcast shape."""
    shape = torch.broadcast_shapes(magnitude.shape, angle.shape)
    return magnitude.new_empty(shape, dtype=torch.complex64 if magnitude.dtype == torch.float32 else torch.complex128)


SYMBOLIC_FAKES: dict[Any, Callable] = {aten.constant_pad_nd.default: _pad, aten.polar.default: _polar}


"""Ops whose fake kernel would fix symbolic sizes, run by a shape-only stand-in in the as-written run."""


def _stack() -> str:
    """The caller's frames outside torch, attn-cost and the command line's plumbing, in the format of an fx
    node's stack_trace."""
    entry = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    frames = [f for f in traceback.extract_stack()[:-2] if not f.filename.startswith(LIBRARY_DIRS)
              and os.path.abspath(f.filename) != entry and not any(p in f.filename for p in PLUMBING)]  # fmt: skip
    return "\n".join(f'  File "{f.filename}", line {f.lineno}, in {f.name}\n    {f.line or ""}' for f in frames)


def _fake_env() -> tuple[Any, Any]:

    env = ShapeEnv(duck_shape=False)
    return env, FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)


def _sizes(env: Any, example: dict[str, int], dims: tuple[str, ...]) -> tuple[dict[str, Any], dict[Any, str]]:

    sym, names = {}, {}
    for k in dims:
        s = env.create_symbol(example[k], source=ConstantSource(k), dynamic_dim=DimDynamic.DYNAMIC)
        sym[k] = env.create_symintnode(s, hint=example[k], source=ConstantSource(k))
        names[s] = k
    return sym, names


def record(module: torch.nn.Module, kind: str, example: dict[str, int], width: int | None, where: str) -> Recording:
    """Run the module eagerly on fake inputs with symbolic sizes, recording its ops and deaths."""
    env, fake = _fake_env()
    dims = CORE_DIMS if kind == "core" else LAYER_DIMS
    sym, names = _sizes(env, example, dims)
    shape = tuple(sym[k] for k in CORE_DIMS) if kind == "core" else (sym["b"], sym["N"], width)
    with fake:
        inputs = [torch.empty(*shape) for _ in range(3 if kind == "core" else 1)]
        params = {k: fake.from_tensor(p, static_shapes=True) for k, p in module.named_parameters()}
        buffers = {k: fake.from_tensor(p, static_shapes=True) for k, p in module.named_buffers()}
    rec = _recorder(fake)
    rec.watch = (env, next(s for s, k in names.items() if k == "N"))
    for i, t in enumerate(inputs):
        rec.leaf(t, "input", i)
    for k, t in params.items():
        rec.leaf(t, "param", k)
    for k, t in buffers.items():
        rec.leaf(t, "const", k)
    try:
        with user_code(where), torch.no_grad(), symbolic_run(), fake, rec:
            out = torch.func.functional_call(module, {**params, **buffers}, tuple(inputs))
    except UserError:
        raise
    except Exception as e:
        if type(e).__name__ in DATA_DEPENDENT:
            loc = user_line(e)
            raise UserError(
                f"{loc or where + ': '}the code reads tensor values to decide a size or a branch ({type(e).__name__}: "
                f"{first_line(e)}): its costs depend on the data and cannot be derived as formulas in N"
            ) from None
        raise RunError(e) from None
    result = first_tensor(out)
    if result is None:
        raise UserError(f"{where} returns no tensor")
    ref = rec.ref_of(result)
    if ref.op == "leaf" and rec.leaves.get(ref.owner[1], ("",))[0] == "input":
        raise UserError(f"{where} returns its input unchanged: it produced no ops (is it attention?)")
    del out, result, inputs
    rec.sweep()
    deaths = {i: list(v) for i, v in rec.deaths.items()}
    exprs, fixed, divisors, pads = _conditions(env, names, example, lambda m: _pads_to(rec.nodes, names, m))
    guards = guard_texts(exprs, divisors, example, pads)
    return Recording(rec.nodes, deaths, rec.leaves, rec.shapes, rec.leaf_refs, ref, names, guards, fixed, divisors,
                     pads, rec.pinned_at, exprs=exprs, example=example)  # fmt: skip


DATA_DEPENDENT = ("DataDependentOutputException", "GuardOnDataDependentSymNode", "DynamicOutputShapeException",
                  "UnsupportedOperatorException", "PendingUnbackedSymbolNotFound")  # fmt: skip


"""Errors of a fake-tensor run that say the code depends on tensor values, not sizes."""


class RunError(Exception):
    """The user's code raised while running on the example inputs."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def first_tensor(out: Any) -> torch.Tensor | None:
    """The first tensor in what a forward returned (a tensor, a tuple, a dict, a Hugging Face output), else None."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return next((t for t in out if isinstance(t, torch.Tensor)), None)
    return None


def _conditions(
    env: Any, names: dict[Any, str], example: dict[str, int], pads_to: Callable[[int], bool]
) -> tuple[list, dict, dict, int]:
    """The ShapeEnv's guards in the engine's symbols; the dims pinned to one value (no other value satisfies
    the guards); the divisors the code requires of a dim (N % 4 == 0 for a window of 4); the m of a branch on
    "N is not a multiple of m" whose run pads N up to a multiple of m (`pads_to(m)`), 0 where there is none (a
    branch on N's parity that pads nothing is a branch like any other)."""
    fixed: dict[str, int] = {}
    divisors: dict[str, int] = {}
    for s, value in env.replacements.items():
        if s in names and getattr(value, "is_number", False):
            fixed[names[s]] = int(value)
    raw = [sp.sympify(g.expr) for g in env.guards]
    for s, k in names.items():
        if k not in fixed and not _can_vary(raw, names, example, s):
            fixed[k] = example[k]
    subs = {s: (sp.Integer(fixed[k]) if k in fixed else SYMBOLS[k]) for s, k in names.items()}
    exprs = [e.xreplace(subs) for e in raw]
    for e in exprs:
        if isinstance(e, sp.Eq) and isinstance(e.lhs, sp.Symbol) and e.rhs.is_Integer and str(e.lhs) in SYMBOLS:
            fixed[str(e.lhs)] = int(e.rhs)
    for e in exprs:  # N % m == 0, or N % m <= 0 (a remainder > 0 branch not taken)
        divides = (isinstance(e, sp.Eq) and e.rhs == 0) or (isinstance(e, sp.LessThan) and e.rhs == 0) or (
            isinstance(e, sp.StrictLessThan) and e.rhs == 1)
        if divides and type(e.lhs).__name__ in ("Mod", "PythonMod"):
            x, m = e.lhs.args
            if isinstance(x, sp.Symbol) and str(x) in SYMBOLS and m.is_Integer:
                divisors[str(x)] = math.lcm(divisors.get(str(x), 1), int(m))
    m = 0 if divisors or "N" in fixed else _padding_branch(exprs, {k: example[k] for k in SYMBOLS if k in example})
    return exprs, fixed, divisors, m if m and pads_to(m) else 0


def guard_texts(exprs: list, divisors: dict[str, int], example: dict[str, int], pads: int = 0) -> list[str]:
    """A run's guards as readable conditions, those that always hold left out. On the branch that pads N to a
    multiple of `pads` (m), the guards are read there: the branch's own (N % m > 0) and those it always meets
    are left out, a guard on ⌈N/m⌉ > 1 reads N >= m + 1, and the others are written in ⌈N/m⌉."""
    whole = {SYMBOLS[k]: m * sp.Symbol(f"{k}_per_{m}", integer=True, positive=True) for k, m in divisors.items()}
    back = {sp.Symbol(f"{k}_per_{m}", integer=True, positive=True): SYMBOLS[k] / m for k, m in divisors.items()}
    out = [f"{k} % {m} == 0" for k, m in divisors.items()]
    for e in exprs:
        if isinstance(e, sp.Eq) and isinstance(e.lhs, sp.Symbol) and e.rhs.is_Integer and str(e.lhs) in SYMBOLS:
            continue  # a dim pinned to a value (`fixed`)
        if pads and N in e.free_symbols:
            if pads_at(e, pads, example) is not None:
                continue
            t = _threshold(e, pads, example)
            if t is not None:
                if t > 1 and f"N >= {t}" not in out:
                    out.append(f"N >= {t}")
                continue
        try:
            plain = e.replace(lambda f: type(f).__name__ in INTEGER_FUNCTIONS, plain_integer).xreplace(whole)
            plain = sp.simplify(on_padding_branch(plain, pads) if pads else plain)
            plain = plain.xreplace({ceil_symbol(pads): sp.ceiling(N / pads)}) if pads else plain
        except Exception:  # sympy cannot simplify it (a division by a size): show it as it is
            plain = e
        if plain is sp.true or _always(e, divisors):
            continue
        text = condition_text(plain.xreplace(back) if plain is not e else e)
        if text and text not in out:
            out.append(text)
    return out


EVERY_N_UP_TO = 32
"""The largest padding multiple m whose guards are read at every N from 1 to 8m; beyond it they are read near 1
and near each multiple of m up to 8m (`points`), so reading them takes the same time for any m."""


def points(m: int) -> tuple[int, ...]:
    """The N at which a guard of code that pads N to a multiple of m is read: every N from 1 to 8m, or, for an m
    beyond EVERY_N_UP_TO, the first 32 and the 16 on either side of each multiple of m up to 8m (where such a guard
    changes; a threshold between two of them is found by bisection, `_threshold`)."""
    if m <= EVERY_N_UP_TO:
        return tuple(range(1, 8 * m + 1))
    near = {n for k in range(1, 9) for n in range(k * m - 16, min(k * m + 17, 8 * m + 1))}
    return tuple(sorted({*range(1, 33), *near}))


def _truths(guard: Any, m: int, example: dict[str, int]) -> list[list[bool]] | None:
    """Whether the guard holds at each of `points(m)`, with the other dims at their example values, then at 2, 3
    and 7 (None where it does not evaluate to a truth value)."""
    holds = _evaluator(guard, tuple(sorted(example.items())))
    if holds is None:
        return None
    try:
        return [[holds(n, i) for n in points(m)] for i in range(4)]
    except (TypeError, ValueError, ZeroDivisionError, NameError, AttributeError, OverflowError):
        return None


@cache
def _evaluator(guard: Any, example: tuple[tuple[str, int], ...]) -> Callable[[int, int], bool] | None:
    """The guard as a Python function of N and a sample of the other dims (0: their example values, then 2, 3 and 7
    for all), evaluated on exact fractions (lambdify), not by sympy substitution: thousands of N take milliseconds."""
    others = sorted(guard.free_symbols - {N}, key=str)
    given = dict(example)
    samples = [[Fraction(given.get(str(s), 2)) for s in others], *([Fraction(v)] * len(others) for v in (2, 3, 7))]
    try:
        f = sp.lambdify([N, *others], _numeric(guard), modules="math")
    except (TypeError, ValueError, NameError, AttributeError, SyntaxError):
        return None
    return lambda n, i: bool(f(Fraction(n), *samples[i]))


def _threshold(guard: Any, m: int, example: dict[str, int]) -> int | None:
    """t where the guard holds exactly for N >= t (N at `points(m)`, the other dims at their example values and at
    a few others; between two points, bisected), None where it is not such a threshold (a guard on ⌈N/m⌉ > 1 reads
    N >= m + 1)."""
    found: set[int | None] = set()
    at = points(m)
    holds = _evaluator(guard, tuple(sorted(example.items())))
    for i, truth in enumerate(_truths(guard, m, example) or [[]]):
        first = truth.index(True) if True in truth else None
        if first is None or not all(truth[first:]):
            found.add(None)
            continue
        lo, hi = (at[first - 1], at[first]) if first else (0, at[0])  # false at lo (or N < 1), true at hi
        while holds is not None and hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if holds(mid, i) else (mid, hi)
        found.add(hi)
    return found.pop() if len(found) == 1 else None


def _numeric(e: Any) -> Any:
    """A guard with torch's integer and float functions of sizes in sympy's (so that it evaluates)."""
    e = e.replace(lambda f: type(f).__name__ in INTEGER_FUNCTIONS, plain_integer)
    return e.replace(lambda f: type(f).__name__ in FLOAT_FUNCTIONS, plain_float)


def pads_at(guard: Any, m: int, example: dict[str, int]) -> bool | None:
    """True where the guard is exactly "N is not a multiple of m" (the padding branch's own guard), False where
    it holds at every N that is not a multiple of m (the branch always meets it), None otherwise; N from 1 to
    8m, the other dims at their example values and at a few others."""
    truths = _truths(guard, m, example)
    if truths is None:
        return None
    padded = [n % m != 0 for n in points(m)]
    if truths[0] == padded:
        return True
    return False if all(t for truth in truths for t, p in zip(truth, padded, strict=True) if p) else None


def _padding_branch(exprs: list, example: dict[str, int]) -> int:
    """The m (>= 2) of a guard that says N is not a multiple of m (the code may pad N), 0 if no guard says so."""
    for e in exprs:
        if e.free_symbols - {N}:
            continue
        found = {int(f.args[1]) for f in _numeric(e).atoms(sp.Mod) if f.args[1].is_Integer}
        found |= {int(sp.cancel(N / f.args[0])) for f in _numeric(e).atoms(sp.floor, sp.ceiling)
                  if sp.cancel(N / f.args[0]).is_Integer}  # fmt: skip
        for m in sorted(x for x in found if x >= 2):
            if pads_at(e, m, example):
                return m
    return 0


def _pads_to(nodes: list[_EagerNode], symbols: dict[Any, str], m: int) -> bool:
    """Whether the run pads N up to a multiple of m: one of its tensors has m·⌈N/m⌉ rows, a size it computed
    from N mod m or ⌈N/m⌉ (F.pad, torch.cat with zeros, a zeros tensor written into: whatever made it). A run
    that merely branches on N mod m (on N's parity) has no such size."""
    subs = Subs(m)
    subs.update({s: SYMBOLS[k] for s, k in symbols.items()})
    sizes = {x.node.expr: x for x in run_sizes(nodes) if isinstance(x, torch.SymInt)}
    return any(sp.expand(engine_expr(x, subs) - padded(N, m)) == 0 for x in sizes.values())


def run_sizes(nodes: list[_EagerNode]) -> list[Any]:
    """Every size of every tensor the run made (SymInts and ints)."""
    metas = [v for node in nodes for v in (node.meta["val"] if isinstance(node.meta["val"], list)
                                           else [node.meta["val"]])]  # fmt: skip
    return [x for v in metas for x in v.shape]


def _always(guard: Any, divisors: dict[str, int]) -> bool:
    """The guard holds at every sample size (dims from 2, multiples of the required divisors): not worth saying."""

    dims = [k for k in SYMBOLS if SYMBOLS[k] in guard.free_symbols]
    grids = [[divisors.get(k, 1) * v for v in (2, 3, 5, 8, 13, 64, 1000, 4099)] for k in dims]
    try:
        return all(bool(guard.xreplace(dict(zip([SYMBOLS[k] for k in dims], p, strict=True)))) for p in product(*grids))
    except TypeError:
        return False


def _can_vary(guards: list, names: dict, example: dict[str, int], sym: Any) -> bool:
    """Some other value of one dim (the others at the example) satisfies every guard."""
    base = {s: example[k] for s, k in names.items()}
    start = base[sym]
    for value in (start + 1, start + 2, start + 3, start + 4, start + 8, 2 * start, 3 * start, 4 * start, 8 * start):
        point = {**base, sym: value}
        try:
            if all(bool(g.xreplace(point)) for g in guards):
                return True
        except TypeError:
            continue
    return False


def condition_text(e: Any) -> str:
    """A guard as a readable condition on b, h, N, d (== != % // and or)."""
    e = sp.sympify(e)
    if e is sp.true:
        return ""
    name = type(e).__name__
    if name in ("Or", "And"):
        return f" {name.lower()} ".join(f"({condition_text(a)})" for a in e.args)
    ops = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<", "LessThan": "<=", "StrictGreaterThan": ">",
           "GreaterThan": ">="}  # fmt: skip
    if name in ops:
        return f"{_arith(e.lhs)} {ops[name]} {_arith(e.rhs)}"
    return _arith(e)


def _arith(e: Any) -> str:
    name = type(e).__name__
    if name in ("Mod", "PythonMod"):
        return f"{_arith(e.args[0])} % {_arith(e.args[1])}"
    if name in ("FloorDiv", "IntTrueDiv"):
        return f"({_arith(e.args[0])}) // {_arith(e.args[1])}"
    if name == "CeilToInt":
        return f"ceil({_arith(e.args[0])})"
    if e.args and name not in ("Symbol", "Integer"):
        return str(e.func(*[sp.Symbol(_arith(a)) for a in e.args]))
    return str(e)


@contextmanager
def symbolic_run():
    """math.sqrt on a symbolic size would fix that size to the example's value: use torch's symbolic sqrt; SDPA's
    flags computed from sizes are symbolic bools its argument parser refuses: decide them (a guard records it).
    transformers' check for packed sequences reads the position ids' values where the installed release finds
    an arange unpacked (5.x; 4.56 returns its tensor whatever the values, and needs nothing here), which a
    symbolic run has not: it takes them as one sequence per row (what arange gives, and what eager transformers
    then finds), and says so in the docs; its ops still run, as they do in eager mode."""
    sqrt = math.sqrt

    def symbolic_sqrt(x):
        return torch._sym_sqrt(x) if isinstance(x, (torch.SymInt, torch.SymFloat)) else sqrt(x)

    functional = torch.nn.functional
    sdpa = functional.scaled_dot_product_attention

    def concrete_flags(*args, **kwargs):  # `is_causal = mask is None and N > 1` is a symbolic bool: decide it
        args = tuple(bool(a) if isinstance(a, torch.SymBool) else a for a in args)
        kwargs = {k: bool(v) if isinstance(v, torch.SymBool) else v for k, v in kwargs.items()}
        return sdpa(*args, **kwargs)

    masking = sys.modules.get("transformers.masking_utils")
    packed = getattr(masking, "find_packed_sequence_indices", None)
    if packed is not None and packed(torch.arange(2).unsqueeze(0)) is not None:
        packed = None

    def unpacked(position_ids):  # eager transformers reads the values; under tracing it keeps a packed mask
        packed(position_ids)
        return None

    math.sqrt = symbolic_sqrt
    functional.scaled_dot_product_attention = concrete_flags
    if packed is not None:
        masking.find_packed_sequence_indices = unpacked
    try:
        yield
    finally:
        math.sqrt = sqrt
        functional.scaled_dot_product_attention = sdpa
        if packed is not None:
            masking.find_packed_sequence_indices = packed


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


def transposed_view(v: Any) -> bool:
    """Whether a view has its last two dimensions swapped against row-major order (a transpose or permute of them),
    read from its strides, as `Tensor.T` marks it: `q @ k.transpose(-2, -1)` is then the catalogue's `Q @ K.T`.
    Only what the strides say for every size counts: no size is specialised to decide it."""

    if isinstance(v, Meta):
        return v.transposed
    if v.dim() < 2:
        return False
    rows, cols = v.stride(-2), v.stride(-1)
    return statically_known_true(rows == 1) and not statically_known_true(cols == 1)
