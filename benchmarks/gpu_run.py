"""The whole GPU run in one call: the device checked, then every measurement a GPU alone can make, within a limit.

    python3 benchmarks/gpu_run.py OUT [--minutes 9] [--earlier DIR]

OUT is this script's folder: absent, empty, or one it made before (it holds OUT/gpu_run.json); it refuses any
other folder, so it never writes beside a user's files. In it, as it goes:

    OUT/gpu_run.json     the run's record: every call of the script, its limit, each part's seconds and exit status
    OUT/doctor.json      `attn-cost doctor --gpu --json`: versions, the device, what is missing
    OUT/kernels.csv      `attn-cost kernels --gpu`: each kernel `--kernel` names that is installed, timed
                         (`python benchmarks/gpu_kernels.py --measured OUT/kernels.csv` judges the model on it)
    OUT/campaign/        `attn-cost campaign --gpu`: its log, measurements.jsonl, summary.json and op calibration

Every file there is replaced only whole, by a complete new result (claimed and written by attn-cost's own file
helpers, `profilers/store/files.py`): a part that is refused, fails or is cut off keeps the earlier result (a
refused device check keeps the earlier doctor.json; the record adds the new call to the earlier ones). Ctrl-C lets
the part under way stop and save as attn-cost does, then ends in one line and exit 130, no temporary file left.

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
import math
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

KIND = "attn-cost gpu run"
RECORD = "gpu_run.json"
DOCTOR = "doctor.json"
MAX_MINUTES = 28.0
"""A device call's whole limit: a longer --minutes is a mistake."""
KERNELS = "kernels.csv"
KERNELS_S, KERNELS_SHARE = 150.0, 0.3
"""`attn-cost kernels` (each installed kernel `--kernel` names, timed) gets at most this many seconds, and at most
this share of what is left after the device check; the campaign the rest."""
DOCTOR_S = 60.0
"""The most the device check may take (it imports torch and initialises CUDA)."""
GRACE_S = 5.0
"""After Ctrl-C, how long a part has to end by itself (a terminal's Ctrl-C reaches it too) before it is asked."""
STOP_S = 60.0
"""How long a part asked to stop (Ctrl-C, or past its limit) has to save what it measured before it is killed."""
INTERRUPTED = 130
"""The exit status after Ctrl-C: attn-cost's own (`cli.app.Status.INTERRUPTED`, 128 + SIGINT)."""


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


def is_record(path: Path) -> bool:
    """Whether a file is this script's run record (attn-cost's JSON of this KIND): the one claim on the folder."""
    from attn_cost.profilers.store.files import is_json_of

    return is_json_of(KIND)(path)


def is_doctor_report(path: Path) -> bool:
    """Whether a file is what `attn-cost doctor --json` printed (its versions name attn-cost; it has a device)."""
    from attn_cost.profilers.store.files import json_data

    data = json_data(path)
    versions = data.get("versions") if isinstance(data, dict) else None
    return isinstance(versions, dict) and "attn-cost" in versions and isinstance(data.get("device"), dict)


def claim_folder(out: Path) -> None:
    """Take OUT for this run: absent, empty, or holding this script's record; then claim the record itself
    (`files.claim`), so that nothing is written into a folder, or over a file, the script did not make."""
    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.store.files import claim, make_folder

    if out.exists() and not out.is_dir():
        raise RefusedError(f"{out} is not a folder")
    if out.exists() and any(out.iterdir()) and not is_record(out / RECORD):
        raise RefusedError(f"{out} holds files this script did not write: give an empty or new folder")
    try:
        make_folder(out, str(out))
        claim(out / RECORD, is_record, "a gpu_run.py record")
    except UserError as e:
        raise RefusedError(str(e)) from None


def earlier_records(earlier: Path) -> Path:
    """The measurements of an earlier run (its OUT, or its campaign folder)."""
    from attn_cost.profilers.store.files import is_regular

    for path in (earlier / "campaign" / "measurements.jsonl", earlier / "measurements.jsonl"):
        if is_regular(path):
            return path
    raise RefusedError(f"no measurements.jsonl in {earlier} or {earlier / 'campaign'}")


def earlier_calls(out: Path) -> list[dict]:
    """The calls an earlier run of this script in OUT recorded (a record of one call's parts, as this script wrote
    before it kept every call, is that call)."""
    from attn_cost.profilers.store.files import json_data

    data = json_data(out / RECORD)
    if not isinstance(data, dict):
        return []
    if isinstance(data.get("calls"), list):
        return list(data["calls"])
    if isinstance(data.get("parts"), list):
        return [{key: data[key] for key in ("started", "minutes", "parts") if key in data}]
    return []


def write_file(path: Path, text: str | bytes, recognise, what: str) -> None:
    """Replace one of OUT's files whole (`files.claim`, then `files.write_atomic`), or one line (RefusedError)."""
    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.store.files import claim, write_atomic

    try:
        claim(path, recognise, what)
        write_atomic(path, text)
    except UserError as e:
        raise RefusedError(str(e)) from None


def write_record(out: Path, record: dict) -> None:
    import json

    write_file(out / RECORD, json.dumps(record, indent=1) + "\n", is_record, "a gpu_run.py record")


@dataclass
class Part:
    """What one attn-cost process of the run ended with."""

    status: int
    stdout: bytes = b""
    stderr: bytes = b""


def stop(process: subprocess.Popen, ask: bool) -> None:
    """End a part that must stop: give it GRACE_S to end by itself (unless `ask`), then ask it as Ctrl-C does
    (it saves what it measured, its files written whole), then kill it after STOP_S. A Ctrl-C meanwhile kills it."""
    try:
        if not ask:
            try:
                process.communicate(timeout=GRACE_S)
                return
            except subprocess.TimeoutExpired:
                pass
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=STOP_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        process.kill()
        process.communicate()


def attn_cost(*args: str, timeout: float, capture: bool = False) -> Part:
    """Run attn-cost in a process of its own (a crash costs its part only), inside `timeout` seconds; `capture`:
    keep its stdout and stderr (printed by the caller) instead of passing them through. Ctrl-C waits for the
    part to end (`stop`) and is raised again."""
    command = [sys.executable, "-m", "attn_cost", *args]
    print("+ attn-cost " + " ".join(args), flush=True)
    pipe = subprocess.PIPE if capture else None
    with subprocess.Popen(command, stdout=pipe, stderr=pipe) as process:
        try:
            out, err = process.communicate(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            print(f"gpu_run: attn-cost {args[0]} outran its {timeout:.0f} s", file=sys.stderr, flush=True)
            stop(process, ask=True)
            return Part(124)
        except KeyboardInterrupt:
            stop(process, ask=False)
            raise
    return Part(process.returncode, out or b"", err or b"")


def run(out: Path, minutes: float, earlier: Path | None) -> int:
    """The run: every file in OUT is replaced only by a whole new result (a part refused, failed or cut off keeps
    the earlier one), and the record keeps every call's parts."""
    import json

    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.store.files import make_folder, read_input
    from attn_cost.profilers.store.store import is_results_file

    start = time.monotonic()
    source = earlier_records(earlier) if earlier is not None else None  # checked before anything is written
    claim_folder(out)
    campaign = out / "campaign"
    call = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "minutes": minutes, "parts": []}
    record = {"kind": KIND, "calls": [*earlier_calls(out), call]}
    write_record(out, record)
    if source is not None and not (campaign / "measurements.jsonl").exists():
        try:
            make_folder(campaign, str(campaign))
            data = read_input(source, "an earlier run's measurements")
        except UserError as e:
            raise RefusedError(str(e)) from None
        write_file(campaign / "measurements.jsonl", data, is_results_file, "a results file")

    def part(name: str, status: int, began: float) -> None:
        call["parts"].append({"part": name, "seconds": round(time.monotonic() - began, 1), "exit": status})
        write_record(out, record)

    began = time.monotonic()
    doctor = attn_cost("doctor", "--gpu", "--json", "--no-profile", timeout=DOCTOR_S, capture=True)
    sys.stderr.write(doctor.stderr.decode("utf-8", "replace"))
    try:
        report = json.loads(doctor.stdout) if doctor.status == 0 else None
    except ValueError:
        report = None
    if isinstance(report, dict):
        write_file(out / DOCTOR, doctor.stdout, is_doctor_report, "a device check's report")
    elif (out / DOCTOR).exists():
        print(f"gpu_run: the earlier {DOCTOR} is kept (this device check ended with exit {doctor.status})",
              file=sys.stderr)  # fmt: skip
    part("doctor", doctor.status, began)
    if doctor.status == 2:
        print("gpu_run: the device check refused this machine (above): nothing measured",
              file=sys.stderr)  # fmt: skip
        return 2
    left = 60 * minutes - (time.monotonic() - start)
    kernels_s = min(KERNELS_S, KERNELS_SHARE * left)
    began = time.monotonic()
    timed = attn_cost("kernels", "--gpu", "--out", str(out / KERNELS), "--minutes", f"{kernels_s / 60:.2f}",
                      timeout=kernels_s + STOP_S)  # fmt: skip
    part("kernels", timed.status, began)
    left = 60 * minutes - (time.monotonic() - start)
    began = time.monotonic()
    status = attn_cost("campaign", "--gpu", "--out", str(campaign), "--minutes", f"{left / 60:.2f}",
                       timeout=left + 30).status  # fmt: skip
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
    except KeyboardInterrupt:
        print(f"gpu_run: interrupted: {args.out} keeps every earlier result and what was measured; run the same "
              "command again to continue", file=sys.stderr)  # fmt: skip
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
