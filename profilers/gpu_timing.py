"""CUDA timing the way the field does it: a benchmark harness, not a hand-written loop.

One timed *run* of a case is the median of one benchmark batch:

- with Triton present, `triton.testing.do_bench`: it estimates the call's time, warms up for
  `warmup_ms`, then times `rep_ms` worth of calls, each between two CUDA events and each after
  zeroing a 256 MB buffer, which flushes the L2 cache (50 MB on an H100), so every call starts cold;
- without Triton, `torch.utils.benchmark.Timer.blocked_autorange`: it times blocks of many calls
  with a synchronisation at each end (a single call of a few µs is below the resolution of one
  pair of CUDA events, ~0.5 µs), so a batch amortises it. The L2 cache is *not* flushed there:
  calls after the first in a block may hit in L2, as a layer inside a model often does.

Before the first batch each case is warmed up until steady: calls are timed one by one until the
last three agree within 5 % (clock boost settled, cuBLAS heuristics and the caching allocator
warm), at most `MAX_WARMUP` calls. Runs of two cases alternate, so drift hits both alike.
Peak memory is not measured here: `memory.cuda_peak` takes `max_memory_allocated` above the
baseline held before the inputs exist, and `corrections.fit_memory` fits the allocator's rounding.

`device_properties` records what the numbers depend on: the GPU, its SM count, L2 size, memory,
and, where NVML answers (nvidia-ml-py), the SM clock now and at most, temperature and power.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from attn_cost.profilers.timing import OutOfMemoryError, TimeStats

WARMUP_MS = 5.0
"""Warm-up inside one do_bench batch (after the steady warm-up that precedes the first batch)."""
REP_MS = 20.0
"""Timed length of one batch: at 20 ms, a 10 µs call is timed 2,000 times."""
MAX_WARMUP = 50
STEADY = 0.05


def timer_name() -> str:
    """Which harness times CUDA calls here."""
    try:
        import triton.testing  # noqa: F401
    except Exception:  # a broken triton is no triton
        return "torch.utils.benchmark"
    return "triton.testing.do_bench"


def describe_timer(name: str | None = None) -> str:
    """One line for the log and the device record: the harness and how it treats the L2 cache."""
    name = name or timer_name()
    if name == "triton.testing.do_bench":
        return f"{name}: per-call CUDA events, L2 flushed before every call, median of {REP_MS:g} ms per run"
    return f"{name}: blocks of calls synchronised at each end, L2 not flushed, median of {REP_MS:g} ms per run"


def bench_seconds(call: Callable[[], object], name: str, rep_ms: float = REP_MS, warmup_ms: float = WARMUP_MS) -> float:
    """Median seconds per call over one benchmark batch."""
    if name == "triton.testing.do_bench":
        from triton.testing import do_bench

        return do_bench(call, warmup=warmup_ms, rep=rep_ms, return_mode="median") / 1e3
    import torch
    import torch.utils.benchmark as benchmark

    # its clock synchronises the device at both ends of every block of calls
    timer = benchmark.Timer(stmt="call()", globals={"call": call}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=rep_ms / 1e3).median


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


def event_clock(call: Callable[[], object]) -> float:
    """Seconds of one call between two CUDA events (for the warm-up: one call, no flush)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3


def time_calls(
    calls: list[Callable[[], object]],
    repeats: int,
    warmup: int,
    name: str,
    clock: Callable[[Callable[[], object]], float] = event_clock,
) -> list[TimeStats]:
    """Warm every call up until steady, then `repeats` alternating benchmark batches of each."""
    warmed = [warm_until_steady(call, clock, minimum=warmup) for call in calls]
    runs: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for i, call in enumerate(calls):
            runs[i].append(bench_seconds(call, name))
    return [TimeStats.from_times(r, w) for r, w in zip(runs, warmed, strict=True)]


def time_cases_cuda(cases: list, repeats: int = 7, warmup: int = 2) -> list[TimeStats]:
    """`timing.time_cases` on CUDA: raises timing.OutOfMemoryError if any case does not fit."""
    import torch

    name = timer_name()
    try:
        with torch.no_grad():
            inputs = [c.make_inputs() for c in cases]
            calls = [_bound(c, x) for c, x in zip(cases, inputs, strict=True)]
            return time_calls(calls, repeats, warmup, name)
    except torch.cuda.OutOfMemoryError as e:
        raise OutOfMemoryError(str(e).splitlines()[0] if str(e) else "out of memory") from None
    except RuntimeError as e:
        if "out of memory" in str(e).lower():
            raise OutOfMemoryError(str(e).splitlines()[0]) from None
        raise
    finally:
        torch.cuda.empty_cache()


def _bound(case, inputs: list) -> Callable[[], object]:
    def call() -> object:
        return case.run(list(inputs))

    return call


def device_properties(index: int = 0) -> dict:
    """The GPU's properties and, where NVML answers, its clocks, temperature and power now."""
    import torch

    props = torch.cuda.get_device_properties(index)
    info: dict = {
        "sm_count": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "timer": describe_timer(),
        "read_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
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
