"""The per-kernel time models of the op model: streaming kernels, matrix products, the chain cost, exact-shape
lines, and the calibration points they are fitted to (see `calibrated.data` for how they add up to a variant).
No torch."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from attn_cost.profilers.devicemodel.tunables import DEFAULT
from attn_cost.profilers.store.schema import rule


class OpModel(Protocol):
    """What a line asks of the op model (`calibrated.data.OpModel`): its kernel model's time of one call. A
    Protocol, so that the forms never import the model they make up."""

    def op_seconds(self, kernel: str, f: dict[str, np.ndarray]) -> np.ndarray: ...

MAD_TO_SIGMA = 1.4826
"""A normal distribution's σ over its median absolute deviation: robust spreads from median errors."""

MAX_SECONDS = 1e4
"""The longest a timed kernel or a fitted cost of one may be in a calibration file (a number beyond is not a
timing: a hand edit, a unit mistake)."""


@dataclass
class Point:
    """One calibration timing: a kernel at one shape."""

    kernel: str
    dims: dict[str, float] = field(metadata=rule(minimum=0, maximum=2.0**62))
    """bytes, and rows/cols or batch/m/k/n."""
    seconds: float = field(metadata=rule(above=0, maximum=MAX_SECONDS))
    se: float = field(default=0.0, metadata=rule(minimum=0, maximum=MAX_SECONDS))
    """Standard error of the median (seconds)."""
    line: str = field(default="", metadata=rule(blank=True))
    """The line (`line_of`) of a variant's op this point was timed for, at length `n`; empty on the grid."""
    n: float = field(default=0.0, metadata=rule(minimum=0, maximum=2.0**32))

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


ALIAS_BYTES = 4096
"""Rows whose stride is a multiple of this many bytes (a page: 1,024 fp32 columns) map a column scan onto one
set of a CPU cache: a cumulative sum down such rows ran at 1.5 GB/s on the shipped CPU, down rows of 2,304 bytes
at 16. Such widths are their own class of a streaming kernel's curves (`Streaming.predict`)."""


def aliased(cols: np.ndarray, elem: int) -> np.ndarray:
    """Whether rows of `cols` elements of `elem` bytes have a stride that is a multiple of `ALIAS_BYTES`."""
    stride = np.rint(np.asarray(cols, dtype=float)) * elem
    return (stride > 0) & (np.mod(stride, ALIAS_BYTES) == 0)


@dataclass
class Streaming:
    """t = t_launch + B · s(B, w), a kernel limited by launching and moving bytes: measured times
    interpolated linearly in B between calibration points, and linearly in log w between widths of the same
    stride class (`aliased`): a row width whose stride is a multiple of a page is priced from the calibrated
    widths that are too, any other from the others (each class from all widths if it has none)."""

    launch: float
    widths: np.ndarray
    """log2 of the calibrated row widths, ascending."""
    curves: list[Curve]
    elem: int = 4
    """Bytes per element of the calibration's dtype: what a width's row stride is in bytes."""

    @classmethod
    def fit(cls, points: list[Point], elem: int = 4) -> Streaming:
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
        return cls(launch, np.array(widths), curves, elem)

    def _classes(self, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per width asked: whether it is aliased, and the indices of the calibrated widths of each class."""
        own = aliased(2.0**self.widths, self.elem)
        every = np.arange(len(self.widths))
        pick = every[own] if own.any() else every, every[~own] if (~own).any() else every
        return aliased(cols, self.elem), pick[0], pick[1]

    def predict(self, f: dict[str, np.ndarray]) -> np.ndarray:
        lb = np.maximum(f["bytes"], 1.0)
        if len(self.curves) == 1:
            return self.curves[0](lb)
        cols = np.broadcast_to(np.maximum(f.get("cols", np.ones_like(lb)), 1.0), lb.shape)
        values = np.stack([c(lb) for c in self.curves])
        query, on, off = self._classes(cols)
        lw = np.log2(cols)
        return np.where(query, _across(values, self.widths, on, lw), _across(values, self.widths, off, lw))

    def beyond(self, f: dict[str, np.ndarray]) -> np.ndarray:
        """Where a width asked lies outside the calibrated widths of its class: priced at the nearest one's
        curve (held), an extrapolation a prediction says it made (`OpModel.extrapolated`)."""
        lb = np.asarray(f["bytes"], dtype=float)
        if len(self.curves) == 1 or "cols" not in f:
            return np.zeros(lb.shape, dtype=bool)
        cols = np.broadcast_to(np.maximum(f["cols"], 1.0), lb.shape)
        query, on, off = self._classes(cols)
        lw = np.log2(cols)
        lo = np.where(query, self.widths[on].min(), self.widths[off].min())
        hi = np.where(query, self.widths[on].max(), self.widths[off].max())
        return (lw < lo - 1e-9) | (lw > hi + 1e-9)


def _across(values: np.ndarray, widths: np.ndarray, idx: np.ndarray, lw: np.ndarray) -> np.ndarray:
    """Curves `values[idx]` (at log widths `widths[idx]`) interpolated linearly in log width at `lw`, held
    beyond the outermost."""
    vals, ws = values[idx], widths[idx]
    if len(ws) == 1:
        return vals[0]
    at = np.clip(lw, ws[0], ws[-1])
    hi = np.clip(np.searchsorted(ws, at, side="left"), 1, len(ws) - 1)
    lo = hi - 1
    frac = (at - ws[lo]) / (ws[hi] - ws[lo])
    cols = np.arange(vals.shape[1])
    return vals[lo, cols] * (1 - frac) + vals[hi, cols] * frac


@dataclass
class Chain:
    """What an op costs more inside a chain of different ops than alone in a tight loop: a fixed cost per ATen
    kernel it dispatches (cold dispatch paths: an op made of four kernels pays four times) and a share of its
    own time (caches and threads no longer primed by the same op just before). Fitted to chains of ops of
    growing sizes timed whole, against the same ops timed alone."""

    launch: float
    share: float
    sigma: float = 0.0
    """Log-scale spread of what this misses on the chains (MAD_TO_SIGMA × median |log(whole / predicted)|): the
    error of predicting a chain timed whole from its ops timed alone, which a variant has too."""

    def predict(self, f: dict[str, np.ndarray]) -> np.ndarray:
        return np.full_like(f["bytes"], self.launch, dtype=float)

    @classmethod
    def fit(cls, points: list[Point], call: float) -> Chain:
        """Non-negative least squares of (whole − call − alone) = launch·dispatches + share·alone, each chain
        weighted by its own time (relative errors: a chain of large ops must not drown the small ones).
        Chains timed before dispatches were counted carry their ops instead."""
        from scipy.optimize import nnls  # scipy fits and finds roots, never loaded by `crossover` alone

        a = np.array([[p.dims.get("dispatches", p.dims["ops"]), p.dims["isolated_s"]] for p in points])
        y = np.array([p.seconds - call - p.dims["isolated_s"] for p in points])
        w = 1.0 / np.array([p.seconds for p in points])
        if a[:, 1].max() < DEFAULT.chain_span * a[:, 1].min():  # sizes too alike to tell a share from a fixed cost
            launch, share = max(float(np.median(y / a[:, 0])), 0.0), 0.0
        else:
            (launch, share), _ = nnls(a * w[:, None], y * w)
        whole = np.array([p.seconds for p in points])
        predicted = call + a[:, 1] * (1 + share) + launch * a[:, 0]
        return cls(float(launch), float(share), MAD_TO_SIGMA * float(np.median(np.abs(np.log(whole / predicted)))))


@dataclass
class Overheads:
    """What running a variant costs beside its ops, calibrated from timings of no op at all (`kernels.OVERHEADS`):
    calling it (Python frames, taking its inputs, the timer), one iteration of a loop (slicing the token,
    writing its row), and what its ops cost more inside a chain of different ops than alone (`Chain`)."""

    call_s: float = 0.0
    loop_step_s: float = 0.0
    chain: Chain | None = None

    def seconds(self, ops_s: np.ndarray, iterations: np.ndarray, dispatched: np.ndarray) -> np.ndarray:
        """Seconds they add to ops that take `ops_s` alone, with `iterations` loop iterations and `dispatched`
        ATen kernels (or ops) in all."""
        out = self.call_s + self.loop_step_s * iterations
        if self.chain is not None:
            out = out + self.chain.launch * dispatched + self.chain.share * ops_s
        return out

    @property
    def sigma(self) -> float:
        """The chain's spread (`Chain.sigma`), 0 without chains."""
        return self.chain.sigma if self.chain is not None else 0.0

    def as_json(self) -> dict:
        chain = self.chain
        return {"call_s": self.call_s, "loop_step_s": self.loop_step_s,
                "chain": None if chain is None else {"launch": chain.launch, "share": chain.share,
                                                     "sigma": chain.sigma}}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> Overheads:
        chain = data.get("chain")
        return cls(float(data["call_s"]), float(data["loop_step_s"]),
                   None if chain is None else Chain(float(chain["launch"]), float(chain["share"]),
                                                    float(chain["sigma"])))  # fmt: skip


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
        w = np.exp(-dist2 / (2 * DEFAULT.residual_octaves**2))
        corr = (w @ self.residuals) / (w.sum(axis=-1) + DEFAULT.residual_prior)
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


def _arrays(dims: dict[str, float]) -> dict[str, np.ndarray]:
    return {k: np.array([v], dtype=float) for k, v in dims.items()}
