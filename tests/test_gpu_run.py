"""benchmarks/gpu_run.py, the one-call GPU run: its arguments, the folders it will and will not write in, its record.

On this machine (no GPU) its device check refuses, which is also what a user without CUDA sees.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_run.py"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "the following arguments are required: out"),
        (("out", "--minutes", "abc"), "not a number of minutes: 'abc'"),
        (("out", "--minutes", "nan"), "give 1 to 28"),
        (("out", "--minutes", "0.5"), "give 1 to 28"),
        (("out", "--minutes", "60"), "give 1 to 28"),
        (("out", "--earlier", "nowhere"), "no measurements.jsonl in"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2_and_write_nothing(tmp_path, args, says) -> None:
    r = _run(*args, cwd=tmp_path)
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("own", ["doctor.json", "notes.txt", "campaign/summary.json"])
def test_a_folder_with_files_it_did_not_write_is_refused_untouched(tmp_path, own) -> None:
    out = tmp_path / "out"
    (out / own).parent.mkdir(parents=True)
    (out / own).write_bytes(b"the user's own\r\n")
    r = _run(str(out), cwd=tmp_path)
    assert r.returncode == 2 and "holds files this script did not write" in r.stderr
    assert (out / own).read_bytes() == b"the user's own\r\n"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [own]


def test_a_file_given_as_the_folder_is_refused(tmp_path) -> None:
    (tmp_path / "f").write_text("x")
    r = _run(str(tmp_path / "f"), cwd=tmp_path)
    assert r.returncode == 2 and "is not a folder" in r.stderr and (tmp_path / "f").read_text() == "x"


@pytest.mark.integration
def test_without_a_gpu_the_device_check_refuses_and_the_record_says_so(tmp_path) -> None:
    """A new folder: the run's record is written first; the device check refuses this CPU machine (exit 2), and
    nothing is measured. A second call finds the folder its own (the record) and goes on the same way."""
    out = tmp_path / "run"
    for _ in range(2):
        r = _run(str(out), "--minutes", "2", cwd=tmp_path)
        assert r.returncode == 2 and "nothing measured" in r.stderr and "--gpu needs CUDA" in r.stderr
        record = json.loads((out / "gpu_run.json").read_text())
        assert record["kind"] == "attn-cost gpu run" and record["minutes"] == 2.0
        assert [p["part"] for p in record["parts"]] == ["doctor"] and record["parts"][0]["exit"] == 2
        assert not (out / "campaign").exists()
