"""Wall-clock time of whole `attn-cost` processes (start-up included), as a user experiences it.

    python benchmarks/bench_cli.py                       # the issue's command, 15 runs
    python benchmarks/bench_cli.py --repeat 9 -- crossover --d 64 --pair softmax:linear

Prints the median, min and max in seconds, and whether torch or plotly were imported.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT = ["crossover", "--d", "8", "--d", "16", "--d", "32", "--d", "64", "--d", "128"]


def script() -> list[str]:
    beside = Path(sys.executable).with_name("attn-cost")
    return [str(beside)] if beside.exists() else [shutil.which("attn-cost") or "attn-cost"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("args", nargs="*", help="attn-cost arguments (after --)")
    opts = parser.parse_args()
    args = opts.args or DEFAULT
    cmd = [*script(), *args]
    subprocess.run(cmd, capture_output=True, check=True)  # warm the file cache once, not timed
    times = []
    for _ in range(opts.repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    probe = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"from attn_cost.cli.main import main; main({args!r})"],
        capture_output=True,
        text=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in probe.stderr.splitlines() if "|" in line}
    print(
        json.dumps(
            {
                "command": "attn-cost " + " ".join(args),
                "runs": opts.repeat,
                "median_s": round(statistics.median(times), 3),
                "min_s": round(min(times), 3),
                "max_s": round(max(times), 3),
                "imports_torch": "torch" in imported,
                "imports_plotly": "plotly" in imported,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
