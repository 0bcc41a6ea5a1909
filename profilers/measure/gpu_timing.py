"""What a time on a GPU means here, and how it is taken (timer version 3).

Every point is timed by the same method, whatever its duration, and three things are recorded for it (`CudaTimes`):

- **Device time** (the statistics themselves; `bench_seconds` for one call): the call captured in a CUDA graph, k
  back-to-back calls in ONE graph, one replay timed between two CUDA events and divided by k. The replays of a run
  are queued back to back, one event between two, so the device never waits for the host between them: no launch
  cost, not even the replay's own, is in the time. k is a count chosen so that a block lasts at least BLOCK_S (the
  events' ~0.5 µs resolution is then below 0.1 %); it changes how many calls a block holds, never the method. What a
  compiled or graph-captured model sees, and what crossovers are searched on.
- **Eager time** (`CudaTimes.eager`): k back-to-back eager calls between two events, per call: what a Python loop
  sees, the host's launches included where they take longer than the GPU's work.
- **The host's launch cost** (`CudaTimes.issue_s`, `kernels`): perf_counter around calls issued without a
  synchronisation, at most ISSUE_LAUNCHES kernels, so far fewer than the launch queue holds that the host never
  waits for the device (measured, never inferred from the eager time), in the first ISSUE_RUNS runs, each issuing
  no more calls than fit in BLOCK_S of eager time; and the kernels per call, counted by
  torch.profiler's CUDA activity (kernels, memory copies and sets), once per call and shape. Their ratio is the
  host's cost per kernel launch, Python's dispatch included. Where the profiler cannot count, `kernels` is None and
  `uncounted` says why.

**L2 policy** (`gpu_record.L2_POLICY`): warm, the same at every N. Nothing is flushed anywhere; each block of a run
follows an identical block, so a call whose working set fits in the L2 finds it there, as a model's layer does when
it runs again. The first block of a run may follow the other case of a pair (or start on an idle device, or be a
fresh graph's first launch): it can only be slower, and the median over at least MIN_BLOCKS blocks is never its
time. A cold-L2 design would have to subtract its flush from the time with an error below the noise of a 5 µs
kernel; a warm one has nothing to subtract.

**A call that cannot be captured** (a synchronisation inside it, an operation capture does not allow) is timed
eager-only: its device time is its eager time, and the reason is recorded (`CudaTimes.method`). Whether a call can
be captured is a property of its code, not of its length: once one length of a curve (a variant at one scope, dtype,
backend and size other than N) fails, every later length of that curve in this process is eager-only without trying.

A *host time* (`host_seconds`) is the wall time of the host around a synchronised block of calls: for terms that
launch little or nothing (a Python call, a loop step), whose events would read ~0.

Each time is the median of the blocks timed within REP_MS (the eager run: EAGER_SHARE of it); a time that is not
positive is refused when it is measured (`NonPositiveTimeError`), never stored. Before the first run each call is
warmed up until three calls agree within 5 % (clock boost settled, cuBLAS heuristics and the caching allocator
warm), then twice on a side stream as PyTorch requires before a capture. Runs of two cases alternate, so drift hits
both alike. Peak memory is in `memory.cuda_peak`.

`device_properties` records what the numbers depend on: the GPU, its SM count, L2 size, the timer (version, meaning
and L2 policy), TF32 and cuDNN settings, and, where NVML answers (nvidia-ml-py), clocks, temperature and power.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass, fields, replace
from itertools import pairwise

import torch
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.measure.gpu_record import EAGER_ONLY, GRAPH, L2_POLICY
from attn_cost.profilers.measure.timing import OutOfMemoryError, TimeStats

TIMER_VERSION = 3
"""Bumped whenever what a CUDA time means changes: part of the device's identity (its slug), so that times of
an older timer are never mixed with a newer one's. Version 1 was triton's do_bench (one call per event pair,
256 MB flushed before each); version 2 chose its method by the call's duration (under 200 µs blocks of eager calls
without a flush, above one call per event pair after a flush), which stepped curves by up to 2x at the switch."""
REP_MS = 20.0
"""Timed length of one run of device time: at 20 ms a 10 µs call is timed 2,000 times."""
EAGER_SHARE = 0.5
"""The eager run's length, as a share of REP_MS (the device time is the number searched on)."""
BLOCK_S = 1e-3
"""Shortest block of back-to-back calls between two events."""
MIN_BLOCKS = 3
"""Fewest blocks in a run: their median is never the first block's, which may start cold or on an idle device."""
MAX_BLOCKS = 1000
MAX_CALLS = 5000
"""Most calls in one block (a call of a few µs needs a few hundred)."""
SIDE_WARMUP = 2
"""Calls on the capture's side stream before the first capture."""
ISSUE_LAUNCHES = 256
"""Most kernel launches issued without a synchronisation when the host's issue time is read: a CUDA launch queue
holds about a thousand, so the host never waits for the device (a call of more kernels is issued alone)."""
ISSUE_RUNS = 3
"""Runs in which the host's issue time is read (its median over them)."""
UNKNOWN_KERNELS = 32
"""Kernels per call assumed when choosing how many calls to issue, where the profiler could not count them."""
LAUNCHED = ("kernel", "gpu_memcpy", "gpu_memset")
"""The profiler's device activities that the host launched (not synchronisations or annotations)."""
MAX_WARMUP = 50
STEADY = 0.05


class NonPositiveTimeError(UserError):
    """A timed block read zero or less: the call does no GPU work to time (use `host_seconds` for it)."""


def timer_name() -> str:
    """The harness that times CUDA calls (the same on every machine: torch.cuda events, graphs and the host clock)."""
    return f"attn-cost CUDA timer v{TIMER_VERSION}"


def describe_timer(name: str | None = None) -> str:
    """One line for the log and the device record: what a CUDA time means."""
    return (
        f"{name or timer_name()}: device time = k back-to-back calls captured in one CUDA graph, replays queued back "
        f"to back between CUDA events (blocks of at least {BLOCK_S * 1e3:g} ms, no launch cost); eager time = k "
        f"back-to-back eager calls between events; host issue time per call and kernels counted by the profiler; "
        f"the same method at every length (eager-only where a call cannot be captured); L2 {L2_POLICY}; median "
        f"over {REP_MS:g} ms per run"
    )


@dataclass
class CudaTimes(TimeStats):
    """A CUDA point: its device time (the statistics: graph replay, or eager where the call cannot be captured)
    and what was measured beside it (`method`: gpu_record.GRAPH or EAGER_ONLY and why). `as_json` gives the device
    time alone, as every TimeStats; `record_fields` the rest, as the records keep it."""

    eager: TimeStats | None = None
    issue_s: float | None = None
    """The host's issue time per call (calls issued without a synchronisation)."""
    kernels: int | None = None
    """Kernels (and memory copies and sets) per call, counted by the profiler; None: it could not count."""
    uncounted: str | None = None
    """Why the kernels were not counted."""
    method: str = GRAPH
    l2: str = L2_POLICY

    def as_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(TimeStats)}

    @property
    def launch_s(self) -> float | None:
        """The host's cost per kernel launch."""
        return None if self.issue_s is None or not self.kernels else self.issue_s / self.kernels

    def record_fields(self) -> dict:
        """`eager`, `host`, `method` and `l2` of a time record (see profilers/store/store.py's schema)."""
        host: dict = {"issue_s": self.issue_s, "kernels": self.kernels, "launch_s": self.launch_s}
        if self.uncounted:
            host["uncounted"] = self.uncounted
        eager = None if self.eager is None else replace(self.eager, discarded=self.discarded).as_json()
        return {"eager": eager, "host": host, "method": self.method, "l2": self.l2}


def _positive(seconds: float, what: str) -> float:
    if not seconds > 0 or not math.isfinite(seconds):
        raise NonPositiveTimeError(
            f"{what} timed {seconds:g} s: it does no GPU work to time between two events (time it on the host clock)"
        )
    return seconds


def event_block(call: Callable[[], object], k: int = 1) -> float:
    """Seconds per call of k back-to-back calls between two CUDA events, from an idle device."""

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(k):
        call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / k


def event_clock(call: Callable[[], object]) -> float:
    """Seconds of one call between two CUDA events (for the warm-up)."""
    return event_block(call, 1)


def chained(block: Callable[[], object], blocks: int) -> list[float]:
    """Seconds of each of `blocks` blocks queued back to back, one CUDA event between two: the device never waits
    for the host between blocks whose host work is shorter than their device work, and each block after the first
    follows the same work (a warm L2)."""

    events = [torch.cuda.Event(enable_timing=True) for _ in range(blocks + 1)]
    torch.cuda.synchronize()
    events[0].record()
    for event in events[1:]:
        block()
        event.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) / 1e3 for a, b in pairwise(events)]


def count_kernels(call: Callable[[], object]) -> tuple[int | None, str | None]:
    """The kernels (memory copies and sets included) one call puts on the device, counted by torch.profiler's CUDA
    activity; (None, why) where the profiler cannot say (no CUPTI, profiling not permitted, nothing seen)."""
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        cuda = torch.autograd.DeviceType.CUDA
        count = sum(1 for e in prof.events() if e.device_type == cuda and _launched(e))
    except Exception as e:  # the profiler is optional machinery: a failure leaves the count unknown, said so
        return None, f"torch.profiler failed: {said(e)}"
    if count == 0:
        return None, "torch.profiler saw no kernel (CUPTI activity unavailable)"
    return count, None


def _launched(event) -> bool:
    """Whether a device event of the profiler is a launch (LAUNCHED); a torch whose events carry no activity type
    names its synchronisations "... Sync"."""
    kind = getattr(event, "activity_type", None)
    return kind in LAUNCHED if kind is not None else "Sync" not in event.name


def issue_seconds(call: Callable[[], object], kernels: int | None, calls: int | None = None) -> float:
    """The host's time to issue one call: perf_counter around `calls` calls issued without a synchronisation, from
    an empty queue, at most ISSUE_LAUNCHES kernels in all (UNKNOWN_KERNELS per call assumed where `kernels` is
    None)."""
    calls = max(1, min(calls or ISSUE_LAUNCHES, ISSUE_LAUNCHES // (kernels or UNKNOWN_KERNELS)))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    seconds = (time.perf_counter() - t0) / calls
    torch.cuda.synchronize()
    return seconds


def warm_side_stream(call: Callable[[], object], stream: torch.cuda.Stream) -> None:
    """SIDE_WARMUP calls on the stream a capture will use, as PyTorch requires before capturing (workspaces and
    lazily made state belong to the stream)."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(SIDE_WARMUP):
            call()
    torch.cuda.current_stream().wait_stream(stream)


def capture(call: Callable[[], object], k: int, stream: torch.cuda.Stream | None) -> tuple[object | None, str | None]:
    """A CUDA graph of k back-to-back calls (its memory pool held until it goes), or (None, why the call cannot be
    captured: the first line of PyTorch's error). Out of memory is raised, as a result of its own."""
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(k):
                call()
    except RuntimeError as e:
        if isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower():
            raise
        del graph
        torch.cuda.synchronize()
        return None, said(e)
    return graph, None


def said(error: BaseException, limit: int = 200) -> str:
    """An error in one printable line for a record: its first line, control characters replaced, at most `limit`
    characters (its type's name where it says nothing)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    text = "".join(c if c.isprintable() else " " for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


NOT_COUNTED = "not counted (a timing of many one-kernel shapes: the op calibration)"
_KERNELS: dict[Hashable, tuple[int | None, str | None]] = {}
"""Kernel counts of the calls timed in this process, by call and shape."""
_EAGER_ONLY: dict[Hashable, str] = {}
"""Why a curve (a call at every length) could not be captured, by the curve's key."""


class _Point:
    """One call being timed: its counts per block, its graph, what it read run by run."""

    def __init__(
        self, call: Callable[[], object], key: Hashable | None, curve: Hashable | None, count: bool = True
    ) -> None:
        self.call, self.key, self.curve, self.count = call, key, curve, count
        self.method = GRAPH if curve not in _EAGER_ONLY else EAGER_ONLY + _EAGER_ONLY[curve]
        self.once = 0.0
        self.k_graph = self.k_eager = 0
        self.graph_block = self.eager_block = 0.0
        self.graph: object | None = None
        self.graph_calls = 0
        self.stream: torch.cuda.Stream | None = None
        self.kernels: int | None = None
        self.uncounted: str | None = None
        self.device: list[float] = []
        self.eager: list[float] = []
        self.issue: list[float] = []

    @property
    def captured(self) -> bool:
        return self.method == GRAPH

    def prepare(self, stream: torch.cuda.Stream, once: float) -> None:
        """After the warm-up, whose last call took `once`: the side stream's warm-up, the kernel count."""
        self.once = _positive(once, "a call")
        self.stream = stream
        if self.captured:
            warm_side_stream(self.call, stream)
        counted: tuple[int | None, str | None]
        if not self.count:
            counted = (None, NOT_COUNTED)
        elif self.key is None or self.key not in _KERNELS:
            counted = count_kernels(self.call)
            if self.key is not None:
                _KERNELS[self.key] = counted
        else:
            counted = _KERNELS[self.key]
        self.kernels, self.uncounted = counted

    def run(self, rep_s: float) -> None:
        """One run: device time (graph replays), eager time, the host's issue time."""
        device = self._graph_run(rep_s) if self.captured else None
        eager = self._eager_run(EAGER_SHARE * rep_s if self.captured else rep_s)
        self.device.append(eager if device is None else device)
        self.eager.append(eager)
        if len(self.issue) < ISSUE_RUNS:  # calls that fit in a block of eager time: a long call is issued alone
            self.issue.append(issue_seconds(self.call, self.kernels, max(1, math.floor(BLOCK_S / eager))))

    def times(self, warmed: int) -> CudaTimes:
        device = self.eager if not self.captured else self.device  # one method for the whole point
        stats = TimeStats.from_times(device, warmed)
        return CudaTimes(
            **asdict(stats), eager=TimeStats.from_times(self.eager, warmed), issue_s=statistics.median(self.issue),
            kernels=self.kernels, uncounted=self.uncounted, method=self.method,
        )  # fmt: skip

    # -- device time
    def _capture(self, k: int) -> object | None:
        """The graph of k back-to-back calls (kept until another k is asked for); None: the call cannot be captured,
        and its curve is eager-only from now on."""
        if self.graph is not None and self.graph_calls == k:
            return self.graph
        self.graph = None  # its pool goes before the next one is made
        graph, reason = capture(self.call, k, self.stream)
        if graph is None:
            self.method = EAGER_ONLY + str(reason)
            if self.curve is not None:
                _EAGER_ONLY[self.curve] = str(reason)
            return None
        self.graph, self.graph_calls = graph, k
        return graph

    def _replays(self, k: int, blocks: int) -> list[float] | None:
        graph = self._capture(k)
        if graph is None:
            return None
        return chained(graph.replay, blocks)  # type: ignore[attr-defined]

    def _graph_run(self, rep_s: float) -> float | None:
        if not self.k_graph:
            sized = _sized(self.once, lambda k: self._replays(k, 2))
            if sized is None:
                return None
            self.k_graph, self.graph_block = sized
        times = self._replays(self.k_graph, _blocks(rep_s, self.graph_block))
        self.graph = None  # the pool is released before the eager calls need the memory
        if times is None:
            return None
        return _positive(statistics.median(times) / self.k_graph, "a block of graph replays")

    # -- eager time
    def _eager_blocks(self, k: int, blocks: int) -> list[float]:
        call = self.call

        def block() -> None:
            for _ in range(k):
                call()

        return chained(block, blocks)

    def _eager_run(self, rep_s: float) -> float:
        if not self.k_eager:
            sized = _sized(self.once, lambda k: self._eager_blocks(k, 2))
            assert sized is not None  # eager blocks always run
            self.k_eager, self.eager_block = sized
        times = self._eager_blocks(self.k_eager, _blocks(rep_s, self.eager_block))
        return _positive(statistics.median(times) / self.k_eager, "a block of calls")


def _sized(once: float, block: Callable[[int], list[float] | None]) -> tuple[int, float] | None:
    """The count of calls whose block lasts at least BLOCK_S, and that block's seconds, for a call that took `once`
    alone (eager, from an idle device: at least its time in a block). A call of 2·BLOCK_S or more is one per block
    as it is; a shorter one is timed in blocks of k, k grown from what the second of two blocks took (three tries
    at most). None where `block` cannot run (no capture)."""
    if once >= 2 * BLOCK_S:
        return 1, once
    k = max(1, min(MAX_CALLS, math.ceil(BLOCK_S / once)))
    for _ in range(3):
        times = block(k)
        if times is None:
            return None
        seconds = _positive(times[-1], "a block of calls")
        if seconds >= BLOCK_S or k >= MAX_CALLS:
            break
        k = min(MAX_CALLS, math.ceil(1.1 * k * BLOCK_S / seconds))
    return k, seconds


def _blocks(rep_s: float, block_s: float) -> int:
    return max(MIN_BLOCKS, min(MAX_BLOCKS, round(rep_s / block_s)))


def time_device_calls(
    calls: list[Callable[[], object]],
    repeats: int,
    warmup: int,
    keys: list[tuple[Hashable, Hashable] | None] | None = None,
    count: bool = True,
) -> list[CudaTimes]:
    """Warm every call up until steady, then `repeats` alternating runs of each: device, eager and issue times
    (see the module's docstring). `keys`: per call, its (shape key, curve key) for the kernel-count cache and the
    eager-only curves (None: neither is cached). `count`: count each call's kernels (False: a timing of many
    one-kernel shapes, the op calibration, spares a profiler session a shape; the records say not counted)."""
    keys = keys or [None] * len(calls)
    points = [_Point(call, *(key or (None, None)), count=count) for call, key in zip(calls, keys, strict=True)]
    warm = [_warm(p.call, warmup) for p in points]
    stream = torch.cuda.Stream()
    for p, (_, once) in zip(points, warm, strict=True):
        p.prepare(stream, once)
    rep_s = REP_MS / 1e3
    for _ in range(repeats):
        for p in points:
            p.run(rep_s)
    return [p.times(w) for p, (w, _) in zip(points, warm, strict=True)]


def _warm(call: Callable[[], object], warmup: int) -> tuple[int, float]:
    """`warm_until_steady` on one eager call between events: the calls made, and the last one's seconds."""
    times: list[float] = []

    def clock(c: Callable[[], object]) -> float:
        times.append(event_clock(c))
        return times[-1]

    return warm_until_steady(call, clock, minimum=warmup), times[-1]


def bench_seconds(call: Callable[[], object], rep_ms: float | None = None) -> float:
    """Device time of one call (median over one run of `rep_ms`, default REP_MS): see the module's docstring."""
    point = _Point(call, None, None)
    point.prepare(torch.cuda.Stream(), event_clock(call))
    point.run((rep_ms or REP_MS) / 1e3)
    return point.device[0]


def host_seconds(call: Callable[[], object], rep_ms: float | None = None) -> float:
    """Host time of one call: perf_counter around a block of calls synchronised at both ends, per call (median
    over the blocks of one run of `rep_ms`). For host-side terms (a Python call, a loop step): what the
    host spends, whether or not it launches anything."""

    rep_ms = rep_ms or REP_MS

    def block(k: int) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(k):
            call()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / k

    once = block(1)
    k = max(1, math.ceil(BLOCK_S / max(once, 1e-7)))
    blocks = max(MIN_BLOCKS, min(MAX_BLOCKS, round(rep_ms / 1e3 / (k * max(once, 1e-7)))))
    return _positive(statistics.median(block(k) for _ in range(blocks)), "a block of host calls")


def warm_until_steady(
    call: Callable[[], object],
    clock: Callable[[Callable[[], object]], float],
    minimum: int = 2,
    maximum: int = MAX_WARMUP,
    tolerance: float = STEADY,
) -> int:
    """Call until the last three timings agree within `tolerance`; returns the calls made."""
    times: list[float] = []
    while len(times) < maximum:
        times.append(clock(call))
        last = times[-3:]
        if len(times) >= max(minimum, 3) and max(last) <= (1 + tolerance) * min(last):
            break
    return len(times)


def time_calls(
    calls: list[Callable[[], object]],
    repeats: int,
    warmup: int,
    bench: Callable[[Callable[[], object]], float] = host_seconds,
    clock: Callable[[Callable[[], object]], float] = event_clock,
) -> list[TimeStats]:
    """Warm every call up until steady, then `repeats` alternating runs of each (`bench`: one run's median)."""
    warmed = [warm_until_steady(call, clock, minimum=warmup) for call in calls]
    runs: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for i, call in enumerate(calls):
            runs[i].append(bench(call))
    return [TimeStats.from_times(r, w) for r, w in zip(runs, warmed, strict=True)]


def time_cases_cuda(
    cases: list, repeats: int = 7, warmup: int = 2, host: bool = False, count: bool = True
) -> list[TimeStats]:
    """`timing.time_cases` on CUDA: `CudaTimes` (device, eager and issue times), or with `host` host times
    (`host_seconds`, plain TimeStats). Raises timing.OutOfMemoryError if any case does not fit, *after* the failed
    attempt's tensors are gone (inputs deleted, garbage collected, the allocator's cache emptied), so that a retry
    of one case alone finds the memory free."""

    failure = None
    inputs = calls = None
    try:
        with torch.no_grad():
            inputs = [c.make_inputs() for c in cases]
            calls = [_bound(c, x) for c, x in zip(cases, inputs, strict=True)]
            if host:
                return time_calls(calls, repeats, warmup, host_seconds)
            return list(time_device_calls(calls, repeats, warmup, [_keys(c) for c in cases], count))
    except torch.cuda.OutOfMemoryError as e:
        failure = str(e).splitlines()[0] if str(e) else "out of memory"
    except RuntimeError as e:
        if "out of memory" not in str(e).lower():
            raise
        failure = str(e).splitlines()[0]
    finally:
        inputs = calls = None
    release()  # outside the except: its traceback, which held the tensors, is gone
    raise OutOfMemoryError(failure)


def _keys(case) -> tuple[Hashable, Hashable]:
    """A case's shape key (its kernel count) and curve key (the same call at every N: captured or not)."""
    curve = (case.variant, case.scope, case.dtype, case.tag, replace(case.sizes, N=0))
    return (*curve[:4], case.sizes), curve


def release() -> None:
    """Free what a failed or finished attempt left: garbage-collect, then empty the caching allocator."""

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _bound(case, inputs: list) -> Callable[[], object]:
    def call() -> object:
        return case.run(list(inputs))

    return call


def precision_settings() -> dict:
    """TF32 and cuDNN settings that change what an fp32 or a convolution-backed kernel computes and how fast."""

    backends = torch.backends
    info = {
        "tf32_matmul": bool(backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": bool(backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "bf16_reduced_precision_reduction": bool(
            getattr(backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", False)
        ),
        "cudnn_enabled": bool(backends.cudnn.enabled),
        "cudnn_benchmark": bool(backends.cudnn.benchmark),
        "cudnn_deterministic": bool(backends.cudnn.deterministic),
    }
    try:
        info["cudnn_version"] = backends.cudnn.version()
    except Exception:  # no cuDNN in this build
        info["cudnn_version"] = None
    return info


def device_properties(index: int = 0) -> dict:
    """The GPU's properties and, where NVML answers, its clocks, temperature and power now."""

    props = torch.cuda.get_device_properties(index)
    info: dict = {
        "sm_count": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "timer": describe_timer(),
        "l2_policy": L2_POLICY,
        "read_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **precision_settings(),
    }
    info.update(_nvml(index))
    return {k: v for k, v in info.items() if v is not None}


def _nvml(index: int) -> dict:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        sm, mem = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
        return {
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, sm),
            "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, sm),
            "memory_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, mem),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
        }
    except Exception:  # NVML is optional: no pynvml, no driver access, a VM without counters
        return {}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
