"""Measured TaylorShift N0 on a quiet machine and beside two busy CPU processes: do the intervals agree?

    python benchmarks/bench_loaded.py                 # 3 quiet runs, then 3 beside two busy processes, d = 32
    python benchmarks/bench_loaded.py --runs 1 --d 8  # a smoke run

Each run is a whole `attn-cost profile --cpu --d D --fresh --cost time --json` process with its own
empty store. Prints one line per run: measured N0 ± its interval (or the verdict and the one line
that says why no crossover is reported), the timed runs the detector threw away, and the seconds;
then, for every reported interval, whether it covers the median of the quiet runs. Run it on an
otherwise idle machine: the "quiet" runs are only quiet if nothing else is running.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOG = "while True:\n    pass\n"


def profile(d: int, home: Path) -> dict:
    script = Path(sys.executable).with_name("attn-cost")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "attn_cost"]
    cmd += ["profile", "--cpu", "--d", str(d), "--fresh", "--cost", "time", "--json"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "ATTN_COST_HOME": str(home)})
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:], "seconds": seconds}
    data = json.loads(proc.stdout)
    (row,) = data["results"]
    return {
        "n0": row["measured_n0"],
        "pm": row["n0_uncertainty"],
        "verdict": row["n0_verdict"],
        "note": row.get("n0_note"),
        "replicates": row.get("n0_replicates"),
        "thrown": f"{data['disturbance']['disturbed']}/{data['disturbance']['calls']}",
        "seconds": round(seconds, 1),
    }


def runs(label: str, count: int, d: int, tmp: Path) -> list[dict]:
    out = []
    for k in range(count):
        r = profile(d, tmp / f"{label}{k}")
        shown = f"{r['n0']:,.0f} ± {r['pm']:,.0f}" if r.get("n0") is not None else r.get("verdict") or r.get("error")
        print(f"{label:6} run {k + 1}: N0 = {shown}  (thrown away {r.get('thrown')}, {r['seconds']} s)", flush=True)
        if r.get("note"):
            print(f"         {r['note']}")
        out.append(r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--hogs", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        quiet = runs("quiet", args.runs, args.d, Path(tmp))
        hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
        try:
            loaded = runs("loaded", args.runs, args.d, Path(tmp))
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    centre = [r["n0"] for r in quiet if r.get("n0") is not None]
    if not centre:
        print("no quiet run reported a crossover: nothing to compare with")
        return
    ref = statistics.median(centre)
    print(f"median of the quiet runs: {ref:,.0f}")
    for label, rs in (("quiet", quiet), ("loaded", loaded)):
        for k, r in enumerate(rs, 1):
            if r.get("n0") is None:
                print(f"{label:6} run {k}: no crossover reported ({r.get('verdict') or r.get('error')})")
            else:
                covers = abs(r["n0"] - ref) <= r["pm"]
                print(
                    f"{label:6} run {k}: {r['n0']:,.0f} ± {r['pm']:,.0f} {'covers' if covers else 'MISSES'} {ref:,.0f}"
                )


if __name__ == "__main__":
    main()
