"""Rehearse the default GPU campaign on the simulated H100 (tests/fakecuda.py) and say how long each part takes.

    python benchmarks/gpu_rehearsal.py [--minutes 8.3] [--json out.json]

The campaign runs as `attn-cost campaign --gpu` would, with the real timer settings (runs of 20 ms of device time
by graph replay and 10 ms of eager time), on a simulated H100 whose kernels take modelled times. Its clock is the
simulated device's time plus the wall time this machine spends in attn-cost's own Python (searches, fits, the
store), so the budget cuts where a real call would, give or take the host's speed. Each unit's time is printed
as device + host seconds; the calibration does not run on the simulation and is estimated from its shape count
(3 timed runs of 20 + 10 ms each, plus warm-up).
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

import pytest  # MonkeyPatch: the simulation is installed the way the tests install it
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
    runs = 3  # each a run of device time (graph replays) and one of eager time
    per_run_s = gpu_timing.REP_MS * (1 + gpu_timing.EAGER_SHARE) / 1e3
    return {"grid_and_held_out_shapes": shapes, "at_least_s": round(shapes * runs * per_run_s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=8.3, help="the campaign's budget (default: the GPU run's)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
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
    shapes, least = cal["grid_and_held_out_shapes"], cal["at_least_s"]
    print(f"calibration: {shapes} shapes, at least {least} s (3 runs of 20 + 10 ms)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
