"""Run a fixed set of attn-cost commands and keep their outputs, to show that a refactoring (a move, a new layer)
changes no output: the measuring commands read a store filled once beforehand (`prime`), so that neither run
measures anything and their outputs are comparable byte for byte.

    python benchmarks/same_outputs.py prime HOME         # fill a store once (the measuring commands, twice)
    python benchmarks/same_outputs.py record OUT --home HOME   # every command on a copy of HOME; OUT/NN-name.*
    python benchmarks/same_outputs.py record OUT --home HOME --tree DIR  # the same, on another checkout (git archive)
    python benchmarks/same_outputs.py compare BEFORE AFTER     # exit 1 and name the commands whose outputs differ

Run `record` on the code before the change and again after it, with the same primed HOME. What a rerun cannot
reproduce is masked before the comparison: the paths of the temporary copies, wall-clock seconds and dates.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docblock.py, beside this script

from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.store.files import make_folder, read_input
from docblock import check_output, fail, write_output

ROOT = Path(__file__).resolve().parents[1]
H200 = "profilers/data/results/cuda-nvidia-h200-12fde9.jsonl"
RUN1 = "benchmarks/data/gpu-h200-2026-11-26/run1/summary.json"
CPU = ["--cpu", "--threads", "1"]
TINY = [*CPU, "--pair", "softmax:linear", "--repeats", "3", "--max-n", "256"]
COMMANDS: list[tuple[str, list[str]]] = [
    ("profile", ["profile", *TINY, "--d", "8", "--max-lengths", "5"]),
    ("profile-json", ["profile", *TINY, "--d", "8", "--max-lengths", "5", "--json"]),
    ("measure", ["measure", *CPU, "--variant", "softmax", "--variant", "linear", "--n", "64", "--n", "128", "--d",
                 "8", "--repeats", "3"]),
    ("validate", ["validate", *TINY, "--fit-d", "4", "--fit-d", "8", "--d", "12", "--no-save", "--no-exact"]),
    ("validate-json", ["validate", *TINY, "--fit-d", "4", "--fit-d", "8", "--d", "12", "--no-save", "--no-exact",
                       "--json"]),
    ("validate-records", ["validate", "--records", H200, "--summary", RUN1, "--dtype", "bf16", "--no-save"]),
    ("validate-records-json", ["validate", "--records", H200, "--summary", RUN1, "--dtype", "fp32", "--no-save",
                               "--json"]),
    ("calibrate", ["calibrate", *CPU, "--quick", "--d", "8", "--variant", "softmax", "--repeats", "3", "--out",
                   "{tmp}/opmodels"]),
    ("calibrate-refit", ["calibrate", "--refit", "profilers/data/opmodels/cpu-amd-epyc-5155e7.json", "--out",
                         "{tmp}/refit"]),
    ("campaign", ["campaign", *CPU, "--quick", "--minutes", "1", "--pair", "softmax:linear", "--d", "4", "--d", "8",
                  "--dtype", "fp32", "--no-calibrate", "--out", "{tmp}/campaign"]),
    ("trace", ["trace", "docs/examples/naive_taylorshift.py:efficient"]),
    ("results-ls", ["results", "ls", "--limit", "20"]),
    ("results-ls-json", ["results", "ls", "--variant", "linear", "--d", "8", "--json"]),
    ("results-export", ["results", "export", "--variant", "softmax", "--kind", "memory"]),
    ("check-flops", ["check-flops", "--variant", "softmax", "--variant", "linear"]),
    ("crossover", ["crossover", "--d", "64"]),
    ("crossover-device", ["crossover", "--device", "cpu-amd-epyc-5155e7", "--d", "32"]),
    ("doctor", ["doctor"]),
    ("crossover-datasheet", ["crossover", "--device", "h100-sxm5-80gb"]),
    ("crossover-datasheet-json", ["crossover", "--device", "a100-sxm4-80gb", "--dtype", "bf16", "--mode", "training",
                                  "--json"]),
    ("crossover-calibrated", ["crossover", "--device", "cpu-amd-epyc-234b2f", "--pair", "softmax:linear", "--d",
                              "16"]),
    ("crossover-gpu-profile", ["crossover", "--device", "cuda-nvidia-h200-12fde9-bf16", "--dtype", "bf16", "--pair",
                               "softmax-fused-causal:linear-chunked", "--d", "64", "--h", "8", "--b", "16", "--json"]),
    ("predict-datasheet", ["predict", "--device", "h100-sxm5-80gb", "--variant", "softmax", "--variant", "linear",
                           "--n", "1024", "--n", "65536"]),
    ("predict-training-json", ["predict", "--device", "l4", "--variant", "softmax-fused", "--n", "4096", "--mode",
                               "training", "--json"]),
    ("report-datasheet", ["report", "--device", "h100-sxm5-80gb", "--html", "{tmp}/r.html", "--d", "64", "--json"]),
    ("report-measured", ["report", "--device", "cpu-amd-epyc-5155e7", "--html", "{tmp}/r.html", "--d", "16", "--pair",
                         "softmax:linear", "--json"]),
    ("io", ["io", "--d", "128", "--json"]),
    ("devices", ["devices", "--json"]),
    ("formula", ["formula", "taylorshift-efficient"]),
    ("decode", ["decode", "--n", "4096"]),
    ("bad-both", ["profile", "--gpu", "--cpu"]),
    ("bad-threads", ["measure", "--cpu", "--threads", "1", "--variant", "softmax", "--n", "64", "--threads", "0"]),
    ("bad-backend", ["profile", "--cpu", "--sdpa-backend", "nope"]),
    ("bad-refit", ["calibrate", "--refit", "x.json", "--threads", "2"]),
    ("bad-filter", ["results", "ls", "--dtype", "fp8"]),
]  # fmt: skip
"""(name, arguments): `{tmp}` is a fresh folder per run."""
MEASURING = {"profile", "measure", "validate", "calibrate", "campaign"}
"""The commands that fill the store when primed."""
MASKS = [
    (re.compile(r'"(seconds|elapsed_s|spent_s|at|created|wall_s)": [^,\n}]+'), r'"\1": #'),
    (re.compile(r"\[ *\d+\.\d s\]"), "[# s]"),
    (re.compile(r"\b\d+(\.\d+)? s\b"), "# s"),
    (re.compile(r"\b20\d\d-\d\d-\d\d[T ][\d:.+]+"), "#date"),
]


def run_all(home: Path, out: Path | None, names: set[str] | None = None, tree: Path = ROOT, tries: int = 1) -> None:
    """Every command (or those in `names`) with ATTN_COST_HOME=home, in the source tree `tree` (another checkout:
    its `.typecheck/attn_cost` first on sys.path: `launcher`); outputs into `out` when given. `tries`: runs of a
    command that failed (a disturbed machine refuses a timing; what was measured is kept, and the next run
    resumes)."""
    env = {**os.environ, "ATTN_COST_HOME": str(home), "COLUMNS": "100", "NO_COLOR": "1"}
    for i, (name, args) in enumerate(COMMANDS):
        if names is not None and name not in names:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            argv = [a.replace("{tmp}", tmp) for a in args]
            for _ in range(tries):
                p = subprocess.run([sys.executable, "-c", launcher(tree), *argv], cwd=tree, env=env,
                                   capture_output=True, text=True)  # fmt: skip
                if p.returncode == 0:
                    break
            if out is None:
                print(f"{name}: exit {p.returncode}", file=sys.stderr)
                continue
            for part, text in (("stdout", p.stdout), ("stderr", p.stderr), ("rc", f"{p.returncode}\n")):
                write_output(out / output_name(i, name, part), mask(text, [tmp, str(home)]), _named_ours, OUTPUT)
            print(f"{name}: exit {p.returncode}", file=sys.stderr)


PARTS = ("stdout", "stderr", "rc")
OUTPUT = "an output of same_outputs.py"


def output_name(i: int, name: str, part: str) -> str:
    """OUT/NN-name.part: what `record` writes for the i-th command."""
    return f"{i:02d}-{name}.{part}"


def _named_ours(path: Path) -> bool:
    """A file in OUT named as `record` names its outputs (`claim_out` has refused a folder holding anything else)."""
    return path.name in {output_name(i, name, part) for i, (name, _) in enumerate(COMMANDS) for part in PARTS}


def claim_out(out: Path) -> None:
    """Before any command runs: OUT new, or a folder holding this script's outputs alone, and each output path a
    regular file or absent (`docblock.check_output`: a FIFO, a device or a folder there is refused unopened)."""
    if out.is_dir():
        stray = sorted(p.name for p in out.iterdir() if not _named_ours(p))
        if stray:
            fail(f"{out} holds {stray[0]}, which this script did not write: give a new or empty folder")
    try:
        make_folder(out, str(out))
    except UserError as e:
        fail(str(e))
    for i, (name, _) in enumerate(COMMANDS):
        for part in PARTS:
            check_output(out / output_name(i, name, part), _named_ours, OUTPUT)


def launcher(tree: Path) -> str:
    """`python -c` code that runs the CLI of the checkout `tree`: its `.typecheck` first on sys.path, before the
    working directory (whose attn_cost/ holds the package's __init__ alone) and the editable install's finder."""
    return (f"import runpy, sys; sys.argv[0] = 'attn-cost'; sys.path.insert(0, {str(tree / '.typecheck')!r}); "
            "runpy.run_module('attn_cost.cli', run_name='__main__', alter_sys=True)")


def mask(text: str, paths: list[str]) -> str:
    for path in paths:
        text = text.replace(path, "<tmp>")
    for pattern, into in MASKS:
        text = pattern.sub(into, text)
    return text


def _recorded(path: Path) -> list[str]:
    """The lines of a recorded output (`files.read_input`: a FIFO or a device is refused unopened, in one line)."""
    try:
        return read_input(path, OUTPUT).decode("utf-8", "replace").splitlines(keepends=True)
    except UserError as e:
        fail(str(e))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    prime = sub.add_parser("prime")
    prime.add_argument("home", type=Path)
    prime.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run (default: this one)")
    record = sub.add_parser("record")
    record.add_argument("out", type=Path)
    record.add_argument("--home", type=Path, required=True)
    record.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run (default: this one)")
    compare = sub.add_parser("compare")
    compare.add_argument("before", type=Path)
    compare.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.what == "prime":
        args.home.mkdir(parents=True, exist_ok=True)
        measuring = {name for name, argv in COMMANDS if argv[0] in MEASURING}
        for _ in range(2):  # the second pass re-times what the first found disturbed
            run_all(args.home, None, measuring, tree=args.tree.resolve(), tries=10)
        return 0
    if args.what == "record":
        claim_out(args.out)
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            shutil.copytree(args.home, home)
            run_all(home, args.out, tree=args.tree.resolve())
        return 0
    differ = []
    for before in sorted(args.before.iterdir()):
        after = args.after / before.name
        old = _recorded(before)
        new = _recorded(after) if os.path.lexists(after) else []
        if old != new:
            differ.append(before.name)
            sys.stdout.writelines(difflib.unified_diff(old, new, str(before), str(after), n=1))
    print(f"{len(differ)} outputs differ" + (f": {', '.join(differ)}" if differ else ""), file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
