"""Op-level device model: predict a variant's time as the sum of its ops, from op microbenchmarks.

`attn-cost calibrate` times every op kind the engine emits on a grid of shapes (`profilers.calibrate`);
this module turns those timings into a per-op time model and evaluates it on any variant's op list.
It is zero-shot: it never sees a timing of a whole variant. numpy and scipy only (no torch), so
`crossover --device` can use it on the analytic path.

Per op kind (kernel) the model is physically shaped:

    element-wise, row-wise, reductions, outer products, ...:  t = t_launch + B · s(B, w)
    matrix products:  t = (t_launch + batch·t_item + max(F / (P·e(m)·e(k)·e(n)), B · s_copy(B))) × residual

B is the op's traffic in bytes (inputs read + output written, as `derive` counts it), which is also
its working set when it runs alone; s(B, w) the seconds per byte measured at that working set and row
width w: measured times are interpolated linearly in B between calibration points (a constant marginal
cost per byte between two sizes: the cache levels are in the curve) and linearly in log w between row
widths, held at the launch cost below the grid and continued at the last marginal cost above it. A
matrix product is the larger of its compute time at a shape-dependent rate (P the peak, e(x) =
x/(x + x½) the efficiency of a dimension of size x) and its traffic time at the copy kernel's
bandwidth; the fitted form is corrected by the measured residuals of nearby grid shapes (Gaussian
weights over octaves of batch, m, k, n), which fade to 1 away from the grid.

Where `calibrate` timed a variant's op at its exact shapes along N (a *line*, `Line`), the op's time is
the kernel model's times the measured ratio to it, interpolated in log N: the head dim fixes every small
dimension of a variant, and a kernel's speed at one width says little about the next (an odd n, a row of 8).

A variant's time is Σ over its ops of repeat × t(op) at concrete sizes, plus the fixed cost of a call,
a per-iteration cost for loops, and per op what running inside a chain of different ops adds to the
op alone: a fixed cost per ATen kernel it dispatches and a share of the op's time (all three calibrated
as pseudo-kernels).
Crossovers come from the predicted curves by bracketing sign changes on a log grid and brentq; their
interval is the 2.5-97.5 % range over bootstrap replicates of the model, each refitted on a resample
(with replacement) of the calibration points, medians jittered by their standard errors, and every
kernel scaled by a draw of the error the model makes on shapes off its grid (log-normal, σ from the
held-out shapes `calibrate` times); each line is resampled likewise and scaled by a draw of its
leave-one-out error, and each variant's whole time by a draw of the error the model makes on chains of
ops timed whole (`Chain.sigma`).
"""

from __future__ import annotations

import contextlib
import json
import math
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import sympy as sp
from attn_cost.costmodel.errors import PricingWarning, UserError
from attn_cost.profilers.kernels import (
    BINARY,
    CALL,
    LOOP_STEP,
    MATMUL_LAYOUTS,
    SEQUENCE,
    kernel_of,
    twins,
)

SCHEMA = 1
FIT_VERSION = 1
"""Version of the fit (`OpModel._fit` and the model families): a calibration stores the parameters it fitted and
this version, and loads them as they are; one of another version is refitted only when asked (`--refit`)."""
OPMODEL_KIND = "attn-cost op model"
"""The `kind` field that marks a JSON file as an op calibration."""
SHIPPED = Path(__file__).parent / "data" / "opmodels"
MIN_POINTS = 3
"""Fewest calibration points of one kernel the model accepts."""
BOOTSTRAP = 100
"""Bootstrap replicates behind a predicted crossover's interval."""
RESIDUAL_OCTAVES = 1.0
"""Width (in octaves of each matmul dimension) of the residual correction's Gaussian weights."""
RESIDUAL_PRIOR = 0.15
"""Weight of 'no correction' against the grid's residuals: the correction fades where the grid is far."""
LINES = "exact shapes"
"""The `held_out` entry of the lines' leave-one-out error (`Line.leave_one_out`)."""
CHAIN_SPAN = 10.0
"""A chain's share of its ops' time is fitted only when the chains' ops alone span this factor in time."""
COPY = "copy"
"""The kernel whose bandwidth curve serves matmul traffic and kernels never calibrated."""


# -- from an op list to kernel calls ----------------------------------------------------------------


@dataclass
class KernelCalls:
    """Every op of one variant at fixed sizes but N, as numpy functions of N."""

    kernels: list[str]
    features: list[dict]
    """Per op: sympy-lambdified functions of N for repeat, bytes, and the kernel's dims."""
    loop_iterations: object
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

    def at(self, n: np.ndarray, dispatches: dict[str, int] | None = None) -> list[tuple[str, dict[str, np.ndarray]]]:
        """Per op, then loop steps, the call and the chain: the kernel and its features at every N. The chain's
        repeat counts the ATen kernels the ops dispatch (`dispatches` per kernel, 1 where not given), or the
        ops themselves without a table (calibrations made before dispatches were counted)."""
        n = np.asarray(n, dtype=float)
        out = []
        for kernel, feats in zip(self.kernels, self.features, strict=True):
            out.append((kernel, {k: np.broadcast_to(np.asarray(f(n), dtype=float), n.shape) for k, f in feats.items()}))
        iters = np.broadcast_to(np.asarray(self.loop_iterations(n), dtype=float), n.shape)
        out.append((LOOP_STEP, {"repeat": iters, "bytes": np.ones_like(n), "rows": np.ones_like(n)}))
        out.append((CALL, {"repeat": np.ones_like(n), "bytes": np.ones_like(n), "rows": np.ones_like(n)}))
        weight = dispatches or {}
        chained = sum((f["repeat"] * weight.get(k, 1) for k, f in out[: len(self.kernels)]), np.zeros_like(n))
        out.append((SEQUENCE, {"repeat": chained, "bytes": np.ones_like(n), "rows": np.ones_like(n)}))
        return out


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
    from attn_cost.costmodel.symbols import N

    e = sp.sympify(sp.sympify(expr).xreplace(values))
    free = e.free_symbols - {N}
    if free:
        raise UserError(f"the op model needs a value for {', '.join(sorted(str(s) for s in free))}")
    return sp.lambdify(N, e, "numpy")


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
    accumulated into an existing tensor (accumulate: baddbmm). Empty for plain operands, so their lines keep
    their names."""
    out: dict[str, int] = {}
    if op.kind == "matmul" and op.attrs.get("accumulate"):
        out["accumulate"] = 1
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
    """The kernel of one op and its features as expressions: repeat, bytes, batch/m/k/n or rows/cols, and
    its operand layout where that is not the plain one (`operand_layout`)."""
    kernel = kernel_of(op)
    feats = {"repeat": op.repeat, "bytes": derived.op_traffic(op, dtype), **operand_layout(op)}
    if kernel.startswith("matmul"):
        feats.update(batch=op.attrs["batch"], m=op.attrs["m"], k=op.attrs["k"], n=op.attrs["n"])
    elif kernel.startswith("sdpa"):
        a = op.attrs
        feats.update(batch=a["batch"], m=a["nq"], k=a["dqk"], n=a["nk"])
    else:
        x = op.inputs[0] if op.inputs else op.output
        feats.update(rows=x.rows, cols=x.shape[-1] if x.shape else sp.Integer(1))
    return kernel, feats


@cache
def _calls(variant: str, scope: str, dtype: str, dims_key: tuple) -> KernelCalls:
    from attn_cost.costmodel.derive import dtype_bytes
    from attn_cost.costmodel.variants import derive

    derived = derive(variant, scope)
    values = dict(dims_key)
    kernels, features, touches = [], [], []
    storages: dict[int, object] = {}
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
    return KernelCalls(kernels, features, _fn(loops, values), touches, sizes, freed, in_loop, lines)


def kernel_calls(variant: str, scope: str, dtype: str, dims: dict) -> KernelCalls:
    """The kernel calls of a variant with every size but N fixed (`dims` keyed by sympy symbols)."""
    from attn_cost.costmodel.symbols import N

    key = tuple(sorted(((s, int(v)) for s, v in dims.items() if s != N), key=lambda kv: kv[0].name))
    return _calls(variant, scope, dtype, key)


# -- the per-kernel time model -------------------------------------------------------------------


@dataclass
class Point:
    """One calibration timing: a kernel at one shape."""

    kernel: str
    dims: dict[str, float]
    """bytes, and rows/cols or batch/m/k/n."""
    seconds: float
    se: float = 0.0
    """Standard error of the median (seconds)."""
    line: str = ""
    """The line (`line_of`) of a variant's op this point was timed for, at length `n`; empty on the grid."""
    n: float = 0.0

    def as_json(self) -> dict:
        out = {"kernel": self.kernel, "dims": self.dims, "seconds": self.seconds, "se": self.se}
        return {**out, "line": self.line, "n": self.n} if self.line else out


@dataclass
class Curve:
    """Seconds against bytes at one row width: linear between calibration points (a constant marginal cost
    per byte between two sizes), the launch cost below the grid, the last segment's marginal cost above it."""

    nbytes: np.ndarray
    seconds: np.ndarray

    def __call__(self, nbytes: np.ndarray) -> np.ndarray:
        top, last = self.nbytes[-1], self.seconds[-1]
        slope = max(last - self.seconds[-2], 0.0) / (top - self.nbytes[-2]) if len(self.nbytes) > 1 else last / top
        return np.where(nbytes > top, last + (nbytes - top) * slope, np.interp(nbytes, self.nbytes, self.seconds))

    @property
    def large_bytes_per_s(self) -> float:
        """Bandwidth at the largest calibrated size (bytes over seconds there)."""
        return float(self.nbytes[-1] / self.seconds[-1])


@dataclass
class Streaming:
    """t = t_launch + B · s(B, w), a kernel limited by launching and moving bytes: measured times
    interpolated linearly in B between calibration points, and linearly in log w between widths."""

    launch: float
    widths: np.ndarray
    """log2 of the calibrated row widths, ascending."""
    curves: list[Curve]

    @classmethod
    def fit(cls, points: list[Point]) -> Streaming:
        launch = min(p.seconds for p in points)
        groups: dict[float, list[Point]] = defaultdict(list)
        for p in points:
            groups[round(math.log2(max(p.dims.get("cols", 1.0), 1.0)), 6)].append(p)
        widths, curves = [], []
        for w in sorted(groups):
            by_size: dict[float, list[float]] = defaultdict(list)
            for p in groups[w]:
                by_size[p.dims["bytes"]].append(p.seconds)
            xs = np.array(sorted(by_size))
            ys = np.maximum.accumulate(np.array([float(np.median(by_size[x])) for x in xs]))  # more bytes, no less time
            widths.append(w)
            curves.append(Curve(xs, ys))
        return cls(launch, np.array(widths), curves)

    def predict(self, f: dict[str, np.ndarray]) -> np.ndarray:
        lb = np.maximum(f["bytes"], 1.0)
        if len(self.curves) == 1:
            return self.curves[0](lb)
        lw = np.clip(np.log2(np.maximum(f.get("cols", np.ones_like(lb)), 1.0)), self.widths[0], self.widths[-1])
        values = np.stack([c(lb) for c in self.curves])
        hi = np.clip(np.searchsorted(self.widths, lw, side="left"), 1, len(self.widths) - 1)
        lo = hi - 1
        frac = (lw - self.widths[lo]) / (self.widths[hi] - self.widths[lo])
        cols = np.arange(values.shape[1])
        return values[lo, cols] * (1 - frac) + values[hi, cols] * frac


@dataclass
class Chain:
    """What an op costs more inside a chain of different ops than alone in a tight loop: a fixed cost per ATen
    kernel it dispatches (cold dispatch paths: an op made of four kernels pays four times) and a share of its
    own time (caches and threads no longer primed by the same op just before). Fitted to chains of ops of
    growing sizes timed whole, against the same ops timed alone."""

    launch: float
    share: float
    sigma: float = 0.0
    """Log-scale spread of what this misses on the chains (1.4826 × median |log(whole / predicted)|): the
    error of predicting a chain timed whole from its ops timed alone, which a variant has too."""

    def predict(self, f: dict[str, np.ndarray]) -> np.ndarray:
        return np.full_like(f["bytes"], self.launch, dtype=float)

    @classmethod
    def fit(cls, points: list[Point], call: float) -> Chain:
        """Non-negative least squares of (whole − call − alone) = launch·dispatches + share·alone, each chain
        weighted by its own time (relative errors: a chain of large ops must not drown the small ones).
        Chains timed before dispatches were counted carry their ops instead."""
        from scipy.optimize import nnls

        a = np.array([[p.dims.get("dispatches", p.dims["ops"]), p.dims["isolated_s"]] for p in points])
        y = np.array([p.seconds - call - p.dims["isolated_s"] for p in points])
        w = 1.0 / np.array([p.seconds for p in points])
        if a[:, 1].max() < CHAIN_SPAN * a[:, 1].min():  # sizes too alike to tell a share from a fixed cost
            launch, share = max(float(np.median(y / a[:, 0])), 0.0), 0.0
        else:
            (launch, share), _ = nnls(a * w[:, None], y * w)
        whole = np.array([p.seconds for p in points])
        predicted = call + a[:, 1] * (1 + share) + launch * a[:, 0]
        return cls(float(launch), float(share), 1.4826 * float(np.median(np.abs(np.log(whole / predicted)))))


@dataclass
class Scaled:
    """A kernel model times a factor (a bootstrap replicate's draw of the off-grid error)."""

    inner: Streaming | Gemm | Chain
    factor: float

    @property
    def launch(self) -> float:
        return self.inner.launch * self.factor

    def predict(self, f: dict[str, np.ndarray]) -> np.ndarray:
        return self.inner.predict(f) * self.factor


def _matmul_coords(f: dict[str, np.ndarray]) -> np.ndarray:
    return np.stack([np.log2(np.maximum(f[k], 1.0)) for k in ("batch", "m", "k", "n")], axis=-1)


@dataclass
class Gemm:
    """Matrix products: launch, per-item cost of a batch, max(compute at a shape-dependent rate,
    traffic at the copy bandwidth), times a residual correction from nearby grid shapes."""

    launch: float
    item: float
    peak: float
    half: tuple[float, float, float]
    coords: np.ndarray
    residuals: np.ndarray
    copy: Streaming | None = None

    def physical(self, f: dict[str, np.ndarray]) -> np.ndarray:
        eff = np.ones_like(f["m"])
        for x, h in zip((f["m"], f["k"], f["n"]), self.half, strict=True):
            eff = eff * x / (x + h)
        compute = 2 * f["batch"] * f["m"] * f["k"] * f["n"] / (self.peak * eff)
        traffic = self.copy.predict(f) - self.copy.launch if self.copy is not None else 0.0
        return self.launch + self.item * f["batch"] + np.maximum(compute, traffic)

    def predict(self, f: dict[str, np.ndarray]) -> np.ndarray:
        base = self.physical(f)
        if not len(self.residuals):
            return base
        c = _matmul_coords(f)
        dist2 = np.sum((c[..., None, :] - self.coords) ** 2, axis=-1)
        w = np.exp(-dist2 / (2 * RESIDUAL_OCTAVES**2))
        corr = (w @ self.residuals) / (w.sum(axis=-1) + RESIDUAL_PRIOR)
        return base * np.exp(corr)

    @classmethod
    def fit(cls, points: list[Point], copy: Streaming | None) -> Gemm:
        from scipy.optimize import least_squares

        f = {k: np.array([p.dims[k] for p in points]) for k in ("batch", "m", "k", "n", "bytes")}
        t = np.array([p.seconds for p in points])
        batched = bool(np.any(f["batch"] > 1))
        flops = 2 * f["batch"] * f["m"] * f["k"] * f["n"]

        def unpack(x: np.ndarray) -> Gemm:
            item = math.exp(x[1]) if batched else 0.0
            half = (math.exp(x[3]), math.exp(x[4]), math.exp(x[5]))
            return cls(math.exp(x[0]), item, math.exp(x[2]), half, np.zeros((0, 4)), np.zeros(0), copy)

        def resid(x: np.ndarray) -> np.ndarray:
            return np.log(unpack(x).physical(f)) - np.log(t)

        x0 = np.array([math.log(t.min() * 0.5), math.log(t.min() * 0.01), math.log((flops / t).max()), 2.0, 2.0, 2.0])
        fit = least_squares(resid, x0, bounds=(np.full(6, -60.0), np.full(6, 60.0)), loss="soft_l1", f_scale=0.1)
        model = unpack(fit.x)
        model.coords = _matmul_coords(f)
        model.residuals = np.log(t) - np.log(model.physical(f))
        return model

    def resampled(self, keep: np.ndarray, jitter: np.ndarray) -> Gemm:
        return Gemm(
            self.launch, self.item, self.peak, self.half, self.coords[keep], self.residuals[keep] + jitter, self.copy
        )


@dataclass
class Line:
    """Timings of one op of the variants at its exact shapes at several lengths (`calibrate --d`).

    Along a line the op's time is the kernel model's time times the measured ratio to it, interpolated
    linearly in log N between the timed lengths and held at the ends: exact at the timed shapes, the
    kernel model's shape in between, and what a grid cannot see (a width or a product dimension that
    a kernel handles badly, such as an odd n) measured rather than interpolated."""

    kernel: str
    n: np.ndarray
    dims: list[dict[str, float]]
    seconds: np.ndarray
    se: np.ndarray
    factor: float = 1.0
    """A bootstrap replicate's draw of the line's own interpolation error."""
    _ratio: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def group(cls, points: list[Point]) -> dict[str, Line]:
        by_line: dict[str, dict[float, list[Point]]] = defaultdict(lambda: defaultdict(list))
        for p in points:
            by_line[p.line][p.n].append(p)
        out = {}
        for name, at in by_line.items():
            ns = sorted(at)
            mid = [sorted(at[x], key=lambda p: p.seconds)[len(at[x]) // 2] for x in ns]
            out[name] = cls(mid[0].kernel, np.array(ns), [p.dims for p in mid],
                            np.array([p.seconds for p in mid]), np.array([p.se for p in mid]))  # fmt: skip
        return out

    def ratio(self, model: OpModel) -> np.ndarray:
        """log(measured / kernel model) at the line's lengths (kept: the same model asks again and again)."""
        if self._ratio is None:
            base = np.array([float(model.op_seconds(self.kernel, _arrays(d))[0]) for d in self.dims])
            self._ratio = np.log(self.seconds) - np.log(base)
        return self._ratio

    def along(self, model: OpModel, n: np.ndarray, base: np.ndarray) -> np.ndarray:
        """The op's seconds at lengths n, given the kernel model's seconds there."""
        return base * np.exp(np.interp(np.log(n), np.log(self.n), self.ratio(model))) * self.factor

    def leave_one_out(self, model: OpModel) -> list[float]:
        """Relative errors at each inner timed length, predicted from the other lengths."""
        r, ln = self.ratio(model), np.log(self.n)
        out = []
        for j in range(1, len(self.n) - 1):
            guess = on_line_through(ln[j], ln[j - 1], r[j - 1], ln[j + 1], r[j + 1])
            out.append(math.expm1(guess - r[j]))
        return out

    def resampled(self, rng: np.random.Generator, sigma: float) -> Line:
        """A bootstrap replicate: lengths resampled (the ends kept), medians jittered by their standard
        errors, the whole line scaled by a draw of its leave-one-out error."""
        inner = rng.choice(np.arange(1, len(self.n) - 1), size=max(len(self.n) - 2, 0), replace=True)
        keep = np.unique(np.concatenate([[0, len(self.n) - 1], inner])).astype(int)
        jitter = np.exp(rng.standard_normal(len(keep)) * np.minimum(self.se[keep] / self.seconds[keep], 0.5))
        return Line(self.kernel, self.n[keep], [self.dims[i] for i in keep], self.seconds[keep] * jitter,
                    self.se[keep], math.exp(sigma * rng.standard_normal()))  # fmt: skip


def on_line_through(x: float, xa: float, ya: float, xc: float, yc: float) -> float:
    """y at x on the straight line through (xa, ya) and (xc, yc): what two neighbours predict for a point."""
    return ya + (yc - ya) * (x - xa) / (xc - xa)


SPIKE = 1.25
"""A timing slower than its neighbours' trend along N by this factor is timed again (`off_trend`)."""


TREND_REACH = 4
"""How many timings on each side of a timing `off_trend` judges it by."""


def off_trend(n: list[float], seconds: list[float], factor: float = SPIKE) -> list[int]:
    """Indices of the timings of a series (sorted by n, no n twice) that their neighbours do not explain: more
    than `factor` slower than the robust (Theil–Sen) line through up to `TREND_REACH` timings on each side, in
    log time over log n. A disturbance slows a timing down, often over two or three lengths timed in the same
    slow spell, which a robust line sees through; a real change of speed along N spans more lengths than that."""
    from scipy.stats import theilslopes

    if len(n) < 3:
        return []
    ln, lt = np.log(np.asarray(n, dtype=float)), np.log(np.asarray(seconds, dtype=float))
    out = []
    for i in range(len(n)):
        near = [j for j in range(max(0, i - TREND_REACH), min(len(n), i + TREND_REACH + 1)) if j != i]
        slope, intercept, _, _ = theilslopes(lt[near], ln[near], method="joint")
        if lt[i] - (intercept + slope * ln[i]) > math.log(factor):
            out.append(i)
    return out


def spikes(series: dict) -> list:
    """What `off_trend` finds in several series, each a list of (n, seconds, item) along N (any order): the
    items of the timings to take again, series by series."""
    out = []
    for key in sorted(series):
        pts = sorted(series[key], key=lambda p: p[0])
        out += [pts[i][2] for i in off_trend([p[0] for p in pts], [p[1] for p in pts])]
    return out


def _arrays(dims: dict[str, float]) -> dict[str, np.ndarray]:
    return {k: np.array([v], dtype=float) for k, v in dims.items()}


@dataclass
class OpModel:
    """Per-kernel time models of one device, and the calibration points they were fitted to."""

    device: dict
    dtype: str
    points: list[Point]
    caches: dict[str, int] = field(default_factory=dict)
    """Cache sizes of the device in bytes (L1d, L2, L3 / GPU L2), as read when calibrating."""
    held_out: dict = field(default_factory=dict)
    """Errors of the model on shapes that are not in the grid (measured by `attn-cost calibrate`)."""
    created: str = ""
    kernels: dict[str, Streaming | Gemm | Chain] = field(default_factory=dict, repr=False)
    context: bool = False
    """Add the cache misses a variant's ops have and the same ops alone do not (`context_seconds`)."""
    lines: dict[str, Line] = field(default_factory=dict, repr=False)
    """The variants' ops timed at their exact shapes, by line (`line_of`)."""
    dispatches: dict[str, int] = field(default_factory=dict)
    """ATen kernels one call of each kernel dispatches, views aside (counted by `calibrate`): what the chain's
    fixed cost is paid per."""
    whole_sigma: float = 0.0
    """In a bootstrap replicate: the spread of the factor that scales each variant's whole time (`Chain.sigma`)."""
    whole_rng: np.random.Generator | None = field(default=None, repr=False)
    _whole: dict = field(default_factory=dict, repr=False)
    rates: dict[str, float] = field(default_factory=dict)
    """The device's rough rates the calibration was sized with (`calibrate.probe`): launch_s, bytes_per_s,
    flops_per_s."""

    def __post_init__(self) -> None:
        if not self.kernels:
            self.kernels = self._fit([p for p in self.points if not p.line])
        if not self.lines:
            self.lines = Line.group([p for p in self.points if p.line])

    @property
    def slug(self) -> str:
        from attn_cost.profilers.device import slug

        return slug(self.device)

    @staticmethod
    def _fit(points: list[Point]) -> dict:
        by_kernel: dict[str, list[Point]] = defaultdict(list)
        for p in points:
            by_kernel[p.kernel].append(p)
        kernels: dict = {}
        copy = Streaming.fit(by_kernel[COPY]) if len(by_kernel.get(COPY, ())) >= MIN_POINTS else None
        for name, pts in by_kernel.items():
            if name == SEQUENCE:
                continue
            if len(pts) < MIN_POINTS:
                continue
            if name.startswith("matmul") or name.startswith("sdpa"):
                kernels[name] = Gemm.fit(pts, copy)
            else:
                kernels[name] = copy if name == COPY and copy is not None else Streaming.fit(pts)
        if by_kernel.get(SEQUENCE) and CALL in kernels:
            kernels[SEQUENCE] = Chain.fit(by_kernel[SEQUENCE], kernels[CALL].launch)
        return kernels

    def kernel(self, name: str) -> Streaming | Gemm:
        """The model of a kernel, or of its in-place or out-of-place twin (`kernels.twins`). One this calibration
        never timed is priced by a stand-in (another layout of a product, SDPA, else copy) with a named
        `PricingWarning`: a calibration older than the kernel, never a silent guess."""
        candidates = pricing(name)
        exact = twins(name)
        for candidate in candidates:
            if candidate in self.kernels:
                if candidate not in exact:
                    warnings.warn(
                        f"the op calibration of {self.slug} has no timings of the {name} kernel: priced as "
                        f"{candidate}; `attn-cost calibrate` times it",
                        PricingWarning,
                        stacklevel=2,
                    )
                return self.kernels[candidate]
        raise UserError(
            f"the calibration of {self.slug} has no timings of {name} nor of {COPY}: run `attn-cost calibrate`"
        )

    def op_seconds(self, kernel: str, f: dict[str, np.ndarray]) -> np.ndarray:
        """Seconds of one call of a kernel (not multiplied by its repeat)."""
        return self.kernel(kernel).predict(f)

    def time(self, calls: KernelCalls, n: np.ndarray) -> np.ndarray:
        """Predicted seconds of one call of a variant at every N (with the cache context, if the model has it)."""
        n = np.atleast_1d(np.asarray(n, dtype=float))
        total, ops = np.zeros_like(n), np.zeros_like(n)
        for i, (kernel, f) in enumerate(calls.at(n, self.dispatches)):
            if kernel in (LOOP_STEP, CALL, SEQUENCE) and (not np.any(f["repeat"] > 0) or kernel not in self.kernels):
                continue
            seconds = self.op_seconds(kernel, f)
            line = self.lines.get(calls.lines[i]) if i < len(calls.lines) else None
            if line is not None:
                seconds = line.along(self, n, seconds)
            total = total + f["repeat"] * seconds
            if i < len(calls.kernels):
                ops = ops + f["repeat"] * seconds
        chain = self.kernels.get(SEQUENCE)
        if isinstance(chain, Chain):
            total = total + chain.share * ops
        if self.whole_rng is not None:  # one draw per variant and replicate, the same at every N
            if id(calls) not in self._whole:
                self._whole[id(calls)] = math.exp(self.whole_sigma * self.whole_rng.standard_normal())
            total = total * self._whole[id(calls)]
        if self.context and COPY in self.kernels:
            total = total + self.context_seconds(calls, n)
        return total

    def context_seconds(self, calls: KernelCalls, n: np.ndarray) -> np.ndarray:
        """What the ops of a variant lose to cache misses that the same ops alone do not have: per tensor,
        its bytes times the rise of the copy kernel's cost per byte from the working set it has alone to
        the one it has inside the variant (zero while both fit in a cache level). Ops in loops are left out."""
        per_byte = self.cache_cost_per_byte()

        out = np.zeros_like(n)
        for j, x in enumerate(n):
            rows = [t for i, r in enumerate(calls.reuse(x)) if not calls.in_loop[i] for t in r]
            if not rows:
                continue
            size, inside, alone = (np.array(col) for col in zip(*rows, strict=True))
            out[j] = float(np.sum(size * np.maximum(per_byte(inside) - per_byte(alone), 0.0)))
        return out

    def cache_cost_per_byte(self):
        """Seconds per byte of moving data whose working set is ws, from the copy kernel's curve: its marginal
        cost per byte between calibrated sizes (at their geometric mean), made non-decreasing in ws (the
        smallest cost at that working set or any larger one: per-call overheads are not cache misses)."""
        copy = self.kernels[COPY]
        curve = copy.inner.curves[0] if isinstance(copy, Scaled) else copy.curves[0]
        if len(curve.nbytes) < 2:
            return lambda ws: np.zeros_like(ws, dtype=float)
        cost = np.maximum(np.diff(curve.seconds), 0.0) / np.diff(curve.nbytes)
        envelope = np.minimum.accumulate(cost[::-1])[::-1]
        log_ws = (np.log2(curve.nbytes[1:]) + np.log2(curve.nbytes[:-1])) / 2

        def per_byte(ws: np.ndarray) -> np.ndarray:
            return np.interp(np.log2(np.where(np.isfinite(ws), ws, 2.0**60)), log_ws, envelope)

        return per_byte

    def resample(
        self, rng: np.random.Generator, only: set[str] | None = None, lines: set[str] | None = None
    ) -> OpModel:
        """A bootstrap replicate: every kernel (of `only`, if given) refitted on a resample of its points,
        medians jittered by their standard errors; every line (of `lines`, if given) likewise."""
        by_kernel: dict[str, list[int]] = defaultdict(list)
        for i, p in enumerate(self.points):
            if p.line:
                continue
            if only is None or p.kernel in only or (p.kernel == COPY and p.kernel in self.kernels):
                by_kernel[p.kernel].append(i)
        kernels: dict = {}
        picked: list[Point] = []
        for name, idx in by_kernel.items():
            keep = np.unique(rng.choice(idx, size=len(idx), replace=True))
            jitter = rng.standard_normal(len(keep)) * np.array(
                [min(self.points[i].se / self.points[i].seconds, 0.5) for i in keep]
            )
            if isinstance(self.kernels.get(name), Gemm):
                gemm = self.kernels[name]
                kernels[name] = gemm.resampled(np.searchsorted(idx, keep), jitter)
                continue
            pts = [self.points[i] for i in keep]
            picked += [Point(p.kernel, p.dims, p.seconds * math.exp(j), p.se) for p, j in zip(pts, jitter, strict=True)]
        refit = self._fit(picked)
        for name, model in refit.items():
            kernels.setdefault(name, model)
        for name in list(kernels):  # the error the model makes off its grid, one draw per kernel and replicate
            sigma = self.off_grid_sigma(name)
            if sigma > 0:
                kernels[name] = Scaled(kernels[name], math.exp(sigma * rng.standard_normal()))
        for name, model in self.kernels.items():
            kernels.setdefault(name, model)
        sigma = 1.4826 * float(self.held_out.get(LINES, {}).get("median_abs_error", 0.0))
        drawn = {
            name: line.resampled(rng, sigma) if lines is None or name in lines else line
            for name, line in self.lines.items()
        }
        chain = self.kernels.get(SEQUENCE)
        return OpModel(
            self.device, self.dtype, self.points, self.caches, self.held_out, self.created, kernels, self.context,
            drawn, self.dispatches, chain.sigma if isinstance(chain, Chain) else 0.0,
            np.random.default_rng(rng.integers(1 << 32)),
        )  # fmt: skip

    def off_grid_sigma(self, kernel: str) -> float:
        """Log-scale spread of the model's error on shapes off the grid (from the held-out shapes that
        `calibrate` times): 1.4826 × their median |relative error|, a robust σ."""
        family = "matmul" if kernel.startswith(("matmul", "sdpa")) else "other kernels"
        if kernel in (CALL, LOOP_STEP, SEQUENCE) or family not in self.held_out:
            return 0.0
        return 1.4826 * float(self.held_out[family].get("median_abs_error", 0.0))

    def as_json(self) -> dict:
        from datetime import datetime, timezone

        return {
            "schema": SCHEMA,
            "kind": OPMODEL_KIND,
            "slug": self.slug,
            "device": self.device,
            "dtype": self.dtype,
            "created": self.created or datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "caches": self.caches,
            "held_out": self.held_out,
            "context": self.context,
            "dispatches": dict(sorted(self.dispatches.items())),
            "rates": self.rates,
            "kernels": {k: _describe(v) for k, v in sorted(self.kernels.items())},
            "fit_version": FIT_VERSION,
            "fitted": {k: _parameters(v) for k, v in sorted(self.kernels.items())},
            "points": [p.as_json() for p in self.points],
        }

    @classmethod
    def from_json(cls, data: dict, where: str, refit: bool = False) -> OpModel:
        """A calibration as it was fitted: its stored parameters, loaded without refitting. One without them
        (another fit version) is refitted from its points only with `refit` (`attn-cost calibrate --refit`)."""
        try:
            if data.get("schema") != SCHEMA or data.get("kind") != OPMODEL_KIND:
                raise KeyError("schema")
            points = [
                Point(p["kernel"], dict(p["dims"]), float(p["seconds"]), float(p.get("se", 0)), str(p.get("line", "")),
                      float(p.get("n", 0)))
                for p in data["points"]
            ]  # fmt: skip
            if any(not p.seconds > 0 or not p.dims.get("bytes", 0) > 0 or (p.line and not p.n > 0) for p in points):
                raise ValueError("a non-positive time, size or length")
            device, dtype = data["device"], data["dtype"]
            if not isinstance(device, dict) or not all(isinstance(device.get(k), str) for k in ("name", "kind")):
                raise TypeError("device: not a device fingerprint with a name and a kind")
            if not isinstance(dtype, str):
                raise TypeError("dtype: not a dtype name")
            stored = data.get("fitted") if data.get("fit_version") == FIT_VERSION else None
            kernels = _from_parameters(stored) if isinstance(stored, dict) else None
        except (KeyError, TypeError, AttributeError, ValueError, IndexError) as e:
            raise UserError(f"{where} is not an attn-cost op calibration ({e.__class__.__name__}: {e})") from None
        if kernels is None and not refit:
            version = data.get("fit_version", "none")
            raise UserError(
                f"{where} carries no parameters of this attn-cost's fit (fit version {version}, this one fits with "
                f"{FIT_VERSION}): refit it from its points with `attn-cost calibrate --refit {where}`"
            )
        model = fit_points(device, dtype, points, data.get("caches", {}), where, kernels=kernels)
        model.held_out, model.created = data.get("held_out", {}), data.get("created", "")
        model.context = bool(data.get("context", False))
        model.dispatches = _dispatch_table(data.get("dispatches", {}), where)
        model.rates = {k: float(v) for k, v in data.get("rates", {}).items() if isinstance(v, (int, float))}
        return model

    def to_text(self) -> str:
        """The calibration as JSON: the summary indented, one fitted kernel and one calibration point per line."""
        data = self.as_json()
        points, fitted = data.pop("points"), data.pop("fitted")
        head = json.dumps(data, indent=1)[:-2]
        kernels = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in fitted.items())
        body = ",\n".join(" " + json.dumps(p, separators=(",", ":")) for p in points)
        return f'{head},\n "fitted": {{\n{kernels}\n }},\n "points": [\n{body}\n ]\n}}\n'

    def save(self, root: Path) -> Path:
        """Write the calibration as root/<slug>.json (atomically; never over a file that is not a calibration)."""
        from attn_cost.profilers.corrections import make_folder
        from attn_cost.profilers.files import claim, is_json_of, write_atomic

        make_folder(root)
        path = root / f"{self.slug}.json"
        claim(path, is_json_of(OPMODEL_KIND), "an op calibration")
        write_atomic(path, self.to_text())
        return path


def _dispatch_table(table, where: str) -> dict[str, int]:
    """A calibration's dispatches per kernel, checked: whole counts of at least one."""
    counts = table.values() if isinstance(table, dict) else [None]
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in counts):
        raise UserError(f"{where} is not an attn-cost op calibration (dispatches: not a count of kernels per kernel)")
    return {str(k): v for k, v in table.items()}


def pricing(name: str) -> list[str]:
    """The kernels that may price an op of kernel `name`, in order: its twins, then the stand-ins a calibration
    without it falls back on (with a warning, `OpModel.kernel`)."""
    base = name.rstrip("!")
    out = twins(name) or [name]
    if base.startswith("matmul"):
        out += [f"matmul-{lay}" for lay in MATMUL_LAYOUTS]
    if base.startswith("sdpa"):
        out += ["sdpa"]
    return list(dict.fromkeys([*out, COPY]))


def _describe(model: Streaming | Gemm | Chain) -> dict:
    if isinstance(model, Chain):
        return {"form": "chain", "launch_s": model.launch, "share": model.share, "sigma": model.sigma}
    if isinstance(model, Gemm):
        return {"form": "gemm", "launch_s": model.launch, "item_s": model.item, "peak_flops_per_s": model.peak,
                "half": list(model.half), "points": len(model.residuals)}  # fmt: skip
    dram = [c.large_bytes_per_s for c in model.curves]
    return {"form": "streaming", "launch_s": model.launch, "widths": [int(2**w) for w in model.widths],
            "large_bytes_per_s": dram}  # fmt: skip


def fit_points(
    device: dict, dtype: str, points: list[Point], caches: dict | None = None, where: str = "the calibration",
    kernels: dict | None = None,
) -> OpModel:
    """Fit the op model (or take the fitted `kernels` as they are); too few points for the copy kernel, which
    matrix products' traffic and stand-ins use, is bad input."""
    copies = sum(p.kernel == COPY and not p.line for p in points)
    if copies < MIN_POINTS:
        raise UserError(
            f"{where} has {copies} timing{'s' if copies != 1 else ''} of the {COPY} kernel, which every kernel "
            f"falls back on; an op model needs at least {MIN_POINTS}: run `attn-cost calibrate`"
        )
    return OpModel(device, dtype, points, caches or {}, kernels=kernels or {})


def _parameters(model: Streaming | Gemm | Chain) -> dict:
    """Everything a fitted kernel model is, as JSON: what `_from_parameters` loads back without refitting."""
    if isinstance(model, Chain):
        return {"form": "chain", "launch": model.launch, "share": model.share, "sigma": model.sigma}
    if isinstance(model, Gemm):
        return {"form": "gemm", "launch": model.launch, "item": model.item, "peak": model.peak,
                "half": list(model.half), "coords": model.coords.tolist(),
                "residuals": model.residuals.tolist()}  # fmt: skip
    return {"form": "streaming", "launch": model.launch, "widths": model.widths.tolist(),
            "curves": [{"bytes": c.nbytes.tolist(), "seconds": c.seconds.tolist()} for c in model.curves]}  # fmt: skip


def _from_parameters(fitted: dict) -> dict:
    """Kernel models from their stored parameters (products take their traffic from the stored copy kernel)."""
    streaming = {
        name: Streaming(float(p["launch"]), np.array(p["widths"], dtype=float),
                        [Curve(np.array(c["bytes"], dtype=float), np.array(c["seconds"], dtype=float))
                         for c in p["curves"]])
        for name, p in fitted.items() if p["form"] == "streaming"
    }  # fmt: skip
    copy = streaming.get(COPY)
    out: dict = dict(streaming)
    for name, p in fitted.items():
        if p["form"] == "gemm":
            out[name] = Gemm(float(p["launch"]), float(p["item"]), float(p["peak"]), tuple(map(float, p["half"])),
                             np.array(p["coords"], dtype=float).reshape(-1, 4), np.array(p["residuals"], dtype=float),
                             copy)  # fmt: skip
        elif p["form"] == "chain":
            out[name] = Chain(float(p["launch"]), float(p["share"]), float(p["sigma"]))
        elif p["form"] != "streaming":
            raise ValueError(f"fitted kernel {name}: unknown form {p['form']!r}")
    return out


# -- where op models live ----------------------------------------------------------------------------


def user_dir() -> Path:
    from attn_cost.profilers.store import user_data_dir

    return user_data_dir("opmodels")


def known_opmodels() -> dict[str, Path]:
    """Op calibrations by device slug: shipped ones, overridden by the user's own."""
    from attn_cost.profilers.store import named_files

    return named_files(SHIPPED, "opmodels")


def read_calibration(path: Path) -> dict:
    """The JSON of an op calibration file, plain or gzipped (`.json.gz`, as kept in benchmarks/data/calibrations);
    an unreadable or ill-formed one is bad input."""
    import gzip
    import zlib

    try:
        raw = path.read_bytes()
        data = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw.decode("utf-8"))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path} is not a readable op calibration ({e.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not an attn-cost op calibration")
    return data


def load_opmodel(name: str, refit: bool = False) -> OpModel:
    """An op model by device slug or path (`.json` or `.json.gz`); an unknown name is bad input. `refit`: a
    calibration of another fit version is refitted from its points (else refused, `OpModel.from_json`)."""
    path = Path(name)
    if not (name.endswith((".json", ".json.gz")) and path.exists()):
        found = known_opmodels()
        if name not in found:
            raise UserError(f"no op calibration for device {name!r}: run `attn-cost calibrate` on it")
        path = found[name]
        model = OpModel.from_json(read_calibration(path), str(path), refit)
        if model.slug != name:
            raise UserError(
                f"{path} is the op calibration of {model.slug} ({model.device.get('name')}), not of {name}: "
                "a calibration applies only to the device it was made on"
            )
        return model
    return OpModel.from_json(read_calibration(path), str(path), refit)


def opmodel_for(slug: str) -> OpModel | None:
    """The op model of a device if one is known, else None."""
    path = known_opmodels().get(slug)
    return load_opmodel(str(path)) if path else None


def check_device(model: OpModel, device: dict) -> None:
    """A calibration applies only to the device (and, on a CPU, the thread count) it was made on."""
    from attn_cost.profilers.device import slug

    if model.slug != slug(device):
        raise UserError(
            f"the op calibration {model.slug} was made on {model.device.get('name')} "
            f"(torch {model.device.get('torch')}); this device is {slug(device)}: run `attn-cost calibrate` here"
        )
    if device.get("kind") == "cpu" and model.device.get("threads") != device.get("threads"):
        raise UserError(
            f"the op calibration of {model.slug} was made with {model.device.get('threads')} threads, these "
            f"timings use {device.get('threads')}: run `attn-cost calibrate --threads {device.get('threads')}`"
        )


# -- crossovers from predicted curves --------------------------------------------------------------


def last_crossing(f, lo: float, hi: float, grid: int = 240) -> float | None:
    """Smallest x from which f(x) >= 0 on [lo, hi] (bracketing on a log grid, then brentq).

    lo when f >= 0 throughout, None when f < 0 at hi (B is still dearer at the end of the range)."""
    from scipy.optimize import brentq

    xs = np.geomspace(lo, hi, grid)
    ys = np.asarray(f(xs), dtype=float)
    if ys[-1] < 0:
        return None
    below = np.nonzero(ys < 0)[0]
    if not len(below):
        return lo
    i = int(below[-1])
    return float(brentq(lambda x: float(np.asarray(f(np.array([x])))[0]), xs[i], xs[i + 1], xtol=1e-3))


@dataclass
class Prediction:
    """A predicted transition point with its bootstrap interval (integers: the first N with B <= A)."""

    n0: int | None
    low: int | None
    high: int | None
    replicates: int

    def as_json(self) -> dict:
        return {"predicted_n0": self.n0, "predicted_n0_low": self.low, "predicted_n0_high": self.high}


def _ceil(x: float | None) -> int | None:
    return None if x is None else math.ceil(x - 1e-9)


def predict_n0(
    model: OpModel,
    a: str,
    b: str,
    dims: dict,
    scope: str = "core",
    dtype: str = "fp32",
    *,
    n_max: int = 65536,
    replicates: int = BOOTSTRAP,
    seed: int = 0,
) -> Prediction:
    """Where B's predicted time falls to A's, with a bootstrap interval over the calibration."""
    ca, cb = kernel_calls(a, scope, dtype, dims), kernel_calls(b, scope, dtype, dims)
    used = {name for calls in (ca, cb) for k in (*calls.kernels, LOOP_STEP, CALL, SEQUENCE) for name in pricing(k)}
    lines = {line for calls in (ca, cb) for line in calls.lines}

    def crossing(m: OpModel) -> float | None:
        return last_crossing(lambda n: m.time(ca, n) - m.time(cb, n), 2.0, float(n_max))

    n0 = crossing(model)
    rng = np.random.default_rng(seed)
    boots = [crossing(model.resample(rng, used, lines)) for _ in range(replicates)]
    vals = np.array([math.inf if x is None else x for x in boots])
    # Order statistics, not interpolation: interpolating between two infinite replicates gives NaN.
    if replicates:
        low = float(np.percentile(vals, 2.5, method="lower"))
        high = float(np.percentile(vals, 97.5, method="higher"))
    else:
        low = high = n0

    def finite(x: float | None) -> int | None:
        return _ceil(x) if x is not None and math.isfinite(x) else None

    return Prediction(_ceil(n0), finite(low), finite(high), replicates)


def predicted_seconds(
    model: OpModel, variant: str, sizes: dict[str, int], scope: str = "core", dtype: str = "fp32"
) -> float:
    """Predicted seconds of one call of a variant at concrete sizes (keyed by name: N, d, h, b, L, ...)."""
    from attn_cost.costmodel.symbols import BY_NAME

    dims = {BY_NAME[k]: v for k, v in sizes.items() if k in BY_NAME and k != "N"}
    return float(model.time(kernel_calls(variant, scope, dtype, dims), np.array([float(sizes["N"])]))[0])


def row_dims(row: dict) -> dict:
    """The sizes of a crossover or validation row keyed by symbol (L, r, D and the variant-specific sizes
    default as `Sizes` does)."""
    from attn_cost.costmodel.symbols import BY_NAME, DEFAULTS

    values = {"h": row.get("heads", row.get("h", 1)), "b": row.get("batch", row.get("b", 1))}
    values.update({k: v for k, v in row.items() if k in BY_NAME and k not in ("N", "h", "b") and isinstance(v, int)})
    values.setdefault("L", values.get("d"))
    values.setdefault("r", 4)
    values.setdefault("D", 2)
    out = {BY_NAME[k]: v for k, v in values.items() if v is not None}
    return {**DEFAULTS, **out}


def add_predicted_columns(
    rows: list[dict], name: str, *, required: bool = True, n_max: int = 65536, replicates: int = BOOTSTRAP
) -> None:
    """Add the op model's predicted_n0 and its bootstrap interval to crossover rows (None where the model
    does not apply: training mode, another dtype, a size it is not given). `replicates=0`: the point
    estimate alone, its interval collapsed onto it (a fraction of a second a row instead of seconds)."""
    model = load_opmodel(name) if required else opmodel_for(name)
    for row in rows:
        out = Prediction(None, None, None, 0).as_json()
        if model is not None:
            row["device"] = model.slug
            if row.get("mode", "inference") == "inference" and row.get("dtype", model.dtype) == model.dtype:
                with contextlib.suppress(UserError):  # a size the model is not given: no prediction
                    out = predict_n0(
                        model, row["a"], row["b"], row_dims(row), row.get("scope", "core"), model.dtype,
                        n_max=n_max, replicates=replicates,
                    ).as_json()  # fmt: skip
        row.update(out)


def predicted_curve(
    model: OpModel, variant: str, sizes: dict[str, int], ns: list[int], scope: str = "core", dtype: str = "fp32"
) -> list[float]:
    """Predicted seconds of one call of a variant at every N of `ns` (other sizes keyed by name)."""
    from attn_cost.costmodel.symbols import BY_NAME

    dims = {BY_NAME[k]: v for k, v in sizes.items() if k in BY_NAME and k != "N"}
    return [float(t) for t in model.time(kernel_calls(variant, scope, dtype, dims), np.array(ns, dtype=float))]
