"""Writes tests/data/devices/<slug>.json: the tests' own device profile, so that no test depends on the
measurements attn-cost ships for one CPU (those change whenever a device is re-measured or added).

The CPU is made up ("Test CPU"), its fitted constants are round made-up numbers, and its measured transition
points are made up too (the TaylorShift pair's N0 at d = 16 is 4321 ± 6, a number no formula gives, so a test can
tell a measured point from a computed one). Everything else in a row (analytic and corrected points, their
errors) is computed by attn-cost from those, as `attn-cost validate` computes it. Run it after a change to the
profile schema:

    python tests/data/make_device.py
"""

from __future__ import annotations

import json
from pathlib import Path

from attn_cost.costmodel.crossover import Setting, crossover
from attn_cost.costmodel.symbols import L, b, d, h
from attn_cost.profilers.devicemodel.measured.data import DeviceProfile, MemoryFit, TimeFit
from attn_cost.profilers.devicemodel.measured.model import corrected_points

HERE = Path(__file__).parent / "devices"
DEVICE = {
    "kind": "cpu",
    "torch": "2.13.0+cpu",
    "python": "3.11.7",
    "threads": 2,
    "name": "Test CPU",
    "machine": "x86_64",
    "cpus": 4,
    "family": "99",
    "model": "9",
    "stepping": "0",
    "cache": "1024 KB",
    "allocator": "glibc, mmap threshold pinned at 1 GiB, no trim",
}
FIT_D = [8, 16, 64]
TIME = {  # launch (s), s per matmul FLOP, s per byte
    "linear": (10e-6, 0.0, 1e-10),
    "softmax": (12e-6, 4e-12, 5e-11),
    "taylorshift-direct": (17e-6, 5e-12, 5e-11),
    "taylorshift-efficient": (16e-6, 5.5e-12, 6e-11),
}
MEASURED_N0 = {  # (a, b, d): measured N0 and its uncertainty; N1 is measured as the analytic one (the CPU tracer)
    ("taylorshift-direct", "taylorshift-efficient", 8): (351.5, 3.5),
    ("taylorshift-direct", "taylorshift-efficient", 16): (4321.0, 6.0),
    ("taylorshift-direct", "taylorshift-efficient", 32): (1310.5, 9.5),
    ("taylorshift-direct", "taylorshift-efficient", 64): (3676.5, 20.5),
    ("softmax", "linear", 8): (60.5, 2.5),
    ("softmax", "linear", 16): (90.5, 3.5),
    ("softmax", "linear", 32): (150.5, 5.5),
    ("softmax", "linear", 64): (300.5, 9.5),
}


def profile() -> DeviceProfile:
    p = DeviceProfile(DEVICE, "core", "fp32", created="2026-01-01T00:00:00+00:00")
    for name, (launch, per_flop, per_byte) in TIME.items():
        p.time[name] = TimeFit(launch, per_flop, per_byte, 100, FIT_D, 0.95, 0.05, 0.3)
        p.memory[name] = MemoryFit(1.0, 0.0, 0.0, 12)
    setting = Setting(scope="core", dtype="fp32")
    for (a, b_, dv), (n0, n0_err) in MEASURED_N0.items():
        dims = {d: dv, h: 1, b: 1, L: dv}
        analytic_n0 = crossover(a, b_, "flops", dims, setting, exact=False).n
        analytic_n1 = crossover(a, b_, "memory", dims, setting, exact=False).n
        row = {
            "a": a, "b": b_, "d": dv, "heads": 1, "batch": 1, "analytic_n0": analytic_n0, "analytic_n1": analytic_n1,
            "measured_n0": n0, "measured_n1": float(analytic_n1), "n0_uncertainty": n0_err, "n1_uncertainty": 0.0,
            "n0_verdict": "found", "n1_verdict": "found", "lengths_timed": 8, "lengths_traced": 2, "seconds": 0.1,
            "held_out": dv not in FIT_D, **corrected_points(p, a, b_, dims, setting),
        }  # fmt: skip
        for k in ("0", "1"):
            truth = row[f"measured_n{k}"]
            for kind in ("analytic", "corrected"):
                row[f"{kind}_n{k}_error"] = (row[f"{kind}_n{k}"] - truth) / truth
        p.validation.append(row)
        keep = ("a", "b", "d", "heads", "batch", "measured_n0", "n0_uncertainty", "measured_n1", "n1_uncertainty")
        p.measured.append({k: row[k] for k in keep})
    return p


def results() -> list[dict]:
    """Made-up time and memory records of the same CPU (softmax and linear at d = 8 and 16, three lengths each), as
    `attn-cost results export` writes them: tests/data/results.jsonl, a small file to import."""
    records = []
    for variant in ("softmax", "linear"):
        for dv in (8, 16):
            for n in (16, 32, 64):
                sizes = f"N={n},d={dv}"
                t = 1e-6 * n * dv  # made up
                stats = {"median": t, "q1": t, "q3": t, "min": t, "max": t, "runs": 5, "warmup": 2}
                peak = {"peak_bytes": 4 * n * (n + 3 * dv), "method": "tracer", "peak_op": None}  # made up
                common = {
                    "schema": 1, "variant": variant, "scope": "core", "dtype": "fp32", "status": "ok",
                    "at": "2026-01-01T00:00:00+00:00", "device": DEVICE, "sizes": {"N": n, "d": dv},
                }  # fmt: skip
                at = f"{variant}|core|fp32|{sizes}"
                records.append({**common, "key": f"time|{at}|threads=2", "kind": "time", "time": stats})
                records.append({**common, "key": f"memory|{at}", "kind": "memory", "memory": peak})
    return records


if __name__ == "__main__":
    print(profile().save(HERE))
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in results())
    (HERE.parent / "results.jsonl").write_text(lines)
    print(HERE.parent / "results.jsonl")
