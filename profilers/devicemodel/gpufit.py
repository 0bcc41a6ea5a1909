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
from attn_cost.costmodel.counting import Counting
from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.symbols import C, N
from attn_cost.costmodel.variants import derive_counted
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.corrections import SHIPPED as SHIPPED_PROFILES
from attn_cost.profilers.devicemodel.corrections import load_profile
from attn_cost.profilers.devicemodel.datasheet import for_device, get_datasheet
from attn_cost.profilers.devicemodel.device import crossing, peak_bytes, row_dims
from attn_cost.profilers.devicemodel.gpumodel import (
    FIT_KIND,
    LAUNCH,
    Efficiency,
    GpuModel,
    input_bytes,
)
from attn_cost.profilers.devicemodel.kernels import FAMILIES
from attn_cost.profilers.measure.standing import cell
from attn_cost.profilers.store.store import SHIPPED as SHIPPED_RECORDS
from attn_cost.profilers.store.store import read_records
from scipy.optimize import least_squares

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
    harness: bool = False
    """Counted with the harness's attention dropout and key padding mask (`HARNESS`)."""

    @property
    def mode(self) -> str:
        return "inference" if self.quantity == "fwd" else "training"


FA1_METHODS = {"PyTorch Attention": ("softmax", ""), "FlashAttention": ("softmax-fused", "fa1"),
               "Linformer": ("linformer", "")}  # fmt: skip
"""The methods of the FlashAttention paper's tables that attn-cost describes. Local attention is left out: the
tables do not give its window or blocks. The rest (Reformer, Longformer, BigBird, ...) are not in the catalogue."""
FA2_METHODS = {"PyTorch": ("softmax", ""), "FlashAttention-2": ("softmax-fused", "fa2"),
               "FlashAttention": ("softmax-fused", "fa1")}  # fmt: skip
"""FlashAttention-2's Fig. 4 implementations attn-cost describes (xformers and the Triton kernel are others)."""
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
            harness = q == "memory" and method in HARNESS_METHODS
            rows.append(Row(f"fa1-t{table}", method, variant, kernel, "a100-sxm4-40gb", "fp16", n, sizes, q, scaled,
                            harness))  # fmt: skip
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


def all_rows() -> list[Row]:
    return fa1_rows() + fa2_rows()


FIT_SOURCES = ("fa2-fig4a", "fa1-t18")
"""What the efficiencies are fitted on: FlashAttention-2's non-causal d = 64 panel and the FlashAttention paper's
forward table. Everything else (the causal and d = 128 panels, the backward and forward+backward tables, the
memory table, the crossovers, other GPUs) judges the model."""


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


def predict(row: Row, eff: Efficiency | None) -> float:
    """The datasheet model's value for a published row: seconds (forward, backward, both) or peak bytes (which
    need no efficiencies: `eff` may be None)."""
    dims = row_dims(row.sizes)
    if row.quantity == "memory":
        return one_step_bytes(row) + input_bytes(row.variant, dims, row.n, dtype=row.dtype)
    if eff is None:
        raise ValueError("a time needs the model's efficiencies")
    model = GpuModel(get_datasheet(row.gpu), eff, attention_kernel=row.kernel or "fa2")
    ns = np.array([float(row.n)])
    fwd = float(model.time(row.variant, dims, ns, dtype=row.dtype)[0])
    if row.quantity == "fwd":
        return fwd
    both = float(model.time(row.variant, dims, ns, dtype=row.dtype, mode="training")[0])
    return both - fwd if row.quantity == "bwd" else both


def one_step_bytes(row: Row, harness: bool | None = None) -> int:
    """The engine's training peak of one forward + backward at the row's setup (bytes): the maximum over the
    forward and backward walks of the op list, fused attention's backward scratch included; with the harness's
    dropout and key padding mask where the row was measured with them (harness None: as the row says)."""
    if not (row.harness if harness is None else harness):
        return peak_bytes(row.variant, row_dims(row.sizes), row.n, dtype=row.dtype, mode="training")
    # the device model's peak_bytes builds its op lists without the two options: the engine's peak directly
    counting = Counting(dropout=HARNESS_P, padding_mask=True)
    derived = derive_counted(row.variant, "core", "training", counting)
    return int(derived.peak(row.dtype).at({**row_dims(row.sizes), N: row.n})[0])


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


PARAMETERS = ("launch_s", "call_s", "stream", "attention", "flash_v1")
START = {"launch_s": 10e-6, "call_s": 20e-6, "stream": 0.8, "attention": 0.6, "flash_v1": 0.35}
LOWER = {"launch_s": 1e-7, "call_s": 1e-8, "stream": 0.05, "attention": 0.05, "flash_v1": 0.05}
UPPER = {"launch_s": 1e-3, "call_s": 1e-2, "stream": 1.0, "attention": 1.0, "flash_v1": 1.0}
MATMUL = 271 / 312
"""Products run at the maximum achievable matmul rate measured on an A100 SXM (271 of 312 TFLOP/s in BF16; stas00,
ml-engineering, "MAMF"), not fitted: fitted on the tables it went to 0.21, absorbing the passes the published
PyTorch-attention baselines make and attn-cost's softmax does not (dropout, mask building, layout copies)."""


def _efficiency(x: np.ndarray) -> Efficiency:
    fitted = {name: float(math.exp(v)) for name, v in zip(PARAMETERS, x, strict=True)}
    return Efficiency(matmul=MATMUL, **fitted)


def fit(rows: list[Row]) -> Efficiency:
    """Least squares on log(predicted / published) over the fit rows (scipy), the parameters in log space."""
    timed = [r for r in rows if r.quantity != "memory"]

    def residuals(x):
        eff = _efficiency(x)
        return np.array([math.log(predict(r, eff) / r.value) for r in timed])

    x0 = np.log([START[p] for p in PARAMETERS])
    bounds = (np.log([LOWER[p] for p in PARAMETERS]), np.log([UPPER[p] for p in PARAMETERS]))
    result = least_squares(residuals, x0, bounds=bounds, diff_step=1e-3)
    return _efficiency(result.x)


def errors(rows: list[Row], eff) -> list[tuple[Row, float, float]]:
    """(row, predicted, relative error) for every row."""
    out = []
    for r in rows:
        p = predict(r, eff)
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


def crossover_record(eff) -> list[dict]:
    """Each published crossover against the model's, both read the same way (log-interpolated over N)."""
    rows = {(r.source, r.method, r.n): r for r in all_rows()}
    out = []
    for a, b, source in CROSSOVERS:
        ns = sorted(n for (s, m, n) in rows if s == source and m == a and (s, b, n) in rows)
        published = table_crossing([(n, rows[(source, a, n)].value, rows[(source, b, n)].value) for n in ns])
        grid = sorted({round(x) for x in (ns[0] * (ns[-1] / ns[0]) ** (i / 200) for i in range(201))})
        template_a, template_b = rows[(source, a, ns[0])], rows[(source, b, ns[0])]
        predicted = table_crossing(
            [(n, predict(_at(template_a, n), eff), predict(_at(template_b, n), eff)) for n in grid]
        )
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
"""Causal FlashAttention-2 against chunked linear attention, forward and backward, bf16, d = 128, h = 8, b = 4: where
the chunked kernel gets faster (flash-linear-attention's benchmarks, as issue 35 quotes them; about)."""


def quoted_record(eff, sigma: float) -> list[str]:
    """The quoted crossovers of FlashAttention-2 and flash-linear-attention's chunked kernel, against the model's
    crossover of softmax-fused-causal and linear-chunked (its eager PyTorch reference, 16 kernels a call)."""

    lines = ["", "Quoted crossovers (flash-linear-attention's benchmarks, as issue 35 quotes them: causal, bf16, "
             "training, d = 128, h = 8, b = 4) against softmax-fused-causal → linear-chunked (C = 64):", "",
             "| GPU | quoted N | predicted N [95 %] | error |", "|---|---|---|---|"]  # fmt: skip
    dims = row_dims({"d": 128, "h": 8, "b": 4})
    assert dims[C] == 64
    for gpu, quoted in QUOTED:
        model = GpuModel(get_datasheet(gpu), eff, sigma)
        p = crossing(model, "softmax-fused-causal", "linear-chunked", dims, Setting(dtype="bf16", mode="training"))
        error = None if p.n0 is None else p.n0 / quoted - 1
        lines.append(f"| {gpu} | ~{quoted:,} | {_n(p.n0)} [{_n(p.low)}, {_n(p.high)}] | {_pct(error)} |")
    return lines


def held_out_record(eff, sigma: float) -> list[dict]:
    """Every shipped profile of a measured GPU that has a datasheet: its measured N0 (and whether it stands,
    profilers/measure/standing.py) beside the datasheet model's (never fitted on it), per pair, head dim and
    dtype; the error only where the measured crossover stands."""

    out = []
    for path in sorted(SHIPPED_PROFILES.glob("cuda-*.json")):
        profile = load_profile(str(path))
        sheet = for_device(profile.device.get("name", ""))
        if sheet is None:
            continue
        model = GpuModel(sheet, eff, sigma)
        for row in profile.measured:
            sizes = {"d": row["d"], "h": row["heads"], "b": row["batch"]}
            p = crossing(model, row["a"], row["b"], row_dims(sizes), Setting(dtype=profile.dtype, scope=profile.scope))
            measured, stands = row["measured_n0"], row.get("n0_standing", "stands") == "stands"
            error = None if measured is None or p.n0 is None or not stands else p.n0 / measured - 1
            out.append({"gpu": sheet.name, "dtype": profile.dtype, "a": row["a"], "b": row["b"], "d": row["d"],
                        "measured": measured, "uncertainty": row.get("n0_uncertainty"),
                        "verdict": row.get("n0_verdict"), "standing": row.get("n0_standing"),
                        "predicted": p.n0, "low": p.low, "high": p.high,
                        "error": error})  # fmt: skip
    return out


def held_out_times(eff, sigma: float) -> list[dict]:
    """Every timed point of a shipped measured GPU that has a datasheet, against the datasheet model's time (never
    fitted on it): one row a point, with what bounds it in the model (`GpuModel.parts`: the kernel family with the
    largest share of the predicted time, or the launches)."""

    out = []
    for path in sorted(SHIPPED_RECORDS.glob("cuda-*.jsonl")):
        for r in read_records(path)[0]:
            sheet = for_device(r["device"].get("name", ""))
            if r.get("kind") != "time" or r.get("status") != "ok" or sheet is None:
                continue
            sizes = r["sizes"]
            parts = GpuModel(sheet, eff, sigma).parts(r["variant"], row_dims(sizes), np.array([sizes["N"]]), r["scope"],
                                                      r["dtype"])  # fmt: skip
            seconds = {k: float(v[0]) for k, v in parts.items()}
            out.append({"gpu": sheet.name, "dtype": r["dtype"], "variant": r["variant"],
                        "bound": max((LAUNCH, *FAMILIES), key=lambda k: seconds[k]),
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


def fit_file(eff: Efficiency, scored: list[tuple[Row, float, float]]) -> str:
    """The text of profilers/data/gpumodel.json: the efficiencies, the spread on the judged rows, and where they came
    from."""

    judged = [math.log(1 + e) for r, _, e in scored if r.source not in FIT_SOURCES and r.quantity != "memory"]
    sigma = statistics.pstdev(judged)
    median = statistics.median(abs(math.expm1(x)) for x in judged)
    data = {
        "kind": FIT_KIND,
        "efficiency": {k: float(f"{v:.6g}") for k, v in asdict(eff).items()},
        "sigma": round(sigma, 4),
        "median_abs_error": round(median, 4),
        "fitted_on": [DESCRIPTIONS[s] for s in FIT_SOURCES],
        "judged_on": [DESCRIPTIONS[s] for s in sorted({r.source for r, _, _ in scored} - set(FIT_SOURCES))],
        "matmul": "not fitted: the maximum achievable matmul rate measured on an A100 SXM (271/312)",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "made_by": "python benchmarks/gpu_published.py --fit",
    }
    return json.dumps(data, indent=1) + "\n"


DESCRIPTIONS = {
    "fa1-t18": "FlashAttention Table 18 (A100 40GB, forward)",
    "fa1-t19": "FlashAttention Table 19 (backward)",
    "fa1-t20": "FlashAttention Table 20 (forward+backward)",
    "fa1-t21": "FlashAttention Table 21 (memory)",
    "fa2-fig4a": "FlashAttention-2 Fig. 4a (A100 80GB, d = 64)",
    "fa2-fig4b": "FlashAttention-2 Fig. 4b (d = 128)",
    "fa2-fig4c": "FlashAttention-2 Fig. 4c (causal, d = 64)",
    "fa2-fig4d": "FlashAttention-2 Fig. 4d (causal, d = 128)",
}


BEGIN, END = "<!-- gpu-published: begin -->", "<!-- gpu-published: end -->"


def _n(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _crossing(x: float | None) -> str:
    return "B faster throughout" if x is None else _n(x)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.0%}"


def record(rows: list[Row], eff, sigma: float) -> str:
    """The record, in markdown: times per table and method, memory, crossovers, and the held-out measured GPUs."""
    scored = errors(rows, eff)
    timed = [t for t in scored if t[0].quantity != "memory"]
    lines = [
        "Made by `python benchmarks/gpu_published.py --into docs/gpumodel.md` from the shipped fit "
        "(profilers/data/gpumodel.json). Fitted on: "
        + ", ".join(DESCRIPTIONS[s] for s in FIT_SOURCES)
        + "; everything else judges the model.",
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
    for c in crossover_record(eff):
        lines.append(f"| {c['b']} vs {c['a']} ({c['source']}) | {c['quantity']} | {_crossing(c['published'])} | "
                     f"{_crossing(c['predicted'])} | {_pct(c['error'])} |")  # fmt: skip
    lines += quoted_record(eff, sigma)
    lines += memory_record([t for t in scored if t[0].quantity == "memory"])

    held = held_out_record(eff, sigma)
    if held:
        lines += ["", "Measured GPUs (held out: never fitted on), measured N0 against the datasheet model's; an error "
                  "only where the measured crossover stands (docs/measuring.md):", "",
                  "| GPU | dtype | A → B | d | measured N0 | datasheet N0 [95 %] | error |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for h in held:
            measured = cell(h["measured"], h["uncertainty"], h["verdict"], h["standing"])
            interval = f"{_n(h['predicted'])} [{_n(h['low'])}, {_n(h['high'])}]"
            lines.append(f"| {h['gpu']} | {h['dtype']} | {h['a']} → {h['b']} | {h['d']} | {measured} | {interval} | "
                         f"{_pct(h['error'])} |")  # fmt: skip
        errs = [abs(h["error"]) for h in held if h["error"] is not None]
        if errs:
            median = statistics.median(errs)
            lines += ["", f"Held-out crossovers: {len(errs)} measured that stand, median |N0 error| {median:.0%}."]
    times = held_out_times(eff, sigma)
    if times:
        head = "| points | median error | median \\|error\\| | 10th … 90th percentile |"
        lines += ["", "Measured GPUs' timed points (held out) against the datasheet model's time, by what bounds "
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
        if r.harness:
            without[r.method, r.n] = p - step + one_step_bytes(r, harness=False)
        bare = f"{without[r.method, r.n] / r.value - 1:+.1%}" if r.harness else ""
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
