"""A variant's op list as kernel calls: each op's kernel and its features (bytes, dims, operand layout) as numpy
functions of N, and the storages it touches (for the cache-reuse context). No torch."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import sympy as sp
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting, N_kv
from attn_cost.costmodel.derive import Derived
from attn_cost.costmodel.dtypes import dtype_bytes
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.graph import Graph, Storage
from attn_cost.costmodel.symbols import N, Pads
from attn_cost.costmodel.variants import derive
from attn_cost.profilers.devicemodel.kernels import BINARY, KERNELS, Shape, family_of, kernel_of


@dataclass
class KernelCalls:
    """Every op of one variant at fixed sizes but N, as numpy functions of N."""

    kernels: list[str]
    features: list[dict]
    """Per op: sympy-lambdified functions of N for repeat, bytes, and the kernel's dims."""
    loop_iterations: Callable[[np.ndarray], np.ndarray | float]
    """Function of N: loop iterations per call (0 without loops)."""
    touches: list[list[tuple[int, bool]]] = field(default_factory=list)
    """Per op: the storages it touches, and whether each is a new allocation it writes (its output)."""
    storage_bytes: dict = field(default_factory=dict)
    """Bytes of every storage, as functions of N."""
    freed_after: dict = field(default_factory=dict)
    """Op index after which a storage is freed (absent: it outlives the call)."""
    in_loop: list[bool] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    """Per op: its line (`line_of`), the key under which `calibrate --d` times it at its exact shapes."""
    key: str = ""
    """The variant, scope and dtype with a digest of its ops' lines: what its glue timings are kept under
    (`calibrated.data.glue_line`), the same however its sizes were spelt."""
    _reuse: dict = field(default_factory=dict, repr=False)

    def reuse(self, n: float) -> list[list[tuple[float, float, float]]]:
        """Per op: (bytes, reuse distance in the variant, reuse distance alone) of every tensor it touches.

        The reuse distance of a tensor is the bytes of distinct storages touched since it was last touched,
        its own included: the working set its cache lines had to survive. Alone in a tight loop, that is the
        op's own footprint. Inside the variant, called again and again, it is what the ops since its last
        touch touched (through the end of the previous call for the graph's inputs); a new allocation reuses
        the block freed most recently that is large enough, and inherits that block's last touch."""
        key = float(n)
        if key not in self._reuse:
            self._reuse[key] = self._simulate(key)
        return self._reuse[key]

    def _simulate(self, n: float) -> list[list[tuple[float, float, float]]]:
        size = {sid: float(f(n)) for sid, f in self.storage_bytes.items()}
        history: list[set[int]] = []
        last: dict[int, int] = {}
        free: dict[int, list[float]] = {}
        """Free blocks: id -> [freed at, bytes, last touch]. A storage carved from a block gives its bytes
        back to that block when freed (the allocator coalesces them), else it becomes a block of its own."""
        origin: dict[int, int] = {}
        out: list[list[tuple[float, float, float]]] = []
        for call in range(2):
            for i, touched in enumerate(self.touches):
                pos = call * len(self.touches) + i
                row = []
                own = sum(size[sid] for sid in {sid for sid, _ in touched})
                for sid, fresh in touched:
                    since = last.get(sid)
                    if fresh:
                        since = None
                        fits = [b for b, blk in free.items() if blk[1] >= size[sid]]
                        if fits:  # best fit, the most recently freed among equal sizes
                            pick = min(fits, key=lambda b: (free[b][1], -free[b][0]))
                            free[pick][1] -= size[sid]
                            since, origin[sid] = int(free[pick][2]), pick
                    if since is None:
                        distance = math.inf
                    else:
                        seen = set().union(*history[since:pos], {sid})
                        distance = sum(size.get(x, 0.0) for x in seen)
                    row.append((size[sid], max(distance, own), own))
                for sid, _ in touched:
                    last[sid] = pos
                history.append({sid for sid, _ in touched})
                for sid in {sid for sid, _ in touched}:
                    if self.freed_after.get(sid) == i:
                        home = origin.pop(sid, None)
                        if home in free:
                            free[home] = [pos, free[home][1] + size[sid], pos]
                        else:
                            free[sid + 1_000_000 * call] = [pos, size[sid], pos]
                if call == 1:
                    out.append(row)
        return out

    def at(self, n: np.ndarray) -> list[tuple[str, dict[str, np.ndarray]]]:
        """Per op: the kernel and its features at every N."""
        n = np.asarray(n, dtype=float)
        return [
            (kernel, {k: np.broadcast_to(np.asarray(f(n), dtype=float), n.shape) for k, f in feats.items()})
            for kernel, feats in zip(self.kernels, self.features, strict=True)
        ]

    def iterations(self, n: np.ndarray) -> np.ndarray:
        """Loop iterations of one call at every N."""
        n = np.asarray(n, dtype=float)
        return np.broadcast_to(np.asarray(self.loop_iterations(n), dtype=float), n.shape)

    def dispatched(self, n: np.ndarray, dispatches: dict[str, int] | None = None) -> np.ndarray:
        """ATen kernels one call dispatches at every N (`dispatches` per kernel, 1 where not given), or its ops
        without a table (calibrations made before dispatches were counted): what the chain cost is paid per."""
        weight = dispatches or {}
        n = np.asarray(n, dtype=float)
        return sum((f["repeat"] * weight.get(k, 1) for k, f in self.at(n)), np.zeros_like(n))


LINE_PROBES = (1009.0, 2003.0)
"""Lengths at which an op's dims are read to name its line: two, so that a dim growing with N and one
that does not tell apart."""


def line_of(kernel: str, feats: dict) -> str:
    """The line of an op: its kernel and how its dims (not its bytes) go with N, read at `LINE_PROBES`.
    Ops of different variants with the same kernel and the same shapes at every N share a line."""
    dims = sorted(k for k in feats if k not in ("repeat", "bytes"))
    probes = ",".join(f"{k}=" + "/".join(f"{float(feats[k](n)):.9g}" for n in LINE_PROBES) for k in dims)
    return f"{kernel}|{probes}"


def _fn(expr, values: dict):

    e = sp.sympify(sp.sympify(expr).xreplace(values))
    free = e.free_symbols - {N}
    if free:
        raise UserError(f"the op model needs a value for {', '.join(sorted(str(s) for s in free))}")
    # a padded length's bracket [m ∤ N] as numpy evaluates it: ⌈N/m⌉ − ⌊N/m⌋
    e = e.replace(lambda x: isinstance(x, Pads), lambda x: _bracket(*x.args))
    return sp.lambdify(N, e, "numpy")


def _bracket(n: sp.Expr, m: sp.Expr) -> sp.Expr:
    return sp.ceiling(n / m) - sp.floor(n / m)


def _is_one(x) -> bool:
    return sp.sympify(x) == 1


def _narrower(t) -> bool:
    """Whether a tensor is a slice of a wider one (fewer elements than its storage; a transpose is not)."""
    return sp.simplify(t.numel - t.storage.numel) != 0


def operand_layout(op) -> dict[str, int]:
    """How an op's operands differ from the plain, same-shape operands the grid times it with: a binary op's
    second operand broadcast as a column (bcast 1: one value per row), a row (2: one per column) or a scalar
    per matrix (3); an operand that is a slice of a wider tensor (xview, zview: a view made on every call and
    read with a stride; outside loops, where a loop step already pays for slicing the token); a product
    accumulated into an existing tensor (accumulate: baddbmm); a product whose B matrices are overlapping
    windows of one buffer (window: a banded kernel's `as_strided` K or V, read once, `kernels.window_rows`).
    Empty for plain operands, so their lines keep their names."""
    out: dict[str, int] = {}
    if op.kind == "matmul" and op.attrs.get("accumulate"):
        out["accumulate"] = 1
    if op.kind == "matmul" and len(op.inputs) > 1 and any(t is op.inputs[1] for t in op.attrs.get("read_once", ())):
        out["window"] = 1
    if op.kind not in BINARY or len(op.inputs) < 2:
        return out
    x, z = op.inputs[0], op.inputs[1]
    one_col = _is_one(z.shape[-1]) and not _is_one(x.shape[-1])
    one_row = len(z.shape) > 1 and len(x.shape) > 1 and _is_one(z.shape[-2]) and not _is_one(x.shape[-2])
    if one_col or one_row:
        out["bcast"] = 3 if one_col and one_row else 1 if one_col else 2
    if op.loop is None:
        out.update({name: 1 for name, t in (("xview", x), ("zview", z)) if _narrower(t)})
    return out


def op_features(derived, op, dtype: str) -> tuple[str, dict]:
    """The kernel of one op and its features as expressions: repeat, bytes, its family's dims (batch/m/k/n or
    rows/cols), and its operand layout where that is not the plain one (`operand_layout`)."""
    kernel = kernel_of(op)
    feats = {"repeat": op.repeat, "bytes": derived.op_traffic(op, dtype), **operand_layout(op)}
    feats.update(family_of(kernel).features(op))
    return kernel, feats


def engine_features(at: Shape, dtype: str) -> tuple[str, dict[str, float]]:
    """The kernel's engine op at a shape, built with the DSL the variants use, and its features as the op model
    reads them (`op_features`); a kernel whose op maps to another kernel is a declaration error."""
    kernel = KERNELS[at.kernel]
    if kernel.build is None:
        raise RuntimeError(f"kernel {at.kernel} is never calibrated: it builds no op")
    g = Graph(f"calibrate {at.kernel}")
    g.output(kernel.build(g, at))
    derived = Derived(g)
    op = derived.ops[0] if kernel.name == "store" else derived.ops[-1]
    name, feats = op_features(derived, op, dtype)
    if name != at.kernel:
        raise RuntimeError(f"kernel {at.kernel} builds an op of kernel {name}: fix its declaration")
    return name, {k: float(v) for k, v in feats.items() if k != "repeat"}


@cache
def _calls(
    variant: str,
    scope: str,
    dtype: str,
    dims_key: tuple,
    kv: bool = False,
    bias: str | None = None,
    feature_map: str = "elu1",
    normalize: bool = True,
) -> KernelCalls:

    derived = derive(variant, scope, "inference", kv, bias, feature_map=feature_map, normalize=normalize)
    values = dict(dims_key)
    kernels, features, touches = [], [], []
    storages: dict[int, Storage] = {}
    last_op: dict[int, int] = {}
    for op in derived.ops:
        kernel, feats = op_features(derived, op, dtype)
        kernels.append(kernel)
        features.append({k: _fn(v, values) for k, v in feats.items()})
        ts = [(t.storage, False) for t in op.inputs] + ([] if op.inplace else [(op.output.storage, True)])
        touches.append([(st.id, fresh) for st, fresh in ts])
        for st, _ in ts:
            storages[st.id] = st
            last_op[st.id] = op.index
    inputs = {t.storage.id for t in derived.graph.inputs}  # the caller holds them across calls
    sizes = {sid: _fn(st.numel * dtype_bytes(st.dtype or dtype), values) for sid, st in storages.items()}
    end = len(derived.ops) - 1  # results are dropped by the caller once the call is over
    freed = {sid: end if sid in derived.graph.kept else i for sid, i in last_op.items() if sid not in inputs}
    loops = sum((lp.count for lp in derived.graph.loops), sp.Integer(0))
    in_loop = [op.loop is not None for op in derived.ops]
    lines = [line_of(k, f) for k, f in zip(kernels, features, strict=True)]
    digest = hashlib.sha1("\n".join(lines).encode()).hexdigest()[:12]
    key = f"{variant}|{scope}|{dtype}|{digest}"
    return KernelCalls(kernels, features, _fn(loops, values), touches, sizes, freed, in_loop, lines, key)


def kernel_calls(
    variant: str, scope: str, dtype: str, dims: dict, counting: Counting = DEFAULT_COUNTING
) -> KernelCalls:
    """The kernel calls of a variant with every size but N fixed (`dims` keyed by sympy symbols), as `counting`
    builds it: keys of their own length (`--n-kv`: N_kv at its value), the projections' biases (`--bias`), a linear
    attention's feature map and normaliser (`--feature-map`, `--normalize`)."""

    if counting.n_kv is not None:
        dims = {**dims, N_kv: counting.n_kv}
    key = tuple(sorted(((s, int(v)) for s, v in dims.items() if s != N), key=lambda kv: kv[0].name))
    return _calls(variant, scope, dtype, key, counting.n_kv is not None, counting.bias, counting.feature_map,
                  counting.normalize)  # fmt: skip
