"""Issue 41's ten classes of hostile inputs, one test (or more) per class, each trying inputs of the class other
than the issue's example: every bad input one line on stderr and exit code 2 (or a documented behaviour), the
user's files byte for byte unchanged, every stored record kept, nothing hanging on sizes within the caps, and
every option applied to every number it could change or refused."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from attn_cost.cli.app import main

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
VALIDATION = BENCH / "data" / "validation-catalogue-round3-quick-cpu-intel-xeon-1f5011.json"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ATTN_COST_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "100")


def _one_line(code: int, err: str, says: str = "") -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error: " in lines[0], err
    assert says in lines[0], err
    return lines[0]


def _script(args: list[str], cwd: Path, file_limit: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    env = {**os.environ, "ATTN_COST_HOME": str(cwd / "home")}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300, preexec_fn=limit
    )


# -- 1. the scripts users are told to run keep the promises the CLI keeps -------------------------------------


def _doc(path: Path, begin: str, end: str, eol: str = "\r\n", tail: bytes = b"") -> bytes:
    data = eol.join(["# notes", begin, "old block", end, "after the block " * 600, ""]).encode() + tail
    path.write_bytes(data)
    return data


@pytest.mark.integration  # the scripts in new processes
def test_scripts_users_run_keep_the_clis_promises(tmp_path) -> None:
    """A file-size limit, a second target without markers, a target that is no regular file: one line, exit 2,
    every target byte for byte as it was, no temporary file left; a good CRLF target keeps CRLF and every byte
    outside its block."""
    begin, end = "<!-- gpu-table: begin -->", "<!-- gpu-table: end -->"
    notes = tmp_path / "notes.md"
    before = _doc(notes, begin, end, tail=b"\xff not UTF-8\r\n")
    proc = _script([str(BENCH / "gpu_table.py"), "--into", "notes.md"], tmp_path, file_limit=4096)
    _one_line(proc.returncode, proc.stderr, "notes.md")
    (tmp_path / "plain.md").write_text("no markers here\n")
    (tmp_path / "reversed.md").write_text(f"{end}\n{begin}\n")
    for second in ["plain.md", "reversed.md", "missing.md", "."]:
        proc = _script([str(BENCH / "gpu_table.py"), "--into", "notes.md", "--into", second], tmp_path)
        _one_line(proc.returncode, proc.stderr, second.strip("."))
    assert notes.read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left

    proc = _script([str(BENCH / "gpu_table.py"), "--into", "notes.md"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    after = notes.read_bytes()
    head, rest = after.split(begin.encode(), 1)
    block, tail = rest.split(end.encode(), 1)
    assert head == before.split(begin.encode())[0] and tail == before.split(end.encode())[1]
    assert block.count(b"\n") > 3 and block.count(b"\n") == block.count(b"\r\n")


@pytest.mark.integration  # the scripts in new processes
def test_every_into_and_output_of_the_scripts_is_checked_before_any_is_written(tmp_path) -> None:
    begin, end = "<!-- opmodel-validation: begin -->", "<!-- opmodel-validation: end -->"
    good = tmp_path / "good.md"
    before = _doc(good, begin, end, eol="\n")
    (tmp_path / "other.md").write_text("a user's notes\n")
    script = str(BENCH / "opmodel_validation.py")
    proc = _script([script, str(VALIDATION), "--into", "good.md", "--into", "other.md"], tmp_path)
    _one_line(proc.returncode, proc.stderr, "other.md")
    assert good.read_bytes() == before
    (tmp_path / "not-a-validation.json").write_text('{"kind": "something else"}')
    proc = _script([script, "not-a-validation.json"], tmp_path)
    _one_line(proc.returncode, proc.stderr, "not-a-validation.json")
    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "own data"}\n')
    for args in (
        [str(BENCH / "gpu_rehearsal.py"), "--json", "mine.json"],
        [str(BENCH / "gpu_rehearsal.py"), "--minutes", "nan"],
        [str(BENCH / "gpu_rehearsal.py"), "--minutes", "-1"],
        [str(BENCH / "trace_table.py"), "--print", "--json", "mine.json"],
    ):
        proc = _script(args, tmp_path)
        _one_line(proc.returncode, proc.stderr)
    assert mine.read_text() == '{"my": "own data"}\n'


# -- 2. an import says what it replaces and never puts an older or worse record over a stored one ------------

DEVICE = {"kind": "cpu", "name": "Test CPU", "threads": 1, "torch": "2.13.0"}


def _record(n: int, at: str, status: str = "ok", median: float = 1e-3) -> dict:
    """A time record written out by hand (not by the store under test)."""
    rec = {
        "schema": 1, "key": f"time|softmax|core|fp32|N={n},d=8|threads=1", "kind": "time", "variant": "softmax",
        "scope": "core", "dtype": "fp32", "status": status, "at": at, "device": DEVICE, "sizes": {"N": n, "d": 8},
    }  # fmt: skip
    if status == "ok":
        rec["time"] = {"median": median, "q1": median, "q3": median, "min": median, "max": median, "runs": 3}
    return rec


def _jsonl(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _stored(tmp_path: Path, capsys) -> dict[int, dict]:
    capsys.readouterr()
    assert main(["results", "export", "--store", str(tmp_path / "db")]) == 0
    return {json.loads(line)["sizes"]["N"]: json.loads(line) for line in capsys.readouterr().out.splitlines()}


def test_an_import_never_replaces_a_newer_or_better_record_silently(tmp_path, capsys) -> None:
    t0, t1, t2 = "2026-11-23T00:00:00+00:00", "2026-11-24T00:00:00+00:00", "2026-11-25T00:00:00+00:00"
    store = ["--store", str(tmp_path / "db")]
    first = _jsonl(tmp_path / "first.jsonl", [_record(n, t1) for n in (1, 2, 3, 4, 5)])
    assert main(["results", "import", first, *store]) == 0
    assert "5 new" in capsys.readouterr().out
    second = _jsonl(tmp_path / "second.jsonl", [
        _record(1, t2, "oom"),  # newer but worse: the ok timing is kept
        _record(2, t0, median=5e-3),  # older: kept
        _record(3, "2026-11-24T01:00:00+01:00", median=5e-3),  # the same moment in another zone: not newer, kept
        _record(4, t2, median=2e-3),  # newer and ok: replaces
        _record(5, t1),  # the same record: nothing changes
        _record(6, t0),  # new
    ])  # fmt: skip
    capsys.readouterr()
    assert main(["results", "import", second, *store, "--json"]) == 0
    said = json.loads(capsys.readouterr().out)["merged"][second]
    assert {k: said[k] for k in ("added", "replaced", "same", "kept_newer", "kept_ok")} == {
        "added": 1, "replaced": 1, "same": 1, "kept_newer": 2, "kept_ok": 1
    }  # fmt: skip
    stored = _stored(tmp_path, capsys)
    assert stored[1]["status"] == "ok" and stored[2]["at"] == t1 and stored[3]["time"]["median"] == 1e-3
    assert stored[4]["time"]["median"] == 2e-3 and sorted(stored) == [1, 2, 3, 4, 5, 6]
    capsys.readouterr()
    assert main(["results", "import", second, *store]) == 0  # the table says it too, and how to take the file's
    out = " ".join(capsys.readouterr().out.split())
    assert "kept 3 stored records" in out and "--replace" in out
    assert main(["results", "import", second, *store, "--replace"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "3 replaced" in out and "by an older record" in out and "oom where it was ok" in out
    stored = _stored(tmp_path, capsys)
    assert stored[1]["status"] == "oom" and stored[2]["at"] == t0
