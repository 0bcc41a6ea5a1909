"""attn-cost never writes to a file it has not recognised as its own, never writes over the file it reads,
and never loses a measurement it has made (issue 22's data-loss class).

Each test keeps the bytes of the user's file before the command and compares them after: the expected
value is the file as the user left it, not anything attn-cost computed.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from attn_cost.cli.main import main
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.store.store import Database, ResultStore, read_jsonl

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
    store = tmp_path / "db" / "r.db"  # not beside the file: a store migrates the JSON lines it finds in its folder
    code, out, err = _run(["results", "import", str(f), "--store", str(store), "--json"], capsys)
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
    from attn_cost.profilers.campaign.run import Plan, open_campaign

    out = tmp_path / "campaign"
    out.mkdir()
    h100 = {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "threads": 16}
    theirs = [_record(h100, n) for n in (1024, 2048)]
    (out / "measurements.jsonl").write_text("".join(json.dumps(r) + "\n" for r in theirs))
    plan = Plan.quick_plan(str(out), device="cpu", store=str(tmp_path / "store"), calibrate=False)
    camp = open_campaign(plan, sink=lambda line: None)
    try:
        mine = {k: v for k, v in _record(DEVICE, 8).items() if k not in ("device", "at", "schema")}
        camp.store.add({**mine, "key": f"time|softmax|core|fp32|N=8,d=8|threads={camp.store.device['threads']}"})
        camp.checkpoint()
    finally:
        camp.log.close()
    kept, problems = read_jsonl(out / "measurements.jsonl")
    assert not problems.lines
    assert {r.data["device"]["name"] for r in kept} == {h100["name"], camp.store.device["name"]}
    assert sorted(r.n for r in kept if r.data["device"]["name"] == h100["name"]) == [1024, 2048]


@pytest.mark.parametrize("name", ["measurements.jsonl", "summary.json", "campaign.log"])
def test_a_campaign_never_writes_over_a_users_file_in_its_folder(tmp_path, name) -> None:
    from attn_cost.profilers.campaign.run import Plan, open_campaign

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


# -- issue 33: filters, links, schema versions, campaigns, read-only reading, damaged databases, imports ----------


def _store(tmp_path: Path, capsys) -> tuple[Path, bytes]:
    db = tmp_path / "results.db"
    assert _run(["results", "import", str(RESULTS), "--store", str(db)], capsys)[0] == 0
    return db, db.read_bytes()


FILTERS = [
    ["--device", ""], ["--device", "  "], ["--variant", ""],  # an empty device matched every name: rm removed all
    ["--dtype", "garbage"], ["--scope", "galaxy"], ["--kind", "speed"], ["--status", "fine"],
    ["--d", "0"], ["--n", "-1"], ["--d", str(2**63)], ["--n", str(2**64 + 1)],  # beyond SQLite: OverflowError
]  # fmt: skip


@pytest.mark.parametrize("command", ["rm", "ls", "export"])
@pytest.mark.parametrize("bad", FILTERS, ids=lambda f: " ".join(f) or "''")
def test_a_filter_that_cannot_select_is_refused_and_removes_nothing(tmp_path, capsys, command, bad) -> None:
    db, before = _store(tmp_path, capsys)
    code, out, err = _run(["results", command, *bad, "--store", str(db)], capsys)
    _refused(code, err, bad[0])
    assert out == "" and db.read_bytes() == before
    code, out, _ = _run(["results", "ls", "--json", "--store", str(db)], capsys)
    assert json.loads(out)["count"] == len(RESULTS.read_text().splitlines())  # all 24 records still there


def test_export_follows_a_link_at_its_output_path_and_keeps_the_link(tmp_path, capsys) -> None:
    db, _ = _store(tmp_path, capsys)
    link = tmp_path / "link.jsonl"
    link.symlink_to("elsewhere.jsonl")  # dangling: a shell redirection creates the file it points to
    code, _, err = _run(["results", "export", "--store", str(db), "-o", str(link)], capsys)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == "elsewhere.jsonl"
    assert (tmp_path / "elsewhere.jsonl").read_text() == RESULTS.read_text()  # both sorted by key: same bytes
    code, _, err = _run(["results", "export", "--store", str(db), "-o", str(link), "--d", "16"], capsys)
    assert code == 0 and link.is_symlink(), err  # its own export, replaced through the link
    assert all('"d": 16' in line for line in (tmp_path / "elsewhere.jsonl").read_text().splitlines())
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes\n")
    (tmp_path / "to-notes.jsonl").symlink_to(mine)
    code, _, err = _run(["results", "export", "--store", str(db), "-o", str(tmp_path / "to-notes.jsonl")], capsys)
    _refused(code, err, "does not write over files it did not create")
    assert mine.read_text() == "my notes\n" and (tmp_path / "to-notes.jsonl").is_symlink()


def test_every_writer_follows_a_link_and_keeps_permissions(tmp_path) -> None:
    from attn_cost.profilers.store.files import claim, is_json_of, write_atomic

    target = tmp_path / "real.json"
    target.write_text('{"kind": "mine"}\n')
    target.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    claim(link, is_json_of("mine"), "a test file")
    write_atomic(link, '{"kind": "mine", "v": 2}\n')
    assert link.is_symlink() and json.loads(target.read_text())["v"] == 2
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


@pytest.mark.parametrize("version", [-5, 0, "'abc'", "''", "1.5", None], ids=str)
@pytest.mark.parametrize("args", STORE_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_schema_version_no_attn_cost_writes_is_refused_untouched(tmp_path, capsys, version, args) -> None:
    db = tmp_path / "results.db"
    Database(db).close()
    con = sqlite3.connect(db)
    con.execute("DELETE FROM schema_version" if version is None else f"UPDATE schema_version SET version = {version}")
    con.commit()
    con.close()
    before = db.read_bytes()
    code, _, err = _run([*args, "--store", str(db)], capsys)
    _refused(code, err, "which no attn-cost writes")
    assert "newer" not in err and db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.db"]


def _campaign_files(slug: str) -> list[str]:
    """The files a CPU campaign in fp32 and bf16 with a calibration writes into DIR (docs/measuring.md)."""
    return ["campaign.log", "measurements.jsonl", "summary.json", f"{slug}.json", f"{slug}-bf16.json",
            "report-fp32.html", "report-bf16.html", f"opmodel-{slug}.json"]  # fmt: skip


def test_a_campaign_checks_every_file_it_writes_before_measuring(tmp_path, monkeypatch) -> None:
    from attn_cost.profilers.campaign.run import Plan, open_campaign
    from attn_cost.profilers.measure.machine import prepare, slug

    monkeypatch.setattr("attn_cost.profilers.store.store.ResultStore.add", lambda *a: pytest.fail("measured"))
    name = slug(prepare("cpu"))
    out, store = tmp_path / "campaign", tmp_path / "store"
    user_calibration = tmp_path / "home" / "opmodels" / f"{name}.json"
    for path in [out / f for f in _campaign_files(name)] + [user_calibration]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("my own notes\n")
        plan = Plan.quick_plan(str(out), device="cpu", store=str(store), dtypes=["fp32", "bf16"])
        with pytest.raises(UserError, match="does not write over files it did not create"):
            open_campaign(plan, sink=lambda line: None)
        assert path.read_text() == "my own notes\n", path
        assert [p.name for p in path.parent.iterdir()] == [path.name]  # no log, no export written beside it
        assert not store.exists()
        path.unlink()


def test_reading_a_database_leaves_no_files_beside_it_and_sees_a_writers_records(tmp_path, capsys) -> None:
    db, before = _store(tmp_path, capsys)
    out = tmp_path / "out.jsonl"
    for args in (["ls"], ["ls", "--json"], ["export"], ["export", "-o", str(out)], ["ls", "--shipped"]):
        code, _, err = _run(["results", *args, "--store", str(db)], capsys)
        assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "results.db"] and db.read_bytes() == before
    writer = ResultStore(DEVICE, db)  # a writer at work: its -wal file holds a record not yet in the database file
    writer.add({k: v for k, v in _record(DEVICE, 999).items() if k not in ("device", "at", "schema")})
    try:
        code, out_text, _ = _run(["results", "ls", "--json", "--n", "999", "--store", str(db)], capsys)
        assert code == 0 and json.loads(out_text)["count"] == 1
    finally:
        writer.close()


def _damage(db: Path) -> None:
    """Overwrite every page after the first (the header and schema stay valid) with a repeated byte."""
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for start in range(page, len(data), page):
        data[start : start + page] = b"\xa5" * page
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("args", STORE_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_damaged_database_is_one_line_that_says_how_to_recover(tmp_path, capsys, args) -> None:
    db, _ = _store(tmp_path, capsys)
    _damage(db)
    before = db.read_bytes()
    code, _, err = _run([*args, "--store", str(db)], capsys)
    _refused(code, err, "is damaged")
    assert ".recover" in err and db.read_bytes() == before


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"sizes": {"N": 0, "d": 8}}, "size N"),
        ({"sizes": {"N": 16, "d": 0}}, "size d"),
        ({"dtype": "fp8"}, "dtype"),
        ({"scope": "galaxy"}, "scope"),
        ({"at": "yesterday"}, "'at'"),
        ({"sizes": {"N": 32, "d": 8}}, "'key'"),  # the key says N=16
        ({"variant": "linear"}, "'key'"),  # the key says softmax
    ],
    ids=lambda x: str(x) if isinstance(x, str) else None,
)
def test_an_imported_record_must_agree_with_itself(tmp_path, capsys, change, reason) -> None:
    f = tmp_path / "odd.jsonl"
    good = _record(DEVICE, 16)
    f.write_text(json.dumps(good) + "\n" + json.dumps({**good, **change}) + "\n")
    store = tmp_path / "db" / "r.db"  # not beside the file: a store migrates the JSON lines it finds in its folder
    code, out, err = _run(["results", "import", str(f), "--store", str(store), "--json"], capsys)
    assert code == 0 and json.loads(out)["imported"] == {str(f): 1}
    assert reason in err and "line 2" in err, err
    f.write_text(json.dumps({**good, **change}) + "\n")
    code, _, err = _run(["results", "import", str(f), "--store", str(tmp_path / "s.db")], capsys)
    _refused(code, err, "none of its 1 lines is a record")
    assert not (tmp_path / "s.db").exists()
