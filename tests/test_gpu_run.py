"""benchmarks/gpu_run.py, the one-call GPU run: its arguments, the folders it will and will not write in, its record.

On this machine (no GPU) its device check refuses, which is also what a user without CUDA sees.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_run.py"
DOCTOR_REPORT = b'{"versions": {"attn-cost": "0.9"}, "device": {"kind": "cuda", "name": "an earlier GPU"}}\n'
"""What an earlier call's `doctor --gpu --json` wrote (cut down): the result a later call must not lose."""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def gpu_run():
    """The script as a module, to call its `main` in this process with its attn-cost parts stood in for."""
    spec = importlib.util.spec_from_file_location("gpu_run_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def _earlier_run(out: Path) -> dict[str, bytes]:
    """A folder an earlier call of the script left (its record in the layout of one call, the device check's
    report, the campaign's measurements), written by hand; returns every file's bytes."""
    (out / "campaign").mkdir(parents=True)
    record = {"kind": "attn-cost gpu run", "minutes": 9.0, "started": "2026-11-26T10:00:00Z",
              "parts": [{"part": "doctor", "seconds": 21.0, "exit": 0}, {"part": "campaign", "seconds": 498.0,
                                                                        "exit": 0}]}  # fmt: skip
    (out / "gpu_run.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "doctor.json").write_bytes(DOCTOR_REPORT)
    (out / "campaign" / "measurements.jsonl").write_text('{"a measurement": 1}\n')
    return _files(out)


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


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
    for calls in (1, 2):
        r = _run(str(out), "--minutes", "2", cwd=tmp_path)
        assert r.returncode == 2 and "nothing measured" in r.stderr and "--gpu needs CUDA" in r.stderr
        record = json.loads((out / "gpu_run.json").read_text())
        assert record["kind"] == "attn-cost gpu run" and len(record["calls"]) == calls
        for call in record["calls"]:
            assert call["minutes"] == 2.0 and [(p["part"], p["exit"]) for p in call["parts"]] == [("doctor", 2)]
        assert sorted(p.name for p in out.iterdir()) == ["gpu_run.json"]  # no doctor.json: nothing to keep


@pytest.mark.parametrize(
    "mine",
    [b'{"kind": "my notes", "parts": []}\n', b'{"parts": [{"part": "doctor"}]}\n', b"my own gpu_run notes\r\n"],
)
def test_a_users_own_gpu_run_json_is_refused_untouched(tmp_path, gpu_run, monkeypatch, capsys, mine) -> None:
    """A file named like the record but not of its kind does not make the folder the script's: refused in one
    line, exit 2, the file byte for byte as it was and nothing written beside it."""
    monkeypatch.setattr(gpu_run, "attn_cost", lambda *args, **kwargs: pytest.fail(f"ran attn-cost {args}"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "gpu_run.json").write_bytes(mine)
    assert gpu_run.main([str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "holds files this script did not write" in err, err
    assert _files(out) == {"gpu_run.json": mine}


@pytest.mark.parametrize(
    ("status", "stdout"),
    [(2, b""), (0, b"not JSON: cut off"), (124, b""), (1, b'{"versions": {"attn-cost": "1.0"}')],
    ids=["refused", "not-json", "outran", "failed"],
)
def test_a_resume_whose_device_check_is_refused_keeps_every_earlier_result(
    tmp_path, gpu_run, monkeypatch, capsys, status, stdout
) -> None:
    """The documented way to continue (the same OUT) on a machine whose device check is refused or fails: the
    earlier doctor.json stays byte for byte, the record keeps the earlier call's parts and adds this one's, and
    nothing else in OUT changes."""
    out = tmp_path / "out"
    before = _earlier_run(out)
    ran = []

    def part(*args, **kwargs):
        ran.append(args[0])
        return gpu_run.Part(status, stdout, b"attn-cost: error: --gpu needs CUDA\n" if status == 2 else b"")

    monkeypatch.setattr(gpu_run, "attn_cost", part)
    code = gpu_run.main([str(out), "--minutes", "2"])
    assert code == status if status == 2 else ran == ["doctor", "kernels", "campaign"]
    after = _files(out)
    assert after.keys() == before.keys()
    assert {k: v for k, v in after.items() if k != "gpu_run.json"} == {
        k: v for k, v in before.items() if k != "gpu_run.json"
    }
    calls = json.loads(after["gpu_run.json"])["calls"]
    earlier = json.loads(before["gpu_run.json"])
    assert calls[0] == {k: earlier[k] for k in ("started", "minutes", "parts")}
    assert len(calls) == 2 and calls[1]["minutes"] == 2.0 and calls[1]["parts"][0]["exit"] == status
    assert "the earlier doctor.json is kept" in capsys.readouterr().err


def test_a_complete_device_check_replaces_the_earlier_report(tmp_path, gpu_run, monkeypatch) -> None:
    """What the resume keeps is kept because the new result was not whole: a whole one replaces it."""
    out = tmp_path / "out"
    _earlier_run(out)
    new = b'{"versions": {"attn-cost": "1.0"}, "device": {"kind": "cuda", "name": "this GPU"}, "missing": []}\n'
    monkeypatch.setattr(gpu_run, "attn_cost", lambda *args, **kwargs: gpu_run.Part(0, new if args[0] == "doctor"
                                                                                   else b""))  # fmt: skip
    assert gpu_run.main([str(out), "--minutes", "2"]) == 0
    assert (out / "doctor.json").read_bytes() == new
    assert [len(c["parts"]) for c in json.loads((out / "gpu_run.json").read_text())["calls"]] == [2, 3]


def test_the_kernels_part_times_into_its_own_file_within_its_share(tmp_path, gpu_run, monkeypatch) -> None:
    """After the device check, `attn-cost kernels --gpu` writes OUT/kernels.csv in at most 150 s or 30 % of what is
    left (here 2 minutes: 0.3 × 120 s less the check's instant = 36 s, 0.60 minutes), the campaign gets the rest."""
    out = tmp_path / "out"
    calls = []

    def part(*args, **kwargs):
        calls.append((args, kwargs["timeout"]))
        return gpu_run.Part(0, DOCTOR_REPORT if args[0] == "doctor" else b"")

    monkeypatch.setattr(gpu_run, "attn_cost", part)
    assert gpu_run.main([str(out), "--minutes", "2"]) == 0
    (kernels, timeout), (campaign, _) = calls[1], calls[2]
    assert kernels[:4] == ("kernels", "--gpu", "--out", str(out.resolve() / "kernels.csv"))
    assert kernels[4] == "--minutes" and float(kernels[5]) == pytest.approx(0.6, abs=0.01)
    assert timeout == pytest.approx(36 + 60, abs=1) and campaign[0] == "campaign"


def test_ctrl_c_during_a_part_is_one_line_and_keeps_every_earlier_result(tmp_path, gpu_run, monkeypatch, capsys):
    out = tmp_path / "out"
    before = _earlier_run(out)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(gpu_run, "attn_cost", interrupted)
    assert gpu_run.main([str(out)]) == 130
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("gpu_run: interrupted"), err
    after = _files(out)
    assert after.keys() == before.keys()  # no temporary file
    assert {k: v for k, v in after.items() if k != "gpu_run.json"} == {
        k: v for k, v in before.items() if k != "gpu_run.json"
    }
    assert json.loads(after["gpu_run.json"])["calls"][0]["parts"] == json.loads(before["gpu_run.json"])["parts"]


def test_the_interrupt_status_is_attn_costs(gpu_run) -> None:
    from attn_cost.cli.app import Status

    assert gpu_run.INTERRUPTED == Status.INTERRUPTED


@pytest.mark.integration  # a real Ctrl-C reaches the script and its attn-cost process, as a terminal's does
def test_a_terminals_ctrl_c_during_the_device_check_ends_cleanly(tmp_path) -> None:
    out = tmp_path / "out"
    before = _earlier_run(out)
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(out)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    assert proc.stdout.readline().startswith("+ attn-cost doctor")  # the device check has started
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")  # Linux with CONFIG_PROC_CHILDREN
    deadline = time.monotonic() + 30
    while children.exists() and not children.read_text().split() and time.monotonic() < deadline:
        time.sleep(0.02)  # until its attn-cost process exists
    time.sleep(0.5)  # and has begun importing (doctor takes seconds here)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("gpu_run: interrupted"), err
    after = _files(out)
    assert after.keys() == before.keys() and after["doctor.json"] == before["doctor.json"]
