"""Wall-clock cost of a whole op calibration, timing every grid shape and every exact shape of the
variants' ops (--fresh store), as a user runs it.

    python benchmarks/bench_calibrate.py                  # the full grid of this CPU (target: <= 300 s)
    python benchmarks/bench_calibrate.py --quick          # the coarse grid (a smoke test)
    python benchmarks/bench_calibrate.py --threads 1
    python benchmarks/bench_calibrate.py --out profilers/data/opmodels   # also keep the op model (to ship it)
    python benchmarks/bench_calibrate.py --context        # also fit the cache context (validate both ways)
    python benchmarks/bench_calibrate.py --d 8 --d 16 --d 64   # exact shapes and glue at these head dims only

Prints the seconds the process took, the shapes it timed, and the op model's held-out error.
Run it on a quiet machine: the disturbance detector re-times (or refuses) disturbed timings.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="--cpu")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", default=None)
    parser.add_argument("--context", action="store_true", help="Pass --context to calibrate.")
    parser.add_argument("--out", default=None, help="Directory to write the op model to (default: the temp home).")
    parser.add_argument("--d", action="append", default=[], help="Head dims of the exact shapes (repeatable; "
                        "default: the tunables' line_d). Fewer head dims bound the run.")  # fmt: skip
    opts = parser.parse_args()
    script = Path(sys.executable).with_name("attn-cost")
    with tempfile.TemporaryDirectory() as home:
        cmd = [str(script), "calibrate", opts.device, "--fresh", "--json"]
        cmd += ["--quick"] if opts.quick else []
        cmd += ["--context"] if opts.context else []
        cmd += ["--threads", opts.threads] if opts.threads else []
        cmd += [arg for d in opts.d for arg in ("--d", d)]
        cmd += ["--out", str(Path(opts.out).resolve())] if opts.out else []
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env={**os.environ, "ATTN_COST_HOME": home}, check=False
        )
        seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(proc.stderr.strip())
    data = json.loads(proc.stdout)
    print(
        json.dumps(
            {
                "command": " ".join(["attn-cost", *cmd[1:]]),
                "process_seconds": round(seconds, 1),
                "device": data["slug"],
                "threads": data["device"].get("threads"),
                "grid_shapes": data["grid_shapes"],
                "exact_shapes": data["exact_shapes"],
                "held_out_shapes": data["held_out_shapes"],
                "measured": data["measured"],
                "held_out": data["held_out"],
                "suspects": data.get("suspects", []),
                "saved_to": data["saved_to"] if opts.out else None,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
