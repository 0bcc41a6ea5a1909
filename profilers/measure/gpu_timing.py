"""What a time on a GPU means here, and how it is taken (timer version 2).

A *device time* (`bench_seconds`) is what an eager caller sees in steady state, launches included:

- a call under BLOCK_BELOW_S (200 µs) is timed in blocks of back-to-back calls between two CUDA events
  (each block at least BLOCK_S long, so the events' ~0.5 µs resolution is below 0.1 %), with no L2 flush:
  a call's launches are paid in the time, as a model's layer pays them, whatever its kernel count (softmax's 4
  ATen kernels and efficient TaylorShift's 21 are timed alike, none hidden behind a flush);
- a longer call is timed one per pair of events, each after zeroing a buffer of twice the L2 cache
  (the L2 is cold, and host launches are far shorter than the call).

A *host time* (`host_seconds`) is the wall time of the host around a synchronised block of calls: for terms
that launch little or nothing (a Python call, a loop step), whose events would read ~0.

Either is the median of the blocks timed within REP_MS; a time that is not positive is refused when it is
measured (`NonPositiveTimeError`), never stored. Before the first run each call is warmed up until three calls
agree within 5 % (clock boost settled, cuBLAS heuristics and the caching allocator warm). Runs of two cases
alternate, so drift hits both alike. Peak memory is in `memory.cuda_peak`.

`device_properties` records what the numbers depend on: the GPU, its SM count, L2 size, the timer (version and
meaning), TF32 and cuDNN settings, and, where NVML answers (nvidia-ml-py), clocks, temperature and power.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable

import torch
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.measure.timing import OutOfMemoryError, TimeStats

TIMER_VERSION = 2
"""Bumped whenever what a CUDA time means changes: part of the device's identity (its slug), so that times of
an older timer are never mixed with a newer one's. Version 1 was triton's do_bench (one call per event pair,
256 MB flushed before each)."""
REP_MS = 20.0
"""Timed length of one run: at 20 ms a 10 µs call is timed 2,000 times."""
BLOCK_BELOW_S = 200e-6
"""Calls shorter than this are timed in blocks of back-to-back calls, without a flush."""
BLOCK_S = 1e-3
"""Shortest block of back-to-back calls between two events."""
MIN_BLOCKS = 3
MAX_WARMUP = 50
STEADY = 0.05


class NonPositiveTimeError(UserError):
    """A timed block read zero or less: the call does no GPU work to time (use `host_seconds` for it)."""


def timer_name() -> str:
    """The harness that times CUDA calls (the same on every machine: torch.cuda events and the host clock)."""
    return f"attn-cost CUDA timer v{TIMER_VERSION}"


def describe_timer(name: str | None = None) -> str:
    """One line for the log and the device record: what a CUDA time means."""
    return (
        f"{name or timer_name()}: calls under {BLOCK_BELOW_S * 1e6:g} µs timed in blocks of back-to-back calls "
        f"between CUDA events, no L2 flush (steady-state eager time, launches included); longer calls one per "
        f"event pair after an L2 flush; median over {REP_MS:g} ms per run"
    )


def _seconds(value_ms: float, what: str) -> float:
    seconds = value_ms / 1e3
    if not seconds > 0 or not math.isfinite(seconds):
        raise NonPositiveTimeError(
            f"{what} timed {seconds:g} s: it does no GPU work to time between two events (time it on the host clock)"
        )
    return seconds


def event_block(call: Callable[[], object], k: int = 1, flush: Callable[[], object] | None = None) -> float:
    """Seconds per call of k back-to-back calls between two CUDA events (after `flush`, outside the events)."""

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if flush is not None:
        flush()
    torch.cuda.synchronize()
    start.record()
    for _ in range(k):
        call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / k


def event_clock(call: Callable[[], object]) -> float:
    """Seconds of one call between two CUDA events (for the warm-up: one call, no flush)."""
    return event_block(call, 1) / 1e3


_FLUSH: dict = {}


def l2_flush() -> Callable[[], object]:
    """A call that evicts the L2 cache: zeroing a buffer of twice its size (64 MiB where the size is unknown)."""

    if "buffer" not in _FLUSH:
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or (32 << 20)
        _FLUSH["buffer"] = torch.empty(2 * int(l2), dtype=torch.int8, device="cuda")
    buffer = _FLUSH["buffer"]
    return buffer.zero_


def bench_seconds(call: Callable[[], object], rep_ms: float | None = None) -> float:
    """Device time of one call (median over one run of `rep_ms`, default REP_MS): see the module's docstring."""
    rep_ms = rep_ms or REP_MS
    once = _seconds(event_block(call, 1), "a call")
    if once < BLOCK_BELOW_S:
        k = max(1, math.ceil(BLOCK_S / once))
        blocks = max(MIN_BLOCKS, min(1000, round(rep_ms / 1e3 / (k * once))))
        times = [event_block(call, k) for _ in range(blocks)]
    else:
        flush = l2_flush()
        runs = max(MIN_BLOCKS, min(1000, round(rep_ms / 1e3 / once)))
        times = [event_block(call, 1, flush) for _ in range(runs)]
    return _seconds(statistics.median(times), "a block of calls")


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
    blocks = max(MIN_BLOCKS, min(1000, round(rep_ms / 1e3 / (k * max(once, 1e-7)))))
    return _seconds(1e3 * statistics.median(block(k) for _ in range(blocks)), "a block of host calls")


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
    bench: Callable[[Callable[[], object]], float] = bench_seconds,
    clock: Callable[[Callable[[], object]], float] = event_clock,
) -> list[TimeStats]:
    """Warm every call up until steady, then `repeats` alternating runs of each (`bench`: one run's median)."""
    warmed = [warm_until_steady(call, clock, minimum=warmup) for call in calls]
    runs: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for i, call in enumerate(calls):
            runs[i].append(bench(call))
    return [TimeStats.from_times(r, w) for r, w in zip(runs, warmed, strict=True)]


def time_cases_cuda(cases: list, repeats: int = 7, warmup: int = 2, host: bool = False) -> list[TimeStats]:
    """`timing.time_cases` on CUDA (`host`: host times, `host_seconds`); raises timing.OutOfMemoryError if any
    case does not fit, *after* the failed attempt's tensors are gone (inputs deleted, garbage collected, the
    allocator's cache emptied), so that a retry of one case alone finds the memory free."""

    failure = None
    inputs = calls = None
    try:
        with torch.no_grad():
            inputs = [c.make_inputs() for c in cases]
            calls = [_bound(c, x) for c, x in zip(cases, inputs, strict=True)]
            return time_calls(calls, repeats, warmup, host_seconds if host else bench_seconds)
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


def precision_key(info: dict) -> str:
    """The precision settings that are part of a CUDA device's identity, as one short string."""
    matmul, cudnn = ("on" if info.get(k) else "off" for k in ("tf32_matmul", "tf32_cudnn"))
    return f"tf32 matmul {matmul}, cudnn {cudnn}"


def device_properties(index: int = 0) -> dict:
    """The GPU's properties and, where NVML answers, its clocks, temperature and power now."""

    props = torch.cuda.get_device_properties(index)
    info: dict = {
        "sm_count": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "timer": describe_timer(),
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
