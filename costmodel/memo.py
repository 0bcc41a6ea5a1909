"""Derived costs kept between runs, so that `crossover --d 64` does not re-derive the catalogue's formulas each time.

`persisted` wraps a pure function of hashable arguments (`crossover.cost_branches`, `crossover._symbolic_roots`,
`display.text`): in a process it is `functools.cache`; across processes its results are kept in one SQLite file,
`$ATTN_COST_CACHE/derived.sqlite` (default `$ATTN_COST_HOME/cache` where ATTN_COST_HOME is set, else
`$XDG_CACHE_HOME/attn-cost` or `~/.cache/attn-cost`; an empty ATTN_COST_CACHE turns it off). A row is keyed by the
function, its arguments (`repr`; a sympy object's `srepr`, which names its structure and assumptions) and a
fingerprint of the code that derives it (attn-cost's `costmodel` sources, sympy's and Python's versions), so a
changed formula is never read back; rows of other fingerprints are dropped when a new one is written. Nothing is
read or kept while a variant not the catalogue's own is registered (`variants.catalogue_only`: a user's file, a
plugin, traced code), whose code is not in the fingerprint.

The cache is an optimisation only: a file that is not attn-cost's (no `attn_cost_memo` table), one that cannot be
read, written or unpickled, or a database locked by another run, is left as it is and the value computed. Writes
are one transaction each, so an interrupted or concurrent run leaves whole rows or none.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import sympy
from attn_cost.costmodel.variants import catalogue_only

ENV = "ATTN_COST_CACHE"
FILE = "derived.sqlite"
TABLE = "attn_cost_memo"
"""The table that marks the file as attn-cost's: a file without it is never written."""

F = TypeVar("F", bound=Callable[..., Any])
_MISSING = object()
_open: dict[Path, sqlite3.Connection | None] = {}
"""Each cache folder's connection this process opened (None: off for this process, see `_connect`)."""
_swept: set[sqlite3.Connection] = set()
"""The connections whose rows of other fingerprints this process has dropped."""


def folder() -> Path | None:
    """Where the cache lives, None where ATTN_COST_CACHE turns it off."""
    given = os.environ.get(ENV)
    if given is not None:
        return Path(given).expanduser() if given.strip() else None
    if os.environ.get("ATTN_COST_HOME"):
        return Path(os.environ["ATTN_COST_HOME"]).expanduser() / "cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attn-cost"


@functools.cache
def fingerprint() -> str:
    """What the cached values depend on: every costmodel source file, sympy's version and Python's."""
    h = hashlib.sha256(f"{sympy.__version__} {sys.version_info[:3]}".encode())
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _connect() -> sqlite3.Connection | None:
    """The open cache (None where it is off, not attn-cost's or cannot be opened, or a variant not the catalogue's
    is registered)."""
    where = folder()
    if where is None or not catalogue_only():
        return None
    if where in _open:
        return _open[where]
    _open[where] = None
    path = where / FILE
    try:
        if path.exists() or path.is_symlink():
            if not path.is_file():
                return None
            db = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=0.2, isolation_level=None)
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if TABLE not in tables:  # someone else's database: neither read nor written
                db.close()
                return None
        else:
            where.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, timeout=0.2, isolation_level=None)
            db.execute("PRAGMA journal_mode = WAL")  # a commit without a sync: a lost row is only recomputed
            db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (fingerprint TEXT, key TEXT, value BLOB, "
                       "PRIMARY KEY (fingerprint, key))")  # fmt: skip
        db.execute("PRAGMA synchronous = NORMAL")
    except (OSError, sqlite3.Error):
        return None
    _open[where] = db
    return db


def _read(key: str) -> Any:
    db = _connect()
    if db is None:
        return _MISSING
    try:
        row = db.execute(f"SELECT value FROM {TABLE} WHERE fingerprint = ? AND key = ?",
                         (fingerprint(), key)).fetchone()  # fmt: skip
        return _MISSING if row is None else pickle.loads(row[0])
    except (sqlite3.Error, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError,
            RecursionError):  # fmt: skip
        return _MISSING


def _write(key: str, value: Any) -> None:
    db = _connect()
    if db is None:
        return
    try:
        blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        with db:
            db.execute("BEGIN IMMEDIATE")
            if db not in _swept:  # other code's rows, once a process: a scan a write would grow with the file
                db.execute(f"DELETE FROM {TABLE} WHERE fingerprint != ?", (fingerprint(),))
            db.execute(f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?, ?)", (fingerprint(), key, blob))
        _swept.add(db)
    except (sqlite3.Error, pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return


def _key(value: Any) -> str:
    """`repr`, with sympy objects as `srepr` (their `repr` drops assumptions and can match another's)."""
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_key, value)) + ",)"
    if hasattr(value, "free_symbols") and hasattr(value, "func"):
        return sympy.srepr(value)
    return repr(value)


def persisted(fn: F) -> F:
    """`functools.cache`, and across processes the cache file (see the module's docstring)."""
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.cache
    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        key = name + _key(args)
        value = _read(key)
        if value is _MISSING:
            value = fn(*args)
            _write(key, value)
        return value

    return wrapper  # type: ignore[return-value]
