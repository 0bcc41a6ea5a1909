"""Measurements on disk: one JSON-lines file per device, written atomically, read back to resume.

Every measurement becomes one record as soon as it is made. A write replaces the whole file
through a temporary file and os.replace, so an interrupted run leaves either the old file or the
new one, never half a line. Lines that do not parse (edited by hand, cut by a full disk) are
reported with their file and line number, skipped, and kept in the file on later writes.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.device import slug

SCHEMA = 1
SHIPPED = Path(__file__).parent / "data" / "results"
"""Measurements that ship with attn-cost (read-only): the devices its authors measured."""


def default_root() -> Path:
    """Where new measurements go: $ATTN_COST_HOME/results, else ~/.local/share/attn-cost/results."""
    home = os.environ.get("ATTN_COST_HOME")
    if home:
        return Path(home) / "results"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "attn-cost" / "results"


def record_key(kind: str, variant: str, scope: str, dtype: str, sizes: dict, device: dict) -> str:
    """What makes two measurements the same measurement (CPU timings also depend on the threads)."""
    dims = ",".join(f"{k}={v}" for k, v in sorted(sizes.items()))
    threads = f"|threads={device['threads']}" if kind == "time" and device["kind"] == "cpu" else ""
    return f"{kind}|{variant}|{scope}|{dtype}|{dims}{threads}"


def read_records(path: Path) -> tuple[list[dict], list[str]]:
    """Valid records of a results file, and one warning per line that is not one."""
    records, warnings = [], []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path} is not an attn-cost results file (not UTF-8 text)") from None
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        problem = _problem(line)
        if problem:
            warnings.append(f"{path}:{number}: {problem}; line skipped (it stays in the file)")
        else:
            records.append(json.loads(line))
    if lines and not records and any(line.strip() for line in lines):
        raise UserError(f"{path} is not an attn-cost results file: none of its {len(lines)} lines is a record")
    return records, warnings


def _problem(line: str) -> str | None:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        return f"not valid JSON ({e.msg})"
    if not isinstance(rec, dict) or rec.get("schema") != SCHEMA or "key" not in rec or "kind" not in rec:
        return f"not an attn-cost record of schema {SCHEMA}"
    return None


class ResultStore:
    """The results of one device: look a measurement up, add one."""

    def __init__(self, device: dict, root: Path | None = None, *, shipped: bool = True, reuse: bool = True) -> None:
        """`shipped`: also read the measurements that ship with attn-cost for this device.
        `reuse`: look measurements up at all (False measures everything again, still saving it)."""
        self.device = device
        self.root = root or default_root()
        self.path = self.root / f"{slug(device)}.jsonl"
        self.records: dict[str, dict] = {}
        self.warnings: list[str] = []
        sources = ([SHIPPED / self.path.name] if shipped else []) + [self.path]
        for path in sources if reuse else []:
            if path.exists():
                records, warnings = read_records(path)
                self.warnings += warnings
                for rec in records:
                    self._accept(rec, path)

    def _accept(self, rec: dict, path: Path) -> None:
        if slug(rec["device"]) != slug(self.device):
            self.warnings.append(f"{path}: a record of {rec['device'].get('name')} in this device's file; ignored")
            return
        self.records[rec["key"]] = rec

    def get(self, key: str) -> dict | None:
        return self.records.get(key)

    def add(self, record: dict) -> dict:
        """Stamp, store and return a record; the file on disk is replaced atomically."""
        record = {
            "schema": SCHEMA,
            **record,
            "device": self.device,
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        self.root.mkdir(parents=True, exist_ok=True)
        old = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        if old and not old.endswith("\n"):
            old += "\n"
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(old + json.dumps(record, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.records[record["key"]] = record
        return record
