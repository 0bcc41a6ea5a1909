"""The datasheet model with the kernel each published table ran (`--kernel`), against the long-format published
tables (profilers/data/published/, `datasheet.published`): median |time error| per (table, GPU, kernel, direction).

    python benchmarks/gpu_kernels.py                         # the record, printed
    python benchmarks/gpu_kernels.py --into docs/gpumodel.md # and written into its marked block
    python benchmarks/gpu_kernels.py --intervals             # and the intervals written (gpumodel_intervals.json)
    python benchmarks/gpu_kernels.py --measured FILE         # the model against a table `attn-cost kernels` made

None of these tables is among the fit's sources (`datasheet.fit.FIT_SOURCES`: FlashAttention's A100 tables and the
H200's own run): every figure here is out of sample. Each point is priced on its GPU's datasheet row with the shipped
efficiencies and the kernel its table names (`KERNELS`), forward as inference, forward + backward as a training step,
backward as their difference, the device time alone (no host: the tables time back-to-back calls of one kernel).
Points of kernels attn-cost does not price (xformers, Triton tutorials, Lightning Attention-2, FlashQLA, ...) and of
variants not in the catalogue are counted, not priced.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docblock.py, beside this script

from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.variants import REGISTRY, all_variants
from attn_cost.profilers.devicemodel.datasheet.data import get_datasheet
from attn_cost.profilers.devicemodel.datasheet.fit import FA3_FIT, table_crossing
from attn_cost.profilers.devicemodel.datasheet.kernels import CHOICES, CHUNK, FUSED
from attn_cost.profilers.devicemodel.datasheet.model import (
    DEVICE_ONLY,
    INTERVALS_FILE,
    INTERVALS_KIND,
    GpuModel,
    fitted,
    spreads,
)
from attn_cost.profilers.devicemodel.datasheet.published import (
    Point,
    Table,
    is_kernel_table,
    read_all,
    read_table,
    shipped_gpus,
)
from attn_cost.profilers.devicemodel.device import row_dims
from attn_cost.profilers.store.files import is_json_of
from docblock import check, fill, write_output

BEGIN, END = "<!-- gpu_kernels.py begin -->", "<!-- gpu_kernels.py end -->"
KERNELS = {**{name: name for name in CHOICES}, "cudnn": "sdpa-cudnn", "flash-attn-1": "fa1"}
"""A published table's kernel as the model prices it (`--kernel`; FlashAttention (1) by the published checks' own)."""
SOFTMAX_TARGET, CHUNK_TARGET, CROSSING_TARGET = 0.15, 0.20, 0.20
MIN_POINTS = 8
"""Fewer held-out points than this set no interval (the model then says its fit's one σ)."""


def model_for(point: Point) -> GpuModel:
    """The datasheet model of the point's GPU pricing with the kernel its table ran, as the PyTorch release it
    ran (where the table says), the device time alone."""
    eff, sigma, _ = fitted()
    kernel = KERNELS[point.kernel]
    fused = kernel == "fa1" or CHOICES[kernel].family == FUSED
    family = {"attention_kernel": kernel} if fused else {"chunk_kernel": kernel}
    return GpuModel(get_datasheet(point.gpu), eff, sigma, host=DEVICE_ONLY, pytorch=point.pytorch, **family)


def predicted(point: Point) -> float:
    """Seconds the model gives the point (backward: a training step less its forward)."""
    dims = row_dims({name: v for name, v in point.sizes.items() if name != "n_kv"})
    model, ns = model_for(point), np.array([float(point.n)])

    def at(mode: str) -> float:
        return float(model.time(point.variant, dims, ns, "core", point.dtype, mode)[0])

    if point.direction == "fwd":
        return at("inference")
    if point.direction == "fwdbwd":
        return at("training")
    return at("training") - at("inference")


def family(kernel: str) -> str:
    """The kernel family a published kernel's interval is of (`GpuModel.family`'s words)."""
    return CHUNK if kernel.startswith("fla-") else FUSED


@functools.cache
def scored() -> tuple[list[tuple[Point, float]], Counter]:
    """Each priced point of the shipped published tables with its signed log error; what was left out, why."""
    return score(read_all())


def score(tables: list[Table]) -> tuple[list[tuple[Point, float]], Counter]:
    """Each priced point of these tables with its signed log error; what was left out, why."""
    all_variants()
    out: list[tuple[Point, float]] = []
    left: Counter = Counter()
    for table in tables:
        for point in table.points:
            if (point.table, point.kernel) == FA3_FIT:
                left["fitted on (the fit's FlashAttention-3 points)"] += 1
            elif point.kernel not in KERNELS:
                left[f"kernel {point.kernel} is not one attn-cost prices"] += 1
            elif point.variant not in REGISTRY:
                left[f"variant {point.variant} is not in the catalogue"] += 1
            elif point.direction == "decode":
                left["a decoding step (its own record: docs/gpumodel.md, decode)"] += 1
            else:
                try:
                    guess = predicted(point)
                except UserError as e:
                    left[f"refused: {str(e).split(':')[0]}"] += 1
                    continue
                out.append((point, float(np.log(guess / point.seconds))))
    return out, left


def judged(points: list[tuple[Point, float]]) -> dict[tuple, list[float]]:
    """Each priced point's signed log error, grouped per (table, GPU, kernel, direction)."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for point, err in points:
        groups[(point.table, point.gpu, point.kernel, point.direction)].append(err)
    return groups


def _shape(point: Point, with_n: bool = True) -> tuple:
    """Where two kernels of one table were measured beside each other: GPU, dtype, direction, causal, sizes (the
    chunk left out: the chunk kernel's own) and, unless a series along N is wanted, N."""
    sizes = tuple(sorted((k, v) for k, v in point.sizes.items() if k != "C"))
    return (point.table, point.gpu, point.dtype, point.direction, point.causal, sizes, *((point.n,) if with_n else ()))


def pair_errors(points: list[tuple[Point, float]]) -> list[tuple[str, str, float]]:
    """The error of each ratio of two kernels' times measured in one table at one shape (GPU, dtype, direction,
    causal, sizes, N): (table, the two families as `spreads` keys them, the ratio's log error)."""
    by_shape: dict[tuple, list[tuple[Point, float]]] = defaultdict(list)
    for point, err in points:
        by_shape[_shape(point)].append((point, err))
    out = []
    for (table, *_), here in by_shape.items():
        for i, (pa, ea) in enumerate(here):
            for pb, eb in here[i + 1 :]:
                if pa.kernel != pb.kernel:
                    out.append((table, "|".join(sorted((family(pa.kernel), family(pb.kernel)))), eb - ea))
    return out


def crossings(points: list[tuple[Point, float]]) -> list[tuple[str, str, float | None, float | None]]:
    """Each published crossover: per series along N of two kernels of different families (a chunk kernel against a
    fused one) measured beside each other, the first N where the chunk kernel is no slower, in the table and in the
    model at the table's own lengths (interpolated in log N): (table, series, published N, model N)."""
    series: dict[tuple, dict[str, dict[int, tuple[float, float]]]] = defaultdict(lambda: defaultdict(dict))
    for point, err in points:
        series[_shape(point, with_n=False)][point.kernel][point.n] = (point.seconds, point.seconds * np.exp(err))
    out = []
    for key, by_kernel in sorted(series.items(), key=lambda kv: str(kv[0])):
        chunks = [k for k in by_kernel if family(k) == CHUNK]
        for chunk in chunks:
            for fused in (k for k in by_kernel if family(k) == FUSED):
                ns = sorted(set(by_kernel[chunk]) & set(by_kernel[fused]))
                if len(ns) < 2:
                    continue
                found = [table_crossing([(n, by_kernel[fused][n][i], by_kernel[chunk][n][i]) for n in ns])
                         for i in (0, 1)]  # fmt: skip
                table, gpu, dtype, direction, causal, sizes = key
                mask = " causal" if causal else ""
                shape = " ".join(f"{k}={v}" for k, v in sizes)
                out.append((table, f"{gpu} {dtype} {direction}{mask} {shape}: {chunk} vs {fused}", found[0], found[1]))
    return out


def q95s(points: list[tuple[Point, float]]) -> dict[str, float]:
    """Per family and per pair of families, the 95th percentile of |log error| over the held-out points."""
    by: dict[str, list[float]] = defaultdict(list)
    for point, err in points:
        by[family(point.kernel)].append(abs(err))
    for _, key, err in pair_errors(points):
        by[key].append(abs(err))
    return {key: float(np.quantile(errs, 0.95)) for key, errs in sorted(by.items()) if len(errs) >= MIN_POINTS}


def record() -> str:
    """The record of the shipped published tables: `groups`, the published crossovers, the intervals' coverage."""
    points, left = scored()
    lines = groups(points)
    lines += crossover_lines(points)
    lines += intervals(points)
    lines.append("- Left out: " + "; ".join(f"{why} ({n})" for why, n in left.most_common()) + ".")
    return "\n".join(lines) + "\n"


def groups(points: list[tuple[Point, float]]) -> list[str]:
    """One line a (table, GPU, kernel, direction), its points, median |error| and median error; how many groups are
    within the targets."""
    lines = [
        "| table | GPU | kernel | direction | points | median \\|error\\| | median error |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts: dict[str, list[bool]] = defaultdict(list)
    for (table, gpu, kernel, direction), errs in sorted(judged(points).items()):
        rel = [float(np.exp(e) - 1) for e in errs]
        med_abs, med = statistics.median(abs(r) for r in rel), statistics.median(rel)
        lines.append(f"| {table} | {gpu} | {kernel} | {direction} | {len(errs)} | {med_abs:.0%} | {med:+.0%} |")
        chunk = kernel.startswith("fla-")
        verdicts["chunk" if chunk else "softmax"].append(med_abs <= (CHUNK_TARGET if chunk else SOFTMAX_TARGET))
    lines.append("")
    for family, target in (("softmax", SOFTMAX_TARGET), ("chunk", CHUNK_TARGET)):
        ok = verdicts[family]
        lines.append(f"- {family} kernels: {sum(ok)} of {len(ok)} (table, GPU, kernel, direction) groups within "
                     f"{target:.0%} median |time error|.")  # fmt: skip
    return lines


def measured_record(paths: list[Path]) -> str:
    """The datasheet model against tables `attn-cost kernels` measured (`--measured`): the same groups and
    crossovers, judged, never fitted; what was left out, why."""
    tables = []
    for path in paths:
        if not is_kernel_table(path):
            raise SystemExit(f"gpu_kernels: {path} is not a table of `attn-cost kernels`")
        tables.append(read_table(path, shipped_gpus()))
    points, left = score(tables)
    skipped = Counter()
    for table in tables:
        skipped.update(table.skipped)
    lines = groups(points) + crossover_lines(points)
    lines.append("- Left out: " + "; ".join(f"{why} ({n})" for why, n in (left + skipped).most_common()) + ".")
    return "\n".join(lines) + "\n"


def crossover_lines(points: list[tuple[Point, float]]) -> list[str]:
    """The published crossovers against the model's, each within 20 % or not, and how many are."""
    found = crossings(points)
    both = [(t, name, pub, mod) for t, name, pub, mod in found if pub is not None and mod is not None]
    ok = sum(abs(np.log(mod / pub)) <= np.log(1 + CROSSING_TARGET) for _, _, pub, mod in both)
    agree = sum(pub is None and mod is None for _, _, pub, mod in found)
    out = [
        f"- Crossovers (a chunk kernel against a fused one, first N where it is no slower, interpolated in log N "
        f"at the table's lengths): {ok} of {len(both)} that the table and the model both show within "
        f"{CROSSING_TARGET:.0%}; {agree} series neither shows; {len(found) - len(both) - agree} one shows alone."
    ]
    for table, name, pub, mod in found:

        def n(x: float | None) -> str:
            return "none" if x is None else f"{x:,.0f}"

        out.append(f"  - {table}, {name}: published {n(pub)}, model {n(mod)}")
    return out


def intervals(points: list[tuple[Point, float]]) -> list[str]:
    """How often a held-out point falls inside its 95 % interval, leave one table out: per kernel family (a time),
    per pair of families (a ratio of two times measured beside each other, what a crossover's interval rests on),
    with the median width of each; and the fit's one σ for comparison."""
    _, sigma, _ = fitted()
    shipped = 1.96 * sigma
    inside = sum(abs(e) <= shipped for _, e in points)
    out = [f"- The fit's one interval, ×/÷ {np.exp(shipped):.2f}: {inside} of {len(points)} held-out times inside "
           f"({inside / len(points):.0%})."]  # fmt: skip
    rows = [(p.table, family(p.kernel), e) for p, e in points]
    for what, errs in (("times, per kernel family", rows), ("ratios, per pair of families", pair_errors(points))):
        held, widths = 0, []
        for table, key, e in errs:
            others = [abs(x) for t, k, x in errs if k == key and t != table]
            if len(others) < MIN_POINTS:
                continue
            q95 = float(np.quantile(others, 0.95))
            held += abs(e) <= q95
            widths.append(q95)
        if widths:
            out.append(f"- Leave one table out, {what}: {held} of {len(widths)} inside ({held / len(widths):.0%}), "
                       f"median width ×/÷ {np.exp(statistics.median(widths)):.2f} (target 90 %, ×/÷ 1.5).")  # fmt: skip
    shipped_q = ", ".join(f"{k} ×/÷ {np.exp(v):.2f}" for k, v in spreads().items())
    out.append(f"- Shipped (`gpumodel_intervals.json`, from every held-out point): {shipped_q or 'none'}.")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--into", type=Path, action="append", default=[], help="write the record into this file")
    parser.add_argument("--intervals", action="store_true", help=f"write {INTERVALS_FILE.name}")
    parser.add_argument("--measured", type=Path, action="append", default=[],
                        help="judge the model on this table of `attn-cost kernels` instead (repeatable)")  # fmt: skip
    args = parser.parse_args()
    if args.measured:
        print(measured_record(args.measured))
        return
    check(args.into, BEGIN, END)
    if args.intervals:
        data = {
            "kind": INTERVALS_KIND,
            "q95": q95s(scored()[0]),
            "source": "benchmarks/gpu_kernels.py --intervals: every long-format published table, none a fit "
            "source; |log(predicted / published)| per kernel family and per pair measured beside each other",
        }
        write_output(INTERVALS_FILE, json.dumps(data, indent=2) + "\n", is_json_of(INTERVALS_KIND),
                     "the datasheet model's intervals")  # fmt: skip
        spreads.cache_clear()
        scored.cache_clear()
    text = record()
    print(text)
    fill(dict.fromkeys(args.into, text), BEGIN, END)


if __name__ == "__main__":
    sys.exit(main())
