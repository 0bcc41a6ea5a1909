"""Wall-clock cost of a whole profile of one pair, measuring every length (--fresh), as a user runs it.

    python benchmarks/bench_profile.py                 # TaylorShift pair, d = 16, CPU
    python benchmarks/bench_profile.py --pair softmax:linear --d 32

Prints the seconds the process took, the lengths it timed and traced, and the transition points.
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
    parser.add_argument("--pair", default="taylorshift-direct:taylorshift-efficient")
    parser.add_argument("--d", default="16")
    parser.add_argument("--device", default="--cpu")
    opts = parser.parse_args()
    script = Path(sys.executable).with_name("attn-cost")
    with tempfile.TemporaryDirectory() as home:
        cmd = [str(script), "profile", "--pair", opts.pair, "--d", opts.d, opts.device, "--fresh", "--json"]
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env={**os.environ, "ATTN_COST_HOME": home}, check=True
        )
        seconds = time.perf_counter() - t0
    (row,) = json.loads(proc.stdout)["results"]
    keys = (
        "analytic_n0",
        "measured_n0",
        "n0_uncertainty",
        "analytic_n1",
        "measured_n1",
        "n1_uncertainty",
        "lengths_timed",
        "lengths_traced",
    )
    print(
        json.dumps(
            {
                "command": " ".join(["attn-cost", *cmd[1:]]),
                "process_seconds": round(seconds, 1),
                **{k: row[k] for k in keys},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
