"""The datasheet model against the published times of the linear-RNN chunk kernels and of FlashAttention-2 beside
them (profilers/data/published/, long-format tables: fla's README tables, helion's benchmarks, FlashQLA's): per
table the median |time error|, and per series the crossover with FlashAttention-2 the table shows against the
model's. `--fit` also scales the chunk kernels' time by one factor fitted on the FIT tables (the median ratio of
published to predicted) and judges the other tables with it: a measure of what one efficiency can do, not a change
to the shipped fit (that is `benchmarks/gpu_published.py --fit`).

    python benchmarks/linear_published.py            # the shipped model
    python benchmarks/linear_published.py --fit      # plus one scale fitted on FIT, judged on the rest
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from attn_cost.costmodel.counting import DEFAULT_COUNTING
from attn_cost.profilers.devicemodel.datasheet.data import datasheets, get_datasheet
from attn_cost.profilers.devicemodel.datasheet.fit import do_bench
from attn_cost.profilers.devicemodel.datasheet.model import GpuModel, fitted, host
from attn_cost.profilers.devicemodel.device import row_dims

FOLDER = Path(__file__).resolve().parent.parent / "profilers" / "data" / "published"
LINEAR = ("retention", "gla", "deltanet", "gated-deltanet", "mamba2", "linear-chunked-fused")
KERNELS = {"fla-chunk": "chunk", "flash-attn-2": "fa2"}
TABLES = ("fla_h100_readme2025_retention", "fla_a100_readme2024_retention", "fla_gb200_readme_ops",
          "helion_fla_h100_b200_chunk", "helion_fla_b200_linear_chunk", "flashqla_h200_gdn",
          "tileops_h200_pr534_gla", "tileops_h200_pr476_gdn_fwd")  # fmt: skip
FIT = ("fla_h100_readme2025_retention", "helion_fla_h100_b200_chunk")
"""The tables the one scale is fitted on (H100, retention and the plain chunk kernels); the others judge it."""


def _rows(table: str) -> list[dict]:
    lines = [x for x in (FOLDER / f"{table}.csv").read_text(encoding="utf-8").splitlines() if not x.startswith("#")]
    out = []
    for r in csv.DictReader(lines):
        if r["kernel"] not in KERNELS or r["quantity"] != "ms" or r["direction"] not in ("fwd", "fwdbwd"):
            continue
        if r["variant"] not in (*LINEAR, "softmax-fused-causal") or r["gpu"] not in datasheets():
            continue
        try:
            r["ms"] = float(r["value"])
        except ValueError:
            continue
        out.append(r)
    return out


def _sizes(r: dict) -> dict:
    s = {"d": int(r["d"]), "h": int(r["h"]), "b": int(r["b"])}
    if r["variant"] in LINEAR:
        s["C"] = int(r["chunk"] or 64)
        if r["d_v"] and r["variant"] != "mamba2":
            s["d_v"] = int(r["d_v"])
        if r["d_state"]:
            s["d_state"] = int(r["d_state"])
    if r["h_kv"]:
        s["h_kv"] = int(r["h_kv"])
    return s


def predict(r: dict) -> float:
    """Milliseconds the datasheet model gives a row: the variant's core op list (forward: inference; fwdbwd:
    training) on the row's GPU under fla's harness (do_bench: an L2 flush ahead of each eager call)."""
    eff, sigma, _ = fitted()
    sheet = get_datasheet(r["gpu"])
    model = GpuModel(sheet, eff, sigma, attention_kernel="fa2", host=host())
    model = GpuModel(sheet, eff, sigma, attention_kernel="fa2", host=do_bench(model, host()))
    mode = "training" if r["direction"] == "fwdbwd" else "inference"
    t = model.time(r["variant"], row_dims(_sizes(r)), np.array([float(r["n"])]), "core", r["dtype"], mode,
                   DEFAULT_COUNTING)  # fmt: skip
    return float(t[0]) * 1e3


def _crossings(rows: list[dict], scale: float) -> list[tuple[str, float | None, float | None]]:
    """Per series (GPU, variant, direction, sizes but N) with FlashAttention-2 at the same sizes: the first N where
    the chunk kernels are faster, in the table and in the model (None: never within the table's lengths)."""
    series: dict[tuple, dict[int, dict[str, tuple[float, float]]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        key = (r["gpu"], r["direction"], r["b"], r["h"], r["d"])
        pred = r["pred"] * (scale if r["kernel"] == "fla-chunk" else 1.0)
        series[key][int(r["n"])][r["variant"]] = (r["ms"], pred)
    out = []
    for key, by_n in series.items():
        for v in {v for at in by_n.values() for v in at if v != "softmax-fused-causal"}:
            ns = sorted(n for n, at in by_n.items() if v in at and "softmax-fused-causal" in at)
            if len(ns) < 2:
                continue
            first = [next((n for n in ns if by_n[n][v][i] < by_n[n]["softmax-fused-causal"][i]), None) for i in (0, 1)]
            out.append((f"{v} {'/'.join(map(str, key))}", first[0], first[1]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="also fit one scale of the chunk kernels on FIT")
    args = parser.parse_args()
    tables = {t: _rows(t) for t in TABLES}
    for rows in tables.values():
        for r in rows:
            r["pred"] = predict(r)
    scale = 1.0
    if args.fit:
        ratios = [r["ms"] / r["pred"] for t in FIT for r in tables[t] if r["kernel"] == "fla-chunk"]
        scale = float(np.median(ratios))
        print(f"one scale of the chunk kernels' time fitted on {', '.join(FIT)}: {scale:.3f}\n")
    print(f"{'table':36} {'rows':>4} {'fla |err| med':>13} {'FA2 |err| med':>13}  role")
    for t, rows in tables.items():
        err = {k: [abs(r["pred"] * (scale if k == "fla-chunk" else 1) / r["ms"] - 1) for r in rows if r["kernel"] == k]
               for k in KERNELS}  # fmt: skip
        med = {k: f"{100 * float(np.median(e)):.0f} %" if e else "—" for k, e in err.items()}
        role = "fit" if args.fit and t in FIT else "judged"
        print(f"{t:36} {len(rows):>4} {med['fla-chunk']:>13} {med['flash-attn-2']:>13}  {role}")
    print("\ncrossovers with FlashAttention-2 (first N where the chunk kernels are faster): table / model")
    for t, rows in tables.items():
        for name, pub, mod in _crossings(rows, scale):
            ok = pub is not None and mod is not None and abs(math.log(mod / pub)) <= math.log(1.2)
            agree = "within 20 %" if ok else ("both never" if pub is None and mod is None else "off")
            print(f"  {t}: {name}: {pub} / {mod}  {agree}")


if __name__ == "__main__":
    sys.exit(main())
