"""The published GPU tables in the long format (profilers/data/published/*.csv with the header row
`gpu,kernel,variant,...,quantity,value,note`), read into timed points: one point a row, its time in seconds.

A row becomes a point only where its number is a time or can be turned into one honestly: milliseconds and
microseconds as they are; TFLOP/s with the source's own FLOP formula, as its `# flops:` header line states it
(`flop_rule`); every other row is counted, per table, under the reason it was left out (a GPU with no row in the
shipped gpus.json, no direction or dtype stated, a ratio of two times, no value, a rate whose formula the header
does not state for its direction), never dropped silently. The wide tables of FlashAttention's papers
(`fa1_a100_appendix_e.csv`, `fa2_a100_fig4_fwdbwd_tflops.csv`) have no such header row: `datasheet.fit` reads
them. Offline: read by `benchmarks/gpu_kernels.py` and the tests, never by a prediction.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.datasheet.data import read_table as read_gpus

FOLDER = DATA / "published"
COLUMNS = ("gpu", "kernel", "variant", "dtype", "direction", "causal", "b", "h", "h_kv", "n", "n_kv", "d", "d_v",
           "d_state", "chunk", "quantity", "value", "note")  # fmt: skip
"""The long format's columns (docs: the format of new published tables)."""
DIRECTIONS = ("fwd", "bwd", "fwdbwd", "decode")
SIZES = {"b": "b", "h": "h", "h_kv": "h_kv", "n_kv": "n_kv", "d": "d", "d_v": "d_v", "d_state": "d_state", "chunk": "C"}
"""A row's size columns and the engine's name of each (`symbols.BY_NAME`; fla's chunk size is C)."""
SECONDS = {"ms": 1e-3, "us": 1e-6, "s": 1.0}
DTYPES = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class FlopRule:
    """The FLOP formula a source's `# flops:` line states: f = 4·b·h·N·N_kv·d per forward (halved where causal,
    where it says so), the backward `bwd` times f and forward + backward `fwdbwd` times f where it states them."""

    causal_half: bool
    bwd: float | None
    fwdbwd: float | None

    def flops(self, direction: str, causal: bool, b: int, h: int, n: int, n_kv: int, d: int) -> float | None:
        """FLOPs of one call as the source counts them; None where it states no formula for `direction`."""
        f = 4.0 * b * h * n * n_kv * d / (2 if causal and self.causal_half else 1)
        factor = {"fwd": 1.0, "bwd": self.bwd, "fwdbwd": self.fwdbwd}.get(direction)
        return None if factor is None else f * factor


_TERMS = (r"\b4\s*\*", r"batch", r"head", r"(head_?dim|head dimension|headdim)", r"seq_?len|q_seqlen")


def flop_rule(text: str) -> FlopRule | None:
    """The FLOP formula of a `# flops:` line, where it is FlashAttention's (4 · batch · seqlen² · heads · head dim,
    the form every published attention benchmark states): None where the line states another or none."""
    if not all(re.search(t, text, re.IGNORECASE) for t in _TERMS):
        return None
    half = bool(re.search(r"2 if (is_)?causal|halved for causal|/\s*2 if causal", text))
    bwd = re.search(r"bwd\s*(=\s*)?2\.5\s*(x|f|\*)?", text)
    both = re.search(r"fwd\s*\+\s*bwd\s*=\s*3\.5", text)
    return FlopRule(half, 2.5 if bwd else None, 3.5 if both else None)


@dataclass(frozen=True)
class Point:
    """One published time: where it was measured (GPU, kernel, harness), what (variant, dtype, direction, causal,
    sizes by the engine's names, N) and its seconds."""

    table: str
    """The file's name without `.csv`."""
    gpu: str
    kernel: str
    variant: str
    dtype: str
    direction: str
    causal: bool
    n: int
    sizes: dict
    seconds: float
    harness: str = ""
    """The table's `# harness:` line."""
    estimated: bool = False
    """The note says the value was estimated (a hidden or ambiguous label)."""
    pytorch: tuple[int, int] | None = None
    """The PyTorch release the table ran (`pytorch_release`; None where it does not say)."""


@dataclass
class Table:
    """One long-format file: its header lines by key, its points, and how many rows were left out and why."""

    name: str
    header: dict[str, str]
    points: list[Point] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)


def shipped_gpus() -> set[str]:
    """The names of the shipped gpus.json rows (a published table is judged on those, not on a user's own rows)."""
    return {sheet.name for sheet in read_gpus(DATA / "gpus.json").rows}


def is_long(path: Path) -> bool:
    """Whether a CSV is in the long format: its first line that is not a `# ` comment is the format's header."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            return tuple(line.strip().split(",")) == COLUMNS
    return False


def _int(cell: str) -> int | None:
    cell = cell.strip()
    return int(float(cell)) if cell else None


MADE_BY = "attn-cost kernels"
"""The first header line of a table `attn-cost kernels` measured (`is_kernel_table`): the one such file it replaces."""


def is_kernel_table(path: Path) -> bool:
    """Whether a file is a table `attn-cost kernels` wrote: the long format, its `made by` line first."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline().strip()
        return first == f"# made by: {MADE_BY}" and is_long(Path(path))
    except (OSError, UnicodeDecodeError):
        return False


def pytorch_release(header: dict[str, str]) -> tuple[int, int] | None:
    """The PyTorch release a table's header states: its `# pytorch:` line (`X.Y, inferred ...`: a release inferred,
    with why), else the first `PyTorch X.Y` or `torch: X.Y` of its `# software:` line; None where neither says one."""
    found = re.match(r"\s*(\d+)\.(\d+)\b", header.get("pytorch", "")) or re.search(
        r"\b(?:PyTorch|torch:?)\s+(\d+)\.(\d+)", header.get("software", ""), re.IGNORECASE
    )
    return (int(found[1]), int(found[2])) if found else None


def read_table(path: Path, gpus: set[str]) -> Table:
    """One long-format file's points (`Point`), the rows that make none counted by reason (`Table.skipped`)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header: dict[str, str] = {}
    for line in lines:
        if line.startswith("# ") and ":" in line:
            key, _, text = line[2:].partition(":")
            header.setdefault(key.strip(), text.strip())
    table = Table(path.stem, header)
    rule = flop_rule(header.get("flops", ""))
    body = [line for line in lines if not line.startswith("#")]
    for row in csv.DictReader(body):
        why, point = _point(row, table, rule, gpus)
        if point is None:
            table.skipped[why] += 1
        else:
            table.points.append(point)
    return table


def _point(row: dict, table: Table, rule: FlopRule | None, gpus: set[str]) -> tuple[str, Point | None]:
    """A row's point, or why it makes none."""
    gpu, quantity, value = row["gpu"].strip(), row["quantity"].strip(), row["value"].strip()
    if not gpu:
        return "no GPU stated", None
    if gpu not in gpus:
        return f"GPU {gpu} has no row in gpus.json", None
    direction, dtype = row["direction"].strip(), row["dtype"].strip()
    if direction not in DIRECTIONS:
        return "direction not stated", None
    if dtype not in DTYPES:
        return "dtype not stated", None
    try:
        number = float(value)
    except ValueError:
        return "no value (OOM or empty)", None
    n = _int(row["n"])
    if n is None or number <= 0:
        return "no N or no positive value", None
    sizes = {name: v for col, name in SIZES.items() if (v := _int(row[col])) is not None}
    if "d" not in sizes:
        return "head dim not stated", None
    causal = row["causal"].strip().lower() == "true"
    if quantity in SECONDS:
        seconds = number * SECONDS[quantity]
    elif quantity == "tflops":
        if rule is None:
            return "a rate without a FLOP formula in the # flops: header", None
        flops = rule.flops(direction, causal, sizes.get("b", 1), sizes.get("h", 1), n, sizes.get("n_kv", n),
                           sizes.get("d", 0))  # fmt: skip
        if flops is None:
            return f"a rate whose # flops: header states no formula for {direction}", None
        seconds = flops / (number * 1e12)
    elif quantity.startswith("speedup"):
        return "a ratio of two times (speedup), not a time", None
    else:
        return f"quantity {quantity} is not a time or a rate the header converts", None
    estimated = "estimated" in row.get("note", "")
    return "", Point(table.name, gpu, row["kernel"].strip(), row["variant"].strip(), dtype, direction, causal, n,
                     sizes, seconds, table.header.get("harness", ""), estimated,
                     pytorch_release(table.header))  # fmt: skip


def read_all(folder: Path = FOLDER, gpus: set[str] | None = None) -> list[Table]:
    """Every long-format table of a folder (the shipped published tables by default), by file name."""
    gpus = shipped_gpus() if gpus is None else gpus
    return [read_table(p, gpus) for p in sorted(folder.glob("*.csv")) if is_long(p)]
