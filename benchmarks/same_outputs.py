"""Outputs of the device-facing commands, saved before a restructuring and compared after: a move that changes
a byte of them changed behaviour.

    python benchmarks/same_outputs.py --save /tmp/before     # on the commit before the move
    python benchmarks/same_outputs.py --compare /tmp/before  # after it: lists every command whose output differs

Each command runs as a user runs it (`attn-cost ...`, a new process) with ATTN_COST_HOME an empty folder, so only
the shipped devices answer; what is compared is its exit code, stdout and stderr. The commands cover crossover,
predict, report, io, devices and formula, with --device of every kind that ships (a datasheet GPU, a measured
device with a profile and an op calibration, a GPU profile, a calibrated device without a profile).
`--only WORD` runs the commands whose line holds WORD.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HTML = "{tmp}/r.html"
COMMANDS: list[list[str]] = [
    ["crossover", "--d", "64"],
    ["crossover", "--d", "32", "--d", "64", "--json"],
    ["crossover", "--device", "h100-sxm5-80gb"],
    ["crossover", "--device", "a100-sxm4-80gb", "--dtype", "bf16", "--mode", "training", "--json"],
    ["crossover", "--device", "cpu-amd-epyc-5155e7", "--pair", "softmax:linear", "--d", "16"],
    ["crossover", "--device", "cpu-amd-epyc-5155e7", "--pair", "softmax:linear", "--d", "16", "--json"],
    ["crossover", "--device", "cpu-amd-epyc-234b2f", "--pair", "softmax:linear", "--d", "16"],
    ["crossover", "--device", "cuda-nvidia-h200-12fde9-bf16", "--dtype", "bf16", "--pair",
     "softmax-fused-causal:linear-chunked", "--d", "64", "--h", "8", "--b", "16", "--json"],
    ["predict", "--device", "h100-sxm5-80gb", "--variant", "softmax", "--variant", "linear", "--n", "1024",
     "--n", "65536"],
    ["predict", "--device", "l4", "--variant", "softmax-fused", "--n", "4096", "--mode", "training", "--json"],
    ["report", "--device", "h100-sxm5-80gb", "--html", HTML, "--d", "64", "--json"],
    ["report", "--device", "cpu-amd-epyc-5155e7", "--html", HTML, "--d", "16", "--pair", "softmax:linear", "--json"],
    ["io", "--d", "64"],
    ["io", "--d", "128", "--json"],
    ["devices"],
    ["devices", "--json"],
    ["formula", "taylorshift-efficient"],
    ["cheapest", "--d", "64"],
    ["heads", "--d-embed", "256"],
    ["decode", "--n", "4096"],
]  # fmt: skip


def script() -> list[str]:
    beside = Path(sys.executable).with_name("attn-cost")
    return [str(beside)] if beside.exists() else [shutil.which("attn-cost") or "attn-cost"]


def run_all(only: str | None) -> dict[str, dict]:
    """Every command's exit code, stdout and stderr, by its command line."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "ATTN_COST_HOME": str(Path(tmp) / "home"), "COLUMNS": "80", "NO_COLOR": "1"}
        for args in COMMANDS:
            key = " ".join(args)
            if only and only not in key:
                continue
            args = [a.format(tmp=tmp) for a in args]
            r = subprocess.run([*script(), *args], capture_output=True, text=True, env=env, timeout=1800)
            out[key] = {
                "code": r.returncode,
                "stdout": r.stdout.replace(tmp, "TMP"),
                "stderr": r.stderr.replace(tmp, "TMP"),
            }
            print(f"{r.returncode}  attn-cost {key}", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, help="a folder to write the outputs to")
    group.add_argument("--compare", type=Path, help="a folder --save wrote")
    parser.add_argument("--only", help="run only the commands whose line holds this")
    opts = parser.parse_args()
    outputs = run_all(opts.only)
    if opts.save:
        opts.save.mkdir(parents=True, exist_ok=True)
        (opts.save / "outputs.json").write_text(json.dumps(outputs, indent=1, ensure_ascii=False) + "\n")
        print(f"saved {len(outputs)} outputs in {opts.save}")
        return
    before = json.loads((opts.compare / "outputs.json").read_text())
    differ = [key for key, now in outputs.items() if before.get(key) != now]
    for key in differ:
        parts = [p for p in ("code", "stdout", "stderr") if before.get(key, {}).get(p) != outputs[key][p]]
        print(f"differs ({', '.join(parts)}): attn-cost {key}")
    print(f"{len(outputs) - len(differ)} of {len(outputs)} outputs identical")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
