"""Hostile inputs answered with one line and exit code 2, or correctly (issue 22's traceback and
silent-wrong-answer classes): variant files, measuring a variant without an implementation,
calibration files, closed and ASCII-only standard streams."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from attn_cost.cli.app import main

ENTRY = [sys.executable, "-c", "from attn_cost.cli.entry import run; run()"]
MY_VARIANTS = Path(__file__).parents[1] / "docs" / "examples" / "my_variants.py"
HEADER = """
from attn_cost.costmodel.symbols import N, b, d, h
from attn_cost.costmodel.variants import variant
import sympy as sp
"""


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ATTN_COST_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "100")


@pytest.fixture(autouse=True)
def _restored(registry_restored):
    """Variant files loaded in-process here are taken back after each test."""


def _cli(args: list[str], tmp_path: Path, **popen) -> subprocess.CompletedProcess:
    env = {**os.environ, "ATTN_COST_HOME": str(tmp_path / "home"), **popen.pop("env", {})}
    return subprocess.run([*ENTRY, *args], capture_output=True, text=True, env=env, timeout=120, **popen)


def _one_line(proc_or_code, err: str | None = None, says: str = "") -> str:
    code, err = (proc_or_code.returncode, proc_or_code.stderr) if err is None else (proc_or_code, err)
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attn-cost: error: "), err
    assert says in lines[0], err
    return lines[0]


def _variant_file(tmp_path: Path, body: str, name: str = "mine.py") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


CORE = """
@variant({name}, "test", source="test", family="test")
def core(g, Q, K, V):
    {extra}
    return g.matmul("Y", g.matmul("S", Q, K.T), V)
"""


@pytest.mark.parametrize(
    ("name", "extra", "says"),
    [
        ("123", "", "must be a string"),
        ("''", "", "is not allowed"),
        ("'soft\\u200bmax'", "", "is not allowed"),  # would list as a second softmax
        ("'my:variant'", "", "is not allowed"),  # could never be named in --pair A:B
        ("'zz'", "g.input('W', b, h, N, sp.Symbol('Z'))", "not a size attn-cost knows"),
        ("'zz'", "g.input('W', b, h, 10**6 / N, d)", "divides by the sequence length"),
        ("'zz'", "g.input('W', b, h, sp.sqrt(N), d)", "not a polynomial"),
        ("'zz'", "g.input('W', b, h, N, -32)", "negative"),
        ("'zz'", "g.zeros('W', b, h, N - 4 * d, d)", "negative at"),
    ],
)
def test_a_variant_file_with_a_bad_name_or_size_is_one_line(tmp_path, capsys, name, extra, says) -> None:
    path = _variant_file(tmp_path, CORE.format(name=name, extra=extra))
    capsys.readouterr()
    code = main(["variants", "--variants", str(path)])
    _one_line(code, capsys.readouterr().err, says)


def test_a_negative_loop_count_is_refused(tmp_path, capsys) -> None:
    path = _variant_file(
        tmp_path,
        """
        @variant("steps", "test", source="test", family="test")
        def core(g, Q, K, V):
            S = g.matmul("S", Q, K.T)
            with g.loop(16 * d - 32 * N, "steps"):
                g.map("exp", "E", S)
            return g.matmul("Y", S, V)
        """,
    )
    capsys.readouterr()
    line = _one_line(main(["formula", "steps", "--variants", str(path)]), capsys.readouterr().err, "loop 'steps'")
    assert "-32*N + 16*d is negative at N = 1, d = 1" in line  # 16 - 32 < 0


@pytest.mark.integration  # the console script in a new process
@pytest.mark.parametrize("code", ["0", "3", "'bye'"])
def test_sys_exit_in_a_variant_file_is_an_error_of_the_file(tmp_path, code) -> None:
    path = _variant_file(tmp_path, f"import sys\nsys.exit({code})\n")
    proc = _cli(["variants", "--variants", str(path)], tmp_path)
    line = _one_line(proc, says="sys.exit")
    assert f"{path}:" in line


@pytest.mark.integration  # the console script in a new process
def test_a_print_in_a_variant_file_never_lands_in_json(tmp_path) -> None:
    path = _variant_file(
        tmp_path,
        """
        print("loading my file")

        @variant("chatty", "test", source="test", family="test")
        def core(g, Q, K, V):
            print("building")
            return g.matmul("Y", g.matmul("S", Q, K.T), V)
        """,
    )
    proc = _cli(["crossover", "--variants", str(path), "--pair", "softmax:chatty", "--d", "8", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)  # stdout is JSON and nothing else
    assert "loading my file" in proc.stderr


def test_a_variant_file_that_defines_nothing_is_said(tmp_path, capsys) -> None:
    path = _variant_file(tmp_path, "x = 1\n")
    capsys.readouterr()
    _one_line(main(["variants", "--variants", str(path)]), capsys.readouterr().err, "defines no variant")


@pytest.mark.integration  # the console script in a new process
def test_an_entry_point_whose_package_is_missing_is_one_line(tmp_path) -> None:
    site = tmp_path / "site"
    info = site / "ghost_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ghost-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[attn_cost.variants]\nghost = ghost_package.variants\n")
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    _one_line(_cli(["variants"], tmp_path, env=env), says="ghost_package")


@pytest.mark.parametrize("command", ["measure", "profile", "validate", "check-flops"])
def test_a_variant_without_an_implementation_is_refused_before_measuring(tmp_path, capsys, command) -> None:
    args = {
        "measure": ["--variant", "cosine", "--n", "64", "--d", "8", "--cpu"],
        "profile": ["--pair", "softmax:cosine", "--d", "8", "--cpu"],
        "validate": ["--pair", "softmax:cosine", "--cpu"],
        "check-flops": ["--variant", "cosine"],
    }[command]
    store = [] if command == "check-flops" else ["--store", str(tmp_path / "r.db")]
    capsys.readouterr()
    code = main([command, *args, "--variants", str(MY_VARIANTS), *store])
    _one_line(code, capsys.readouterr().err, "no reference implementation")
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["measure", "--variant", "softmax", "--n", "64", "--d", "8", "--cpu", "--n-kv", "128"],
        ["profile", "--pair", "softmax:linear", "--d", "8", "--cpu", "--n-kv", "128"],
    ],
)
def test_n_kv_is_refused_where_it_cannot_be_measured(tmp_path, capsys, args) -> None:
    capsys.readouterr()
    _one_line(main([*args, "--store", str(tmp_path / "r.db")]), capsys.readouterr().err, "--n-kv")


@pytest.mark.parametrize("minutes", ["nan", "inf", "-1", "0"])
def test_campaign_budget_must_be_a_real_number_of_minutes(tmp_path, capsys, minutes) -> None:
    capsys.readouterr()
    code = main(["campaign", "--cpu", "--out", str(tmp_path / "c"), "--minutes", minutes])
    _one_line(code, capsys.readouterr().err, "--minutes")
    assert not (tmp_path / "c").exists()


def test_calibrate_refuses_an_unknown_dtype(tmp_path, capsys) -> None:
    capsys.readouterr()
    _one_line(main(["calibrate", "--cpu", "--dtype", "fp8"]), capsys.readouterr().err, "unknown dtype 'fp8'")


def _calibration(device: dict) -> dict:
    return {
        "schema": 1, "kind": "attn-cost op model", "device": device, "dtype": "fp32",
        "points": [{"kernel": "copy", "dims": {"bytes": 4096}, "seconds": 1e-6}],
    }  # fmt: skip


def test_a_calibration_without_a_device_is_one_line(tmp_path, capsys) -> None:
    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.opmodel import load_opmodel

    path = tmp_path / "cal.json"
    path.write_text(json.dumps(_calibration({})))
    with pytest.raises(UserError, match="not an attn-cost op calibration"):
        load_opmodel(str(path))


def test_another_devices_calibration_under_this_devices_name_is_refused(tmp_path, monkeypatch) -> None:
    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers import opmodel
    from test_opmodel import synthetic_model

    theirs = synthetic_model()  # a calibration of the tests' made-up CPU
    saved = theirs.save(tmp_path / "theirs")
    folder = tmp_path / "home" / "opmodels"
    folder.mkdir(parents=True)
    (folder / "cpu-someone-else-123456.json").write_bytes(saved.read_bytes())
    with pytest.raises(UserError, match=f"is the op calibration of {theirs.slug}"):
        opmodel.load_opmodel("cpu-someone-else-123456")


def _with_closed(redirect: str, args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run attn-cost from a shell with one standard stream closed (`>&-` or `2>&-`)."""
    env = {**os.environ, "ATTN_COST_HOME": str(tmp_path / "home")}
    shell = f'exec "$@" {redirect}'
    return subprocess.run(["bash", "-c", shell, "_", *ENTRY, *args], capture_output=True, text=True, env=env)


@pytest.mark.integration  # the console script in a new process
def test_closed_stdout_is_one_line(tmp_path) -> None:
    _one_line(_with_closed(">&-", ["crossover", "--d", "64"], tmp_path), says="standard output is closed")


@pytest.mark.integration  # the console script in a new process
def test_closed_stderr_only_loses_the_messages(tmp_path) -> None:
    good = _with_closed("2>&-", ["crossover", "--d", "64", "--json"], tmp_path)
    assert good.returncode == 0 and json.loads(good.stdout)
    bad = _with_closed("2>&-", ["crossover", "--d", "0"], tmp_path)
    assert bad.returncode == 2 and bad.stdout == ""


@pytest.mark.integration  # the console script in a new process
@pytest.mark.parametrize("args", [["crossover", "--d", "64"], ["formula", "taylorshift-efficient"], ["variants"]])
def test_an_ascii_only_terminal_gets_ascii_spellings(tmp_path, args) -> None:
    proc = _cli(args, tmp_path, env={"PYTHONIOENCODING": "ascii", "COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout.isascii()
    if args[0] == "formula":
        assert "d^3" in proc.stdout or "d^2" in proc.stdout


def test_terminal_escapes_in_what_the_user_typed_are_never_echoed_raw(tmp_path, capsys) -> None:
    path = tmp_path / "a\x1b[2Jb.jsonl"
    capsys.readouterr()
    code = main(["results", "import", str(path), "--store", str(tmp_path / "r.db")])
    line = _one_line(code, capsys.readouterr().err, "cannot read")
    assert "\x1b" not in line and "\\x1b[2J" in line
