"""Op-level device model: predict a variant's time as the sum of its ops, from op microbenchmarks.

`attn-cost calibrate` times every op kind the engine emits on a grid of shapes (`profilers.devicemodel.calibrated.fit`);
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
from timings of no op at all, and kept as named fields, `Overheads`).
Crossovers come from the predicted curves by bracketing sign changes on a log grid and brentq; their
interval is the 2.5-97.5 % range over bootstrap replicates of the model, each refitted on a resample
(with replacement) of the calibration points, medians jittered by their standard errors, and every
kernel scaled by a draw of the error the model makes on shapes off its grid (log-normal, σ from the
held-out shapes `calibrate` times); each line is resampled likewise and scaled by a draw of its
leave-one-out error, and each variant's whole time by a draw of the error the model makes on chains of
ops timed whole (`Chain.sigma`).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import warnings
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

import numpy as np
from attn_cost.costmodel.dtypes import STORAGE_BYTES
from attn_cost.costmodel.errors import PricingWarning, UserError
from attn_cost.profilers.devicemodel.calibrated.forms import (
    MAD_TO_SIGMA,
    MAX_SECONDS,
    Chain,
    Curve,
    Gemm,
    Line,
    Overheads,
    Point,
    Scaled,
    Streaming,
)
from attn_cost.profilers.devicemodel.kernels import (  # noqa: F401
    CALL,
    GEMM,
    LOOP_STEP,
    OVERHEADS,
    SEQUENCE,
    family_of,
    kernel_of,
    runnable,
    twins,
)
from attn_cost.profilers.devicemodel.names import known_opmodels
from attn_cost.profilers.devicemodel.opcalls import KernelCalls, kernel_calls, line_of, op_features, operand_layout  # noqa: F401
from attn_cost.profilers.measure.machine import slug
from attn_cost.profilers.store.files import (
    MAX_INPUT_BYTES,
    DuplicateKeyError,
    claim,
    is_json_of,
    make_folder,
    parse_json,
    read_input,
    text_of,
    write_atomic,
)
from attn_cost.profilers.store.schema import Fingerprint, SchemaError, check, load_error, rule
from attn_cost.profilers.store.store import user_data_dir

SCHEMA = 1
FIT_VERSION = 1
"""Version of the fit (`OpModel._fit` and the model families): a calibration stores the parameters it fitted and
this version, and loads them as they are; one of another version is refitted only when asked (`--refit`)."""
OPMODEL_KIND = "attn-cost op model"
"""The `kind` field that marks a JSON file as an op calibration."""
MIN_POINTS = 3
"""Fewest calibration points of one kernel the model accepts."""
BOOTSTRAP = 100
"""Bootstrap replicates behind a predicted crossover's interval."""
LINES = "exact shapes"
"""The `held_out` entry of the lines' leave-one-out error (`Line.leave_one_out`)."""
COPY = "copy"
"""The kernel whose bandwidth curve serves matmul traffic and kernels never calibrated."""


@dataclass
class CalibrationFile:
    """An op calibration's JSON, as `OpModel.from_json` checks it before reading it (its fitted parameters are
    checked as they are loaded)."""

    schema: Literal[1]  # SCHEMA
    kind: str = field(metadata=rule(choices=(OPMODEL_KIND,)))
    device: Fingerprint
    dtype: str
    points: list[Point]


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
    kernels: dict[str, Streaming | Gemm] = field(default_factory=dict, repr=False)
    overheads: Overheads = field(default_factory=Overheads)
    """The call, loop-step and chain costs: what running a variant costs beside its ops."""
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
    _glue_at: dict = field(default_factory=dict, repr=False)
    rates: dict[str, float] = field(default_factory=dict)
    """The device's rough rates the calibration was sized with (`calibrated.fit.probe`): launch_s, bytes_per_s,
    flops_per_s."""
    tunables: dict = field(default_factory=dict)
    """The settings it was made with (`tunables.Tunables.as_json`); empty in calibrations older than them."""
    suspects: list[str] = field(default_factory=list)
    """Timings its bytes and FLOPs do not allow (`sanity`), as found when it was calibrated."""

    def __post_init__(self) -> None:
        if not self.kernels:
            self.kernels, self.overheads = self._fit([p for p in self.points if not p.line], self.elem)
        if not self.lines:
            self.lines = Line.group([p for p in self.points if p.line and p.kernel != GLUE])

    @property
    def slug(self) -> str:

        return slug(self.device)

    @property
    def elem(self) -> int:
        """Bytes per element of the calibration's dtype."""
        return STORAGE_BYTES.get(self.dtype, 4)

    @staticmethod
    def _fit(points: list[Point], elem: int = 4) -> tuple[dict, Overheads]:
        by_kernel: dict[str, list[Point]] = defaultdict(list)
        for p in points:
            by_kernel[p.kernel].append(p)
        kernels: dict = {}
        copy = Streaming.fit(by_kernel[COPY], elem) if len(by_kernel.get(COPY, ())) >= MIN_POINTS else None
        for name, pts in by_kernel.items():
            if name in OVERHEADS or len(pts) < MIN_POINTS:
                continue
            if family_of(name).form == GEMM:
                kernels[name] = Gemm.fit(pts, copy)
            else:
                kernels[name] = copy if name == COPY and copy is not None else Streaming.fit(pts, elem)
        return kernels, _fit_overheads(by_kernel)

    def kernel(self, name: str) -> Streaming | Gemm:
        """The model of a kernel, or of its in-place or out-of-place twin (`kernels.twins`). One this calibration
        never timed is priced by a stand-in (another layout of a product, SDPA, else copy) with a named
        `PricingWarning`: a calibration older than the kernel, never a silent guess."""
        candidates = pricing(name)
        exact = twins(name)
        for candidate in candidates:
            if candidate in self.kernels:
                if candidate not in exact:
                    remedy = ("`attn-cost calibrate` times it" if runnable(name) else
                              "the op model has no PyTorch code to time it yet")  # fmt: skip
                    warnings.warn(
                        f"the op calibration of {self.slug} has no timings of the {name} kernel: priced as "
                        f"{candidate}; {remedy}",
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
        ops = self._ops(calls, n)
        glue = self.glue_seconds(calls, n)
        if glue is None:  # no glue measured for this variant: the chain's fitted costs per call and dispatch
            total = ops + self.overheads.seconds(ops, calls.iterations(n), calls.dispatched(n, self.dispatches))
        else:
            total = timeline(self.device.get("kind", "cpu"), glue, self._kernel_seconds(ops))
        if self.whole_rng is not None:  # one draw per variant and replicate, the same at every N
            if id(calls) not in self._whole:
                self._whole[id(calls)] = math.exp(self.whole_sigma * self.whole_rng.standard_normal())
            total = total * self._whole[id(calls)]
        if self.context and COPY in self.kernels:
            total = total + self.context_seconds(calls, n)
        return total

    def op_times(self, calls: KernelCalls, n: np.ndarray) -> list[tuple[str, dict[str, np.ndarray], np.ndarray]]:
        """Per op of a variant: its kernel, its features at every N (`repeat` among them) and the seconds of one
        call of it as timed alone (its line where it has one)."""
        out = []
        for i, (kernel, f) in enumerate(calls.at(n)):
            seconds = self.op_seconds(kernel, f)
            line = self.lines.get(calls.lines[i])
            if line is not None:
                seconds = line.along(self, n, seconds)
            out.append((kernel, f, seconds))
        return out

    def _ops(self, calls: KernelCalls, n: np.ndarray) -> np.ndarray:
        """Seconds of a variant's ops, each as timed alone (its line where it has one), summed at every N."""
        ops = np.zeros_like(n)
        for _, f, seconds in self.op_times(calls, n):
            ops = ops + f["repeat"] * seconds
        return ops

    def _kernel_seconds(self, ops: np.ndarray) -> np.ndarray:
        """The ops' device time inside a variant: alone, plus the chain's share (caches no longer primed)."""
        chain = self.overheads.chain
        return ops * (1 + (chain.share if chain is not None else 0.0))

    def glue_seconds(self, calls: KernelCalls, n: np.ndarray) -> np.ndarray | None:
        """The host time of a variant between and around its ops (views, Python, dispatch), per call and loop
        iteration, measured by `calibrate` at short lengths (`glue_points`) as the variant's time there less its
        ops' device time; interpolated in log N and held beyond. None where it was not measured."""
        timed = self._glue_at.get(calls.key)
        if timed is None:
            pts = [p for p in self.points if p.kernel == GLUE and p.line == glue_line(calls.key)]
            if not pts:
                self._glue_at[calls.key] = timed = ()
            else:
                ns = np.array(sorted({p.n for p in pts}))
                best = np.array([min(p.seconds for p in pts if p.n == x) for x in ns])
                per = np.maximum(best - self._kernel_seconds(self._ops(calls, ns)), 0.0) / (1 + calls.iterations(ns))
                self._glue_at[calls.key] = timed = (np.log(ns), per)
        if not timed:
            return None
        log_n, per = timed
        return np.interp(np.log(n), log_n, per) * (1 + calls.iterations(n))

    def extrapolated(self, calls: KernelCalls, n: np.ndarray) -> list[str]:
        """The ops of a variant this model prices at lengths `n` without a timing of their own shape: an op a
        calibration could time that has no exact-shape line at these sizes (another head dim than `calibrate
        --d` timed), or, off every line, a row width outside the calibrated widths of its stride class (held at
        the nearest).
        A prediction says so (`calibrated.model.Prediction.extrapolated`), never silently."""
        out: list[str] = []
        for i, (kernel, f) in enumerate(calls.at(np.atleast_1d(np.asarray(n, dtype=float)))):
            if calls.lines[i] in self.lines:  # timed at its own shapes: the line's ratio carries the width too
                continue
            if runnable(kernel):
                out.append(f"{kernel} (no exact-shape line)")
            model = next((self.kernels[k] for k in pricing(kernel) if k in self.kernels), None)
            if isinstance(model, Streaming) and model.beyond(f).any():
                out.append(f"{kernel} (rows of {f['cols'].max():,.0f} beyond the calibrated widths)")
        return list(dict.fromkeys(out))

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
            if only is None or p.kernel in only or p.kernel in OVERHEADS or (p.kernel == COPY and COPY in self.kernels):
                by_kernel[p.kernel].append(i)
        kernels: dict = {}
        picked: list[Point] = []
        for name, idx in by_kernel.items():
            keep = np.unique(rng.choice(idx, size=len(idx), replace=True))
            jitter = rng.standard_normal(len(keep)) * np.array(
                [min(self.points[i].se / self.points[i].seconds, 0.5) for i in keep]
            )
            gemm = self.kernels.get(name)
            if isinstance(gemm, Gemm):
                kernels[name] = gemm.resampled(np.searchsorted(idx, keep), jitter)
                continue
            pts = [self.points[i] for i in keep]
            picked += [Point(p.kernel, p.dims, p.seconds * math.exp(j), p.se) for p, j in zip(pts, jitter, strict=True)]
        refit, fresh = self._fit(picked, self.elem)
        kept = self.overheads  # one this resample has no timings of stays as fitted
        overheads = Overheads(
            fresh.call_s or kept.call_s, fresh.loop_step_s or kept.loop_step_s, fresh.chain or kept.chain
        )
        for name, model in refit.items():
            kernels.setdefault(name, model)
        for name in list(kernels):  # the error the model makes off its grid, one draw per kernel and replicate
            sigma = self.off_grid_sigma(name)
            if sigma > 0:
                kernels[name] = Scaled(kernels[name], math.exp(sigma * rng.standard_normal()))
        for name, model in self.kernels.items():
            kernels.setdefault(name, model)
        sigma = MAD_TO_SIGMA * float(self.held_out.get(LINES, {}).get("median_abs_error", 0.0))
        drawn = {
            name: line.resampled(rng, sigma) if lines is None or name in lines else line
            for name, line in self.lines.items()
        }
        return OpModel(
            self.device, self.dtype, self.points, self.caches, self.held_out, self.created, kernels, overheads,
            self.context, drawn, self.dispatches, self.overheads.sigma, np.random.default_rng(rng.integers(1 << 32)),
        )  # fmt: skip

    def with_lines(self, points: list[Point]) -> OpModel:
        """This model with more exact-shape line and glue points (timed on demand for a head dim its calibration
        did not time; glue it already has is kept): the kernel models and overheads as they are, lines regrouped."""
        have = {p.line for p in self.points if p.kernel == GLUE}
        points = [p for p in points if p.kernel != GLUE or p.line not in have]
        model = fit_points(self.device, self.dtype, self.points + points, self.caches, kernels=self.kernels,
                           overheads=self.overheads)  # fmt: skip
        for name in ("held_out", "created", "context", "dispatches", "rates", "tunables", "suspects"):
            setattr(model, name, getattr(self, name))
        return model

    def off_grid_sigma(self, kernel: str) -> float:
        """Log-scale spread of the model's error on shapes off the grid (from the held-out shapes that
        `calibrate` times): MAD_TO_SIGMA × their median |relative error|, a robust σ."""
        family = "matmul" if family_of(kernel).form == GEMM else "other kernels"
        if family not in self.held_out:
            return 0.0
        return MAD_TO_SIGMA * float(self.held_out[family].get("median_abs_error", 0.0))

    def as_json(self) -> dict:

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
            "tunables": self.tunables,
            "suspects": self.suspects,
            "kernels": {k: _describe(v) for k, v in sorted(self.kernels.items())},
            "fit_version": FIT_VERSION,
            "overheads": self.overheads.as_json(),
            "fitted": {k: _parameters(v) for k, v in sorted(self.kernels.items())},
            "points": [p.as_json() for p in self.points],
        }

    @classmethod
    def from_json(cls, data: dict, where: str, refit: bool = False, from_points: bool = False) -> OpModel:
        """A calibration as it was fitted: its stored parameters, loaded without refitting. One without them
        (another fit version) is refitted from its points only with `refit` (`attn-cost calibrate --refit`);
        `from_points` refits every one, its stored parameters left unread."""
        try:
            check(data, CalibrationFile)
            points = [
                Point(p["kernel"], dict(p["dims"]), float(p["seconds"]), float(p.get("se", 0)), p.get("line", ""),
                      float(p.get("n", 0)))
                for p in data["points"]
            ]  # fmt: skip
            for i, p in enumerate(points):
                if not p.dims.get("bytes", 0) > 0:
                    raise SchemaError(f"points[{i}].dims.bytes", "a number > 0", p.dims.get("bytes"))
                if p.line and not p.n > 0:
                    raise SchemaError(f"points[{i}].n", "a length > 0 (the point is timed on a line)", p.n)
        except SchemaError as e:
            raise load_error(where, "op calibration", e) from None
        device, dtype = data["device"], data["dtype"]
        stored = data.get("fitted") if data.get("fit_version") == FIT_VERSION and not from_points else None
        try:
            if stored is not None:
                _checked_parameters(stored, data.get("overheads"))
        except SchemaError as e:
            raise load_error(where, "op calibration", e) from None
        try:
            kernels, overheads = (
                _from_parameters(stored, data.get("overheads")) if isinstance(stored, dict) else (None, None)
            )
        except (KeyError, TypeError, AttributeError, ValueError, IndexError) as e:
            raise UserError(f"{where} is not an attn-cost op calibration ({e.__class__.__name__}: {e})") from None
        if kernels is None and not refit:
            version = data.get("fit_version", "none")
            raise UserError(
                f"{where} carries no parameters of this attn-cost's fit (fit version {version}, this one fits with "
                f"{FIT_VERSION}): refit it from its points with `attn-cost calibrate --refit {where}`"
            )
        model = fit_points(device, dtype, points, data.get("caches", {}), where, kernels=kernels, overheads=overheads)
        model.held_out, model.created = data.get("held_out", {}), data.get("created", "")
        model.context = bool(data.get("context", False))
        model.dispatches = _dispatch_table(data.get("dispatches", {}), where)
        model.rates = {k: float(v) for k, v in data.get("rates", {}).items() if isinstance(v, (int, float))}
        model.tunables = data["tunables"] if isinstance(data.get("tunables"), dict) else {}
        suspects = data.get("suspects", [])
        model.suspects = [str(x) for x in suspects] if isinstance(suspects, list) else []
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
        make_folder(root, f"the folder {root}")
        path = root / f"{self.slug}.json"
        claim(path, is_json_of(OPMODEL_KIND), "an op calibration")
        write_atomic(path, self.to_text())
        return path


GLUE = "glue"
"""The pseudo-kernel of a variant's glue timings (`calibrated.fit.glue_points`): the variant timed whole at short
lengths, on the line `glue_line(KernelCalls.key)`."""


def glue_line(key: str) -> str:
    return f"{GLUE}|{key}"


def timeline(kind: str, host: np.ndarray, device: np.ndarray) -> np.ndarray:
    """A call's time from its host time (glue: Python, views, dispatch) and its kernels' device time: on a CPU
    one thread does both, so they add; on a GPU the host runs ahead of the kernels it queues, so the slower of
    the two timelines sets the time."""
    return np.maximum(host, device) if kind == "cuda" else host + device


SANITY_SLOW = 20.0
"""A timing of a streaming kernel over this many times a copy of the same bytes (at the same working set) is
physically suspect: no element-wise or row-wise op of the catalogue does that much work per byte. On the shipped
CPU it singles out `exp_` timed on its own overflow (22–30×) and column scans down page-aligned rows (25–100×);
gelu, layernorm, softmax stay under 13×."""
SANITY_MIN_COLS = 64
"""Rows narrower than this are left out of the copy comparison: there the per-row work, not the bytes, sets the
time (a softmax over rows of 8 costs 20× more per element than over rows of 64, and that is real)."""
SANITY_FAST = 1.5
"""A product timed faster than this times the best FLOP rate among the grid's products is suspect too."""


def sanity(model: OpModel) -> list[str]:
    """What the calibration timed that its bytes and FLOPs do not allow on this device, one line per kernel and
    row width: a streaming op slower than `SANITY_SLOW` × a copy of its bytes (rows of at least `SANITY_MIN_COLS`,
    beyond 4× the copy's launch cost), or a product faster than `SANITY_FAST` × the grid's best FLOP rate.
    `calibrate` prints them as warnings and keeps them in the file (`suspects`)."""
    copy = model.kernels.get(COPY)
    slow: dict[tuple[str, int], list[float]] = defaultdict(list)
    fast: dict[str, list[float]] = defaultdict(list)
    rates = [_flop_rate(p) for p in model.points if not p.line and p.kernel.startswith("matmul")]
    best = max(rates, default=0.0)
    for p in model.points:
        if p.kernel in OVERHEADS or p.kernel == GLUE:  # not ops: a call, a loop step, a chain, a whole variant
            continue
        if family_of(p.kernel).flop_bound:  # bound by their FLOPs, not their bytes
            if best and p.kernel.startswith("matmul") and _flop_rate(p) > SANITY_FAST * best:
                fast[p.kernel].append(_flop_rate(p) / best)
            continue
        if copy is None or p.dims.get("cols", SANITY_MIN_COLS) < SANITY_MIN_COLS or p.seconds < 4 * copy.launch:
            continue
        ratio = p.seconds / float(copy.predict({"bytes": np.array([p.dims["bytes"]])})[0])
        if ratio > SANITY_SLOW:
            slow[(p.kernel, int(p.dims.get("cols", 0)))].append(ratio)
    out = [f"{k} over rows of {w:,}: up to {max(r):.0f}× the time of a copy of its bytes ({len(r)} timing"
           f"{'s' if len(r) != 1 else ''})" for (k, w), r in sorted(slow.items())]  # fmt: skip
    out += [f"{k}: up to {max(r):.1f}× the best FLOP rate of the grid's products ({len(r)} timing"
            f"{'s' if len(r) != 1 else ''})" for k, r in sorted(fast.items())]  # fmt: skip
    return out


def _flop_rate(p: Point) -> float:
    return 2 * p.dims.get("batch", 1) * p.dims["m"] * p.dims["k"] * p.dims["n"] / p.seconds


def _dispatch_table(table, where: str) -> dict[str, int]:
    """A calibration's dispatches per kernel, checked: whole counts of at least one."""
    counts = table.values() if isinstance(table, dict) else [None]
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in counts):
        raise UserError(f"{where} is not an attn-cost op calibration (dispatches: not a count of kernels per kernel)")
    return {str(k): v for k, v in table.items()}


def pricing(name: str) -> list[str]:
    """The kernels that may price an op of kernel `name`, in order: its twins, then the stand-ins a calibration
    without it falls back on (with a warning, `OpModel.kernel`): its family's (`Family.stand_ins`), then copy."""
    out = twins(name) or [name]
    out += family_of(name).stand_ins
    return list(dict.fromkeys([*out, COPY]))


def _describe(model: Streaming | Gemm) -> dict:
    if isinstance(model, Gemm):
        return {"form": "gemm", "launch_s": model.launch, "item_s": model.item, "peak_flops_per_s": model.peak,
                "half": list(model.half), "points": len(model.residuals)}  # fmt: skip
    dram = [c.large_bytes_per_s for c in model.curves]
    return {"form": "streaming", "launch_s": model.launch, "widths": [int(2**w) for w in model.widths],
            "large_bytes_per_s": dram}  # fmt: skip


def fit_points(
    device: dict,
    dtype: str,
    points: list[Point],
    caches: dict | None = None,
    where: str = "the calibration",
    kernels: dict | None = None,
    overheads: Overheads | None = None,
) -> OpModel:
    """Fit the op model (or take the fitted `kernels` and `overheads` as they are); too few points for the copy
    kernel, which matrix products' traffic and stand-ins use, is bad input."""
    copies = sum(p.kernel == COPY and not p.line for p in points)
    if copies < MIN_POINTS:
        raise UserError(
            f"{where} has {copies} timing{'s' if copies != 1 else ''} of the {COPY} kernel, which every kernel "
            f"falls back on; an op model needs at least {MIN_POINTS}: run `attn-cost calibrate`"
        )
    return OpModel(device, dtype, points, caches or {}, kernels=kernels or {}, overheads=overheads or Overheads())


def _parameters(model: Streaming | Gemm) -> dict:
    """Everything a fitted kernel model is, as JSON: what `_from_parameters` loads back without refitting."""
    if isinstance(model, Gemm):
        return {"form": "gemm", "launch": model.launch, "item": model.item, "peak": model.peak,
                "half": list(model.half), "coords": model.coords.tolist(),
                "residuals": model.residuals.tolist()}  # fmt: skip
    return {"form": "streaming", "launch": model.launch, "widths": model.widths.tolist(), "elem": model.elem,
            "curves": [{"bytes": c.nbytes.tolist(), "seconds": c.seconds.tolist()} for c in model.curves]}  # fmt: skip


def _fit_overheads(by_kernel: dict[str, list[Point]]) -> Overheads:
    """The call and loop-step costs (their timings' model at one byte, as an op is priced) and the chain cost
    (fitted against the fastest call)."""
    fitted = {name: Streaming.fit(by_kernel[name]) for name in (CALL, LOOP_STEP)
              if len(by_kernel.get(name, ())) >= MIN_POINTS}  # fmt: skip
    call = fitted.get(CALL)
    chain = Chain.fit(by_kernel[SEQUENCE], call.launch) if by_kernel.get(SEQUENCE) and call is not None else None
    return Overheads(_moving_nothing(call), _moving_nothing(fitted.get(LOOP_STEP)), chain)


def _moving_nothing(model: Streaming | None) -> float:
    """Seconds of a call that moves no data (one byte, one row, as `KernelCalls` prices an overhead); 0 if the
    calibration has no model of it."""
    return float(model.predict({"bytes": np.ones(1), "rows": np.ones(1)})[0]) if model is not None else 0.0


def _streaming(p: dict) -> Streaming:
    """A streaming kernel model from its stored parameters."""
    curves = [Curve(np.array(c["bytes"], dtype=float), np.array(c["seconds"], dtype=float)) for c in p["curves"]]
    return Streaming(float(p["launch"]), np.array(p["widths"], dtype=float), curves, int(p.get("elem", 4)))


def _triple(values: list) -> tuple[float, float, float]:
    a, b, c = (float(v) for v in values)
    return a, b, c


SECONDS = rule(minimum=0, maximum=MAX_SECONDS)
LOG2 = rule(minimum=0, maximum=64)
"""A log2 of a size (a row width, a product's dims)."""


@dataclass
class CurveParameters:
    bytes: list[float] = field(metadata=rule(above=0, maximum=2.0**62))
    seconds: list[float] = field(metadata=rule(above=0, maximum=MAX_SECONDS))


@dataclass
class StreamingParameters:
    """A streaming kernel's stored model (`_streaming`): at least one curve per calibrated width, each with at
    least one point, bytes rising."""

    form: str
    launch: float = field(metadata=SECONDS)
    widths: list[float] = field(metadata=LOG2)
    curves: list[CurveParameters]
    elem: int = field(default=4, metadata=rule(minimum=1, maximum=16))


@dataclass
class GemmParameters:
    form: str
    launch: float = field(metadata=SECONDS)
    item: float = field(metadata=SECONDS)
    peak: float = field(metadata=rule(above=0, maximum=1e18))
    """FLOP/s."""
    half: list[float] = field(metadata=rule(minimum=0, maximum=1e6))
    coords: list[list[float]] = field(metadata=LOG2)
    residuals: list[float] = field(metadata=rule(minimum=-50, maximum=50))


@dataclass
class ChainParameters:
    launch: float = field(metadata=SECONDS)
    share: float = field(metadata=rule(minimum=0, maximum=1e3))
    sigma: float = field(default=0.0, metadata=rule(minimum=0, maximum=100))


@dataclass
class OverheadsParameters:
    call_s: float = field(metadata=SECONDS)
    loop_step_s: float = field(metadata=SECONDS)
    chain: ChainParameters | None = None


PARAMETERS: dict[object, type] = {"streaming": StreamingParameters, "gemm": GemmParameters, "chain": ChainParameters}
"""The stored parameters of each form of fitted kernel model."""


def _checked_parameters(fitted: object, overheads: object) -> None:
    """Every stored parameter of a calibration finite and in range, and each model whole (a curve with points,
    bytes rising, as many curves as widths; a product's three half sizes, a residual per coordinate row of four):
    SchemaError naming the first that is not (`fitted.copy.curves[0].seconds[3]`)."""
    if not isinstance(fitted, dict):
        raise SchemaError("fitted", "an object", fitted)
    for name, p in fitted.items():
        where = f"fitted.{name}"
        form = p.get("form") if isinstance(p, dict) else None
        schema = PARAMETERS.get(form)
        if schema is None:
            raise SchemaError(f"{where}.form", "streaming, gemm or chain", form)
        check(p, schema, path=where)
        if form == "streaming":
            if not p["curves"] or len(p["curves"]) != len(p["widths"]):
                raise SchemaError(f"{where}.curves", "one curve per width (at least one)", len(p["curves"]))
            if any(b >= a for a, b in zip(p["widths"][1:], p["widths"], strict=False)):
                raise SchemaError(f"{where}.widths", "rising", p["widths"])
            for i, c in enumerate(p["curves"]):
                if not c["bytes"] or len(c["bytes"]) != len(c["seconds"]):
                    raise SchemaError(f"{where}.curves[{i}]", "points (as many seconds as bytes, at least one)", c)
                if any(b >= a for a, b in zip(c["bytes"][1:], c["bytes"], strict=False)):
                    raise SchemaError(f"{where}.curves[{i}].bytes", "rising", c["bytes"])
        elif form == "gemm":
            if len(p["half"]) != 3 or any(len(row) != 4 for row in p["coords"]):
                raise SchemaError(f"{where}.half", "three half sizes, and coordinates of four", p["half"])
            if len(p["coords"]) != len(p["residuals"]):
                raise SchemaError(f"{where}.residuals", "one per coordinate row", len(p["residuals"]))
    if overheads is not None:
        check(overheads, OverheadsParameters, path="overheads")


def _from_parameters(fitted: dict, overheads: dict | None) -> tuple[dict, Overheads]:
    """Kernel models and overheads from their stored parameters (products take their traffic from the stored copy
    kernel). Files written before the overheads were named fields keep them among the kernels."""
    if overheads is None:
        fitted = dict(fitted)
        old = {name: fitted.pop(name) for name in OVERHEADS if name in fitted}
        call, step = (_streaming(old[n]) if n in old else None for n in (CALL, LOOP_STEP))
        overheads = {"call_s": _moving_nothing(call), "loop_step_s": _moving_nothing(step), "chain": old.get(SEQUENCE)}
    streaming = {name: _streaming(p) for name, p in fitted.items() if p["form"] == "streaming"}
    copy = streaming.get(COPY)
    out: dict = dict(streaming)
    for name, p in fitted.items():
        if p["form"] == "gemm":
            out[name] = Gemm(float(p["launch"]), float(p["item"]), float(p["peak"]), _triple(p["half"]),
                             np.array(p["coords"], dtype=float).reshape(-1, 4), np.array(p["residuals"], dtype=float),
                             copy)  # fmt: skip
        elif p["form"] != "streaming":
            raise ValueError(f"fitted kernel {name}: unknown form {p['form']!r}")
    return out, Overheads.from_json(overheads) if overheads else Overheads()


# -- where op models live ----------------------------------------------------------------------------


def user_dir() -> Path:

    return user_data_dir("opmodels")


def read_calibration(path: Path) -> dict:
    """The JSON of an op calibration file, plain or gzipped (`.json.gz`, as kept in benchmarks/data/calibrations);
    an unreadable or ill-formed one is bad input."""

    raw = read_input(path, "an op calibration")
    try:
        if path.suffix == ".gz":
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
                raw = f.read(MAX_INPUT_BYTES + 1)
            if len(raw) > MAX_INPUT_BYTES:
                raise UserError(f"{path} unpacks to over {MAX_INPUT_BYTES / 2**20:,.0f} MiB: not an op calibration")
        data = parse_json(text_of(raw, path, "an op calibration"))
    except (OSError, EOFError, zlib.error, RecursionError) as e:
        raise UserError(f"{path} is not a readable op calibration ({e.__class__.__name__})") from None
    except ValueError as e:  # not JSON, a key given twice, or an integer of more digits than Python reads
        why = ("not JSON" if isinstance(e, json.JSONDecodeError) else str(e) if isinstance(e, DuplicateKeyError)
               else "a number too long to read")  # fmt: skip
        raise UserError(f"{path} is not a readable op calibration ({why})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not an attn-cost op calibration")
    return data


def load_opmodel(name: str, refit: bool = False, from_points: bool = False) -> OpModel:
    """An op model by device slug or path (`.json` or `.json.gz`); an unknown name is bad input. `refit`: a
    calibration of another fit version is refitted from its points (else refused, `OpModel.from_json`);
    `from_points`: every calibration is, its stored parameters left unread (`calibrate --refit`)."""
    path = Path(name)
    if not (path.is_file() or name.endswith((".json", ".json.gz"))):
        found = known_opmodels()
        if name not in found:
            raise UserError(f"no op calibration for device {name!r}: run `attn-cost calibrate` on it")
        path = found[name]
        model = OpModel.from_json(read_calibration(path), str(path), refit, from_points)
        if model.slug != name:
            raise UserError(
                f"{path} is the op calibration of {model.slug} ({model.device.get('name')}), not of {name}: "
                "a calibration applies only to the device it was made on"
            )
        return model
    return OpModel.from_json(read_calibration(path), str(path), refit, from_points)


def opmodel_for(slug: str) -> OpModel | None:
    """The op model of a device if one is known, else None."""
    path = known_opmodels().get(slug)
    return load_opmodel(str(path)) if path else None


def check_device(model: OpModel, device: dict) -> None:
    """A calibration applies only to the device (and, on a CPU, the thread count) it was made on."""

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
