"""The measured GPU's transition points beside every prediction attn-cost makes of them, as markdown.

    python benchmarks/gpu_table.py                       # print the tables
    python benchmarks/gpu_table.py --into README.md --into docs/gpu.md

Measured N0 and N1 come from the kept campaign summaries (benchmarks/data/gpu-*/run*/summary.json, the latest
run's value where a unit was measured twice); analytic from the engine (FLOPs, peak memory); corrected from the
shipped device profile fitted on that campaign (profilers/data/devices/cuda-*.json, where the unit was fitted or
checked); datasheet from the datasheet model of that GPU (profilers/devicemodel/gpumodel.py, never fitted on
it); op model where the device has an op calibration (the first GPU run had no time left for one). The
TaylorShift table sets the measured N̂0 − N0 beside the paper's ≈ 18·d (A100, single head, fp32).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docblock.py, beside this script

from docblock import fill

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(ROOT.glob("benchmarks/data/gpu-*/run*/summary.json"))
BEGIN, END = "<!-- gpu-table: begin -->", "<!-- gpu-table: end -->"
README_PAIRS = (
    ("softmax-fused-causal", "linear-chunked"),
    ("softmax-fused", "linear"),
    ("softmax-fused", "latte"),
    ("softmax", "linear"),
)
"""The pairs the README shows (bf16, d = 64 and 128); docs/gpu.md shows every measured unit."""


def measured_units() -> dict[tuple, dict]:
    """(device name, dtype, a, b, d) -> the latest measured unit, with the campaign's batch and heads."""
    out: dict[tuple, dict] = {}
    for path in RUNS:
        summary = json.loads(path.read_text(encoding="utf-8"))
        device = summary["device"]
        for u in summary["transitions"]:
            out[(device["name"], u["dtype"], u["a"], u["b"], u["d"])] = {**u, "device": device}
    return out


def _profiles() -> dict[tuple[str, str], object]:
    from attn_cost.profilers.devicemodel.corrections import SHIPPED, load_profile

    out = {}
    for path in sorted(SHIPPED.glob("cuda-*.json")):
        p = load_profile(str(path))
        out[(p.device.get("name", ""), p.dtype)] = p
    return out


def rows() -> list[dict]:
    from attn_cost.profilers.devicemodel.datasheet import for_device
    from attn_cost.profilers.devicemodel.gpumodel import GpuModel, fitted, predict_n0
    from attn_cost.profilers.devicemodel.oppredict import row_dims

    eff, sigma, _ = fitted()
    profiles = _profiles()
    out = []
    for (name, dtype, a, b, d), u in sorted(measured_units().items(), key=lambda kv: (kv[0][1], kv[0][4], kv[0][2:4])):
        sheet = for_device(name)
        profile = profiles.get((name, dtype))
        fit = next((r for r in (profile.validation if profile else []) if (r["a"], r["b"], r["d"]) == (a, b, d)), {})
        dims = row_dims({"d": d, "h": u["heads"], "b": u["batch"]})
        datasheet = predict_n0(GpuModel(sheet, eff, sigma), a, b, dims, "core", dtype) if sheet else None
        measured = {**u, **{k: fit[k] for k in ("measured_n0", "n0_uncertainty", "n0_verdict") if fit}}
        out.append({
            "gpu": name, "dtype": dtype, "a": a, "b": b, "d": d, "batch": u["batch"], "heads": u["heads"],
            "analytic_n0": u["analytic_n0"], "analytic_n1": u["analytic_n1"],
            "corrected_n0": fit.get("corrected_n0"), "corrected_n1": fit.get("corrected_n1"),
            "op_model_n0": fit.get("predicted_n0"),
            "datasheet_n0": datasheet.n0 if datasheet else None,
            "datasheet_low": datasheet.low if datasheet else None,
            "datasheet_high": datasheet.high if datasheet else None,
            "measured_n0": measured["measured_n0"], "n0_uncertainty": measured["n0_uncertainty"],
            "n0_verdict": measured["n0_verdict"],
            "measured_n1": u["measured_n1"], "n1_verdict": u["n1_verdict"],
        })  # fmt: skip
    return out


VERDICT = {"a-cheaper-throughout": "A cheaper throughout", "b-cheaper-throughout": "B cheaper throughout",
           "inconsistent": "unsteady", "disturbed": "unsteady", "memory-limit": "memory limit"}  # fmt: skip


def _n(x) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _measured(value, spread, verdict) -> str:
    if value is None:
        return VERDICT.get(verdict or "", verdict or "—")
    return f"{value:,.0f} ± {spread:,.0f}" if spread else _n(value)


def _datasheet(r: dict) -> str:
    if r["datasheet_n0"] is None:
        return "—"
    if r["datasheet_n0"] <= 2:  # the search's first length: B is predicted faster from the start
        return f"B faster throughout [–{_n(r['datasheet_high'])}]"
    return f"{_n(r['datasheet_n0'])} [{_n(r['datasheet_low'])}–{_n(r['datasheet_high'])}]"


def transition_table(items: list[dict]) -> list[str]:
    lines = ["| A → B | dtype | d | N0 analytic | N0 corrected | N0 op model | N0 datasheet [95 %] | N0 measured | "
             "N1 analytic | N1 measured |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in items:
        n0 = _measured(r["measured_n0"], r["n0_uncertainty"], r["n0_verdict"])
        lines.append(
            f"| {r['a']} → {r['b']} | {r['dtype']} | {r['d']} | {_n(r['analytic_n0'])} | {_n(r['corrected_n0'])} | "
            f"{_n(r['op_model_n0'])} | {_datasheet(r)} | {n0} | "
            f"{_n(r['analytic_n1'])} | {_measured(r['measured_n1'], None, r['n1_verdict'])} |"
        )
    return lines


def taylorshift_table(items: list[dict]) -> list[str]:
    lines = ["| d | dtype | N0 (FLOPs) | measured N̂0 | N̂0 − N0 | in units of d | the paper (A100) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in items:
        if (r["a"], r["b"]) != ("taylorshift-direct", "taylorshift-efficient") or r["measured_n0"] is None:
            continue
        gap = r["measured_n0"] - r["analytic_n0"]
        lines.append(f"| {r['d']} | {r['dtype']} | {_n(r['analytic_n0'])} | "
                     f"{_measured(r['measured_n0'], r['n0_uncertainty'], 'found')} | {gap:+,.0f} | "
                     f"{gap / r['d']:+.1f}·d | ≈ +18·d = {18 * r['d']:,} |")  # fmt: skip
    return lines


def markdown(items: list[dict], short: bool) -> str:
    first = items[0]
    chosen = [r for r in items if (r["a"], r["b"]) in README_PAIRS and r["dtype"] == "bf16" and r["d"] >= 64]
    chosen = chosen if short else items
    head = (f"Measured on an {first['gpu']} (b = {first['batch']}, h = {first['heads']}, core scope; "
            "`python benchmarks/gpu_table.py` makes this table from the kept campaign and the shipped "
            "profiles).")  # fmt: skip
    out = [head, "", *transition_table(chosen), "", "TaylorShift, direct → efficient:", "", *taylorshift_table(items)]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--into", type=Path, action="append", default=[], help="README.md (short) or another file")
    args = parser.parse_args()
    items = rows()
    print(markdown(items, short=False))
    fill({path: markdown(items, short=path.name == "README.md") for path in args.into}, BEGIN, END)


if __name__ == "__main__":
    main()
