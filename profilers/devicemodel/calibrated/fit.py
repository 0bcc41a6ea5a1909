"""Op microbenchmarks: time every kernel the engine emits on a grid of shapes, for the op model.

Each grid point is one engine op at concrete shapes (built with the same `Graph` calls the variants
use, so its traffic and dims are exactly what the op model will be asked about) and the PyTorch code
the reference implementations run for it. Shapes run from launch-bound sizes to several times the
last-level cache, denser around the cache (where bandwidth falls). Beside the grid, `line_grid` gives
the ops of the catalogue's variants at their exact shapes along N (the op model's lines). Timings go
through `timing.time_cases` into the device's result store, so an interrupted calibration resumes.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import torch
from attn_cost.costmodel.dtypes import dtype_bytes
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.devicemodel import kernels
from attn_cost.profilers.devicemodel.calibrated.data import GLUE, LINES, Point, fit_points, glue_line, sanity
from attn_cost.profilers.devicemodel.device import row_dims
from attn_cost.profilers.devicemodel.kernels import (
    CALL,
    FAMILIES,
    KERNELS,
    LAYOUT,
    LOOP_STEP,
    RANK,
    SEQUENCE,
    Shape,
    members,
    runnable,
)
from attn_cost.profilers.devicemodel.opcalls import engine_features, kernel_calls
from attn_cost.profilers.devicemodel.trend import spikes
from attn_cost.profilers.devicemodel.tunables import DEFAULT, Tunables
from attn_cost.profilers.measure.cases import Case, build_case
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.measure.timing import OutOfMemoryError, time_cases
from attn_cost.profilers.store.store import ResultStore, record_key
from torch.utils._python_dispatch import TorchDispatchMode


def cache_sizes(device: str) -> dict[str, int]:
    """Cache sizes in bytes: sysfs (CPU, cpu0's view) or the CUDA device's L2."""
    if device == "cuda":
        return {"L2": int(torch.cuda.get_device_properties(0).L2_cache_size)}
    out: dict[str, int] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1], 1)
        out[f"L{level}{'d' if kind == 'Data' else ''}"] = int(size.rstrip("KMG")) * mult
    return out or {"L3": 32 << 20}


_s = kernels.shape


# -- the grid ----------------------------------------------------------------------------------------


def grid(caches: dict[str, int], dtype: str = "fp32", tune: Tunables = DEFAULT) -> list[Shape]:
    """Every shape the calibration times: each kernel family's grid (`kernels.registry.Family.grid`), in the
    families' order, then what is timed beside the kernels (`kernels.OVERHEADS`)."""
    llc, elem = max(caches.values()), dtype_bytes(dtype)
    shapes = [s for name, family in FAMILIES.items() for s in family.grid(members(name), llc, elem, tune)]
    shapes += [_s(LOOP_STEP, iterations=n) for n in tune.loop_iterations]
    shapes += [_s(CALL, rows=n, cols=8) for n in tune.call_rows]
    shapes += [_s(SEQUENCE, rows=r) for r in tune.chain_sizes]
    return shapes


@dataclass(frozen=True)
class LinePoint:
    """One op of a variant at one length: the shape to time, and the line it lies on."""

    shape: Shape
    line: str
    n: int


def line_grid(variants: list[str], sizes: list[dict[str, int]], caches: dict[str, int], dtype: str = "fp32",
              tune: Tunables = DEFAULT, rates: Rates | None = None) -> list[LinePoint]:  # fmt: skip
    """The ops of `variants` (core scope) at every size of `sizes` (keyed by name: d, h, b, L, ...) at their
    exact shapes along `tune.lengths`, up to `tune.cache_multiple` × the last-level cache and `tune.line_max_s`
    a call at the device's `rates` (default: those of the first calibrations). A variant that needs a size it
    is not given, or has no core scope, is skipped."""

    top = tune.cache_multiple * max(caches.values())
    rates = rates or FIRST_RATES
    out: dict[tuple[Shape, str], LinePoint] = {}
    for size in sizes:
        for variant in variants:
            try:
                calls = kernel_calls(variant, "core", dtype, row_dims(size))
            except UserError:
                continue
            for kernel, feats, line in zip(calls.kernels, calls.features, calls.lines, strict=True):
                if not runnable(kernel):
                    if not kernels.twins(kernel):  # nothing times it, nothing prices it: a registry gap
                        raise UserError(
                            f"{variant}: its {kernel} op has no kernel to calibrate (profilers/devicemodel/kernels/)"
                        )
                    continue  # priced by its twin's grid model
                for n in tune.lengths:
                    f = {k: float(fn(float(n))) for k, fn in feats.items() if k not in ("repeat",)}
                    shape = shape_of(kernel, f)
                    seconds = rates.estimate(Point(kernel, {**f, **dict(shape.dims)}, 0.0))
                    if f["bytes"] > top or seconds > tune.line_max_s:
                        break
                    out.setdefault((shape, line), LinePoint(shape, line, n))
    return list(out.values())


def shape_of(kernel: str, features: dict[str, float]) -> Shape:
    """The shape to time an op at, from its features at one N (`calibrated.data.KernelCalls.at`): its family's dims
    (batch/m/k/n of a product or SDPA, rows/cols of anything else, a chunk kernel's value dim and flags), sizes
    rounded to whole ones (a flag stays 0), and its operand layout if any."""
    dims = {k: round(v) if (v := features[k]) == 0 else max(1, round(v)) for k in kernels.family_of(kernel).dims}
    layout = {k: round(features[k]) for k in LAYOUT if features.get(k)}
    return _s(kernel, **dims, **layout)


def held_out_grid(caches: dict[str, int], dtype: str = "fp32", tune: Tunables = DEFAULT, seed: int = 7) -> list[Shape]:
    """Shapes off the grid (each family's `held_out`: log-uniform in the grid's range, d = 24 and 48 products) for
    the held-out error."""
    rng = random.Random(seed)
    top = max(caches.values()) * tune.cache_multiple // (2 * dtype_bytes(dtype))
    return [s for name, family in FAMILIES.items() for s in family.held_out(members(name), top, tune, rng)]


# -- one grid point as an engine op and as PyTorch code -----------------------------------------------


def engine_op(shape: Shape, dtype: str) -> Point:
    """The kernel's engine op at the shape and its features (what the op model will see), from its declaration."""
    k = shape.kernel
    if k == LOOP_STEP:
        return Point(k, {"bytes": 1.0, "rows": 1.0, "iterations": float(shape.get("iterations"))}, 0.0)
    if k == CALL:
        return Point(k, {"bytes": 1.0, "rows": 1.0}, 0.0)
    if k == SEQUENCE:
        return Point(k, {"bytes": 1.0, "rows": 1.0, "ops": float(len(sequence_parts(shape)))}, 0.0)
    _, dims = engine_features(shape, dtype)
    return Point(k, dims, 0.0)


def _runner(shape: Shape, dtype: str, device: str) -> tuple[Callable, Callable[[], list]]:
    """(run(inputs), make_inputs) of one kernel at one shape, as the reference implementations run it."""
    runner = kernels.build_runner(shape, dtype, device, sequence_parts)
    return runner.run, runner.make


CHAIN_KINDS = ("matmul-NT", "scale!", "softmax", "matmul-NN", "l2normalize", "poly2", "div!", "sum-axis2",
               "exp!", "add", "sub", "maximum", "elu1", "gelu", "layernorm", "max-axis2",
               "copy", "add!", "mul!", "normalize_rows!", "softmax-axis2", "cumsum!", "matmul-TN", "div")  # fmt: skip
"""The op kinds an op-sequence point chains, in order: the first 8 (the grid's chains), or the first `kinds`
(`benchmarks/bench_chain_length.py`)."""


def sequence_parts(shape: Shape) -> list[Shape]:
    """The small ops of different kinds an op-sequence point chains (each also timed alone), all r × r."""
    r = shape.get("rows")
    kinds = CHAIN_KINDS[: shape.get("kinds", 8)]
    return [_s(k, batch=1, m=r, k=r, n=r) if k.startswith("matmul") else _s(k, rows=r, cols=r) for k in kinds]


ALIASES = {"_unsafe_view"}
"""ATen ops that make a view without being marked as one (the reshape a matmul ends with)."""


class _CountDispatches(TorchDispatchMode):
    """Counts the ATen kernels a call dispatches, views and aliases aside."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view and func.overloadpacket.__name__ not in ALIASES:
            self.count += 1
        return func(*args, **(kwargs or {}))


@cache
def dispatches(shape: Shape, dtype: str = "fp32") -> int:
    """ATen kernels one call of the shape's kernel dispatches (on CPU, at that shape): an op made of several
    kernels pays the cost of running inside a chain once per kernel (`calibrated.data.Chain`)."""
    if shape.kernel == SEQUENCE:
        return sum(dispatches(part, dtype) for part in sequence_parts(shape))
    runner = kernels.build_runner(shape, dtype, "cpu", sequence_parts)
    with torch.no_grad():
        runner.run(runner.make())
        inputs = runner.make()
        with _CountDispatches() as counted:
            runner.run(inputs)
        restored = 0
        if runner.restore is not None:  # the copy that restores an in-place kernel's input is not the kernel's
            with _CountDispatches() as copies:
                runner.restore(inputs)
            restored = copies.count
    return max(1, counted.count - restored)


def dispatch_table(shapes: list[Shape], dtype: str) -> dict[str, int]:
    """Dispatches per kernel, counted at each kernel's smallest shape among `shapes` (overheads aside)."""
    smallest: dict[str, Shape] = {}
    for shape in sorted((s for s in shapes if runnable(s.kernel)), key=lambda s: math.prod(v for _, v in s.dims)):
        smallest.setdefault(shape.kernel, shape)
    return {kernel: dispatches(shape, dtype) for kernel, shape in sorted(smallest.items())}


# -- running the grid ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rates:
    """Roughly what an op costs on the device being calibrated: a launch, a byte moved, a FLOP. They size the
    calibration to the device (calls per timed sample, where exact-shape lines stop), so that on a GPU the lines
    reach its crossovers at tens of thousands of tokens instead of stopping at a CPU's lengths."""

    launch_s: float
    bytes_per_s: float
    flops_per_s: float

    def estimate(self, p: Point) -> float:
        """Seconds of one call of a calibration point."""
        flops = 2 * p.dims.get("batch", 1) * p.dims.get("m", 0) * p.dims.get("k", 0) * p.dims.get("n", 0)
        return self.launch_s + p.dims["bytes"] / self.bytes_per_s + flops / self.flops_per_s

    def inner(self, p: Point, tune: Tunables = DEFAULT) -> int:
        """How many calls one timed sample makes (kept with each timing, so a resumed calibration divides
        stored samples by what they were timed with). A variant's call overhead is timed one call per sample."""
        if p.kernel in (CALL, SEQUENCE):
            return 1
        calls = int(tune.sample_s / (self.estimate(p) * p.dims.get("iterations", 1)))
        return max(1, min(tune.max_calls_per_sample, calls))

    def as_json(self) -> dict[str, float]:
        return {"launch_s": self.launch_s, "bytes_per_s": self.bytes_per_s, "flops_per_s": self.flops_per_s}


FIRST_RATES = Rates(5e-6, 4e9, 3e10)
"""The rates calibrations were sized with before the device was probed (a 2-core CPU): timings stored without
their calls per sample were made with them."""
PROBE_COPY_ELEMENTS = (64, 1 << 22)
"""A launch-bound copy and one well beyond a CPU's last-level cache (16 MiB in fp32)."""
PROBE_PRODUCT = 512
"""Side of the square product the probe times for the device's FLOP rate."""


def probe(device: str, dtype: str = "fp32") -> Rates:
    """The device's rates from three quick timings (a second or so): a tiny copy (launch), a large one (bytes)
    and a square product (FLOPs). Fed to `Calibrator` and recorded in the calibration."""
    small, large = (_s("copy", rows=1, cols=n) for n in PROBE_COPY_ELEMENTS)
    product = _s("matmul-NN", batch=1, m=PROBE_PRODUCT, k=PROBE_PRODUCT, n=PROBE_PRODUCT)
    seconds = []
    for at in (small, large, product):
        run, make = _runner(at, dtype, device)
        size = Sizes(N=at.get("rows", at.get("m", 1)), d=at.get("cols", at.get("k", 1)))
        case = Case(f"probe:{at.kernel}", "op", size, dtype, device, run, make, tag=str(at.dims))
        (stats,) = time_cases([case], 3, 1)
        seconds.append(stats.median)
    t_small, t_large, t_product = seconds
    moved = engine_op(large, dtype).dims["bytes"]
    return Rates(
        launch_s=t_small,
        bytes_per_s=moved / max(t_large - t_small, 1e-9),
        flops_per_s=2 * PROBE_PRODUCT**3 / max(t_product - t_small, 1e-9),
    )


class Calibrator:
    """Times grid points through a result store (stored ones are reused), returning op-model points."""

    def __init__(
        self,
        store: ResultStore,
        device: str,
        dtype: str = "fp32",
        repeats: int = 7,
        rates: Rates | None = None,
        tune: Tunables = DEFAULT,
    ) -> None:
        """`rates`: the device's (`probe`); default: probed now, on first use."""
        self.store, self.device, self.dtype, self.repeats, self.tune = store, device, dtype, repeats, tune
        self._rates = rates
        self.measured = 0

    @property
    def rates(self) -> Rates:
        if self._rates is None:
            self._rates = probe(self.device, self.dtype)
        return self._rates

    def key(self, shape: Shape, tag: str) -> str:
        return record_key("time", f"{tag}:{shape.kernel}", "op", self.dtype, _sizes(shape), self.store.device)

    def point(self, shape: Shape, tag: str = "op") -> Point | None:
        """The timing of one grid point (None: out of memory), measured unless stored."""
        p = engine_op(shape, self.dtype)
        key = self.key(shape, tag)
        rec = self.store.get(key)
        if rec is None:
            rec = self._measure(shape, p, key, tag)
        if rec["status"] != "ok":
            return None
        t = rec["time"]
        per = rec.get("calls_per_sample") or FIRST_RATES.inner(p)
        per *= max(1, int(p.dims.get("iterations", 1)))
        se = _se(t)
        median = t["median"]
        restore = rec.get("restore")
        if restore:  # an in-place kernel: its input restored before each call, that copy's time taken off
            median = max(median - restore["median"], RESTORE_FLOOR * median)
            se = math.hypot(se, _se(restore))
        dims = {k: v for k, v in p.dims.items() if k != "iterations"}
        if shape.kernel == SEQUENCE:  # the same ops timed alone, as the grid times them
            alone = [self.point(part, tag) for part in sequence_parts(shape)]
            if any(a is None for a in alone):
                return None
            dims["isolated_s"] = sum(a.seconds for a in alone)
            dims["dispatches"] = float(dispatches(shape, self.dtype))
        return Point(shape.kernel, dims, median / per, se / per)

    def _measure(self, shape: Shape, p: Point, key: str, tag: str) -> dict:
        runner = kernels.build_runner(shape, self.dtype, self.device, sequence_parts)
        run, make = runner.run, runner.make
        inner = self.rates.inner(p, self.tune)
        repeats = self.repeats if self.rates.estimate(p) * p.dims.get("iterations", 1) < self.tune.slow_call_s else 3
        if p.kernel in (CALL, SEQUENCE):  # one call per sample, a few µs each: the noisiest points of all
            repeats *= self.tune.host_repeat_factor

        def many(box: list) -> None:
            for _ in range(inner):
                run(box)

        size = Sizes(N=int(p.dims.get("rows", p.dims.get("m", 1))), d=int(p.dims.get("cols", p.dims.get("k", 1))))
        exact = f"{shape.dims}|inner={inner}"  # `size` is a summary of the shape: the timer's caches key on this
        cases = [Case(f"{tag}:{shape.kernel}", "op", size, self.dtype, self.device, many, make, tag=exact)]
        if runner.restore is not None:  # the restoring copy alone, timed in alternation with the kernel
            restore = runner.restore

            def restores(box: list) -> None:
                for _ in range(inner):
                    restore(box)

            cases.append(
                Case(f"{tag}:{shape.kernel}:restore", "op", size, self.dtype, self.device, restores, make, tag=exact)
            )
        # a call, a loop step or a chain is host-side work: on CUDA the host clock times it (GPU events see ~0)
        host = {"host_clock": True} if self.device == "cuda" and p.kernel in (CALL, LOOP_STEP, SEQUENCE) else {}
        try:
            stats = time_cases(cases, repeats, 1, count_kernels=False, **host)  # a sample runs `inner` kernels
            values = {"time": stats[0].as_json(), "status": "ok"}
            if len(stats) > 1:
                values["restore"] = stats[1].as_json()
        except OutOfMemoryError:
            values = {"time": None, "status": "oom"}
        self.measured += 1
        record = {"kind": "time", "key": key, "variant": f"{tag}:{shape.kernel}", "scope": "op", "dtype": self.dtype,
                  "sizes": _sizes(shape), "calls_per_sample": inner, **values}  # fmt: skip
        return self.store.add(record)


RESTORE_FLOOR = 0.05
"""An in-place kernel's time net of its restoring copy is at least this share of the two together (two noisy
timings of nearly the same cost may differ by less than nothing)."""


def _sizes(shape: Shape) -> dict[str, int]:
    """A timing's sizes in the result store: the shape's dims, the rank, and `fresh` for an in-place kernel
    whose input is restored before every call (`kernels.fresh_inputs`), so that timings made on reused inputs
    are never taken for them."""
    fresh = {"fresh": 1} if shape.kernel in KERNELS and KERNELS[shape.kernel].inplace else {}
    return {**dict(shape.dims), "rank": RANK, **fresh}


def _se(t: dict) -> float:
    """Standard error of a timing's median, from its quartiles (a normal's IQR is 1.349 σ; the median's SE is
    1.2533 σ/√n)."""
    return 1.2533 * ((t["q3"] - t["q1"]) / 1.349) / max(1, t["runs"]) ** 0.5


def _recheck_lines(
    calibrator: Calibrator, points: list[Point], shapes: list[Shape], step: Callable[[str, int, int], None]
) -> None:
    """Time again every point of a line that its neighbours do not explain (`calibrated.data.off_trend`) and keep the
    faster timing: a disturbed timing is slow, never fast. `points[i]` was timed at `shapes[i]`."""
    by_line: dict[str, list[tuple[float, float, int]]] = {}
    for i, p in enumerate(points):
        if p.line:
            by_line.setdefault(p.line, []).append((p.n, p.seconds, i))
    suspects = spikes(by_line)
    for j, i in enumerate(suspects):
        step(f"again: {points[i].kernel}", j, len(suspects))
        _keep_faster(points, i, calibrator.point(shapes[i], tag="op-again"))


def _keep_faster(points: list[Point], i: int, again: Point | None) -> None:
    """Replace line point i by another timing of its shape if that one is faster."""
    p = points[i]
    if again is not None and again.seconds < p.seconds:
        points[i] = Point(p.kernel, p.dims, again.seconds, again.se, p.line, p.n)


def _more_passes(
    calibrator: Calibrator, points: list[Point], timed: list[Shape], step: Callable, done: int, total: int
) -> None:
    """Time every line point again, `line_passes` − 1 times, each pass in its own random order; keep the fastest."""
    for later in range(2, calibrator.tune.line_passes + 1):
        order = [i for i, p in enumerate(points) if p.line]
        random.Random(later).shuffle(order)
        for i in order:
            step(f"exact, pass {later}: {timed[i].kernel} {dict(timed[i].dims)}", done, total)
            _keep_faster(points, i, calibrator.point(timed[i], tag=f"op-pass{later}"))
            done += 1


def time_lines(
    calibrator: Calibrator, lines: list[LinePoint], step: Callable[[str, int, int], None] = lambda m, d, t: None
) -> list[Point]:
    """Time exact-shape line points as `calibrate` does (random order, every pass, spikes again), without the
    grid: the lines a calibration lacks, timed when a prediction needs them (`validate`)."""
    todo = list(lines)
    random.Random(0).shuffle(todo)
    total = len(todo) * calibrator.tune.line_passes
    points: list[Point] = []
    timed: list[Shape] = []
    for i, lp in enumerate(todo):
        step(f"exact: {lp.shape.kernel} {dict(lp.shape.dims)}", i, total)
        p = calibrator.point(lp.shape)
        if p is not None:
            points.append(Point(p.kernel, p.dims, p.seconds, p.se, lp.line, float(lp.n)))
            timed.append(lp.shape)
    _more_passes(calibrator, points, timed, step, len(todo), total)
    _recheck_lines(calibrator, points, timed, step)
    return points


def glue_points(calibrator: Calibrator, variants: list[str], sizes: list[dict[str, int]],
                step: Callable[[str, int, int], None] = lambda m, d, t: None) -> list[Point]:  # fmt: skip
    """Each variant (core scope) timed whole at the short lengths `tune.glue_lengths`, at every size of `sizes`:
    there its ops take microseconds and the rest of its time is glue (views, Python, dispatch between them),
    which the op model keeps per variant (`OpModel.glue_seconds`) instead of one constant for every variant. A
    variant without a reference implementation, or that needs a size it is not given, is skipped. Stored like
    every timing (a resumed calibration reuses them)."""
    todo = []
    for size in sizes:
        for variant in variants:
            try:
                calls = kernel_calls(variant, "core", calibrator.dtype, row_dims(size))
                build_case(variant, "core", Sizes(N=8, **size), calibrator.dtype, calibrator.device)
            except UserError:
                continue
            todo += [(variant, size, calls.key, n) for n in calibrator.tune.glue_lengths]
    out = []
    for i, (variant, size, key, n) in enumerate(todo):
        step(f"glue: {variant} {size} N={n}", i, len(todo))
        sizes_n = {**size, "N": n}
        record_id = record_key("time", f"{GLUE}:{variant}", "core", calibrator.dtype, sizes_n, calibrator.store.device)
        rec = calibrator.store.get(record_id)
        if rec is None:
            case = build_case(variant, "core", Sizes(N=n, **size), calibrator.dtype, calibrator.device)
            host = {"host_clock": True} if calibrator.device == "cuda" else {}
            repeats = calibrator.repeats * calibrator.tune.host_repeat_factor
            (stats,) = time_cases([case], repeats, 2, **host)
            rec = calibrator.store.add({"kind": "time", "key": record_id, "variant": f"{GLUE}:{variant}",
                                        "scope": "core", "dtype": calibrator.dtype, "sizes": sizes_n,
                                        "time": stats.as_json(), "status": "ok"})  # fmt: skip
            calibrator.measured += 1
        t = rec["time"]
        out.append(Point(GLUE, {"bytes": 1.0, "rows": 1.0}, t["median"], _se(t), glue_line(key), float(n)))
    return out


def missing_lines(model, variants: list[str], ds: list[int], caches: dict[str, int], rates: Rates,
                  tune: Tunables = DEFAULT) -> list[LinePoint]:  # fmt: skip
    """The exact shapes of `variants`' ops at head dims `ds` whose lines the op model `model` has none of."""
    wanted = line_grid(variants, [{"d": d} for d in ds], caches or cache_sizes("cpu"), model.dtype, tune, rates)
    return [lp for lp in wanted if lp.line not in model.lines]


def calibrate(
    calibrator: Calibrator,
    caches: dict[str, int],
    *,
    lines: list[LinePoint] = (),
    glue: tuple[list[str], list[dict[str, int]]] = ([], []),
    step: Callable[[str, int, int], None] = lambda message, done, total: None,
):
    """Time the grid and the variants' ops at their exact shapes (`lines`, from `line_grid`), and the `glue`
    of (variants, sizes) (`glue_points`), reusing stored points; fit the op model; measure its error off the
    grid, and each line's leave-one-out error. Returns the model and the numbers of grid, line and held-out
    shapes."""

    tune = calibrator.tune
    shapes = grid(caches, calibrator.dtype, tune)
    extra = held_out_grid(caches, calibrator.dtype, tune)
    # In random order: a slow spell of the machine then slows scattered shapes, which the check of each
    # line against its neighbours finds, rather than a whole stretch of one kernel, which nothing would.
    todo: list[tuple[Shape, LinePoint | None]] = [(shape, None) for shape in shapes] + [(lp.shape, lp) for lp in lines]
    random.Random(0).shuffle(todo)
    total = len(todo) + (tune.line_passes - 1) * len(lines) + len(extra)
    points: list[Point] = []
    timed: list[Shape] = []
    for i, (shape, lp) in enumerate(todo):
        step(f"{'exact: ' if lp else ''}{shape.kernel} {dict(shape.dims)}", i, total)
        p = calibrator.point(shape)
        if p is not None:
            points.append(p if lp is None else Point(p.kernel, p.dims, p.seconds, p.se, lp.line, float(lp.n)))
            timed.append(shape)
    _more_passes(calibrator, points, timed, step, len(todo), total)
    _recheck_lines(calibrator, points, timed, step)
    points += glue_points(calibrator, *glue, step=step)
    model = fit_points(calibrator.store.device, calibrator.dtype, points, caches)
    model.tunables = tune.as_json()
    model.dispatches = dispatch_table(shapes + [lp.shape for lp in lines], calibrator.dtype)
    model.rates = calibrator.rates.as_json()
    model.suspects = sanity(model)
    errors: dict[str, list[float]] = {}
    for j, shape in enumerate(extra):
        step(f"held out: {shape.kernel} {dict(shape.dims)}", total - len(extra) + j, total)
        p = calibrator.point(shape, tag="op-held-out")
        if p is None:
            continue
        f = {k: np.array([v]) for k, v in p.dims.items()}
        guess = float(model.op_seconds(shape.kernel, f)[0])
        family = "matmul" if shape.kernel.startswith("matmul") else "other kernels"
        errors.setdefault(family, []).append((guess - p.seconds) / p.seconds)
    loo = [e for line in model.lines.values() for e in line.leave_one_out(model)]
    if loo:
        errors[LINES] = loo
    step("done", total, total)
    model.held_out = {
        family: {
            "shapes": len(errs),
            "median_abs_error": float(sorted(map(abs, errs))[len(errs) // 2]),
            "max_abs_error": float(max(map(abs, errs))),
        }
        for family, errs in errors.items()
    }
    return model, len(shapes), len(lines), len(extra)
