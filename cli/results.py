"""`attn-cost results ls|rm|export|import`: inspect, drop and share the stored measurements.

The measurements live in one SQLite database (`profilers/store/store.py`); JSON lines are the format
to share them in and the format of the measurements shipped with attn-cost. No torch here.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Optional

import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import app, fail, help_without_command, typed
from attn_cost.cli.options import grouped
from attn_cost.cli.render import emit
from attn_cost.costmodel.dtypes import ACTIVATION
from attn_cost.profilers.measure.machine import slug
from attn_cost.profilers.store.files import STDOUT, claim, regular_files, write_atomic
from attn_cost.profilers.store.store import (
    KINDS,
    MAX_SIZE,
    STATUSES,
    Database,
    database_path,
    device_matches,
    is_results_file,
    open_database,
    read_jsonl,
    select,
    stored_names,
    write_jsonl,
)
from attn_cost.profilers.store.store import SHIPPED as SHIPPED_DIR
from rich.console import Console
from rich.markup import escape

err = Console(stderr=True, highlight=False)

results_app = typer.Typer(
    help="Inspect, drop, export and import stored measurements (one SQLite database; JSON lines to share).",
    invoke_without_command=True,
)
app.add_typer(results_app, name="results")


@results_app.callback()
def _results(ctx: typer.Context) -> None:
    help_without_command(ctx)


DEVICE = typer.Option(None, "--device", help="Device slug (cpu-amd-epyc-bed586) or a part of the device's name.")
VARIANT = typer.Option(None, "--variant", help="Only this variant.")
KIND = typer.Option(None, "--kind", help="time or memory.")
STATUS = typer.Option(None, "--status", help="ok or oom.")
SCOPE = typer.Option(None, "--scope", help="Only this scope (core, layer, block, model, decode, op).")
DTYPE = typer.Option(None, "--dtype", help=f"Only this dtype ({', '.join(ACTIVATION)}).")
D = typer.Option(None, "--d", help="Only this head dimension.")
N = typer.Option(None, "--n", help="Only this sequence length.")
SHIPPED = typer.Option(False, "--shipped", help="Also the measurements shipped with attn-cost (read-only).")
NO_FILTER: dict = {}
"""The default of a command's `filters` parameter, which `with_filters` replaces by the filter options."""


def _filters(
    device: str | None = None,
    variant: str | None = None,
    kind: str | None = None,
    status: str | None = None,
    scope: str | None = None,
    dtype: str | None = None,
    d: int | None = None,
    n: int | None = None,
) -> dict:
    """The filters given, each checked: a value no record can have is refused, not matched against nothing, and an
    empty one (which would match every device name) is refused before anything is removed."""

    for value, flag in ((device, "--device"), (variant, "--variant")):
        if value is not None and not value.strip():
            fail(f"{flag} needs a value (an empty one would match every record), got {value!r}")
    for value, flag, known in (
        (kind, "--kind", KINDS), (status, "--status", STATUSES), (scope, "--scope", stored_names()["scope"]),
        (dtype, "--dtype", stored_names()["dtype"]),
    ):  # fmt: skip
        if value is not None and value not in known:
            fail(f"{flag} takes {', '.join(known[:-1])} or {known[-1]}, got {value!r}")
    for size, flag in ((d, "--d"), (n, "--n")):
        if size is not None and not 1 <= size <= MAX_SIZE:
            fail(f"{flag} must be a positive integer of at most {MAX_SIZE:,} (2^53, the largest stored size), "
                 f"got {typed(flag, size)}")  # fmt: skip
    found = dict(device=device, variant=variant, kind=kind, status=status, scope=scope, dtype=dtype, d=d, n=n)
    return {k: v for k, v in found.items() if v is not None}


with_filters = grouped(
    "filters",
    {"device": (DEVICE, Optional[str]), "variant": (VARIANT, Optional[str]), "kind": (KIND, Optional[str]),
     "status": (STATUS, Optional[str]), "scope": (SCOPE, Optional[str]), "dtype": (DTYPE, Optional[str]),
     "d": (D, Optional[int]), "n": (N, Optional[int])},
    _filters,
)  # fmt: skip
"""Give a command the filter options (--device, --variant, --kind, --status, --scope, --dtype, --d, --n), each
defined once above, in place of its parameter `filters`, which receives the checked filters (`_filters`)."""


def _open(store: Path | None, writable: bool) -> Database:

    db = open_database(store, writable)
    _warn(db)
    return db


def _warn(db) -> None:
    """Print the database's warnings (migrated files, rows that are not records) once each."""
    for warning in db.warnings:
        render.warn(warning)
    db.warnings.clear()


def _matching(
    store: Path | None, filters: dict, shipped: bool, writable: bool = False
) -> tuple[Database, list[tuple[int | None, dict]]]:
    """(database, [(row id or None for a shipped record, record)]) of every record matching the filters."""

    db = _open(store, writable)
    rows: list[tuple[int | None, dict]] = list(select(db, filters))
    _warn(db)
    if shipped:
        for path in regular_files(SHIPPED_DIR, "*.jsonl"):
            records, _ = read_jsonl(path)
            rows += [(None, r.data) for r in records if _match(r, filters)]
    return db, rows


def _match(r, filters: dict) -> bool:

    fields = {"variant": r.variant, "kind": r.kind, "status": r.status, "scope": r.scope, "dtype": r.dtype}
    fields.update(d=r.d, n=r.n)
    return all(fields[k] == v for k, v in filters.items() if k != "device") and device_matches(
        r.data, filters.get("device")
    )


@results_app.command("ls")
@with_filters
def ls(
    filters: dict = NO_FILTER,
    shipped: bool = SHIPPED,
    limit: int = typer.Option(50, "--limit", help="Rows shown in the table (0: all); --json prints all."),
    store: Optional[Path] = o.STORE,
    as_json: bool = o.JSON,
) -> None:
    """List stored measurements, newest last, filtered by device, variant, kind, status, scope, dtype, d, N."""

    if limit < 0:
        fail(f"--limit must be 0 or more, got {typed('--limit', limit)}")
    db, rows = _matching(store, filters, shipped)
    if as_json:
        emit({"store": str(db.path), "count": len(rows), "results": [rec for _, rec in rows]})
        return
    if not rows:
        render.line(f"No stored measurements match in {escape(str(db.path))}.")
        return
    shown = rows if limit == 0 else rows[-limit:]
    by_device: dict[str, list[dict]] = {}
    for _, rec in shown:
        by_device.setdefault(slug(rec["device"]), []).append(rec)
    columns = [render.Col("variant"), render.Col("kind"), render.Col("scope"), render.Col("dtype")]
    columns += [render.right("N"), render.right("d"), render.right("value")]
    for device_slug, recs in by_device.items():
        cells = [
            [escape(str(x)) for x in (r["variant"], r["kind"], r["scope"], r["dtype"])]
            + [str(r["sizes"].get("N", "")), str(r["sizes"].get("d", "")), _value(r)]
            for r in recs
        ]
        render.table(escape(f"{device_slug}: {recs[0]['device']['name']}"), columns, cells, keys=1)
    hidden = len(rows) - len(shown)
    more = f"; the {hidden:,} oldest not shown (--limit 0 shows all)" if hidden else ""
    where = escape(str(db.path)) + (" and the shipped files" if shipped else "")
    render.line(f"{len(rows):,} records in {where}{more}.")


def _value(rec: dict) -> str:
    if rec["status"] != "ok":
        return rec["status"]
    if rec["kind"] == "time":
        ms = 1e3 * rec["time"]["median"]
        rep = f" r{rec['replicate']}" if "replicate" in rec else ""
        return f"{ms:.3f} ms{rep}"
    return f"{rec['memory']['peak_bytes']:,} B"


@results_app.command("rm")
@with_filters
def rm(
    filters: dict = NO_FILTER,
    every: bool = typer.Option(False, "--all", help="Remove every record (needed when no filter is given)."),
    store: Optional[Path] = o.STORE,
    as_json: bool = o.JSON,
) -> None:
    """Remove the stored measurements that match the filters (the shipped ones are never touched)."""
    if not filters and not every:
        fail("results rm needs a filter (--device, --variant, --kind, --status, --scope, --dtype, --d, --n) or --all")
    db, rows = _matching(store, filters, shipped=False, writable=True)
    removed = db.delete([i for i, _ in rows if i is not None])
    if as_json:
        emit({"store": str(db.path), "removed": removed})
    else:
        render.line(f"Removed {removed:,} records from {escape(str(db.path))}.")


@results_app.command("export")
@with_filters
def export(
    filters: dict = NO_FILTER,
    shipped: bool = SHIPPED,
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Write to this file (default, and with -o -: stdout)."
    ),
    store: Optional[Path] = o.STORE,
) -> None:
    """Write the matching records as JSON lines: the format to share measurements and to ship them."""

    if output is not None and str(output) == STDOUT:
        output = None
    if output is not None:
        db_path = database_path(store)
        sqlite_files = (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm"))
        claim(output, is_results_file, "a results file", reading=sqlite_files)
    _, rows = _matching(store, filters, shipped)
    records = [rec for _, rec in rows]
    if output is None:
        write_jsonl(records, sys.stdout)
        return
    text = io.StringIO()
    count = write_jsonl(records, text)
    write_atomic(output, text.getvalue())
    err.print(f"Wrote {count:,} records to {escape(str(output))}.")


@results_app.command("import")
def import_(
    paths: list[Path] = typer.Argument(
        ..., metavar="FILE...", help="JSON-lines files written by `attn-cost results export`.", show_default=False
    ),
    store: Optional[Path] = o.STORE,
    replace: bool = typer.Option(
        False, "--replace", help="Take every record of the files, even over a newer stored one or an ok one."
    ),
    as_json: bool = o.JSON,
) -> None:
    """Add the records of JSON-lines files to the database. A record with a device and key already stored replaces
    it only when it is newer (its `at`) and not an oom where the stored one is ok; otherwise the stored one is kept,
    and the output says how many of each (docs/measuring.md). --replace takes the file's records over every one."""

    read = [(path, *read_jsonl(path)) for path in paths]  # every file checked before the store is touched
    db = _open(store, writable=True)
    merged = {}
    for path, records, problems in read:
        merged[str(path)] = db.merge(records, replace=replace)
        for warning in problems.warnings():
            render.warn(warning)
    if as_json:
        emit({"store": str(db.path), "imported": {k: m.written for k, m in merged.items()},
              "merged": {k: m.as_json() for k, m in merged.items()}})  # fmt: skip
    else:
        for name, m in merged.items():  # imported: what the store gained or had replaced, never what it had
            total = m.written + m.same + m.kept
            render.line(f"Imported {m.written:,} of {total:,} records from {escape(name)} into "
                        f"{escape(str(db.path))}: {m.said()}.")  # fmt: skip
