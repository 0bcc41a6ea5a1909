"""attn-cost never writes to a file it has not recognised as its own, never writes over the file it reads,
and never loses a measurement it has made (issue 22's data-loss class).

Each test keeps the bytes of the user's file before the command and compares them after: the expected
value is the file as the user left it, not anything attn-cost computed.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from attn_cost.cli.app import main
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.store import Database, ResultStore, read_jsonl

RESULTS = Path(__file__).parent / "data" / "results.jsonl"
"""Records of the tests' own made-up CPU (tests/data/make_device.py), not the shipped measurements of one CPU."""
DEVICE = {"kind": "cpu", "name": "Test CPU", "threads": 1, "torch": "2.13.0"}


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ATTN_COST_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "100")


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _refused(code: int, err: str, says: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert says in err, err


def _record(device: dict, n: int) -> dict:
    """A minimal valid time record, written out by hand (not by the store under test)."""
    return {
        "schema": 1, "key": f"time|softmax|core|fp32|N={n},d=8|threads=1", "kind": "time", "variant": "softmax",
        "scope": "core", "dtype": "fp32", "status": "ok", "at": "2026-11-24T00:00:00+00:00", "device": device,
        "sizes": {"N": n, "d": 8},
        "time": {"median": 1e-3, "q1": 1e-3, "q3": 1e-3, "min": 1e-3, "max": 1e-3, "runs": 3},
    }  # fmt: skip


STORE_COMMANDS = [
    ["results", "ls"],
    ["results", "export"],
    ["results", "rm", "--all"],
    ["results", "import", str(RESULTS)],
]


@pytest.mark.parametrize("content", [b"x", b"\n", b"hello world\n", b"SQLite format 3"], ids=repr)
@pytest.mark.parametrize("args", STORE_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_file_that_is_not_a_database_is_never_written(tmp_path, capsys, args, content) -> None:
    target = tmp_path / "notes.txt"
    target.write_bytes(content)
    code, _, err = _run([*args, "--store", str(target)], capsys)
    _refused(code, err, "not an attn-cost results database")
    assert target.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def _foreign_database(path: Path) -> bytes:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
    con.execute("INSERT INTO contacts VALUES ('Ada', '555')")
    con.commit()
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize("args", STORE_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_another_applications_database_is_checked_before_anything_is_written(tmp_path, capsys, args) -> None:
    db = tmp_path / "contacts.db"
    before = _foreign_database(db)
    code, _, err = _run([*args, "--store", str(db)], capsys)
    _refused(code, err, "without attn-cost's tables")
    assert db.read_bytes() == before  # still in its rollback journal mode, no tables added
    assert sorted(p.name for p in tmp_path.iterdir()) == ["contacts.db"]


def test_a_newer_attn_cost_database_is_refused_untouched(tmp_path, capsys) -> None:
    db = tmp_path / "results.db"
    Database(db).close()
    con = sqlite3.connect(db)
    con.execute("UPDATE schema_version SET version = 99")
    con.commit()
    con.close()
    before = db.read_bytes()
    code, _, err = _run(["results", "import", str(RESULTS), "--store", str(db)], capsys)
    _refused(code, err, "newer attn-cost")
    assert db.read_bytes() == before


def test_listing_or_exporting_creates_nothing(tmp_path, capsys) -> None:
    for args in (["results", "ls"], ["results", "export"], ["results", "ls", "--json"]):
        code, _, err = _run([*args, "--store", str(tmp_path / "new.db")], capsys)
        assert code == 0, err
    code, _, err = _run(["results", "ls", "--store", str(tmp_path / "folder")], capsys)
    assert code == 0, err
    assert list(tmp_path.iterdir()) == []


def test_export_never_writes_over_the_database_it_reads(tmp_path, capsys) -> None:
    db = tmp_path / "results.db"
    assert _run(["results", "import", str(RESULTS), "--store", str(db)], capsys)[0] == 0
    before = db.read_bytes()
    for target in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), tmp_path / "." / "results.db"):
        code, _, err = _run(["results", "export", "--store", str(db), "-o", str(target)], capsys)
        _refused(code, err, "being read")
    assert db.read_bytes() == before
    code, out, err = _run(["results", "ls", "--store", str(db), "--json"], capsys)
    assert code == 0 and json.loads(out)["count"] == len(read_jsonl(RESULTS)[0])


def test_export_writes_over_its_own_exports_only(tmp_path, capsys) -> None:
    db = tmp_path / "results.db"
    _run(["results", "import", str(RESULTS), "--store", str(db)], capsys)
    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"my": "data"}\n')
    code, _, err = _run(["results", "export", "--store", str(db), "-o", str(mine)], capsys)
    _refused(code, err, "does not write over files it did not create")
    assert mine.read_text() == '{"my": "data"}\n'
    export = tmp_path / "export.jsonl"
    export.touch()  # an empty file (mktemp's) holds nothing to lose
    for filters in ([], ["--d", "16"]):
        code, _, err = _run(["results", "export", "--store", str(db), "-o", str(export), *filters], capsys)
        assert code == 0, err
    records, problems = read_jsonl(export)
    assert records and not problems.lines and {r.d for r in records} == {16}
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_report_never_writes_over_a_page_it_did_not_make(tmp_path, capsys) -> None:
    page = tmp_path / "index.html"
    page.write_text("<html><body>my thesis</body></html>")
    code, _, err = _run(["report", "--html", str(page)], capsys)
    _refused(code, err, "not an HTML report")
    assert page.read_text() == "<html><body>my thesis</body></html>"


def test_rows_that_are_not_records_are_skipped_with_a_warning(tmp_path, capsys) -> None:
    db = tmp_path / "results.db"
    _run(["results", "import", str(RESULTS), "--store", str(db)], capsys)
    total = len(read_jsonl(RESULTS)[0])
    con = sqlite3.connect(db)
    con.execute("UPDATE records SET record = 'not json' WHERE id = 1")
    con.execute("UPDATE records SET record = ? WHERE id = 2", (json.dumps({"schema": 1, "key": "k"}),))
    no_time = _record(DEVICE, 5)
    del no_time["time"]
    con.execute("UPDATE records SET record = ? WHERE id = 3", (json.dumps(no_time),))
    con.commit()
    con.close()
    for args in (["results", "ls"], ["results", "ls", "--json"], ["results", "export"]):
        code, _, err = _run([*args, "--store", str(db)], capsys)
        assert code == 0 and "Traceback" not in err
        assert err.count("not an attn-cost record") == 3, err
    assert json.loads(_run(["results", "ls", "--json", "--store", str(db)], capsys)[1])["count"] == total - 3


@pytest.mark.parametrize("size", [2**63, 2**64 + 1, -1])
def test_sizes_beyond_sqlite_integers_are_refused_on_import(tmp_path, capsys, size) -> None:
    f = tmp_path / "big.jsonl"
    good, bad = _record(DEVICE, 8), _record(DEVICE, 9)
    bad["sizes"]["N"] = size
    f.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    code, out, err = _run(["results", "import", str(f), "--store", str(tmp_path / "r.db"), "--json"], capsys)
    assert code == 0 and "Traceback" not in err
    assert json.loads(out)["imported"] == {str(f): 1}
    assert "line 2" in err


def test_terminal_escapes_in_an_imported_record_are_refused(tmp_path, capsys) -> None:
    f = tmp_path / "evil.jsonl"
    evil = _record({**DEVICE, "name": "CPU\x1b[2J\x1b]0;pwned\x07"}, 8)
    f.write_text(json.dumps(evil) + "\n" + json.dumps(_record(DEVICE, 9)) + "\n")
    code, out, err = _run(["results", "import", str(f), "--store", str(tmp_path / "r.db")], capsys)
    assert code == 0 and "\x1b" not in out + err and "control characters" in err
    code, out, err = _run(["results", "ls", "--store", str(tmp_path / "r.db")], capsys)
    assert code == 0 and "\x1b" not in out + err and "Test CPU" in out


def _immutable(path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0


def test_a_database_that_cannot_be_written_is_refused_before_measuring(tmp_path) -> None:
    db = tmp_path / "results.db"
    Database(db).close()
    if not _immutable(db):
        pytest.skip("needs chattr +i (a file even root cannot write)")
    try:
        with pytest.raises(UserError, match=r"cannot be written.*nothing was measured"):
            ResultStore(DEVICE, db)
        ResultStore(DEVICE, db, writable=False).close()  # reading it is fine
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


def test_a_measurement_the_database_refuses_is_kept_elsewhere(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    store = ResultStore(DEVICE, tmp_path / "results.db")

    def full_disk(record) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store.db, "put", full_disk)
    record = _record(DEVICE, 8)
    with pytest.raises(UserError, match="attn-cost results import") as caught:
        store.add({k: v for k, v in record.items() if k not in ("device", "at", "schema")})
    kept = Path(str(caught.value).split("kept in ")[1].split(":")[0])
    rescued, problems = read_jsonl(kept)
    assert [r.key for r in rescued] == [record["key"]] and not problems.lines
    assert rescued[0].data["time"] == record["time"]


def test_a_campaign_rerun_keeps_another_devices_measurements(tmp_path) -> None:
    from attn_cost.profilers.campaign import Plan, open_campaign

    out = tmp_path / "campaign"
    out.mkdir()
    h100 = {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "threads": 16}
    theirs = [_record(h100, n) for n in (1024, 2048)]
    (out / "measurements.jsonl").write_text("".join(json.dumps(r) + "\n" for r in theirs))
    plan = Plan.quick_plan(str(out), device="cpu", store=str(tmp_path / "store"), calibrate=False)
    camp = open_campaign(plan, sink=lambda line: None)
    try:
        camp.store.add({k: v for k, v in _record(DEVICE, 8).items() if k not in ("device", "at", "schema")})
        camp.checkpoint()
    finally:
        camp.log.close()
    kept, problems = read_jsonl(out / "measurements.jsonl")
    assert not problems.lines
    assert {r.data["device"]["name"] for r in kept} == {h100["name"], camp.store.device["name"]}
    assert sorted(r.n for r in kept if r.data["device"]["name"] == h100["name"]) == [1024, 2048]


@pytest.mark.parametrize("name", ["measurements.jsonl", "summary.json", "campaign.log"])
def test_a_campaign_never_writes_over_a_users_file_in_its_folder(tmp_path, name) -> None:
    from attn_cost.profilers.campaign import Plan, open_campaign

    out = tmp_path / "campaign"
    out.mkdir()
    (out / name).write_text("my own notes\n")
    plan = Plan.quick_plan(str(out), device="cpu", store=str(tmp_path / "store"), calibrate=False)
    with pytest.raises(UserError, match="does not write over files it did not create"):
        camp = open_campaign(plan, sink=lambda line: None)
        try:
            camp.checkpoint()
        finally:
            camp.log.close()
    assert (out / name).read_text() == "my own notes\n"


def test_an_empty_store_file_reads_as_empty_and_a_bad_import_leaves_it_untouched(tmp_path, capsys) -> None:
    store = tmp_path / "results.db"
    store.touch()
    code, out, err = _run(["results", "ls", "--store", str(store)], capsys)
    assert code == 0 and "No stored measurements" in out and "Traceback" not in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema": 1}\n')
    code, _, err = _run(["results", "import", str(RESULTS), str(bad), "--store", str(store)], capsys)
    _refused(code, err, "not an attn-cost results file")
    assert store.read_bytes() == b""  # every file is read before the store is opened: nothing half-imported


def test_a_new_store_is_created_with_the_users_umask(tmp_path) -> None:
    import os

    old = os.umask(0o022)
    try:
        Database(tmp_path / "results.db").close()
    finally:
        os.umask(old)
    assert (tmp_path / "results.db").stat().st_mode & 0o777 == 0o644
