"""The datasheet model against published GPU measurements: its efficiencies fitted on one part, judged on the rest.

`benchmarks/gpu_published.py` runs it (the record, `--fit` to refit profilers/data/gpumodel.json, `--into` to
write the record into docs/gpumodel.md); the tests import it by name.

The published numbers are in profilers/data/published/*.csv, each with its source and setup in its header:

- `fa1_a100_appendix_e.csv`: FlashAttention (Dao et al. 2022), Appendix E.6, Tables 18-21: A100 40GB, fp16,
  b = 16, h = 8, d = 64; forward, backward and forward+backward ms and memory MB (MiB: 13.06 N×d fp16 tensors
  at N = 1k is FlashAttention's 209).
- `fa2_a100_fig4_fwdbwd_tflops.csv`: FlashAttention-2, Fig. 4: A100 80GB, fp16/bf16, forward+backward TFLOP/s
  at b·N = 16k tokens, h·d = 2048, causal or not; times from the paper's own formula 3.5 · 4N²dh·b (/2 causal).

Methods attn-cost has no description of (Reformer, xformers, ...) and rows whose setup is not known (local
attention's window) are left out, and the record says so.
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
import time
from dataclasses import asdict, dataclass, replace
from itertools import pairwise

import numpy as np
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting
from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.symbols import C
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.datasheet.data import for_device, get_datasheet
from attn_cost.profilers.devicemodel.datasheet.model import (
    DEVICE_ONLY,
    FIT_KIND,
    LAUNCH,
    TRITON_S,
    Efficiency,
    GpuModel,
    Host,
    _ops,
    fitted,
    harness,
    input_bytes,
    timeline,
)
from attn_cost.profilers.devicemodel.datasheet.published import read_table, shipped_gpus
from attn_cost.profilers.devicemodel.device import KernelTime, crossing, peak_bytes, row_dims
from attn_cost.profilers.devicemodel.kernels import CHUNK, CHUNKED, priced_families
from attn_cost.profilers.devicemodel.measured.data import SHIPPED as SHIPPED_PROFILES
from attn_cost.profilers.devicemodel.measured.data import load_profile
from attn_cost.profilers.measure.standing import cell, interval
from attn_cost.profilers.store.store import SHIPPED as SHIPPED_RECORDS
from attn_cost.profilers.store.store import read_records
from scipy.optimize import least_squares, nnls

FOLDER = DATA / "published"


@dataclass(frozen=True)
class Row:
    """One published number and what it was measured on."""

    source: str
    """`fa1-t18` … `fa1-t21`, `fa2-fig4a` … `fa2-fig4d`: the table or panel."""
    method: str
    """The paper's name for it."""
    variant: str
    kernel: str
    """The fused attention kernel it ran (fa2, fa1), or '' where it has none."""
    gpu: str
    dtype: str
    n: int
    sizes: dict
    """d, h, b and the variant's own sizes (Linformer's k), by name."""
    quantity: str
    """'fwd', 'bwd', 'fwd+bwd' (seconds) or 'memory' (bytes, forward and backward)."""
    value: float
    scope: str = "core"

    @property
    def harness_options(self) -> bool:
        """Counted with the harness's attention dropout and key padding mask: the memory of the FlashAttention
        paper's materialised methods (`HARNESS_P`, `HARNESS_METHODS`)."""
        return self.harness == "fa1" and self.quantity == "memory" and self.method in HARNESS_METHODS

    @property
    def harness(self) -> str:
        """The harness that timed it (`HARNESSES`): each keeps its own host."""
        return self.source.split("-")[0]

    @property
    def mode(self) -> str:
        return "inference" if self.quantity == "fwd" else "training"


FA1_METHODS = {"PyTorch Attention": ("softmax", ""), "FlashAttention": ("softmax-fused", "fa1"),
               "Linformer": ("linformer", "")}  # fmt: skip
"""The methods of the FlashAttention paper's tables that attn-cost describes. Local attention is left out: the
tables do not give its window or blocks. The rest (Reformer, Longformer, BigBird, ...) are not in the catalogue."""
FA2_METHODS = {"PyTorch": ("softmax", ""), "FlashAttention-2": ("softmax-fused", "fa2"),
               "FlashAttention": ("softmax-fused", "fa1"), "xformers": ("softmax-fused", "sdpa-efficient")}  # fmt: skip
"""FlashAttention-2's Fig. 4 implementations attn-cost describes: xformers' CUTLASS kernel is the one PyTorch's SDPA
runs as its memory-efficient backend (PyTorch 2.0 took it from xformers); the Triton kernel is another."""
QUANTITY = {"fwd_ms": "fwd", "bwd_ms": "bwd", "fwd+bwd_ms": "fwd+bwd", "mem_MB_fwd+bwd": "memory"}
HARNESS_P = "0.1"
"""The dropout probability of flash-attention's benchmark script (dropout_p = 0.1): the paper runs its attention
benchmarks "with dropout and a padding mask" (Section 4.3) without giving p; the counts do not depend on it."""
HARNESS_METHODS = ("PyTorch Attention", "Linformer")
"""The FlashAttention paper's methods whose memory is counted with the harness's dropout and key padding mask
(`attn-cost formula softmax --mode training --dropout 0.1 --padding-mask`): the materialised ones, where both show
in memory. FlashAttention keeps no dropout mask and unpads the batch instead of masking (cu_seqlens); the time
rows wait for the device model to price the options."""


def _number(cell: str) -> float | None:
    """A table cell: '-' and 'OOM' are None; 'alt=' keeps the first transcription; '~' (estimated) is kept."""
    cell = cell.strip()
    if cell in ("-", "OOM", ""):
        return None
    m = re.match(r"~?([0-9.]+)", cell)
    return float(m.group(1)) if m else None


def _lengths(header: list[str]) -> list[int]:
    return [int(float(h[:-1]) * 1024) if h.endswith("k") else int(h) for h in header]


def _csv(name: str) -> list[list[str]]:
    lines = [line for line in (FOLDER / name).read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return list(csv.reader(lines))


def fa1_rows() -> list[Row]:
    header, *body = _csv("fa1_a100_appendix_e.csv")
    ns = _lengths(header[3:])
    rows = []
    for table, quantity, method, *cells in body:
        if method not in FA1_METHODS:
            continue
        variant, kernel = FA1_METHODS[method]
        for n, text in zip(ns, cells, strict=True):
            value = _number(text)
            if value is None:
                continue
            sizes = {"d": 64, "h": 8, "b": 16}
            if variant == "linformer":
                sizes["k"] = min(n // 8, 256)  # "compression 1/8 or compressed length 256, whichever smaller"
            q = QUANTITY[quantity]
            scaled = value * 2**20 if q == "memory" else value / 1e3
            rows.append(Row(f"fa1-t{table}", method, variant, kernel, "a100-sxm4-40gb", "fp16", n, sizes, q, scaled))
    return rows


def fa2_rows() -> list[Row]:
    header, *body = _csv("fa2_a100_fig4_fwdbwd_tflops.csv")
    ns = _lengths(header[4:])
    rows = []
    for panel, causal, hdim, impl, *cells in body:
        if impl not in FA2_METHODS:
            continue
        variant, kernel = FA2_METHODS[impl]
        is_causal = causal == "True"
        if is_causal:
            variant = {"softmax": "softmax-causal", "softmax-fused": "softmax-fused-causal"}[variant]
        d = int(hdim)
        for n, text in zip(ns, cells, strict=True):
            tflops = _number(text)
            if tflops is None:
                continue
            h, b = 2048 // d, 16384 // n
            flops = 3.5 * 4 * n * n * d * h * b / (2 if is_causal else 1)
            rows.append(Row(f"fa2-fig4{panel}", impl, variant, kernel, "a100-sxm4-80gb", "fp16", n,
                            {"d": d, "h": h, "b": b}, "fwd+bwd", flops / (tflops * 1e12)))  # fmt: skip
    return rows


DEVICE_BOUND = 4.0
"""A measured GPU's timed point joins the fit or the judging only where the device, not the launches, set its time:
at least this many times its series' floor (its shortest time at that variant, dtype and shape), so that the fixed
cost is at most a quarter of it (profilers/measure/standing.py's launch-bound rule, with a wider margin)."""
FIT_D = 64
"""A measured GPU's head dim whose device-bound points join the fit; those of the other head dims judge the model."""


def _series_key(r: dict) -> tuple:
    sizes = {k: v for k, v in r["sizes"].items() if k != "N"}
    return (r["variant"], r["dtype"], r["scope"], tuple(sorted(sizes.items())))


def _h200_records() -> list[dict]:
    """Every timed point of a shipped measured GPU that has a datasheet, with that datasheet's name."""
    out = []
    for path in sorted(SHIPPED_RECORDS.glob("cuda-*.jsonl")):
        for r in read_records(path)[0]:
            sheet = for_device(r["device"].get("name", ""))
            if r.get("kind") == "time" and r.get("status") == "ok" and sheet is not None:
                out.append({**r, "gpu": sheet.name})
    return out


def h200_rows() -> list[Row]:
    """The measured GPU's device-bound points (`DEVICE_BOUND`) as rows: source `h200-<dtype>-d<d>`, forward
    (inference) times of one call, timed by attn-cost's CUDA timer (v2) on the H200's host."""
    records = _h200_records()
    floor: dict[tuple, float] = {}
    for r in records:
        key = _series_key(r)
        floor[key] = min(floor.get(key, math.inf), r["time"]["median"])
    rows = []
    for r in records:
        t = r["time"]["median"]
        if t < DEVICE_BOUND * floor[_series_key(r)]:
            continue
        sizes = {k: v for k, v in r["sizes"].items() if k != "N"}
        rows.append(Row(f"h200-{r['dtype']}-d{sizes['d']}", r["variant"], r["variant"], "", r["gpu"], r["dtype"],
                        int(r["sizes"]["N"]), sizes, "fwd", t, r["scope"]))  # fmt: skip
    return rows


FA3_FIT = ("fa3_h100_fwd_fp16_tflops", "flash-attn-3")
"""The published table (profilers/data/published/) and kernel whose points fit FlashAttention-3's overlap
(`Efficiency.overlap_unhidden`): the FlashAttention-3 paper's forward figure, its own kernel; the table's other kernels,
and every other table of FlashAttention-3, judge the model (`benchmarks/gpu_kernels.py` leaves these points out)."""


def fa3_rows() -> list[Row]:
    """The FlashAttention-3 paper's forward times of its own kernel (`FA3_FIT`) as rows: source `fa3-fig`, the device
    time alone (its harness's host not fitted: the times are of milliseconds)."""
    table, kernel = FA3_FIT
    points = read_table(FOLDER / f"{table}.csv", shipped_gpus()).points
    return [Row("fa3-fig", kernel, p.variant, kernel, p.gpu, p.dtype, p.n, dict(p.sizes), "fwd", p.seconds)
            for p in points if p.kernel == kernel]  # fmt: skip


def all_rows() -> list[Row]:
    return fa1_rows() + fa2_rows() + h200_rows() + fa3_rows()


FIT_SOURCES = ("fa2-fig4a", "fa1-t18", f"h200-bf16-d{FIT_D}", f"h200-fp32-d{FIT_D}", "fa3-fig")
"""What the efficiencies are fitted on: FlashAttention-2's non-causal d = 64 panel, the FlashAttention paper's
forward table, the H200's device-bound points at d = 64 and FlashAttention-3's forward figure (its own kernel).
Everything else (the causal and d = 128 panels, the backward and forward+backward tables, the memory table, the
H200's other head dims, the crossovers, other GPUs, the published tables of profilers/data/published/ but that
figure's FlashAttention-3 points) judges the model."""


def table_crossing(points: list[tuple[int, float, float]]) -> float | None:
    """The first N from which B's time is no longer than A's, log-interpolated between the table's lengths;
    points: (N, time of A, time of B), ascending."""
    for (n0, a0, b0), (n1, a1, b1) in pairwise(points):
        r0, r1 = math.log(b0 / a0), math.log(b1 / a1)
        if r0 > 0 >= r1:
            t = r0 / (r0 - r1)
            return math.exp(math.log(n0) + t * (math.log(n1) - math.log(n0)))
    return None


CROSSOVERS = (
    ("PyTorch Attention", "Linformer", "fa1-t20"),
    ("FlashAttention", "Linformer", "fa1-t20"),
    ("FlashAttention", "Linformer", "fa1-t18"),
    ("PyTorch Attention", "FlashAttention", "fa1-t20"),
)
"""Crossovers the FlashAttention paper's tables imply (method A, method B, table): where B gets faster than A."""


def kernel_count(variant: str, sizes: dict, n: int, scope: str, dtype: str) -> float:
    """Kernels one inference call of a variant launches at length n: the engine's op list, each op's kernel times
    its loop steps."""
    dims = row_dims(sizes)
    key = tuple(sorted(((s, int(v)) for s, v in dims.items()), key=lambda kv: kv[0].name))
    at = np.array([float(n)])
    return float(sum(np.broadcast_to(repeat(at), (1,))[0] for _, _, repeat, _ in _ops(variant, scope, dtype, key)))


HOST_BOUND_N = 256
"""The smallest-N point of a series measures the host where N is at most this (b·h·N ≤ 8k tokens at b = 32, h = 1):
series that start longer (TaylorShift's, from N ≈ 500 to 16k) are left out."""


def eager_host() -> tuple[Host, dict]:
    """The eager host the H200 run measured: the smallest-N point of every timed series that starts at a small N
    (`HOST_BOUND_N`; b = 32, h = 1: host-bound, the GPU idle most of the call) against the kernels the engine's op
    list launches there, time = call + K · launch by non-negative least squares on relative errors (every series
    alike, as the model's fits weigh errors); with the quartiles of
    (time − call) / K over those points, its spread."""
    records = _h200_records()
    first: dict[tuple, dict] = {}
    for r in records:
        key = _series_key(r)
        if key not in first or r["sizes"]["N"] < first[key]["sizes"]["N"]:
            first[key] = r
    ks, ts = [], []
    for r in (r for r in first.values() if r["sizes"]["N"] <= HOST_BOUND_N):
        sizes = {k: v for k, v in r["sizes"].items() if k != "N"}
        ks.append(kernel_count(r["variant"], sizes, r["sizes"]["N"], r["scope"], r["dtype"]))
        ts.append(r["time"]["median"])
    k, t = np.array(ks), np.array(ts)
    (launch, call), _ = nnls(np.stack([k, np.ones_like(k)], axis=1) / t[:, None], np.ones_like(t))  # relative errors
    per = (t - call) / k
    q1, q3 = np.percentile(per, [25, 75])
    source = (f"the H200 run's host (profilers/data/results/cuda-nvidia-h200-12fde9.jsonl, eager PyTorch 2.11): "
              f"the smallest-N point of {len(t)} timed series, time = call + kernels × launch by non-negative least "
              "squares on relative errors; "
              f"launch {launch * 1e6:.1f} µs (quartiles of (time − call) / kernels {q1 * 1e6:.1f}–{q3 * 1e6:.1f} µs), "
              f"call {call * 1e6:.1f} µs; a Triton kernel of flash-linear-attention {TRITON_S * 1e6:.0f} µs "
              "(fla pull request 1243)")  # fmt: skip
    h = Host("eager", float(f"{launch:.4g}"), float(f"{max(call, 0.0):.4g}"), float(f"{TRITON_S:.4g}"), source)
    return h, {"points": len(t), "q1_s": float(q1), "q3_s": float(q3)}


HARNESSES = {
    "fa1": "the FlashAttention paper's benchmark harness (2022: flash-attention's benchmark utilities)",
    "fa2": "FlashAttention-2's benchmark harness (Fig. 4)",
    "h200": "attn-cost's CUDA timer v2 on the H200's host (eager PyTorch 2.11): the eager default, not fitted",
    "fa3": "FlashAttention-3's paper figure: the device time alone, not fitted",
}
"""Each table's harness keeps its own host (launch and call cost), fitted with the kernels' efficiencies; the H200's
is measured (`eager_host`)."""


@dataclass(frozen=True)
class Fit:
    """The datasheet model's parameters: the kernels' efficiencies (one set) and each harness's host."""

    eff: Efficiency
    hosts: dict

    @classmethod
    def shipped(cls) -> Fit:
        return cls(fitted()[0], {name: harness(name) for name in HARNESSES})


def _model(row: Row, fit: Fit) -> GpuModel:
    return GpuModel(get_datasheet(row.gpu), fit.eff, attention_kernel=row.kernel or "sdpa", host=fit.hosts[row.harness])


def predict(row: Row, fit: Fit | None) -> float:
    """The datasheet model's value for a published row: seconds (forward, backward, both) or peak bytes (which
    need no efficiencies: `fit` may be None)."""
    if row.quantity == "memory":
        return one_step_bytes(row) + input_bytes(row.variant, row_dims(row.sizes), row.n, dtype=row.dtype)
    if fit is None:
        raise ValueError("a time needs the model's efficiencies")
    return predict_times([row], fit)[0]


def predict_times(rows: list[Row], fit: Fit) -> list[float]:
    """Seconds of timed rows, every row of one setup priced at once (its lengths as one array)."""
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        key = (r.gpu, r.variant, r.kernel, r.harness, r.dtype, r.scope, r.quantity, tuple(sorted(r.sizes.items())))
        groups.setdefault(key, []).append(i)
    out = [0.0] * len(rows)
    for idx in groups.values():
        r = rows[idx[0]]
        model, dims = _model(r, fit), row_dims(r.sizes)
        ns = np.array([float(rows[i].n) for i in idx])
        fwd = model.time(r.variant, dims, ns, r.scope, r.dtype)
        both = None if r.quantity == "fwd" else model.time(r.variant, dims, ns, r.scope, r.dtype, "training")
        values = fwd if both is None else both - fwd if r.quantity == "bwd" else both
        for j, i in enumerate(idx):
            out[i] = float(values[j])
    return out


def one_step_bytes(row: Row, options: bool | None = None) -> int:
    """The engine's training peak of one forward + backward at the row's setup (bytes): the maximum over the
    forward and backward walks of the op list, fused attention's backward scratch included; with the harness's
    dropout and key padding mask where the row was measured with them (options None: as the row says)."""
    with_options = row.harness_options if options is None else options
    counting = Counting(dropout=HARNESS_P, padding_mask=True) if with_options else DEFAULT_COUNTING
    return peak_bytes(row.variant, row_dims(row.sizes), row.n, dtype=row.dtype, mode="training", counting=counting)


MEMORY_SETUP = [
    "Setup (the table's header, Appendix E): A100 40GB, fp16, batch 16, 8 heads, d = 64, random Q/K/V, no "
    "projection; Linformer k = min(N/8, 256). MB = MiB (2^20 bytes): FlashAttention's 209 MB at N = 1k is "
    "13.06 tensors of b·h·N·d fp16 (16 MiB each), which 10^6-byte MB would not make a whole count of.",
    "The published harness (flash-attention's benchmark utilities) reads `torch.cuda.max_memory_allocated()` "
    "absolutely, after the timing loops: the inputs' `.grad` from the last timed backward are still allocated "
    "(each call clears them only when it starts). *Predicted* is the engine's training peak of one forward + "
    "backward (forward and backward walks) plus those input gradients (the inputs' own sizes, from the op list); "
    "*one step* is the engine's peak alone.",
    "Fused attention's backward holds dQ, dK, dV, dO, the row log-sum-exp, D = rowsum(dO∘O) and an fp32 dQ "
    "accumulator (flash-attention's `mha_bwd`: `softmax_d`, `dq_tmp`). FlashAttention-1 skips the accumulator "
    "where the keys fit one block (N ≤ 256 at d = 64, its `loop = seq_len > base_N`): the engine, which always "
    "holds it (as FlashAttention-2 does), is over by those 2 of 11 tensors there.",
    "PyTorch Attention and Linformer: the paper runs its attention benchmarks with dropout and a padding mask "
    "(Section 4.3; the CSV's header does not say it): their rows are predicted with the benchmark script's "
    f"dropout_p = {HARNESS_P} and a b×N bool key mask (`--dropout {HARNESS_P} --padding-mask`: dropout's bool "
    "keep mask and the dropped probabilities kept for backward, the inverted mask, Linformer's masked K and V); "
    "*without* is the error of the same prediction without them. The caching allocator's rounding (512 B, 2 MiB "
    "blocks) is below 0.1 % at these sizes.",
]


EFFICIENCIES = (
    "stream",
    "attention",
    "warpgroup",
    "flash_v1",
    "efficient",
    "efficient_half",
    "strided",
    "broadcast",
    "overlap_unhidden",
)
FITTED_HOSTS = ("fa1", "fa2")
PARAMETERS = (*EFFICIENCIES, *(f"{h}.{p}" for h in FITTED_HOSTS for p in ("launch_s", "call_s")))
START = {"stream": 0.8, "attention": 0.6, "warpgroup": 0.6, "flash_v1": 0.35, "efficient": 0.5,
         "efficient_half": 0.5, "strided": 0.5, "broadcast": 0.5, "overlap_unhidden": 0.3, "launch_s": 10e-6,
         "call_s": 20e-6}  # fmt: skip
LOWER = {"stream": 0.05, "attention": 0.05, "warpgroup": 0.05, "flash_v1": 0.05, "efficient": 0.05,
         "efficient_half": 0.05, "strided": 0.005,
         "broadcast": 0.01, "overlap_unhidden": 0.001, "launch_s": 1e-7, "call_s": 1e-8}  # fmt: skip
UPPER = {**dict.fromkeys(EFFICIENCIES, 1.0), "launch_s": 1e-3, "call_s": 1e-2}
MATMUL = 271 / 312
"""Products run at the maximum achievable matmul rate measured on an A100 SXM (271 of 312 TFLOP/s in BF16; stas00,
ml-engineering, "MAMF"), not fitted: fitted on the tables it went to 0.21, absorbing the passes the published
PyTorch-attention baselines make and attn-cost's softmax does not (dropout, mask building, layout copies)."""


def _bound(p: str, which: dict) -> float:
    return which[p.split(".")[-1]]


def _fit_of(x: np.ndarray, eager: Host) -> Fit:
    v = {name: float(math.exp(x_)) for name, x_ in zip(PARAMETERS, x, strict=True)}
    eff = Efficiency(matmul=MATMUL, **{k: v[k] for k in EFFICIENCIES})
    hosts = {h: Host(h, v[f"{h}.launch_s"], v[f"{h}.call_s"], v[f"{h}.launch_s"], HARNESSES[h]) for h in FITTED_HOSTS}
    return Fit(eff, {**hosts, "h200": eager, "fa3": DEVICE_ONLY})


def fit(rows: list[Row], eager: Host | None = None) -> Fit:
    """Least squares on log(predicted / published) over the fit rows (scipy), each table weighted alike (a table of
    n rows: 1/√n a row), the parameters in log space: the kernels' efficiencies, one set, and each published
    harness's host; the H200's host is the measured eager one."""
    timed = [r for r in rows if r.quantity != "memory"]
    eager = eager or eager_host()[0]
    values = np.array([r.value for r in timed])
    per_source = {s: sum(r.source == s for r in timed) for s in {r.source for r in timed}}
    weights = np.array([1 / math.sqrt(per_source[r.source]) for r in timed])  # each table counts alike

    def residuals(x):
        return weights * np.log(np.array(predict_times(timed, _fit_of(x, eager))) / values)

    x0 = np.log([_bound(p, START) for p in PARAMETERS])
    bounds = (np.log([_bound(p, LOWER) for p in PARAMETERS]), np.log([_bound(p, UPPER) for p in PARAMETERS]))
    result = least_squares(residuals, x0, bounds=bounds, diff_step=1e-3)
    return _fit_of(result.x, eager)


def errors(rows: list[Row], fit: Fit) -> list[tuple[Row, float, float]]:
    """(row, predicted, relative error) for every row."""
    timed = [r for r in rows if r.quantity != "memory"]
    values = dict(zip(map(id, timed), predict_times(timed, fit), strict=True))
    out = []
    for r in rows:
        p = values[id(r)] if id(r) in values else predict(r, None)
        out.append((r, p, p / r.value - 1))
    return out


def table_record(scored: list[tuple[Row, float, float]]) -> list[dict]:
    """Median and worst |error| per table (or panel), quantity and method, with whether it was fitted on."""
    groups: dict[tuple, list[float]] = {}
    for r, _, e in scored:
        groups.setdefault((r.source, r.quantity, r.method), []).append(e)
    out = []
    for (s, q, m), es in groups.items():
        median, worst = statistics.median(abs(e) for e in es), max(es, key=abs)
        out.append({"source": s, "quantity": q, "method": m, "rows": len(es), "fitted": s in FIT_SOURCES,
                    "median_abs": median, "worst": worst})  # fmt: skip
    return out


def crossover_record(fit: Fit) -> list[dict]:
    """Each published crossover against the model's, both read the same way (log-interpolated over N)."""
    rows = {(r.source, r.method, r.n): r for r in all_rows()}
    out = []
    for a, b, source in CROSSOVERS:
        ns = sorted(n for (s, m, n) in rows if s == source and m == a and (s, b, n) in rows)
        published = table_crossing([(n, rows[(source, a, n)].value, rows[(source, b, n)].value) for n in ns])
        grid = sorted({round(x) for x in (ns[0] * (ns[-1] / ns[0]) ** (i / 200) for i in range(201))})
        template_a, template_b = rows[(source, a, ns[0])], rows[(source, b, ns[0])]
        ta = predict_times([_at(template_a, n) for n in grid], fit)
        tb = predict_times([_at(template_b, n) for n in grid], fit)
        predicted = table_crossing(list(zip(grid, ta, tb, strict=True)))
        error = None if published is None or predicted is None else predicted / published - 1
        out.append({"a": a, "b": b, "source": source, "quantity": template_a.quantity, "published": published,
                    "predicted": predicted, "error": error})  # fmt: skip
    return out


def _at(row: Row, n: int) -> Row:
    sizes = dict(row.sizes)
    if row.variant == "linformer":
        sizes["k"] = max(1, min(n // 8, 256))
    return replace(row, n=n, sizes=sizes)


QUOTED = (
    ("a100-sxm4-80gb", 1400),
    ("h100-sxm5-80gb", 2300),
)
"""Causal FlashAttention-2 against flash-linear-attention's chunk kernels, forward and backward, bf16, d = 128, h = 8,
b = 4, C = 64: where the chunk kernels get faster (flash-linear-attention's benchmarks, as issue 35 quotes them;
about)."""
FLUSH_BYTES = 256 * 2**20
"""triton.testing.do_bench zeroes a 256 MB buffer before each call (an L2 flush) that fla's benchmarks time with."""


def do_bench(model: GpuModel, eager: Host) -> Host:
    """fla's benchmark harness on this GPU: the eager host, with do_bench's flush queued ahead of each call (its
    bytes at the bandwidth streaming reaches) as the host's head start."""
    lead = FLUSH_BYTES / (model.sheet.bandwidth * model.eff.stream)
    return replace(eager, name="do_bench (eager, an L2 flush ahead)", lead_s=lead)


def chunk_kernels_time(model: GpuModel, sizes: dict, ns: np.ndarray, dtype: str = "bf16") -> np.ndarray:
    """Seconds of one training step of flash-linear-attention's chunk kernels alone (q, k, v in, o out; what its
    benchmarks time), forward then backward, on the model's host: six Triton launches."""
    feats = {"batch": np.full(ns.shape, float(sizes["b"] * sizes["h"])), "m": ns, "k": np.full(ns.shape, sizes["d"]),
             "n": np.full(ns.shape, float(sizes.get("C", 64)))}  # fmt: skip
    ones = np.ones(ns.shape)
    passes = [[KernelTime(CHUNK, CHUNKED, ones, t, backward=b) for t in model.chunk(feats, dtype, b)]
              for b in (False, True)]  # fmt: skip
    return timeline(passes, model.launch, ns.shape)


QUOTED_GRID = np.unique(np.round(np.geomspace(256, 65536, 241)))


def _first_crossing(ta: np.ndarray, tb: np.ndarray, grid: np.ndarray = QUOTED_GRID) -> float | None:
    return table_crossing(list(zip(grid.tolist(), ta.tolist(), tb.tolist(), strict=True)))


def quoted_record(fit: Fit, sigma: float) -> list[str]:
    """The quoted crossovers of FlashAttention-2 and flash-linear-attention's chunk kernels against the model's: the
    chunk kernels alone (priced by their tiles and waves, each a Triton launch) under fla's harness (do_bench: eager,
    an L2 flush queued ahead of each call), on the eager host, under CUDA graphs; and the catalogue's
    linear-chunked-fused (the kernels with φ and the normaliser around them: a layer) on the eager host."""

    eager = fit.hosts["h200"]
    lines = ["", "Quoted crossovers (flash-linear-attention's benchmarks, as issue 35 quotes them: causal, bf16, "
             "training, d = 128, h = 8, b = 4, C = 64) against the model's softmax-fused-causal → fla's chunk kernels "
             "alone (six Triton kernels a step), timed as fla's benchmarks time them (do_bench: eager, a 256 MB L2 "
             "flush queued ahead of each call), plainly eager, and under CUDA graphs; and → the catalogue's "
             "linear-chunked-fused (φ and the normaliser around the kernels), eager. Eager: "
             f"{eager.launch_s * 1e6:.1f} µs a PyTorch kernel, {eager.triton_s * 1e6:.0f} µs a Triton kernel.", "",
             "| GPU | quoted N | kernels, do_bench [95 %] | error | kernels, eager | error | kernels, graphs | error "
             "| linear-chunked-fused, eager | error |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    sizes = {"d": 128, "h": 8, "b": 4, "C": 64}
    dims = row_dims(sizes)
    assert dims[C] == 64
    setting = Setting(dtype="bf16", mode="training")
    spread = math.exp(1.96 * sigma)
    for gpu, quoted in QUOTED:
        model = GpuModel(get_datasheet(gpu), fit.eff, sigma, attention_kernel="fa2", host=eager)
        cells = []
        for h in (do_bench(model, eager), eager, model.with_host("graphs").launch):
            m = replace(model, host=h)
            fa = m.time("softmax-fused-causal", dims, QUOTED_GRID, dtype="bf16", mode="training")
            fb = chunk_kernels_time(m, sizes, QUOTED_GRID)
            n0 = _first_crossing(fa, fb)
            if h is eager or h.name == "graphs":
                cells += [_n(n0), _pct(_rel(n0, quoted))]
                continue
            low, high = _first_crossing(fa * spread, fb), _first_crossing(fa / spread, fb)
            cells += [f"{_n(n0)} [{_n(low)}, {_n(high)}]", _pct(_rel(n0, quoted))]
        layer = crossing(model, "softmax-fused-causal", "linear-chunked-fused", dims, setting)
        cells += [_n(layer.n0), _pct(_rel(layer.n0, quoted))]
        lines.append(f"| {gpu} | ~{quoted:,} | " + " | ".join(cells) + " |")
    return lines


def _rel(x: float | None, ref: float) -> float | None:
    return None if x is None else x / ref - 1


def held_out_record(fit: Fit, sigma: float) -> list[dict]:
    """Every shipped profile of a measured GPU that has a datasheet: its measured N0 (and whether it stands,
    profilers/measure/standing.py) beside the datasheet model's (on its measured eager host), per pair, head dim and
    dtype; the error only where the measured crossover stands."""

    out = []
    for path in sorted(SHIPPED_PROFILES.glob("cuda-*.json")):
        profile = load_profile(str(path))
        sheet = for_device(profile.device.get("name", ""))
        if sheet is None:
            continue
        model = GpuModel(sheet, fit.eff, sigma, host=fit.hosts["h200"])
        for row in profile.measured:
            sizes = {"d": row["d"], "h": row["heads"], "b": row["batch"]}
            p = crossing(model, row["a"], row["b"], row_dims(sizes), Setting(dtype=profile.dtype, scope=profile.scope))
            measured, stands = row["measured_n0"], row.get("n0_standing", "stands") == "stands"
            error = None if measured is None or p.n0 is None or not stands else p.n0 / measured - 1
            out.append({"gpu": sheet.name, "dtype": profile.dtype, "a": row["a"], "b": row["b"], "d": row["d"],
                        "measured": measured, "uncertainty": row.get("n0_uncertainty"),
                        "verdict": row.get("n0_verdict"), "standing": row.get("n0_standing"), "tie": row.get("n0_tie"),
                        "predicted": p.n0, "low": p.low, "high": p.high,
                        "error": error})  # fmt: skip
    return out


def held_out_times(fit: Fit, sigma: float) -> list[dict]:
    """Every timed point of a shipped measured GPU that has a datasheet, against the datasheet model's time on its
    measured eager host: one row a point, with what bounds it in the model (`GpuModel.parts`: the kernel family with
    the largest share of the predicted time, or the launches)."""

    out = []
    for r in _h200_records():
        sizes = r["sizes"]
        model = GpuModel(get_datasheet(r["gpu"]), fit.eff, sigma, host=fit.hosts["h200"])
        parts = model.parts(r["variant"], row_dims(sizes), np.array([sizes["N"]]), r["scope"], r["dtype"])
        seconds = {k: float(v[0]) for k, v in parts.items()}
        out.append({"gpu": r["gpu"], "dtype": r["dtype"], "variant": r["variant"],
                    "bound": max((LAUNCH, *priced_families()), key=lambda k: seconds[k]),
                    "error": sum(seconds.values()) / r["time"]["median"] - 1})  # fmt: skip
    return out


def _grouped(points: list[dict], key: str) -> list[tuple[tuple, list[float]]]:
    groups: dict[tuple, list[float]] = {}
    for p in points:
        groups.setdefault((p["gpu"], p["dtype"], p[key]), []).append(p["error"])
    return sorted(groups.items())


def _spread(errs: list[float]) -> str:
    q = statistics.quantiles(errs, n=10) if len(errs) > 1 else errs * 9
    return (f"{len(errs)} | {statistics.median(errs):+.0%} | {statistics.median(abs(e) for e in errs):.0%} | "
            f"{q[0]:+.0%} … {q[-1]:+.0%}")  # fmt: skip


def fit_file(fit: Fit, scored: list[tuple[Row, float, float]]) -> str:
    """The text of profilers/data/gpumodel.json: the efficiencies, the hosts (the eager default and each harness's),
    the spread on the judged rows, and where they came from."""

    judged = [math.log(1 + e) for r, _, e in scored if r.source not in FIT_SOURCES and r.quantity != "memory"]
    sigma = statistics.pstdev(judged)
    median = statistics.median(abs(math.expm1(x)) for x in judged)
    data = {
        "kind": FIT_KIND,
        "efficiency": {k: float(f"{v:.6g}") for k, v in asdict(fit.eff).items()},
        "eager": asdict(replace(fit.hosts["h200"], name="eager")),
        "harnesses": {name: _rounded(h) for name, h in fit.hosts.items()},
        "sigma": round(sigma, 4),
        "median_abs_error": round(median, 4),
        "fitted_on": [describe(s) for s in FIT_SOURCES],
        "judged_on": [describe(s) for s in sorted({r.source for r, _, _ in scored} - set(FIT_SOURCES))],
        "matmul": "not fitted: the maximum achievable matmul rate measured on an A100 SXM (271/312)",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "made_by": "python benchmarks/gpu_published.py --fit",
    }
    return json.dumps(data, indent=1) + "\n"


def _rounded(h: Host) -> dict:
    return {**asdict(h), **{k: float(f"{getattr(h, k):.6g}") for k in ("launch_s", "call_s", "triton_s")}}


DESCRIPTIONS = {
    "fa1-t18": "FlashAttention Table 18 (A100 40GB, forward)",
    "fa1-t19": "FlashAttention Table 19 (backward)",
    "fa1-t20": "FlashAttention Table 20 (forward+backward)",
    "fa1-t21": "FlashAttention Table 21 (memory)",
    "fa2-fig4a": "FlashAttention-2 Fig. 4a (A100 80GB, d = 64)",
    "fa2-fig4b": "FlashAttention-2 Fig. 4b (d = 128)",
    "fa2-fig4c": "FlashAttention-2 Fig. 4c (causal, d = 64)",
    "fa2-fig4d": "FlashAttention-2 Fig. 4d (causal, d = 128)",
    "fa3-fig": "FlashAttention-3's forward figure, its own kernel (H100, d = 64, 128, 256)",
}


def describe(source: str) -> str:
    """A table's description; a measured GPU's rows (`h200-<dtype>-d<d>`) by their dtype and head dim."""
    if source in DESCRIPTIONS:
        return DESCRIPTIONS[source]
    _, dtype, d = source.split("-")
    return f"H200 device-bound points ({dtype}, d = {d[1:]})"


BEGIN, END = "<!-- gpu-published: begin -->", "<!-- gpu-published: end -->"


def _n(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _crossing(x: float | None) -> str:
    return "B faster throughout" if x is None else _n(x)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.0%}"


DEVICE_SETS = 1024
"""From this N the device, not the launches, sets a published table's times (the targets' rule)."""


def table_summary(timed: list[tuple[Row, float, float]]) -> list[str]:
    """One line per table and method: median |error| of its rows at N ≥ `DEVICE_SETS`."""
    groups: dict[tuple, list[float]] = {}
    for r, _, e in timed:
        if r.n >= DEVICE_SETS:
            groups.setdefault((r.source, r.method), []).append(abs(e))
    return [f"| {s} {m} | {'yes' if s in FIT_SOURCES else 'no'} | {len(es)} | {statistics.median(es):.1%} |"
            for (s, m), es in sorted(groups.items())]  # fmt: skip


def record(rows: list[Row], fit: Fit, sigma: float) -> str:
    """The record, in markdown: times per table and method, memory, crossovers, and the held-out measured GPUs."""
    scored = errors(rows, fit)
    timed = [t for t in scored if t[0].quantity != "memory"]
    lines = [
        "Made by `python benchmarks/gpu_published.py --into docs/gpumodel.md` from the shipped fit "
        "(profilers/data/gpumodel.json). Fitted on: "
        + ", ".join(describe(s) for s in FIT_SOURCES)
        + "; everything else judges the model. Each harness prices its launches with its own host (fitted with "
        "the efficiencies, one set of those for every table):",
        "",
        *(
            f"- {name}: {h.launch_s * 1e6:.1f} µs a kernel, {h.call_s * 1e6:.1f} µs a call ({HARNESSES[name]})"
            for name, h in fit.hosts.items()
        ),
        f"- eager default (`--launch eager`): {fit.hosts['h200'].source}.",
        f"- efficiencies: {', '.join(f'{k} {v:.3g}' for k, v in asdict(fit.eff).items())}.",
        "",
        "Per table where the device sets the time (N ≥ 1,024), median |error| per method:",
        "",
        "| table | fitted on | rows | median \\|error\\| |",
        "|---|---|---|---|",
        *table_summary(timed),
        "",
        "Every table, quantity and method:",
        "",
        "| table | quantity | method | rows | fitted on | median \\|error\\| | worst |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in sorted(table_record(timed), key=lambda g: (g["source"], g["quantity"], g["method"])):
        lines.append(
            f"| {g['source']} | {g['quantity']} | {g['method']} | {g['rows']} | {'yes' if g['fitted'] else 'no'} | "
            f"{g['median_abs']:.1%} | {g['worst']:+.0%} |"
        )
    judged = [abs(e) for r, _, e in timed if r.source not in FIT_SOURCES]
    lines += ["", f"Judged times: {len(judged)}, median |error| {statistics.median(judged):.1%}; "
              f"spread σ = {sigma:.3f} (95 % interval ×/÷ {math.exp(1.96 * sigma):.2f}).", ""]  # fmt: skip
    lines += ["| crossover (published tables) | quantity | published N | predicted N | error |",
              "|---|---|---|---|---|"]  # fmt: skip
    for c in crossover_record(fit):
        lines.append(f"| {c['b']} vs {c['a']} ({c['source']}) | {c['quantity']} | {_crossing(c['published'])} | "
                     f"{_crossing(c['predicted'])} | {_pct(c['error'])} |")  # fmt: skip
    lines += quoted_record(fit, sigma)
    lines += memory_record([t for t in scored if t[0].quantity == "memory"])

    held = held_out_record(fit, sigma)
    if held:
        lines += ["", f"Measured GPUs, measured N0 against the datasheet model's on the measured eager host (the "
                  f"crossovers are judged, never fitted; the device-bound points at d = {FIT_D} were fitted on); an "
                  "error only where the measured crossover stands (docs/measuring.md):", "",
                  "| GPU | dtype | A → B | d | measured N0 | datasheet N0 [95 %] | error |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for h in held:
            measured = cell(h["measured"], h["uncertainty"], h["verdict"], h["standing"], tie=h.get("tie"))
            predicted = f"{_n(h['predicted'])} {interval(h['low'], h['high'])}"
            lines.append(f"| {h['gpu']} | {h['dtype']} | {h['a']} → {h['b']} | {h['d']} | {measured} | {predicted} | "
                         f"{_pct(h['error'])} |")  # fmt: skip
        errs = [abs(h["error"]) for h in held if h["error"] is not None]
        if errs:
            median = statistics.median(errs)
            lines += ["", f"Measured crossovers: {len(errs)} that stand, median |N0 error| {median:.0%}."]
    times = held_out_times(fit, sigma)
    if times:
        head = "| points | median error | median \\|error\\| | 10th … 90th percentile |"
        lines += ["", "Measured GPUs' timed points (all of them, launch-bound ones included) against the datasheet "
                  "model's time on the measured eager host, by what bounds "
                  "the point in the model (the kernel family with the largest share of its predicted time, or the "
                  "launches), and by variant:", "", "| GPU | dtype | bound by " + head, "|---" * 7 + "|"]  # fmt: skip
        lines += [f"| {gpu} | {dtype} | {bound} | {_spread(errs)} |" for (gpu, dtype, bound), errs in
                  _grouped(times, "bound")]  # fmt: skip
        lines += ["", "| GPU | dtype | variant " + head, "|---" * 7 + "|"]
        lines += [f"| {gpu} | {dtype} | {variant} | {_spread(errs)} |" for (gpu, dtype, variant), errs in
                  _grouped(times, "variant")]  # fmt: skip
    return "\n".join(lines) + "\n"


def memory_record(memory: list[tuple[Row, float, float]]) -> list[str]:
    """Peak memory against the published table, per method and N, with the setup it assumes."""
    lines = ["", "Peak memory (forward + backward, MiB) against the engine's training peak:", ""]
    lines += [f"- {item}" for item in MEMORY_SETUP]
    lines += ["", "| method | N | published | predicted | error | one step | error | without |",
              "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    without: dict[tuple[str, int], float] = {}  # (method, N) -> the prediction without the harness's options
    for r, p, e in sorted(memory, key=lambda t: (t[0].method, t[0].n)):
        step = one_step_bytes(r)
        if r.harness_options:
            without[r.method, r.n] = p - step + one_step_bytes(r, options=False)
        bare = f"{without[r.method, r.n] / r.value - 1:+.1%}" if r.harness_options else ""
        lines.append(f"| {r.method} | {r.n:,} | {r.value / 2**20:,.0f} | {p / 2**20:,.0f} | {e:+.1%} | "
                     f"{step / 2**20:,.0f} | {step / r.value - 1:+.1%} | {bare} |")  # fmt: skip
    lines.append("")
    for g in sorted(table_record(memory), key=lambda g: g["method"]):
        es = [e for r, _, e in memory if r.method == g["method"]]
        within = sum(abs(e) <= 0.05 for e in es)
        bare_errors = [without[r.method, r.n] / r.value - 1 for r, _, _ in memory
                       if r.method == g["method"] and (r.method, r.n) in without]  # fmt: skip
        before = (f" (without dropout and mask: {statistics.median(abs(e) for e in bare_errors):.1%})"
                  if bare_errors else "")  # fmt: skip
        lines.append(f"- {g['method']}: median |error| {statistics.median(abs(e) for e in es):.1%}{before}, median "
                     f"error {statistics.median(es):+.1%}, {within} of {len(es)} rows within 5 %.")  # fmt: skip
    return lines
