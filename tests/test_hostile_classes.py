"""Issue 41's ten classes of hostile inputs, one test (or more) per class, each trying inputs of the class other
than the issue's example: every bad input one line on stderr and exit code 2 (or a documented behaviour), the
user's files byte for byte unchanged, every stored record kept, nothing hanging on sizes within the caps, and
every option applied to every number it could change or refused."""

from __future__ import annotations

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
