"""Rehearse the default GPU campaign on the simulated H100 (tests/fakecuda.py) and say how long each part takes.

    python benchmarks/gpu_rehearsal.py [--minutes 8.3] [--json out.json]

The campaign runs as `attn-cost campaign --gpu` would, with the real timer settings (20 ms per timed run), on a
simulated H100 whose kernels take modelled times. Its clock is the simulated device's time plus the wall time
this machine spends in attn-cost's own Python (searches, fits, the store), so the budget cuts where a real call
would, give or take the host's speed. Each unit's time is printed as device + host seconds; the calibration does
not run on the simulation and is estimated from its shape count (3 timed runs of 20 ms each, plus warm-up).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import types
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docblock.py, beside this script

import pytest  # MonkeyPatch: the simulation is installed the way the tests install it
from docblock import check_output, fail, write_output
from fakecuda import SimGPU, install


def rehearse(minutes: float) -> dict:
    from attn_cost.profilers.campaign import run as campaign
    from attn_cost.profilers.campaign.run import Plan, run_campaign

    patch = pytest.MonkeyPatch()
    sim = SimGPU()
    install(patch, sim)
    wall0 = time.monotonic()
    both = types.SimpleNamespace(monotonic=lambda: sim.host + (time.monotonic() - wall0))
    patch.setattr(campaign, "time", both)  # the budget counts the device's time and the host's own work
    marks: list[tuple[str, float, float]] = []

    def sink(line: str) -> None:
        marks.append((line.split("] ", 1)[1], sim.host, time.monotonic() - wall0))
        print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        plan = Plan(out=f"{tmp}/out", device="cuda", store=f"{tmp}/store", minutes=minutes, calibrate=False)
        summary = run_campaign(plan, sink)
    patch.undo()
    starts = [i for i, (what, _, _) in enumerate(marks) if what.startswith(("profile ", "validate ", "skipped: the"))]
    parts = []
    for i, j in pairwise(starts):
        (what, dev0, host0), (_, dev1, host1) = marks[i], marks[j]
        parts.append({"part": what, "device_s": round(dev1 - dev0, 1), "host_s": round(host1 - host0, 1)})
    return {"plan": summary["plan"], "parts": parts, "skipped": summary["skipped"], "usable": summary["usable"],
            "calibration": calibration_estimate()}  # fmt: skip


def calibration_estimate() -> dict:
    """Shapes the default calibration times on an H100-sized device, and the least time that takes."""
    from attn_cost.profilers.devicemodel.calibrate import grid, held_out_grid
    from attn_cost.profilers.devicemodel.tunables import DEFAULT
    from attn_cost.profilers.measure import gpu_timing

    caches = {"L2": 50 << 20}
    shapes = len(grid(caches, "bf16", DEFAULT)) + len(held_out_grid(caches, "bf16", DEFAULT))
    runs = 3
    return {"grid_and_held_out_shapes": shapes, "at_least_s": round(shapes * runs * gpu_timing.REP_MS / 1e3)}


def _is_figures(path: Path) -> bool:
    """Whether a file holds the figures this script writes with --json."""
    from attn_cost.profilers.store.files import json_data

    data = json_data(path)
    return isinstance(data, dict) and {"parts", "skipped", "usable", "calibration"} <= data.keys()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=8.3, help="the campaign's budget (default: the GPU run's)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not 0 < args.minutes < 60 * 24 * 30:  # nan and inf fail both
        fail(f"--minutes must be a positive number of minutes (at most 30 days), got {args.minutes}")
    check_output(args.json, _is_figures, "a rehearsal's figures")
    result = rehearse(args.minutes)
    total_dev = sum(p["device_s"] for p in result["parts"])
    total_host = sum(p["host_s"] for p in result["parts"])
    print(f"{'part':60} {'device s':>9} {'host s':>7}")
    for p in result["parts"]:
        print(f"{p['part'][:60]:60} {p['device_s']:9.1f} {p['host_s']:7.1f}")
    print(f"{'total':60} {total_dev:9.1f} {total_host:7.1f}")
    skipped = result["skipped"]
    print(f"skipped: {len(skipped)}: " + "; ".join(skipped[:3]) + (" ..." if skipped else ""))
    print(f"usable: {result['usable']}")
    cal = result["calibration"]
    print(f"calibration: {cal['grid_and_held_out_shapes']} shapes, at least {cal['at_least_s']} s (3 runs of 20 ms)")
    if args.json:
        write_output(args.json, json.dumps(result, indent=1) + "\n", _is_figures, "a rehearsal's figures")


if __name__ == "__main__":
    main()
