"""The datasheet model with the kernel each published table ran (`--kernel`), against the long-format published
tables (profilers/data/published/, `datasheet.published`): median |time error| per (table, GPU, kernel, direction).

    python benchmarks/gpu_kernels.py                         # the record, printed
    python benchmarks/gpu_kernels.py --into docs/gpumodel.md # and written into its marked block

None of these tables is among the fit's sources (`datasheet.fit.FIT_SOURCES`: FlashAttention's A100 tables and the
H200's own run): every figure here is out of sample. Each point is priced on its GPU's datasheet row with the shipped
efficiencies and the kernel its table names (`KERNELS`), forward as inference, forward + backward as a training step,
backward as their difference, the device time alone (no host: the tables time back-to-back calls of one kernel).
Points of kernels attn-cost does not price (xformers, Triton tutorials, Lightning Attention-2, FlashQLA, ...) and of
variants not in the catalogue are counted, not priced.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docblock.py, beside this script

from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import BY_NAME, DEFAULTS, FOLLOW_D
from attn_cost.costmodel.variants import REGISTRY, all_variants
from attn_cost.profilers.devicemodel.datasheet.data import get_datasheet
from attn_cost.profilers.devicemodel.datasheet.kernels import CHOICES, FUSED
from attn_cost.profilers.devicemodel.datasheet.model import DEVICE_ONLY, GpuModel, fitted
from attn_cost.profilers.devicemodel.datasheet.published import Point, read_all
from attn_cost.profilers.devicemodel.device import row_dims
from docblock import check, fill

BEGIN, END = "<!-- gpu_kernels.py begin -->", "<!-- gpu_kernels.py end -->"
KERNELS = {**{name: name for name in CHOICES}, "cudnn": "sdpa-cudnn", "flash-attn-1": "fa1"}
"""A published table's kernel as the model prices it (`--kernel`; FlashAttention (1) by the published checks' own)."""
SOFTMAX_TARGET, CHUNK_TARGET = 0.15, 0.20


def model_for(point: Point) -> GpuModel:
    """The datasheet model of the point's GPU pricing with the kernel its table ran, the device time alone."""
    eff, sigma, _ = fitted()
    kernel = KERNELS[point.kernel]
    fused = kernel == "fa1" or CHOICES[kernel].family == FUSED
    family = {"attention_kernel": kernel} if fused else {"chunk_kernel": kernel}
    return GpuModel(get_datasheet(point.gpu), eff, sigma, host=DEVICE_ONLY, **family)


def predicted(point: Point) -> float:
    """Seconds the model gives the point (backward: a training step less its forward)."""
    values = {name: v for name, v in point.sizes.items() if name != "n_kv"}
    dims = row_dims(values)
    for symbol, v in DEFAULTS.items():
        dims.setdefault(symbol, v)
    for symbol in FOLLOW_D:
        dims.setdefault(symbol, dims[BY_NAME["d"]])
    model, ns = model_for(point), np.array([float(point.n)])

    def at(mode: str) -> float:
        return float(model.time(point.variant, dims, ns, "core", point.dtype, mode)[0])

    if point.direction == "fwd":
        return at("inference")
    if point.direction == "fwdbwd":
        return at("training")
    return at("training") - at("inference")


def judged() -> tuple[dict[tuple, list[float]], Counter]:
    """Each priced point's signed log error, grouped per (table, GPU, kernel, direction); what was left out, why."""
    all_variants()
    groups: dict[tuple, list[float]] = defaultdict(list)
    left: Counter = Counter()
    for table in read_all():
        for point in table.points:
            if point.kernel not in KERNELS:
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
                key = (table.name, point.gpu, point.kernel, point.direction)
                groups[key].append(float(np.log(guess / point.seconds)))
    return groups, left


def record() -> str:
    """The record: one line a (table, GPU, kernel, direction), its points, median |error| and median error."""
    groups, left = judged()
    lines = [
        "| table | GPU | kernel | direction | points | median \\|error\\| | median error |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts: dict[str, list[bool]] = defaultdict(list)
    for (table, gpu, kernel, direction), errs in sorted(groups.items()):
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
    lines += intervals(groups)
    lines.append("- Left out: " + "; ".join(f"{why} ({n})" for why, n in left.most_common()) + ".")
    return "\n".join(lines) + "\n"


def intervals(groups: dict[tuple, list[float]]) -> list[str]:
    """How often a held-out point falls inside its 95 % interval: the shipped one (one ×/÷ e^(1.96σ) for every
    prediction), and one per kernel family (softmax, chunk) from the other tables' errors (leave one table out:
    the 95th percentile of their |log error|), with the median width of each."""
    _, sigma, _ = fitted()
    shipped = 1.96 * sigma
    errs = [(table, "chunk" if kernel.startswith("fla-") else "softmax", e)
            for (table, _, kernel, _), es in groups.items() for e in es]  # fmt: skip
    inside = sum(abs(e) <= shipped for *_, e in errs)
    out = [f"- The shipped interval, ×/÷ {np.exp(shipped):.2f} on every prediction: {inside} of {len(errs)} held-out "
           f"points inside ({inside / len(errs):.0%})."]  # fmt: skip
    held, widths = 0, []
    for table, family, e in errs:
        others = [abs(x) for t, f, x in errs if f == family and t != table]
        q95 = float(np.quantile(others, 0.95))
        held += abs(e) <= q95
        widths.append(q95)
    out.append(f"- Per kernel family, leave one table out: {held} of {len(errs)} inside ({held / len(errs):.0%}), "
               f"median width ×/÷ {np.exp(statistics.median(widths)):.2f} (target: 90 % inside, ×/÷ 1.5).")  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--into", type=Path, action="append", default=[], help="write the record into this file")
    args = parser.parse_args()
    check(args.into, BEGIN, END)
    text = record()
    print(text)
    fill(dict.fromkeys(args.into, text), BEGIN, END)


if __name__ == "__main__":
    sys.exit(main())
