"""How long the analytic path takes against a bare `import sympy`: the floor any `attn-cost` command pays.

    python benchmarks/bench_startup.py                        # crossover --d 64, 9 paired runs
    python benchmarks/bench_startup.py --runs 15 -- formula taylorshift-efficient

Each run starts a new process for the command and one for `python -c "import sympy"`, one right after the other
(paired: a machine that slows down slows both), in alternating order, with the modules' bytecode cached as an
installed attn-cost has it (PYTHONDONTWRITEBYTECODE is dropped; one untimed run first writes it). Prints both
medians, the median of the per-pair ratios (the figure to quote: issue 42 asks for at most 3×) and which of torch,
plotly and scipy the command imported. The untimed first run also fills the cache of derivations
(costmodel/memo.py), so the timed runs are warm, as every run after a setting's first is; `ATTN_COST_CACHE=` before
the command times them cold (the cache off). Timings on a machine other work shares are not evidence; run it on a quiet
one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench_cli import script

DEFAULT = ["crossover", "--d", "64"]
HEAVY = ("torch", "plotly", "scipy")


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _seconds(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True, env=ENV)
    return time.perf_counter() - t0


def imported(args: list[str]) -> list[str]:
    """Which of torch, plotly and scipy the command imports (`python -X importtime`)."""
    probe = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"from attn_cost.cli.main import main; main({args!r})"],
        capture_output=True,
        text=True,
        env=ENV,
    )
    names = {line.rsplit("|", 1)[-1].strip() for line in probe.stderr.splitlines() if "|" in line}
    return [m for m in HEAVY if m in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9, help="paired runs (at least 7)")
    parser.add_argument("args", nargs="*", help="attn-cost arguments (after --)")
    opts = parser.parse_args()
    if opts.runs < 7:
        parser.error("--runs: at least 7 paired runs")
    args = opts.args or DEFAULT
    command, sympy = [*script(), *args], [sys.executable, "-c", "import sympy"]
    _seconds(command), _seconds(sympy)  # warm the file cache and write the bytecode once, not timed
    pairs = []
    for i in range(opts.runs):
        if i % 2:
            s, c = _seconds(sympy), _seconds(command)
        else:
            c, s = _seconds(command), _seconds(sympy)
        pairs.append((c, s))
    ratios = [c / s for c, s in pairs]
    print(
        json.dumps(
            {
                "command": "attn-cost " + " ".join(args),
                "runs": opts.runs,
                "command_median_s": round(statistics.median(c for c, _ in pairs), 3),
                "import_sympy_median_s": round(statistics.median(s for _, s in pairs), 3),
                "ratio_median": round(statistics.median(ratios), 2),
                "ratio_min": round(min(ratios), 2),
                "ratio_max": round(max(ratios), 2),
                "imports": imported(args),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
