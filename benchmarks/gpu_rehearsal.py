"""Rehearse the GPU run (`benchmarks/gpu_run.py`) on the simulated H100 (tests/fakecuda.py): each part's time.

    python benchmarks/gpu_rehearsal.py [--minutes 9] [--cut-at 0.5] [--json out.json]

The campaign runs as `gpu_run.py` runs it (`attn-cost campaign --gpu`, after the device check), with the real
timer settings (runs of 20 ms of device time by graph replay and 10 ms of eager time), on a simulated H100 whose
kernels take modelled times; flash-linear-attention's chunk kernel is taken to be installed (its pair is planned
as on a GPU with fla-core). Its clock is the simulated device's time plus the wall time this machine spends in
attn-cost's own Python (planning, searches, the store), so the budget cuts where a real call would, give or take
the host's speed. The op calibration cannot run on the simulation (its shapes are real tensors): it is charged
its estimated time (`calibration_estimate`: its shapes × 2 runs of 20 + 10 ms and a fixed cost each), cut where
its share of the budget ends. The device check is charged DOCTOR_S before the campaign starts.

`--cut-at F` also rehearses a cut-off run: the first call is stopped at F of its budget, and a second call with
the same folder continues it; the figures say what the second call measured anew and what it looked up.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import types
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docblock.py, beside this script

import pytest  # MonkeyPatch: the simulation is installed the way the tests install it
from docblock import check_output, fail, write_output
from fakecuda import SimGPU, install

DOCTOR_S = 20.0
"""The device check's time on a GPU machine (torch's import and CUDA's start-up; its mini profile is skipped)."""
CALIBRATION_SHAPE_S = 0.02
"""A calibration shape's cost beside its timed runs: warm-up, graph capture, counting its kernels."""
PARTS = ("profile ", "op check", "calibrate ", "validation", "skipped: the rest", "done in")


def calibration_estimate(plan) -> dict:
    """Shapes the GPU campaign's calibration times at the plan's sizes, and the time that takes."""
    from attn_cost.profilers.campaign.steps import calibration_runs
    from attn_cost.profilers.devicemodel.calibrated.fit import grid, held_out_grid, line_grid
    from attn_cost.profilers.devicemodel.tunables import GPU_CAMPAIGN
    from attn_cost.profilers.measure import gpu_timing

    caches = {"L2": 50 << 20}
    dtype = plan.dtypes[0]
    variants = sorted({v for pair in plan.pairs for v in pair})
    sizes = [{"d": d, "h": plan.heads, "b": plan.batch} for d in plan.ds]
    shapes = len(line_grid(variants, sizes, caches, dtype, GPU_CAMPAIGN)) + len(grid(caches, dtype, GPU_CAMPAIGN))
    shapes += len(held_out_grid(caches, dtype, GPU_CAMPAIGN))
    runs = calibration_runs(plan, "cuda")
    per_shape = runs * gpu_timing.REP_MS * (1 + gpu_timing.EAGER_SHARE) / 1e3 + CALIBRATION_SHAPE_S
    return {"shapes": shapes, "seconds": round(shapes * per_shape, 1)}


def rehearse(minutes: float, cut_at: float | None = None) -> dict:
    from attn_cost.profilers.campaign import run as campaign
    from attn_cost.profilers.campaign import state
    from attn_cost.profilers.campaign.plan import CALIBRATE_SHARE
    from attn_cost.profilers.campaign.run import Plan, run_campaign

    patch = pytest.MonkeyPatch()
    sim = SimGPU()
    install(patch, sim)
    patch.setattr(campaign, "stand_in", lambda variant, sizes, device, scope="core": variant)  # fla-core "installed"
    wall0 = time.monotonic()
    both = types.SimpleNamespace(monotonic=lambda: sim.host + (time.monotonic() - wall0))
    patch.setattr(state, "time", both)  # the budget counts the device's time and the host's own work
    estimate: dict = {}

    def calibrate_op_model(camp, dtype: str) -> None:  # charged its estimated time less what an earlier call timed
        estimate.update(calibration_estimate(camp.plan))
        window = max(0.0, CALIBRATE_SHARE * 60 * camp.plan.minutes - camp.log.elapsed)
        spent = min(estimate["seconds"] - estimate.get("timed_s", 0.0), window)
        estimate["timed_s"] = estimate.get("timed_s", 0.0) + spent
        camp.log(f"calibrate the op model (simulated: {estimate['shapes']} shapes, {estimate['seconds']:.0f} s)")
        sim.spend_host(spent)
        sim.synchronize()
        left = estimate["seconds"] - estimate["timed_s"]
        camp.steps["calibrate"] = f"{spent:.0f} s timed in this call, " + (f"{left:.0f} s left" if left > 0 else "done")

    simulated = [replace(s, run=calibrate_op_model) if s.name == "calibrate" else s for s in campaign.STEPS]
    patch.setattr(campaign, "STEPS", tuple(simulated))  # the calibration charged, not timed
    calls = []
    with tempfile.TemporaryDirectory() as tmp:
        for call, budget in enumerate([minutes * cut_at, minutes] if cut_at else [minutes]):
            marks: list[tuple[str, float, float]] = []

            def sink(line: str, marks: list = marks) -> None:
                marks.append((line.split("] ", 1)[1], sim.host, time.monotonic() - wall0))
                print(line, file=sys.stderr, flush=True)

            sim.spend_host(DOCTOR_S)
            plan = Plan(out=f"{tmp}/out", device="cuda", store=f"{tmp}/store-{call}", minutes=budget,
                        spent_s=DOCTOR_S)  # fmt: skip
            summary = run_campaign(plan, sink)
            calls.append({"budget_min": round(budget, 2), "parts": _parts(marks), "summary": _brief(summary)})
    patch.undo()
    return {"calls": calls, "calibration": estimate}


def _parts(marks: list[tuple[str, float, float]]) -> list[dict]:
    starts = [i for i, (what, _, _) in enumerate(marks) if what.startswith(PARTS)]
    out = []
    for i, j in pairwise(starts):
        (what, dev0, host0), (_, dev1, host1) = marks[i], marks[j]
        out.append({"part": what, "device_s": round(dev1 - dev0, 1), "host_s": round(host1 - host0, 1)})
    return out


def _brief(summary: dict) -> dict:
    units = summary["transitions"]
    return {"plan": {k: summary["plan"][k] for k in ("heads", "batch", "repeats", "minutes")},
            "units": len(units), "n0_found": sum(u["n0_verdict"] == "found" for u in units),
            "skipped": summary["skipped"], "steps": summary["steps"], "elapsed_s": summary["elapsed_s"],
            "new_records": summary["new_records"]}  # fmt: skip


def _is_figures(path: Path) -> bool:
    """Whether a file holds the figures this script writes with --json."""
    from attn_cost.profilers.store.files import json_data

    data = json_data(path)
    return isinstance(data, dict) and {"calls", "calibration"} <= data.keys()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=9.0, help="the run's budget (default: gpu_run.py's)")
    parser.add_argument("--cut-at", type=float, help="also cut the first call at this share of its budget")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not 0 < args.minutes < 60 * 24 * 30:  # nan and inf fail both
        fail(f"--minutes must be a positive number of minutes (at most 30 days), got {args.minutes}")
    if args.cut_at is not None and not 0 < args.cut_at < 1:
        fail(f"--cut-at must be a share of the budget between 0 and 1, got {args.cut_at}")
    check_output(args.json, _is_figures, "a rehearsal's figures")
    result = rehearse(args.minutes, args.cut_at)
    for n, call in enumerate(result["calls"], 1):
        s = call["summary"]
        print(f"call {n}: budget {call['budget_min']} min, b = {s['plan']['batch']}, h = {s['plan']['heads']}; "
              f"{s['units']} units ({s['n0_found']} N0 found), {s['new_records']} new records, "
              f"{s['elapsed_s']} s")  # fmt: skip
        print(f"  {'part':62} {'device s':>9} {'host s':>7}")
        for p in call["parts"]:
            print(f"  {p['part'][:62]:62} {p['device_s']:9.1f} {p['host_s']:7.1f}")
        print(f"  doctor (charged before the campaign): {DOCTOR_S:.0f} s; calibration: {s['steps'].get('calibrate')}")
        print(f"  skipped: {len(s['skipped'])}" + "".join(f"\n    {x}" for x in s["skipped"][:12]))
    print(f"calibration: {result['calibration']}")
    if args.json:
        write_output(args.json, json.dumps(result, indent=1) + "\n", _is_figures, "a rehearsal's figures")


if __name__ == "__main__":
    main()
