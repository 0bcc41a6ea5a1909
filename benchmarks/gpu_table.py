"""The measured GPU's transition points beside every prediction attn-cost makes of them, as markdown.

    python benchmarks/gpu_table.py                       # print the tables
    python benchmarks/gpu_table.py --into README.md --into docs/gpu.md

Every number is what a command prints: measured N0 and N1, their standing, the corrected N0 and N1 and the op
model's N0 are `attn-cost crossover --device <profile> --json` of the shipped profiles (refit from the shipped
records by benchmarks/gpu_reread.py, each measured unit judged by profilers/measure/standing.py); the analytic
points are the same command's; the datasheet N0 is `attn-cost crossover --device <datasheet row> --json` (the
datasheet model of that GPU on its default eager host; the GPU's device-bound times at d = 64 join the model's fit,
its crossovers never do). The units are the profiles' measured rows (every unit the
campaign measured to an end). The TaylorShift table sets the measured N̂0 − N0 beside the paper's ≈ 18·d (A100,
single head, fp32).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docblock.py, beside this script

from docblock import check, fill

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- gpu-table: begin -->", "<!-- gpu-table: end -->"
README_PAIRS = (
    ("softmax-fused-causal", "linear-chunked"),
    ("softmax-fused", "linear"),
    ("softmax-fused", "latte"),
    ("softmax", "linear"),
)
"""The pairs the README shows (bf16, d = 64 and 128); docs/gpu.md shows every measured unit."""
TAYLORSHIFT = ("taylorshift-direct", "taylorshift-efficient")


def attn_cost(*args: str) -> dict:
    """What `attn-cost ARGS --json` prints, parsed (a failure is the command's own message and exit code 2)."""
    done = subprocess.run(
        [sys.executable, "-c", "from attn_cost.cli.entry import run; run()", *args, "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"attn-cost {' '.join(args)}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def shipped_gpu_profiles() -> list[dict]:
    """The shipped measured-GPU profiles (name, dtype, device, measured units), from `attn-cost devices --json`."""
    from attn_cost.profilers.devicemodel.measured.data import SHIPPED, load_profile

    out = []
    for entry in attn_cost("devices"):
        path = Path(entry.get("path", ""))
        if entry["kind"] != "measured" or entry["device"].get("kind") != "cuda" or path.parent != SHIPPED:
            continue
        profile = load_profile(str(path))
        out.append({"name": entry["name"], "dtype": profile.dtype, "device": profile.device,
                    "units": profile.measured})  # fmt: skip
    return out


def rows() -> list[dict]:
    """One row per measured unit: the crossover command's points on the profile and on the GPU's datasheet."""
    from attn_cost.profilers.devicemodel.datasheet.data import for_device

    out = []
    for prof in shipped_gpu_profiles():
        units = prof["units"]
        (batch,), (heads,) = {u["batch"] for u in units}, {u["heads"] for u in units}
        pairs = list(dict.fromkeys(f"{u['a']}:{u['b']}" for u in units))
        ds = sorted({u["d"] for u in units})
        args = [arg for p in pairs for arg in ("--pair", p)] + [arg for d in ds for arg in ("--d", str(d))]
        args += ["--b", str(batch), "--h", str(heads), "--dtype", prof["dtype"]]
        measured = {
            (r["a"], r["b"], r["d"]): r for r in attn_cost("crossover", *args, "--device", prof["name"])["results"]
        }
        sheet = for_device(prof["device"].get("name", ""))
        predicted = (
            {(r["a"], r["b"], r["d"]): r for r in attn_cost("crossover", *args, "--device", sheet.name)["results"]}
            if sheet
            else {}
        )
        for u in units:
            key = (u["a"], u["b"], u["d"])
            r, p = measured[key], predicted.get(key, {})
            sheet_n0 = {"datasheet_n0": p.get("predicted_n0"), "datasheet_low": p.get("predicted_n0_low"),
                        "datasheet_high": p.get("predicted_n0_high")}  # fmt: skip
            out.append({**r, "gpu": prof["device"]["name"], **sheet_n0})
    return sorted(out, key=lambda r: (r["dtype"], r["d"], r["a"], r["b"]))


def _n(x) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _datasheet(r: dict) -> str:
    from attn_cost.profilers.measure.standing import interval

    if r["datasheet_n0"] is None:
        return "—"
    if r["datasheet_n0"] <= 2:  # the search's first length: B is predicted faster from the start
        return f"B faster throughout {interval(None, r['datasheet_high'])}"
    return f"{_n(r['datasheet_n0'])} {interval(r['datasheet_low'], r['datasheet_high'])}"


def _n1(r: dict) -> str:
    from attn_cost.profilers.measure.standing import cell

    return cell(r["measured_n1"], None, r["n1_verdict"])


def transition_table(items: list[dict]) -> list[str]:
    from attn_cost.profilers.measure.standing import cell, standing_words

    lines = ["| A → B | dtype | d | N0 analytic | N0 corrected | N0 op model | N0 datasheet [95 %] | N0 measured | "
             "stands | N1 analytic | N1 measured |", "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in items:
        n0 = cell(r["measured_n0"], r["n0_uncertainty"], r["n0_verdict"], tie=r.get("n0_tie"))
        lines.append(
            f"| {r['a']} → {r['b']} | {r['dtype']} | {r['d']} | {_n(r['n0'])} | {_n(r['corrected_n0'])} | "
            f"{_n(r['predicted_n0'])} | {_datasheet(r)} | {n0} | "
            f"{standing_words(r['n0_standing'], r['n0_launch_bound'])} | {_n(r['n1'])} | {_n1(r)} |"
        )
    return lines


def taylorshift_table(items: list[dict]) -> list[str]:
    from attn_cost.profilers.measure.standing import cell, standing_words

    lines = ["| d | dtype | N0 (FLOPs) | measured N̂0 | stands | N̂0 − N0 | in units of d | the paper (A100) |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in items:
        if (r["a"], r["b"]) != TAYLORSHIFT or r["measured_n0"] is None:
            continue
        gap = r["measured_n0"] - r["n0"]
        lines.append(f"| {r['d']} | {r['dtype']} | {_n(r['n0'])} | "
                     f"{cell(r['measured_n0'], r['n0_uncertainty'], r['n0_verdict'])} | "
                     f"{standing_words(r['n0_standing'], r['n0_launch_bound'])} | {gap:+,.0f} | "
                     f"{gap / r['d']:+.1f}·d | ≈ +18·d = {18 * r['d']:,} |")  # fmt: skip
    return lines


def counts(items: list[dict]) -> list[str]:
    """One line per dtype: how many units stand and why the others do not."""
    from attn_cost.profilers.measure.standing import tally

    return [f"- {dtype}: {tally([r for r in items if r['dtype'] == dtype])}."
            for dtype in dict.fromkeys(r["dtype"] for r in items)]  # fmt: skip


def markdown(items: list[dict], short: bool) -> str:
    first = items[0]
    chosen = [r for r in items if (r["a"], r["b"]) in README_PAIRS and r["dtype"] == "bf16" and r["d"] >= 64]
    shown = chosen if short else items
    head = (f"Measured on an {first['gpu']} (b = {first['batch']}, h = {first['heads']}, core scope). Every number "
            "is what `attn-cost crossover --device <profile> --json` prints for the shipped profiles (the datasheet "
            "column: `--device` the GPU's datasheet row); `python benchmarks/gpu_table.py` makes this block. "
            "Of the units the campaign measured to an end:")  # fmt: skip
    from attn_cost.profilers.measure.standing import open_edges_said

    table = transition_table(shown)
    opened = [said, ""] if (said := open_edges_said(table)) else []
    out = [head, "", *counts(items), "", *table, "", *opened, "TaylorShift, direct → efficient:", "",
           *taylorshift_table(items)]  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--into", type=Path, action="append", default=[], help="README.md (short) or another file")
    args = parser.parse_args()
    check(args.into, BEGIN, END)  # every target, before the 20 s of commands: a bad one costs nothing
    items = rows()
    print(markdown(items, short=False))
    fill({path: markdown(items, short=path.name == "README.md") for path in args.into}, BEGIN, END)


if __name__ == "__main__":
    main()
