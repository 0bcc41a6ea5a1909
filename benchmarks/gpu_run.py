"""The whole GPU run in one call: the device checked, then every measurement a GPU alone can make, within a limit.

    python3 benchmarks/gpu_run.py OUT [--minutes 9] [--earlier DIR]

OUT is this script's folder: absent, empty, or one it made before (it holds OUT/gpu_run.json); it refuses any
other folder, so it never writes beside a user's files. In it, as it goes:

    OUT/gpu_run.json     the run's record: each part, its seconds and exit status, the limit (rewritten after each)
    OUT/doctor.json      `attn-cost doctor --gpu --json`: versions, the device, what is missing
    OUT/campaign/        `attn-cost campaign --gpu`: its log, measurements.jsonl, summary.json and op calibration

The campaign measures and calibrates only (nothing is fitted on the GPU: `attn-cost validate --records
OUT/campaign/measurements.jsonl` fits the device afterwards, on any machine). The limit (`--minutes`, default 9:
one 10-minute device call) counts from this script's start; the campaign stops itself inside it. A run cut off at
any point keeps what it measured; run the script again with the same OUT (or a new OUT and `--earlier` the old
one) and it measures only what is missing. attn-cost must be installed (`pip install --no-deps
--no-build-isolation -e .` in this checkout: a GPU machine has the rest); wheels such as fla-core's are installed
by the caller (docs/gpu.md says how). `benchmarks/gpu_rehearsal.py` runs the same campaign on a simulated GPU and
says how long each part takes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

KIND = "attn-cost gpu run"
RECORD = "gpu_run.json"
MAX_MINUTES = 28.0
"""A device call's whole limit: a longer --minutes is a mistake."""
DOCTOR_S = 60.0
"""The most the device check may take (it imports torch and initialises CUDA)."""


class RefusedError(Exception):
    """An argument or a folder the script will not work with: one line, exit 2."""


def minutes_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of minutes: {text!r}") from None
    if not 1.0 <= value <= MAX_MINUTES or math.isnan(value):
        raise argparse.ArgumentTypeError(f"{text} minutes: give 1 to {MAX_MINUTES:g}")
    return value


def is_ours(folder: Path) -> bool:
    """Whether a folder is this script's (it holds the run record) or holds nothing at all."""
    record = folder / RECORD
    if not any(folder.iterdir()):
        return True
    try:
        return record.is_file() and not record.is_symlink() and json.loads(record.read_text()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def claim_folder(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise RefusedError(f"{out} is not a folder")
    if out.exists() and not is_ours(out):
        raise RefusedError(f"{out} holds files this script did not write: give an empty or new folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RefusedError(f"cannot make {out}: {e.strerror or e}") from None


def earlier_records(earlier: Path) -> Path:
    """The measurements of an earlier run (its OUT, or its campaign folder)."""
    for path in (earlier / "campaign" / "measurements.jsonl", earlier / "measurements.jsonl"):
        if path.is_file():
            return path
    raise RefusedError(f"no measurements.jsonl in {earlier} or {earlier / 'campaign'}")


def write_record(out: Path, record: dict) -> None:
    tmp = out / f".{RECORD}.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out / RECORD)


def attn_cost(*args: str, timeout: float, stdout=None) -> int:
    """Run attn-cost in a process of its own (a crash costs its part only), inside `timeout` seconds."""
    command = [sys.executable, "-m", "attn_cost", *args]
    print("+ attn-cost " + " ".join(args), flush=True)
    try:
        return subprocess.run(command, stdout=stdout, timeout=max(1.0, timeout), check=False).returncode
    except subprocess.TimeoutExpired:
        print(f"gpu_run: attn-cost {args[0]} outran its {timeout:.0f} s", file=sys.stderr, flush=True)
        return 124


def run(out: Path, minutes: float, earlier: Path | None) -> int:
    start = time.monotonic()
    source = earlier_records(earlier) if earlier is not None else None  # checked before anything is written
    claim_folder(out)
    campaign = out / "campaign"
    if source is not None and not (campaign / "measurements.jsonl").exists():
        campaign.mkdir(exist_ok=True)
        (campaign / "measurements.jsonl").write_bytes(source.read_bytes())
    record: dict = {"kind": KIND, "minutes": minutes, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "parts": []}  # fmt: skip
    write_record(out, record)

    def part(name: str, status: int, began: float) -> None:
        record["parts"].append({"part": name, "seconds": round(time.monotonic() - began, 1), "exit": status})
        write_record(out, record)

    began = time.monotonic()
    with open(out / ".doctor.json.tmp", "wb") as f:
        status = attn_cost("doctor", "--gpu", "--json", "--no-profile", timeout=DOCTOR_S, stdout=f)
    os.replace(out / ".doctor.json.tmp", out / "doctor.json")
    part("doctor", status, began)
    if status == 2:
        print("gpu_run: the device check refused this machine (above): nothing measured",
              file=sys.stderr)  # fmt: skip
        return 2
    left = 60 * minutes - (time.monotonic() - start)
    began = time.monotonic()
    status = attn_cost("campaign", "--gpu", "--out", str(campaign), "--minutes", f"{left / 60:.2f}",
                       timeout=left + 30)  # fmt: skip
    part("campaign", status, began)
    print(f"gpu_run: done in {time.monotonic() - start:.0f} s (campaign exit {status}); {out} holds:", flush=True)
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(out)}  {path.stat().st_size:,} bytes")
    return status


class Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """Bad arguments: one line and exit 2 (argparse prints its usage first)."""
        print(f"gpu_run: {message} (usage: {self.format_usage().strip().removeprefix('usage: ')})", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="benchmarks/gpu_run.py", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="this run's folder (absent, empty, or an earlier run of this script)")
    parser.add_argument("--minutes", type=minutes_arg, default=9.0, help="the whole run's limit (default 9)")
    parser.add_argument("--earlier", type=Path, help="an earlier run's folder: its measurements are reused")
    args = parser.parse_args(argv)
    try:
        import attn_cost.cli  # noqa: F401
    except ImportError:
        print("gpu_run: attn-cost is not installed: pip install --no-deps --no-build-isolation -e .", file=sys.stderr)
        return 2
    try:
        return run(args.out.resolve(), args.minutes, args.earlier.resolve() if args.earlier else None)
    except RefusedError as e:
        print(f"gpu_run: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
