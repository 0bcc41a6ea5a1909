"""`attn-cost doctor`: what this machine can measure, and how, before a campaign spends its time.

Versions (torch, CUDA, cuDNN, triton, fla-core, typer, click, rich, plotly, nvidia-ml-py), the device and its L2
cache, which SDPA backends run at which head dims and dtypes, whether flash-linear-attention's chunk kernels run
(linear-chunked-fused), what a time means (the L2 policy, whether CUDA graphs capture and the profiler counts
kernels here) and how fine the clock is, whether peak memory is exact, TF32, and a
mini profile of at most ~30 seconds. Runs on a CPU-only machine too: each
missing piece is one line that says what it costs.
"""

from __future__ import annotations

import os
import time
from importlib import metadata
from typing import Any

import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import app
from attn_cost.cli.render import emit
from attn_cost.costmodel.dtypes import ACTIVATION
from attn_cost.profilers.measure.gpu_record import L2_POLICY
from attn_cost.profilers.measure.machine import CPU_TIMER_VERSION, cpu_info
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.workflow.measuring import choose_device, measuring

HEAD_DIMS = (16, 32, 64, 96, 128, 256)
SDPA_DTYPES = ACTIVATION
PROFILE_S = 30.0
"""The mini profile stops starting new lengths after this many seconds."""
OPTIONAL = {
    "triton": "no Triton: fine (attn-cost times CUDA with torch.cuda events)",
    "plotly": "no plotly: no HTML reports (pip install plotly); everything else works",
    "nvidia-ml-py": "no nvidia-ml-py: no SM clock, temperature or power in the records (pip install nvidia-ml-py)",
}


@app.command()
def doctor(
    gpu: bool = o.GPU,
    cpu: bool = o.CPU,
    profile: bool = typer.Option(True, "--profile/--no-profile", help="Run the ~30-second mini profile."),
    as_json: bool = o.JSON,
) -> None:
    """Check this machine before measuring: versions, device, SDPA backends, timer, peak memory, TF32, a mini
    profile. Run it first on a new machine; --gpu makes a missing GPU an error."""

    device = choose_device(measuring(gpu, cpu))
    report = examine(device, profile)
    if as_json:
        emit(report)
        return
    _print(report)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def examine(device: str, profile: bool = True) -> dict:
    """Everything `doctor` reports, JSON-ready."""
    import torch
    from attn_cost.profilers.measure.kernel_times import fla_status, kernels_here, sdpa_table

    from attn_cost import __version__

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    versions = {
        "attn-cost": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "triton": _version("triton"),
        "fla-core": _version("fla-core"),
        "typer": _version("typer"),
        "click": _version("click") or ("typer's own" if _version("typer") else None),
        "rich": _version("rich"),
        "plotly": _version("plotly"),
        "nvidia-ml-py": _version("nvidia-ml-py"),
    }
    missing = [text for dist, text in OPTIONAL.items() if versions[dist] is None]
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        missing.insert(0, f"no CUDA device (torch {torch.__version__} is {build}): CPU measurements only")
    fla = fla_status(device)
    if not fla["usable"]:
        missing.append(f"no flash-linear-attention kernels here: {fla['why']}; linear-chunked-fused runs the "
                       "PyTorch chunked form")  # fmt: skip
    timer = _timer(device)
    if timer.get("graph_capture", "ok") != "ok":
        missing.append(f"no CUDA graph capture ({timer['graph_capture']}): every point is timed eager-only")
    if timer.get("kernel_count", "ok") != "ok":
        missing.append(f"no kernel count ({timer['kernel_count']}): records keep no launch cost per kernel")

    sdpa_runs = sdpa_table(device, HEAD_DIMS, SDPA_DTYPES)
    report: dict[str, Any] = {
        "versions": versions,
        "device": _device(device),
        "sdpa": sdpa_runs,
        "kernels": kernels_here(device, sdpa_runs["runs"], fla),
        "fla": fla,
        "timer": timer,
        "memory": _memory(device),
        "precision": _precision(device),
        "missing": missing,
    }
    report["profile"] = _mini_profile(device) if profile else None
    return report


def _device(device: str) -> dict:
    import torch

    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        return {
            "kind": "cuda", "name": props.name, "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1), "sm_count": props.multi_processor_count,
            "l2_mib": round(getattr(props, "L2_cache_size", 0) / 2**20, 1) or None,
        }  # fmt: skip

    info = cpu_info()
    return {"kind": "cpu", "name": info.get("name"), "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
            "cache": info.get("cache")}  # fmt: skip


def _timer(device: str) -> dict:

    if device == "cuda":
        from attn_cost.profilers.measure import gpu_timing

        return {
            "version": gpu_timing.TIMER_VERSION,
            "meaning": gpu_timing.describe_timer(),
            "l2": L2_POLICY,
            "resolution_s": _event_resolution(),
            **_timer_probes(),
        }
    from attn_cost.profilers.measure.timing import SETTLE_S

    return {
        "version": CPU_TIMER_VERSION,
        "meaning": f"host wall clock (perf_counter) per call; calls under {1e3 * SETTLE_S:g} ms timed after an "
        "untimed call of their own; the median of the runs",
        "resolution_s": time.get_clock_info("perf_counter").resolution,
    }


def _timer_probes() -> dict:
    """Whether a CUDA graph captures here (else every point is timed eager-only) and whether torch.profiler counts
    the kernels of a one-kernel call (else records keep `host.kernels` null): `graph_capture` and `kernel_count`
    are "ok" or why not."""
    import torch
    from attn_cost.profilers.measure import gpu_timing

    x = torch.zeros(1, device="cuda")
    probe = lambda: x.add_(1)  # noqa: E731  (one kernel)
    stream = torch.cuda.Stream()
    gpu_timing.warm_side_stream(probe, stream)
    graph, why = gpu_timing.capture(probe, 1, stream)
    kernels, uncounted = gpu_timing.count_kernels(probe)
    if kernels is not None and kernels != 1:
        uncounted = f"torch.profiler counted {kernels} kernels for one"
    del graph
    return {"graph_capture": why or "ok", "kernel_count": uncounted or "ok"}


def _event_resolution() -> float:
    """The smallest non-zero gap two CUDA events report around almost nothing (about 0.5 µs on most GPUs)."""
    import torch

    x = torch.zeros(1, device="cuda")
    gaps = []
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        x.add_(1)
        end.record()
        torch.cuda.synchronize()
        gaps.append(start.elapsed_time(end) / 1e3)
    positive = [g for g in gaps if g > 0]
    return min(positive) if positive else 0.0


def _memory(device: str) -> dict:
    import torch

    if device == "cuda":
        exact = "requested_bytes.all.peak" in torch.cuda.memory_stats()
        how = ("exact: the bytes requested (memory_stats requested_bytes), the allocator's blocks kept beside"
               if exact else "allocator blocks (max_memory_allocated): rounded, up to 1 MiB per tensor")  # fmt: skip
        return {"exact": exact, "method": how}
    return {"exact": True, "method": "exact: a tracer of live tensors (what the engine models)"}


def _precision(device: str) -> dict:
    import torch

    if device == "cuda":
        from attn_cost.profilers.measure.gpu_timing import precision_settings

        return precision_settings()
    return {"float32_matmul_precision": torch.get_float32_matmul_precision()}


def _mini_profile(device: str) -> dict:
    """softmax against linear attention at d = 64 on a few lengths, time and peak memory, within PROFILE_S."""
    from attn_cost.profilers.measure.cases import build_case
    from attn_cost.profilers.measure.memory import cuda_peak, traced_peak
    from attn_cost.profilers.measure.timing import OutOfMemoryError, time_cases

    batch = 8 if device == "cuda" else 1
    lengths = (256, 1024, 4096, 16384) if device == "cuda" else (64, 256, 1024)
    start, rows = time.monotonic(), []
    for n in lengths:
        if time.monotonic() - start > PROFILE_S:
            break
        sizes = Sizes(N=n, d=64, b=batch)
        cases = [build_case(v, "core", sizes, "fp32", device) for v in ("softmax", "linear")]
        try:
            ta, tb = time_cases(cases, 3, 2, detector=None)
            peaks = [cuda_peak(c)["requested"] if device == "cuda" else traced_peak(c)[0] for c in cases]
        except OutOfMemoryError:
            rows.append({"N": n, "status": "oom"})
            break
        rows.append({"N": n, "softmax_s": ta.median, "linear_s": tb.median, "softmax_bytes": peaks[0],
                     "linear_bytes": peaks[1], "status": "ok"})  # fmt: skip
    return {"pair": ["softmax", "linear"], "d": 64, "batch": batch, "dtype": "fp32", "rows": rows,
            "seconds": round(time.monotonic() - start, 1)}  # fmt: skip


def _print(report: dict) -> None:
    v, dev = report["versions"], report["device"]
    render.table(
        "Versions",
        [render.Col("package"), render.Col("version")],
        [[k, str(val) if val is not None else "—"] for k, val in v.items()],
    )
    if dev["kind"] == "cuda":
        text = (f"{dev['name']}, compute capability {dev['capability']}, {dev['memory_gib']} GiB, "
                f"{dev['sm_count']} SMs, L2 {dev['l2_mib']} MiB")  # fmt: skip
    else:
        text = f"{dev['name']}, {dev['cpus']} CPUs, {dev['threads']} torch threads, cache {dev['cache']}"
    render.line(f"Device: {text}", markup=False)
    sd = report["sdpa"]
    rows = [[name, dtype, ", ".join(map(str, ds)) or "—"] for name, by in sd["runs"].items() for dtype, ds in
            by.items()]  # fmt: skip
    render.table("SDPA backends: head dims that run here", [render.Col("backend"), render.Col("dtype"),
                 render.Col("d")], rows, keys=1)  # fmt: skip
    render.line(f"PyTorch's own choice at d = 64: {sd['default_at_d64']}", markup=False)
    fla = report["fla"]
    render.line(f"linear-chunked-fused runs: {fla['runs']} ({fla['version']})", markup=False)
    kernels = report["kernels"]
    here = [name for name, k in kernels.items() if k["here"]]
    render.sentence(f"--kernel names that run here: {', '.join(here) or 'none'}.", indent=0)
    for name, k in kernels.items():
        if not k["here"]:
            render.line(f"  not here: {name}: {k['why']}", markup=False)
    t = report["timer"]
    render.sentence(f"Timer (v{t['version']}, resolution {t['resolution_s']:.2g} s): {t['meaning']}.", indent=0)
    if "graph_capture" in t:
        render.line(f"CUDA graph capture: {t['graph_capture']}; kernels counted: {t['kernel_count']}", markup=False)
    render.sentence(f"Peak memory: {report['memory']['method']}.", indent=0)
    render.line(f"Precision: {report['precision']}", markup=False)
    p = report["profile"]
    if p is not None:
        rows = [[f"{r['N']:,}", *([_us(r["softmax_s"]), _us(r["linear_s"]), _mib(r["softmax_bytes"]),
                                  _mib(r["linear_bytes"])] if r["status"] == "ok" else ["oom"] * 4)]
                for r in p["rows"]]  # fmt: skip
        render.table(
            f"Mini profile: softmax vs linear, d = 64, b = {p['batch']}, fp32 ({p['seconds']:g} s)",
            [render.right("N"), render.right("softmax"), render.right("linear"), render.right("softmax mem"),
             render.right("linear mem")],
            rows,
        )  # fmt: skip
    for text in report["missing"]:
        render.line(f"missing: {text}", markup=False)
    if not report["missing"]:
        render.line("Nothing missing.", markup=False)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:,.2f} MiB"
