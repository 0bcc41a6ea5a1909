"""Measurements on disk: one SQLite database of records, JSON lines for sharing and shipping.

Every measurement becomes one record as soon as it is made, written in its own transaction
(stdlib `sqlite3`, WAL journal, a busy timeout): any number of processes can write at once and
lose nothing, and a process killed at any moment leaves a valid database with every committed
record and no temporary files beside it. Records are keyed by (device slug, record key) with a
unique index, so a lookup stays one index probe at 100,000 records.

JSON lines remain the sharing format (`attn-cost results export|import`) and the format of the
measurements shipped in `profilers/data/results/`. Results files of earlier versions
(`<results dir>/<device slug>.jsonl`) are imported once, the first time `<results dir>/results.db` is opened to
write (`migrate_legacy`); no other file in the folder is read.
Every record read from any file passes one schema (`Record.check`); a line that fails it is
reported with its line number, grouped by reason, and skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import sqlite3
import tempfile
import time
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from attn_cost.costmodel.dtypes import DTYPE_BYTES
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.paths import check_input, os_reason, real
from attn_cost.costmodel.scopes import SCOPES
from attn_cost.profilers import DATA
from attn_cost.profilers.measure.gpu_record import EAGER_ONLY, GRAPH, is_method
from attn_cost.profilers.measure.machine import slug
from attn_cost.profilers.store.files import (
    head,
    is_regular,
    make_folder,
    new_file_mode,
    parse_json,
    read_input,
    regular_files,
    text_of,
)
from attn_cost.profilers.store.schema import Fingerprint, SchemaError, check, rule

SCHEMA = 1
"""Version of one record's JSON layout."""
DB_SCHEMA = 1
"""Version of the database's tables (kept in its `schema_version` table)."""
DB_NAME = "results.db"
SHIPPED = DATA / "results"
"""Measurements that ship with attn-cost (read-only): the devices its authors measured."""
BUSY_TIMEOUT_S = 60.0
SQLITE_FULL = 13
"""SQLite's result code for a full disk (or a database at its page limit)."""
KINDS = ("time", "memory")
STATUSES = ("ok", "oom")
MAX_SIZE = 2**53
"""The largest size a record may carry: every size must fit SQLite's 64-bit integers and a JSON number."""
FILTERS = ("device", "variant", "kind", "status", "scope", "dtype", "d", "n")
"""Fields `ResultStore.select` filters on (device: slug or a part of the device name)."""


def stored_names() -> dict[str, tuple[str, ...]]:
    """The dtypes and scopes a record may have (the model's scopes, and `op`: one op of the calibration grid), read
    from the cost model when first needed: opening the store does not import sympy."""

    return {"dtype": tuple(DTYPE_BYTES), "scope": (*SCOPES, "op")}


def default_root() -> Path:
    """Where new measurements go: $ATTN_COST_HOME/results, else ~/.local/share/attn-cost/results."""
    home = os.environ.get("ATTN_COST_HOME")
    if home:
        return Path(home) / "results"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "attn-cost" / "results"


def user_data_dir(kind: str) -> Path:
    """The user's own folder of one kind of data (devices, opmodels) beside the results."""
    return default_root().parent / kind


def named_files(shipped: Path, kind: str) -> dict[str, Path]:
    """JSON files by stem: those shipped with attn-cost, overridden by the user's own of the same name."""
    found: dict[str, Path] = {}
    for root in (shipped, user_data_dir(kind)):
        found.update({p.stem: p for p in regular_files(root, "*.json")})
    return found


def record_key(kind: str, variant: str, scope: str, dtype: str, sizes: dict, device: dict) -> str:
    """What makes two measurements the same measurement (CPU timings also depend on the threads)."""
    dims = ",".join(f"{k}={v}" for k, v in sorted(sizes.items()))
    threads = f"|threads={device['threads']}" if kind == "time" and device["kind"] == "cpu" else ""
    return f"{kind}|{variant}|{scope}|{dtype}|{dims}{threads}"


# -- one schema for a record -------------------------------------------------------------------


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
"""Control characters (terminal escapes among them): never in a record's text, which is printed."""


@dataclass
class RecordFile:
    """One record's JSON, as `Record.check` checks it (with `TimeValues` or `MemoryValues` where it is ok)."""

    schema: Literal[1]  # SCHEMA
    key: str
    kind: str = field(metadata=rule(choices=KINDS))
    variant: str
    scope: str
    dtype: str
    status: str = field(metadata=rule(choices=STATUSES))
    at: str
    device: Fingerprint
    sizes: dict[str, int] = field(metadata=rule(minimum=0, maximum=MAX_SIZE))


@dataclass
class TimeValues:
    """A timing's statistics (seconds, and how many runs)."""

    median: float = field(metadata=rule(minimum=0))
    q1: float = field(metadata=rule(minimum=0))
    q3: float = field(metadata=rule(minimum=0))
    min: float = field(metadata=rule(minimum=0))
    max: float = field(metadata=rule(minimum=0))
    runs: float = field(metadata=rule(minimum=0))


@dataclass
class HostValues:
    """The host's side of a CUDA timing: its issue time per call, and kernels per call and the cost of one where
    the profiler counted them."""

    issue_s: float = field(metadata=rule(minimum=0))
    kernels: int | None = field(default=None, metadata=rule(minimum=0))
    launch_s: float | None = field(default=None, metadata=rule(minimum=0))
    uncounted: str | None = None
    """Why the kernels were not counted."""


@dataclass
class CudaTimeValues:
    """What a CUDA time record keeps beside its device time (`gpu_record`), each field optional: records of older
    timers have none of them."""

    eager: TimeValues | None = None
    host: HostValues | None = None
    method: str | None = None
    l2: str | None = None
    retimed: int | None = field(default=None, metadata=rule(minimum=0))
    """How many times the timing was taken again (`Measurer.time_again`)."""


@dataclass
class MemoryValues:
    """A peak memory measurement."""

    peak_bytes: float = field(metadata=rule(minimum=0))


def _reason(e: SchemaError) -> str:
    """What is wrong with a record in the few words the warnings group its lines by: the field, and the value only
    where it is a kind or status that is not one of the known ones."""
    if e.path == "schema":
        return f"not an attn-cost record of schema {SCHEMA}"
    if e.value is None:
        return f"field {e.path!r} missing"
    if e.what.startswith("one of "):
        return f"{e.path} {e.shown} is not {e.what}"
    return f"field {e.path!r} is not {e.what}"


@dataclass(frozen=True)
class Record:
    """One measurement as stored: the checked fields plus the whole JSON object."""

    device: str
    """The device slug (`device.slug` of the fingerprint)."""
    key: str
    kind: str
    variant: str
    scope: str
    dtype: str
    status: str
    d: int | None
    n: int | None
    at: str
    data: dict
    line: int = 0
    """Line of the JSON-lines file it was read from (0: not read from a file)."""

    @classmethod
    def check(cls, obj: object) -> Record:
        """The record in `obj`, or ValueError saying in a few words what is wrong with it."""
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        try:
            check(obj, RecordFile)
            if obj["status"] == "ok":  # a measurement's numbers: the timing's statistics or the peak
                check(obj.get(obj["kind"]), TimeValues if obj["kind"] == "time" else MemoryValues, path=obj["kind"])
                if obj["kind"] == "time":
                    check(obj, CudaTimeValues)
        except SchemaError as e:
            raise ValueError(_reason(e)) from None
        if obj.get("method") is not None and not is_method(obj["method"]):
            raise ValueError(f"field 'method' is not {GRAPH} or {EAGER_ONLY}<reason>")
        device, sizes, kind, status = obj["device"], obj["sizes"], obj["kind"], obj["status"]
        host = [(f"host.{k}", v) for k, v in obj["host"].items()] if isinstance(obj.get("host"), dict) else []
        for where, text in [*obj.items(), *device.items(), *host]:
            if isinstance(text, str) and _CONTROL.search(text):
                raise ValueError(f"field {where!r} holds control characters")
        try:
            device_slug = slug(device)
        except (KeyError, TypeError, AttributeError):
            raise ValueError("field 'device' is not a device fingerprint") from None
        for size in ("N", "d"):
            if sizes.get(size, 1) < 1:
                raise ValueError(f"size {size} is not a positive integer")
        try:
            datetime.fromisoformat(obj["at"])
        except ValueError:
            raise ValueError("field 'at' is not an ISO 8601 time") from None
        return cls(
            device_slug, obj["key"], kind, obj["variant"], obj["scope"], obj["dtype"], status,
            sizes.get("d"), sizes.get("N"), obj["at"], obj,
        )  # fmt: skip

    def consistent(self) -> Record:
        """The record if it agrees with itself, else ValueError: a dtype and a scope attn-cost knows, and the key its
        own fields make (`record_key`, then any suffix such as a replicate's), so that it is found under the sizes it
        holds. Records read from files pass it; the store's own are made so."""
        for field_name, known in stored_names().items():
            value = getattr(self, field_name)
            if value not in known:
                raise ValueError(f"{field_name} {value!r} is not one of {', '.join(known)}")
        try:
            key = record_key(self.kind, self.variant, self.scope, self.dtype, self.data["sizes"], self.data["device"])
        except (KeyError, TypeError):
            key = None
        if key is None or not (self.key == key or self.key.startswith(f"{key}|")):
            raise ValueError("field 'key' does not agree with the record's kind, variant, scope, dtype and sizes")
        return self


@dataclass
class Problems:
    """Lines of a file that are not records, grouped by reason: one warning per reason, not per line."""

    path: Path
    lines: dict[str, list[int]]

    def said(self, shown: int = 3) -> str:
        """The reasons in one line, each with its line numbers, the first `shown` of them and how many more:
        `line 1 (not valid JSON: Expecting value), lines 2-3 (schema must be 1, got 2)`."""
        parts = [f"line{'s' if len(numbers) > 1 else ''} {_ranges(numbers, 3)} ({reason})"
                 for reason, numbers in list(self.lines.items())[:shown]]  # fmt: skip
        rest = len(self.lines) - shown
        return ", ".join(parts) + (f", and {rest:,} more reason{'s' if rest > 1 else ''}" if rest > 0 else "")

    def warnings(self) -> list[str]:
        return [
            f"{self.path}: {len(numbers)} line{'s' if len(numbers) > 1 else ''} skipped ({reason}): "
            f"line{'s' if len(numbers) > 1 else ''} {_ranges(numbers)}"
            for reason, numbers in self.lines.items()
        ]


def _ranges(numbers: list[int], shown: int = 6) -> str:
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    text = [str(a) if a == b else f"{a}-{b}" for a, b in spans[:shown]]
    return ", ".join(text) + (f", … ({len(spans) - shown} more spans)" if len(spans) > shown else "")


def read_jsonl(path: Path) -> tuple[list[Record], Problems]:
    """Checked records of a JSON-lines file, and the lines that are not records."""
    text = text_of(read_input(path, "a results file"), path, "an attn-cost results file")
    records: list[Record] = []
    problems = Problems(path, {})
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(replace(Record.check(parse_json(line)).consistent(), line=number))
        except RecursionError:
            problems.lines.setdefault("nested too deeply", []).append(number)
        except json.JSONDecodeError as e:
            problems.lines.setdefault(f"not valid JSON: {e.msg}", []).append(number)
        except ValueError as e:
            problems.lines.setdefault(str(e), []).append(number)
    if not records and any(line.strip() for line in lines):
        raise UserError(f"{path} is not an attn-cost results file: none of its {len(lines):,} lines is a record, "
                        f"nothing is read from it: {problems.said()}")  # fmt: skip
    return records, problems


def read_records(path: Path) -> tuple[list[dict], list[str]]:
    """Valid records of a JSON-lines file (as dicts), and one warning per kind of bad line."""
    records, problems = read_jsonl(path)
    return [r.data for r in records], problems.warnings()


def is_results_file(path: Path) -> bool:
    """Whether a file holds attn-cost records and nothing else (so an export may write over it)."""
    try:
        _, problems = read_jsonl(path)
    except UserError:
        return False
    return not problems.lines


def write_jsonl(records: Iterable[dict], out) -> int:
    """Write records as JSON lines to a text stream; returns how many."""
    count = 0
    for rec in records:
        out.write(json.dumps(rec, sort_keys=True) + "\n")
        count += 1
    return count


# -- the database ------------------------------------------------------------------------------

_TABLES = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    device TEXT NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    variant TEXT NOT NULL,
    scope TEXT NOT NULL,
    dtype TEXT NOT NULL,
    status TEXT NOT NULL,
    d INTEGER,
    n INTEGER,
    at TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS records_by_key ON records (device, key);
CREATE INDEX IF NOT EXISTS records_by_variant ON records (variant, kind);
CREATE TABLE IF NOT EXISTS migrated (file TEXT PRIMARY KEY, records INTEGER NOT NULL, at TEXT NOT NULL);
"""

_UPSERT = """
INSERT INTO records (device, key, kind, variant, scope, dtype, status, d, n, at, record)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (device, key) DO UPDATE SET
    kind = excluded.kind, variant = excluded.variant, scope = excluded.scope, dtype = excluded.dtype,
    status = excluded.status, d = excluded.d, n = excluded.n, at = excluded.at, record = excluded.record
"""


@dataclass
class Merged:
    """What an import did with its records (`Database.merge`)."""

    added: int = 0
    """Records under a device and key not stored before."""
    replaced: int = 0
    """Stored records replaced by the file's."""
    by_older: int = 0
    """Of those replaced, how many by a record no newer than the stored one (`--replace` only)."""
    by_worse: int = 0
    """Of those replaced, how many ok measurements by an oom (`--replace` only)."""
    same: int = 0
    """Records stored already, unchanged."""
    kept_newer: int = 0
    """Stored records kept because the file's is no newer."""
    kept_ok: int = 0
    """Stored ok measurements kept because the file's, newer, is an oom."""

    @property
    def written(self) -> int:
        return self.added + self.replaced

    @property
    def kept(self) -> int:
        return self.kept_newer + self.kept_ok

    def as_json(self) -> dict:
        return {**asdict(self), "written": self.written, "kept": self.kept}

    def said(self) -> str:
        """What the import did, in words: `4 new, 2 replacing older ones, 3 already stored; kept 1 stored record
        newer than the file's (--replace takes the file's)`."""
        parts = [f"{self.added:,} new"] if self.added or not (self.replaced or self.same) else []
        if self.replaced:
            forced = [f"{k:,} by {what}" for k, what in ((self.by_older, "an older record"),
                                                          (self.by_worse, "an oom where it was ok")) if k]  # fmt: skip
            parts.append(f"{self.replaced:,} replaced" + (f" ({', '.join(forced)})" if forced else " (older ones)"))
        if self.same:
            parts.append(f"{self.same:,} already stored")
        text = ", ".join(parts)
        if self.kept:
            why = [f"{k:,} {what}" for k, what in ((self.kept_newer, "as new as the file's or newer"),
                                                   (self.kept_ok, "ok where the file's is an oom")) if k]  # fmt: skip
            text += (f"; kept {self.kept:,} stored record{'s' if self.kept > 1 else ''} ({', '.join(why)}): "
                     "`--replace` takes the file's")  # fmt: skip
        return text


def _moment(at: str) -> datetime:
    """A record's `at` as an aware time (a time without a zone is UTC; one that cannot be read is the oldest)."""
    try:
        moment = datetime.fromisoformat(at)
    except (TypeError, ValueError):
        return datetime.min.replace(tzinfo=timezone.utc)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _row(r: Record) -> tuple:
    return (r.device, r.key, r.kind, r.variant, r.scope, r.dtype, r.status, r.d, r.n, r.at, json.dumps(r.data))


def database_path(root: Path | None) -> Path:
    """The database file: `root` itself if it names a file (an existing one or *.db), else root/results.db."""
    root = Path(root) if root is not None else default_root()
    if root.suffix == ".jsonl":
        raise UserError(f"{root} is a JSON-lines file: bring it in with `attn-cost results import {root}`")
    suffixes = (".db", ".sqlite", ".sqlite3")
    if not root.is_dir() and os.path.lexists(root) and (root.exists() or root.suffix not in suffixes):
        return check_input(root, "a results database or folder")  # a FIFO, a device, a link loop: refused
    if root.suffix in suffixes:
        return root
    return root / DB_NAME


class _ProbeDoneError(Exception):
    """Rolls back the write probe of `Database._probe_write`."""


SQLITE_MAGIC = b"SQLite format 3\x00"
COLUMNS = {"id", "device", "key", "kind", "variant", "scope", "dtype", "status", "d", "n", "at", "record"}
"""The columns of attn-cost's `records` table: a database without them is not attn-cost's."""


def _read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection that creates nothing beside the database. SQLite removes a WAL database's -wal
    file when its last connection closes, and creates -wal and -shm files for any reader that finds none: where
    neither a -wal nor a rollback -journal file exists no one is writing, and the file is read as immutable;
    where one exists, a writer's files are shared as they are."""
    file = real(path)
    busy = any(Path(f"{file}{suffix}").exists() for suffix in ("-wal", "-journal"))
    uri = f"{file.as_uri()}?mode=ro" + ("" if busy else "&immutable=1")
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)


def damaged(path: Path, e: sqlite3.Error, doing: str = "use") -> UserError:
    """The one line for an SQLite error on the results database: a damaged file (SQLite's "malformed", "not a
    database") with what the user can do, else the error itself (a disk error, a lock held past the busy timeout)."""
    if getattr(e, "sqlite_errorcode", None) == SQLITE_FULL or "disk is full" in str(e):
        return UserError(
            f"cannot {doing} the results database {path}: the disk is full; what the command was writing is not "
            "stored (the database keeps every record it had): free some space and run it again"
        )
    if isinstance(e, sqlite3.OperationalError) or not isinstance(e, sqlite3.DatabaseError):
        return UserError(f"cannot {doing} the results database {path}: {e}")
    return UserError(
        f"the results database {path} is damaged ({e}): move it aside (attn-cost then starts a new one) and copy "
        f"what is readable with `sqlite3 {path} .recover | sqlite3 recovered.db`"
    )


def check_version(path: Path, version: object) -> None:
    """Refuse a database whose schema version this attn-cost did not write: a newer one's, or one never written
    (absent, not a positive integer)."""
    if isinstance(version, int) and not isinstance(version, bool) and version > DB_SCHEMA:
        raise UserError(
            f"{path} was written by a newer attn-cost (database schema {version}, this one reads {DB_SCHEMA}): "
            "upgrade attn-cost or use another --store"
        )
    if not (isinstance(version, int) and 1 <= version <= DB_SCHEMA):
        raise UserError(
            f"{path} is not an attn-cost results database (schema version {version!r}, which no attn-cost writes; "
            f"this one writes {DB_SCHEMA}): attn-cost writes only to databases of its own; give --store a folder or "
            "a new file"
        )


def check_own_database(path: Path) -> None:
    """Refuse (UserError), before anything is written to it, a file that is not an attn-cost results database:
    a text file, another application's SQLite database, one of a newer attn-cost or with a schema version no
    attn-cost writes. Absent and empty files pass (nothing in them can be lost)."""
    first = head(path, len(SQLITE_MAGIC))
    if not first:
        return
    refuse = f"{path} is not an attn-cost results database"
    hint = "attn-cost writes only to databases of its own; give --store a folder or a new file"
    if first != SQLITE_MAGIC:
        raise UserError(f"{refuse} (not an SQLite file): {hint}")
    try:
        con = _read_only(path)
    except sqlite3.Error as e:
        raise UserError(f"cannot read {path}: {e}") from None
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"records", "schema_version"} <= tables:
            raise UserError(f"{refuse} (an SQLite database without attn-cost's tables): {hint}")
        if not {r[1] for r in con.execute("PRAGMA table_info(records)")} >= COLUMNS:
            raise UserError(f"{refuse} (its records table has other columns): {hint}")
        versions = [r[0] for r in con.execute("SELECT DISTINCT version FROM schema_version")]
    except sqlite3.DatabaseError as e:
        raise damaged(path, e, "read") from None
    finally:
        con.close()
    for version in versions or [None]:
        check_version(path, version)


class Database:
    """One connection to the results database; every write is one transaction.

    `writable=False` opens an existing database read-only and an absent one as an empty database in memory,
    so listing or exporting never creates or changes a file."""

    def __init__(self, path: Path | None, writable: bool = True) -> None:
        """`path` None: an empty database in memory, nothing on disk read or written (`ResultStore.of_records`)."""
        self.path = path or Path(":memory:")
        self.writable = writable and path is not None
        self.warnings: list[str] = []
        self.bad_rows: set[int] = set()
        if path is None:
            self.file = self.path
            self.con = sqlite3.connect(":memory:", isolation_level=None)
            self._finalizer = weakref.finalize(self, self.con.close)
            self._create()
            return
        self.file = real(path)
        """The database file itself (a symbolic link at `path` followed)."""
        if path.is_dir():
            raise UserError(f"{path} is a directory, not a results database; give --store the directory above it")
        if os.path.lexists(self.file):  # the file, or a link in a loop (a dangling link: its absent target)
            check_input(path, "a results database")
        exists = self.file.exists()
        check_own_database(path)
        try:
            if writable:
                self._create_file()
                self.con = sqlite3.connect(self.file, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            elif exists and self.file.stat().st_size:
                self.con = _read_only(path)
            else:
                self.con = sqlite3.connect(":memory:", isolation_level=None)
            self._finalizer = weakref.finalize(self, self.con.close)
            if writable:
                self._wal()
                self.con.execute("PRAGMA synchronous = NORMAL")
            if writable or not (exists and self.file.stat().st_size):
                self._create()
            if writable:
                self._probe_write()
        except sqlite3.DatabaseError as e:
            raise damaged(path, e, "open") from None
        except OSError as e:
            raise UserError(f"cannot open the results database {path}: {os_reason(e)}") from None

    def _create_file(self) -> None:
        """Create an absent database whole: built under a temporary name, then linked into place, so the
        path never holds a half-made file. The temporary name carries the creating process's id: what a process
        killed while creating left behind is removed by the next one that opens the database for writing."""
        file = self.file
        prefix = f".{file.name}."
        with contextlib.suppress(OSError):
            for stale in file.parent.glob(f"{prefix}*.tmp*"):
                pid = stale.name[len(prefix) :].split(".", 1)[0]
                if pid.isdigit() and not _alive(int(pid)):
                    stale.unlink(missing_ok=True)
        if file.exists():
            return
        make_folder(file.parent, f"the results directory {file.parent}")
        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=f"{prefix}{os.getpid()}.", suffix=".tmp")
        os.close(fd)
        os.chmod(tmp, new_file_mode())  # as a file the user creates (mkstemp's are private)
        try:
            con = sqlite3.connect(tmp, isolation_level=None)
            try:
                con.executescript(_TABLES)
                con.execute("INSERT INTO schema_version VALUES (?)", (DB_SCHEMA,))
            finally:
                con.close()
            with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
                os.link(tmp, file)
        finally:
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(tmp + suffix).unlink(missing_ok=True)

    def _probe_write(self) -> None:
        """Refuse a database that cannot be written before anything is measured into it."""
        try:
            with self.transaction() as con:
                con.execute("UPDATE schema_version SET version = version")
                raise _ProbeDoneError
        except _ProbeDoneError:
            pass
        except sqlite3.OperationalError as e:
            raise UserError(
                f"the results database {self.path} cannot be written ({e}): nothing was measured; "
                "give --store a writable folder or file"
            ) from None

    def _wal(self) -> None:
        """Switch to the WAL journal, retrying while another process does the same: two connections switching
        a new database at once deadlock, and SQLite then answers "database is locked" at once, without
        waiting out its busy timeout (seen when four writer processes opened one new store together)."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                self.con.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(random.uniform(0.005, 0.05))

    def _create(self) -> None:
        with self.transaction():
            for statement in _TABLES.strip().split(";"):
                if statement.strip():
                    self.con.execute(statement)
            versions = [r[0] for r in self.con.execute("SELECT DISTINCT version FROM schema_version")]
            if not versions:
                self.con.execute("INSERT INTO schema_version VALUES (?)", (DB_SCHEMA,))
        for version in versions:
            check_version(self.path, version)

    class _Tx:
        def __init__(self, con: sqlite3.Connection) -> None:
            self.con = con

        def __enter__(self) -> sqlite3.Connection:
            self.con.execute("BEGIN IMMEDIATE")
            return self.con

        def __exit__(self, exc_type, exc, tb) -> None:
            if not exc_type:
                self.con.execute("COMMIT")
            elif self.con.in_transaction:  # SQLite ends the transaction itself on a full disk: the error stays its own
                self.con.execute("ROLLBACK")

    def transaction(self) -> Database._Tx:
        """BEGIN IMMEDIATE … COMMIT (ROLLBACK on any exception); waits up to the busy timeout for other writers."""
        return Database._Tx(self.con)

    @contextlib.contextmanager
    def _using(self) -> Iterator[None]:
        """An SQLite error inside (damaged pages, a lock held past the busy timeout) becomes one line."""
        try:
            yield
        except sqlite3.Error as e:
            raise damaged(self.path, e) from None

    def put(self, record: Record) -> None:
        """One record in its own transaction (sqlite3.Error passes: `ResultStore.add` keeps the record elsewhere)."""
        with self.transaction() as con:
            con.execute(_UPSERT, _row(record))

    def put_many(self, records: Iterable[Record], source: str | None = None) -> int:
        """Several records in one transaction by the import rule (`merge`); returns how many were written."""
        return self.merge(records, source=source).written

    def merge(self, records: Iterable[Record], replace: bool = False, source: str | None = None) -> Merged:
        """Several records in one transaction (an import), each by the import rule: a record whose device and key
        are not stored is added; one that is stored unchanged changes nothing; a stored record is replaced by a
        newer one (its `at`) of a status no worse (an ok measurement is never replaced by an oom), and kept
        otherwise, unless `replace` takes every record of the file. `source` marks a file as migrated in the same
        transaction (a file migrated before adds nothing)."""
        merged = Merged()
        with self._using(), self.transaction() as con:
            if source is not None and con.execute("SELECT 1 FROM migrated WHERE file = ?", (source,)).fetchone():
                return merged
            for r in records:
                row = con.execute(
                    "SELECT status, at, record FROM records WHERE device = ? AND key = ?", (r.device, r.key)
                ).fetchone()
                if row is not None and row[2] == json.dumps(r.data):
                    merged.same += 1
                    continue
                if row is not None:
                    older, worse = _moment(r.at) <= _moment(row[1]), row[0] == "ok" and r.status != "ok"
                    if (older or worse) and not replace:
                        merged.kept_newer += older
                        merged.kept_ok += worse and not older
                        continue
                    merged.replaced += 1
                    merged.by_older += older
                    merged.by_worse += worse
                else:
                    merged.added += 1
                con.execute(_UPSERT, _row(r))
            if source is not None:
                con.execute(
                    "INSERT INTO migrated VALUES (?, ?, ?)",
                    (source, merged.written, datetime.now(timezone.utc).isoformat(timespec="seconds")),
                )
        return merged

    def migrated(self, source: str) -> bool:
        with self._using():
            return self.con.execute("SELECT 1 FROM migrated WHERE file = ?", (source,)).fetchone() is not None

    def _decode(self, rowid: int, text: str) -> dict | None:
        """A stored row's record, checked; a row that is not an attn-cost record is reported once and skipped."""
        try:
            return Record.check(parse_json(text)).data
        except (TypeError, ValueError, RecursionError) as e:
            if rowid not in self.bad_rows:
                self.bad_rows.add(rowid)
                reason = f"not valid JSON: {e.msg}" if isinstance(e, json.JSONDecodeError) else str(e)
                self.warnings.append(f"{self.path}: row {rowid} is not an attn-cost record ({reason}); skipped")
            return None

    def get(self, device: str, key: str) -> dict | None:
        with self._using():
            row = self.con.execute(
                "SELECT id, record FROM records WHERE device = ? AND key = ?", (device, key)
            ).fetchone()
        return self._decode(*row) if row else None

    def select(self, where: str = "", params: tuple = ()) -> Iterator[tuple[int, dict]]:
        """(row id, record) of the rows matching an SQL condition; rows that are not records are skipped."""
        with self._using():
            for rowid, text in self.con.execute(f"SELECT id, record FROM records {where} ORDER BY id", params):
                record = self._decode(rowid, text)
                if record is not None:
                    yield rowid, record

    def delete(self, ids: list[int]) -> int:
        with self._using(), self.transaction() as con:
            con.executemany("DELETE FROM records WHERE id = ?", [(i,) for i in ids])
        return len(ids)

    def count(self) -> int:
        with self._using():
            return self.con.execute("SELECT count(*) FROM records").fetchone()[0]

    def close(self) -> None:
        self._finalizer()


def _where(filters: dict) -> tuple[str, tuple, str | None]:
    """SQL for the filters on indexed columns, and the device filter (matched on slug or name)."""
    clauses, params = [], []
    for name in ("variant", "kind", "status", "scope", "dtype", "d", "n"):
        value = filters.get(name)
        if value is not None:
            clauses.append(f"{name} = ?")
            params.append(value)
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), tuple(params), filters.get("device")


def device_matches(rec: dict, device: str | None) -> bool:
    """Whether a record is of the device named by a slug or a part of its name (None: any)."""
    if device is None:
        return True
    needle = device.lower()
    return needle == slug(rec["device"]) or needle in rec["device"]["name"].lower()


LEGACY_NAME = re.compile(r"[a-z]+-[a-z0-9-]*-[0-9a-f]{6}\.jsonl")
"""How an earlier version named its results files: one per device, `<results dir>/<device slug>.jsonl`
(`measure.machine.slug`: kind, name, a 6-digit hash), in the folder whose database is now `<results dir>/results.db`."""
LEGACY_LOOKED = "(the earlier version's files looked for)"
"""The `migrated` row that says a database has looked for the earlier version's files: no later open reads its
folder again."""


def migrate_legacy(db: Database, root: Path) -> list[str]:
    """Import the results files an earlier version kept in `root` (`LEGACY_NAME`, beside `results.db`), once per
    database: the first writable open looks, imports each file in its own transaction and marks the database; no
    later open reads the folder, and a file that could not be imported is named that once. A database of another
    name (`--store FILE.db`) had no earlier layout, and JSON lines of other names are never read (`results import`
    takes those). Returns warnings."""
    if db.path.name != DB_NAME or db.migrated(LEGACY_LOOKED):
        return []
    warnings: list[str] = []
    for path in regular_files(root, "*.jsonl"):
        source = str(real(path))
        if not LEGACY_NAME.fullmatch(path.name) or db.migrated(source):
            continue
        try:
            records, problems = read_jsonl(path)
        except UserError as e:
            warnings.append(f"{e}; not imported")
            continue
        count = db.put_many(records, source=source)
        warnings += problems.warnings()
        if count:
            warnings.append(f"imported {count} records from {path} into {db.path} (once; the file is left as it was)")
    db.put_many([], source=LEGACY_LOOKED)
    return warnings


def _alive(pid: int) -> bool:
    """Whether a process with this id exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def open_database(root: Path | None = None, writable: bool = True) -> Database:
    """The results database under `root` (default: `default_root()`); opened to write, earlier files migrated.
    Read-only, an absent database reads as empty and nothing is created."""
    path = database_path(root)
    db = Database(path, writable)
    if writable:
        db.warnings += migrate_legacy(db, path.parent)
    return db


def select(db: Database, filters: dict) -> list[tuple[int, dict]]:
    """(row id, record) of every stored record matching the filters (see FILTERS)."""
    where, params, device = _where(filters)
    return [(i, rec) for i, rec in db.select(where, params) if device_matches(rec, device)]


def rescue(record: dict) -> str:
    """Keep a measurement the database refused in a JSON-lines file of its own; says where (or that it could not)."""
    folder = Path(tempfile.gettempdir()) / "attn-cost-rescued"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{os.getpid()}.jsonl"
        with path.open("a", encoding="utf-8") as f:
            write_jsonl([record], f)
    except OSError as e:
        return f"the measurement could not be kept elsewhere either ({e.strerror or e})"
    return f"it was kept in {path}: bring it in with `attn-cost results import {path}`"


# -- the store one device's measurements go through ------------------------------------------------


def shipped_records(device_slug: str) -> tuple[dict[str, dict], list[str]]:
    """The measurements shipped with attn-cost for one device, by key."""
    path = SHIPPED / f"{device_slug}.jsonl"
    if not is_regular(path):
        return {}, []
    records, problems = read_jsonl(path)
    mine = [r for r in records if r.device == device_slug]
    warnings = problems.warnings()
    others = [r.line for r in records if r.device != device_slug]
    if others:
        warnings.append(f"{path}: {len(others)} records of other devices ignored: lines {_ranges(others)}")
    return {r.key: r.data for r in mine}, warnings


class ResultStore:
    """The results of one device: look a measurement up, add one."""

    def __init__(
        self, device: dict, root: Path | None = None, *, shipped: bool = True, reuse: bool = True,
        writable: bool = True, _memory: bool = False,
    ) -> None:  # fmt: skip
        """`root`: results directory or database file (default `default_root()`).
        `shipped`: also read the measurements that ship with attn-cost for this device.
        `reuse`: look stored measurements up at all (False measures everything again, still saving it).
        `writable`: False only reads (a report); nothing is created or changed."""
        self.device = device
        self.slug = slug(device)
        self.reuse = reuse
        self.db = Database(None) if _memory else open_database(root, writable)
        self.path = self.db.path
        self.warnings: list[str] = list(self.db.warnings)
        self.shipped: dict[str, dict] = {}
        if shipped and reuse:
            self.shipped, warnings = shipped_records(self.slug)
            self.warnings += warnings
        self.session: dict[str, dict] = {}
        """Records added through this store object (what this process measured)."""
        self.hits = {"stored": 0, "shipped": 0}
        """Lookups answered from the database and from the measurements shipped with attn-cost."""

    @classmethod
    def of_records(cls, device: dict, records: dict[str, dict]) -> ResultStore:
        """A read-only store of these records (by key) alone, no database on disk opened: what `validate --records
        FILE` reads, so that the file, not the user's store, is judged."""
        store = cls(device, shipped=False, writable=False, root=None, _memory=True)
        store.shipped = dict(records)
        return store

    @property
    def records(self) -> dict[str, dict]:
        """Every record of this device by key: shipped ones, overridden by stored ones (a full scan).
        Replicates (timings repeated to see a crossover's spread) are left out: one point per setting."""
        return {k: rec for k, rec in self.every().items() if "replicate" not in rec}

    def every(self) -> dict[str, dict]:
        """Every record of this device by key, replicates included (a full scan): what a re-read of a crossover
        from its records needs (`profile.stored_pair`)."""
        if not self.reuse:
            return dict(self.session)
        stored = {rec["key"]: rec for _, rec in self.db.select("WHERE device = ?", (self.slug,))}
        return {**self.shipped, **stored, **self.session}

    def get(self, key: str) -> dict | None:
        """The stored measurement with this key (an index probe), else the shipped one, else None; counts
        where each came from (`hits`)."""
        if key in self.session:
            return self.session[key]
        if not self.reuse:
            return None
        found = self.db.get(self.slug, key)
        source = "stored"
        if found is None:
            found, source = self.shipped.get(key), "shipped"
        if found is not None:
            self.hits[source] += 1
        return found

    def add(self, record: dict) -> dict:
        """Stamp, check, store (one transaction) and return a record."""
        record = {
            "schema": SCHEMA,
            **record,
            "device": self.device,
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        checked = Record.check(record)
        try:
            self.db.put(checked)
        except sqlite3.Error as e:
            raise UserError(f"could not store a measurement in {self.path} ({e}); {rescue(record)}") from None
        self.session[record["key"]] = record
        return record

    def close(self) -> None:
        self.db.close()
