"""The command line on every typer, click and rich from the oldest that pyproject.toml declares.

CI runs this file (with test_cli_analytic.py and test_bad_inputs.py) twice: in the main environment and
in a second one holding the oldest declared typer, click and rich (.ci/run), so the declaration stays true.
No torch here: the analytic path and the CLI's error handling must run without it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _declared(package: str) -> str:
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(rf'"{package}>=([0-9.]+)"', text)
    assert found, f"pyproject.toml declares no minimum {package}"
    return found[1]


@pytest.mark.parametrize("package", ["typer", "click", "rich"])
def test_ci_checks_the_oldest_declared_version(package) -> None:
    """.ci/run installs exactly the minimum pyproject.toml declares, so the claim is what CI runs."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert f'"{package}=={_declared(package)}' in ci


def test_the_installed_versions_are_at_least_the_declared_ones() -> None:
    def as_tuple(version: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", version)[:3])

    for package in ("typer", "click", "rich"):
        try:
            have = metadata.version(package)
        except metadata.PackageNotFoundError:  # typer >= 0.27 carries its own click
            assert package == "click"
            continue
        assert as_tuple(have) >= as_tuple(_declared(package)), (package, have)


COMMANDS = ["crossover", "formula", "campaign", "measure", "profile", "calibrate", "report", "devices", "doctor",
            "trace", "results", "results import"]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
def test_every_commands_help_shows_metavars_and_plain_brackets(cli, command) -> None:
    r = cli(*command.split(), "--help")
    assert r.code == 0, r.err
    assert r.out.startswith("Usage: attn-cost")
    assert "<list" not in r.out and "\\[" not in r.out  # typer's type spellings, rich's escapes
    if command != "results import":  # the group's subcommands do not take it
        assert "--variants PATH [--variants ...]" in r.out  # the option every command gets, with its type


def test_option_metavars_say_what_a_value_is(cli) -> None:
    out = cli("crossover", "--help").out
    assert "--d INT [--d ...]" in out and "--pair A:B [--pair ...]" in out and "--dtype fp32|bf16|fp16" in out
    campaign = cli("campaign", "--help").out
    assert "--out PATH" in campaign and "--minutes FLOAT" in campaign and "--max-n INT" in campaign


def test_arguments_show_their_help(cli) -> None:
    out = cli("formula", "--help").out
    assert "NAME" in out and "Variant name (see `attn-cost variants`)." in " ".join(out.split())


def test_no_arguments_is_the_help_and_exit_0(cli) -> None:
    r = cli()
    assert r.code == 0 and "Usage: attn-cost" in r.out and "crossover" in r.out
    r = cli("results")  # a group of commands alone: its help, on every declared typer and click
    assert r.code == 0 and "Usage: attn-cost results" in r.out and "export" in r.out and r.err == ""


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--bogus"], "(see 'attn-cost --help')"),  # click's own words differ between versions
        (["crossover", "--d", "x"], "(see 'attn-cost crossover --help')"),
        (["crossover", "--pair"], "--pair"),
        (["nope"], "nope"),
        (["formula"], "NAME"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(cli, args, says) -> None:
    r = cli(*args)
    assert r.code == 2, (r.code, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attn-cost: error: ") and says in lines[0], r.err
    if args == ["--bogus"]:
        assert "No such option" in lines[0] and "--bogus" in lines[0]
    assert "Traceback" not in r.err


@pytest.mark.integration  # a fresh interpreter
def test_an_analytic_command_runs_and_imports_no_torch(tmp_path) -> None:
    code = (
        "import sys; from attn_cost.cli.main import main; "
        "rc = main(['crossover', '--pair', 'softmax:linear', '--d', '64', '--json']); "
        "print('torch' in sys.modules, 'plotly' in sys.modules, rc, file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.stderr.split()[-3:] == ["False", "False", "0"], proc.stderr
    assert '"n0"' in proc.stdout or '"N0"' in proc.stdout.upper()
