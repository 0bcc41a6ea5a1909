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
from attn_cost.cli.main import main

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
    from attn_cost.profilers.devicemodel.calibrated.data import load_opmodel

    path = tmp_path / "cal.json"
    path.write_text(json.dumps(_calibration({})))
    with pytest.raises(UserError, match="not an attn-cost op calibration"):
        load_opmodel(str(path))


def test_another_devices_calibration_under_this_devices_name_is_refused(tmp_path, monkeypatch) -> None:
    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.devicemodel.calibrated import data as opmodel
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


# -- issue 33 (user code, variants, options, wrong or silent answers) and issue 32 item 5 ---------------------


BOOM = """
class Boom(BaseException):
    \"\"\"Neither an Exception nor SystemExit nor KeyboardInterrupt.\"\"\"
"""


@pytest.mark.parametrize(
    ("body", "args"),
    [
        (BOOM + "raise Boom('at import')\n", ["variants"]),
        ("raise GeneratorExit\n", ["variants"]),
        (
            BOOM + CORE.format(name="'late'", extra="if g.training:\n        raise Boom('in training')"),
            ["formula", "late", "--mode", "training"],
        ),
        (
            CORE.format(name="'late'", extra="if g.training:\n        raise ValueError('in training')"),
            ["formula", "late", "--mode", "training"],
        ),
    ],
    ids=["BaseException at import", "GeneratorExit at import", "BaseException in training", "error in training"],
)
def test_whatever_a_variant_file_raises_is_one_line_with_its_line(tmp_path, capsys, body, args) -> None:
    path = _variant_file(tmp_path, body)
    capsys.readouterr()
    line = _one_line(main([*args, "--variants", str(path)]), capsys.readouterr().err)
    assert f"{path}:" in line


TRACED_BOOM = """
import torch

class Boom(BaseException):
    pass

def at_run(q, k, v):
    raise Boom("when run")

def closing(q, k, v):
    raise GeneratorExit
"""


@pytest.mark.parametrize(
    ("body", "name", "says"),
    [
        ("class Boom(BaseException):\n    pass\n\nraise Boom('at import')\n", "f", "raised Boom: at import"),
        (TRACED_BOOM, "at_run", "raised Boom: when run"),
        (TRACED_BOOM, "closing", "raised GeneratorExit"),
    ],
    ids=["at import", "when run", "GeneratorExit"],
)
def test_a_base_exception_in_traced_code_is_one_line(tmp_path, capsys, body, name, says) -> None:
    pytest.importorskip("torch")
    path = tmp_path / "boom.py"
    path.write_text(body)
    capsys.readouterr()
    line = _one_line(main(["trace", f"{path}:{name}"]), capsys.readouterr().err, says)
    assert f"{path}:" in line


SOFTMAX = """
import torch

def attn(q, k, v):
    return (q @ k.transpose(-2, -1)).softmax(-1) @ v
"""


def test_traced_code_cannot_change_torchs_global_state(tmp_path, capsys) -> None:
    """A module that switches torch to float64, no grad, deterministic algorithms and one thread at import: what
    attn-cost reports as fp32 is what the same code without those lines gives, and torch is as it was after."""
    torch = pytest.importorskip("torch")
    (tmp_path / "plain.py").write_text(SOFTMAX)
    (tmp_path / "switched.py").write_text(
        "import torch\ntorch.set_default_dtype(torch.float64)\ntorch.set_grad_enabled(False)\n"
        "torch.use_deterministic_algorithms(True)\ntorch.set_num_threads(1)\n"
        "torch.set_float32_matmul_precision('medium')\n" + SOFTMAX.replace("def attn", "def switched")
    )
    before = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.are_deterministic_algorithms_enabled(),
              torch.get_num_threads(), torch.get_float32_matmul_precision())  # fmt: skip
    out = {}
    for name, function in (("plain", "attn"), ("switched", "switched")):
        capsys.readouterr()
        assert main(["trace", f"{tmp_path / name}.py:{function}", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        out[name] = (data["traffic_bytes"], data["peak_bytes"])
    assert out["switched"] == out["plain"]
    after = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.are_deterministic_algorithms_enabled(),
             torch.get_num_threads(), torch.get_float32_matmul_precision())  # fmt: skip
    assert after == before


def test_a_variant_file_cannot_change_torchs_global_state(tmp_path, capsys) -> None:
    torch = pytest.importorskip("torch")
    path = _variant_file(
        tmp_path,
        "import torch\ntorch.set_default_dtype(torch.float64)\n" + CORE.format(name="'mine'", extra=""),
    )
    capsys.readouterr()
    assert main(["variants", "--variants", str(path)]) == 0
    assert torch.get_default_dtype() == torch.float32


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("not a module spec!", "is not a module name"),
        ("", "is not a module name"),
        ("json:no_such_attribute", "AttributeError"),
    ],
    ids=["spaces", "empty", "missing attribute"],
)
def test_an_entry_point_that_is_no_module_is_named_with_its_distribution(tmp_path, capsys, monkeypatch, value, says):
    from attn_cost.costmodel import plugins

    info = tmp_path / "site" / "odd_plugin-2.5.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: odd-plugin\nVersion: 2.5\n")
    (info / "entry_points.txt").write_text(f"[attn_cost.variants]\nodd = {value}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(plugins, "_configured", False)
    capsys.readouterr()
    line = _one_line(main(["variants"]), capsys.readouterr().err, says)
    assert "entry point odd" in line and "odd-plugin 2.5" in line


def test_an_unreadable_entry_points_file_is_named(tmp_path, capsys, monkeypatch) -> None:
    from attn_cost.costmodel import plugins

    info = tmp_path / "site" / "odd_plugin-2.5.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: odd-plugin\nVersion: 2.5\n")
    (info / "entry_points.txt").write_text("[attn_cost.variants]\nodd\n")  # no '='
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(plugins, "_configured", False)
    capsys.readouterr()
    _one_line(main(["variants"]), capsys.readouterr().err, "the distribution odd-plugin has an entry_points.txt")


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--example", "N=10000000", "at most 16,777,216"),  # 2·3·10⁷·8 = 4.8·10⁸ elements per input
        ("--example", "N=16,N=32", "--example gives N twice"),
        ("--example", "", "--example takes sizes"),
        ("--example", ",", "--example takes sizes"),
        ("--check", "N=x", "--check takes sizes"),
        ("--check", "N=16,N=32", "--check gives N twice"),
        ("--check", "", "--check takes sizes"),
    ],
)
def test_example_and_check_sizes_are_checked(tmp_path, capsys, option, value, says) -> None:
    pytest.importorskip("torch")
    (tmp_path / "plain.py").write_text(SOFTMAX)
    capsys.readouterr()
    _one_line(main(["trace", f"{tmp_path / 'plain.py'}:attn", option, value]), capsys.readouterr().err, says)


def test_check_sizes_beyond_memory_are_refused_before_running(tmp_path, capsys) -> None:
    """N = 10⁷: the N² scores alone are 2·3·10¹⁴·4 bytes, far beyond any machine's memory."""
    pytest.importorskip("torch")
    (tmp_path / "plain.py").write_text(SOFTMAX)
    capsys.readouterr()
    code = main(["trace", f"{tmp_path / 'plain.py'}:attn", "--check", "N=10000000"])
    _one_line(code, capsys.readouterr().err, "--check runs it for real")


def test_a_second_decode_step_for_a_variant_is_refused(tmp_path, capsys) -> None:
    path = _variant_file(
        tmp_path,
        """
        from attn_cost.costmodel.variants import decode_step

        @decode_step("softmax-causal")
        def cheap(g):
            q = g.input("q", b, h, 1, d)
            g.output(g.map("exp", "y", q))
        """,
    )
    capsys.readouterr()
    assert main(["decode", "--variant", "softmax-causal", "--n", "1024", "--json"]) == 0
    built_in = json.loads(capsys.readouterr().out)
    line = _one_line(main(["decode", "--variants", str(path)]), capsys.readouterr().err, "already has a decoding step")
    assert f"{path}:" in line
    assert main(["decode", "--variant", "softmax-causal", "--n", "1024", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == built_in


def test_a_variant_file_that_changes_a_registered_variant_is_refused(tmp_path, capsys) -> None:
    path = _variant_file(
        tmp_path,
        """
        from dataclasses import replace
        from attn_cost.costmodel.variants import REGISTRY

        REGISTRY["softmax"] = replace(REGISTRY["softmax"], summary="replaced")
        """,
    )
    capsys.readouterr()
    _one_line(main(["variants", "--variants", str(path)]), capsys.readouterr().err, "changes the registered variant")


ESCAPES = "\x1b[31m\x1b]0;title\x07\r\u202e"


@pytest.mark.parametrize(
    "args",
    [
        ["variants"],
        ["formula", "shouty"],
        ["crossover", "--pair", "softmax:shouty", "--d", "64"],
        ["cheapest", "--variant", "softmax", "--variant", "shouty"],
    ],
    ids=lambda a: a[0],
)
def test_terminal_control_sequences_in_a_variant_file_are_shown_escaped(tmp_path, capsys, args) -> None:
    path = tmp_path / "shouty.py"
    path.write_text(
        HEADER
        + f"""
@variant("shouty", {ESCAPES + "summary"!r}, source={ESCAPES + "source"!r}, family={ESCAPES!r})
def core(g, Q, K, V):
    S = g.matmul("S" + {ESCAPES!r}, Q, K.T, label={ESCAPES + "label"!r})
    return g.matmul("Y", S, V)
"""
    )
    capsys.readouterr()
    assert main([*args, "--variants", str(path)]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\r\u202e"), repr(out)
    if args[0] in ("variants", "formula"):  # the commands that print a summary
        assert "\\x1b[31m" in out


def _options() -> list[tuple[list[str], str, str]]:
    """(command path, flag, metavar) of every option of every command, as `main` builds them (metavars by
    `polish_help`: INT for an integer option)."""
    from attn_cost.cli.main import command_line

    root = command_line()
    out = []

    def walk(command, path: list[str]) -> None:
        for param in command.params:
            if param.param_type_name == "option" and param.opts:
                out.append((path, max(param.opts, key=len), str(param.metavar or "")))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(root, [])
    return out


def test_every_integer_option_has_a_limit() -> None:
    """Every integer option is a size or a count with a stated limit (cli.options.LIMITS), checked as it is read;
    `results ls --limit` (rows shown, 0 for all) is the one that is not a size."""
    from attn_cost.cli.options import LIMITS

    unbounded = [f"{' '.join(path)} {flag}" for path, flag, metavar in _options()
                 if metavar.startswith("INT") and flag not in LIMITS and flag != "--limit"]  # fmt: skip
    assert not unbounded


def _bounded() -> list[tuple[list[str], str]]:
    from attn_cost.cli.options import LIMITS

    return [(path, flag) for path, flag, _ in _options() if flag in LIMITS]


BOUNDED = _bounded()


@pytest.mark.parametrize(("path", "flag"), BOUNDED, ids=[f"{' '.join(p)} {f}" for p, f in BOUNDED])
def test_every_size_option_is_bounded_in_every_command(tmp_path, capsys, path, flag) -> None:
    from attn_cost.cli.options import LIMITS

    capsys.readouterr()
    _one_line(main([*path, flag, str(LIMITS[flag] + 1)]), capsys.readouterr().err, "beyond what attn-cost models")
    _one_line(main([*path, flag, "0"]), capsys.readouterr().err, "must be a positive integer")
    assert not (tmp_path / "home").exists()


def test_a_window_of_ten_to_the_thirty_is_refused(capsys) -> None:
    capsys.readouterr()
    code = main(["crossover", "--pair", "softmax:sliding-window", "--window", str(10**30)])
    _one_line(code, capsys.readouterr().err, "--window")


def test_io_against_a_quadratic_variant_is_refused(capsys) -> None:
    capsys.readouterr()
    _one_line(main(["io", "--against", "softmax"]), capsys.readouterr().err, "grow as N^2")
    assert main(["io", "--against", "sliding-window", "--json"]) == 0
    listed = {a["variant"] for r in json.loads(capsys.readouterr().out)["results"] for a in r["against"]}
    assert listed == {"sliding-window"}


NOT_APPLYING = [
    (["crossover", "--pair", "softmax:linear", "--causal-count", "tiles"], "--causal-count"),
    (["crossover", "--pair", "softmax:linear", "--causal", "--backward", "recompute"], "--backward"),
    (["crossover", "--pair", "softmax:linear", "--causal", "--causal-count", "triangle", "--tile", "64"], "--tile"),
    (["crossover", "--pair", "softmax:linear", "--align", "bottom-right"], "--align"),
    (["crossover", "--pair", "softmax:linear", "--bias", "none"], "--bias"),
    (["crossover", "--pair", "softmax:linear", "--window", "8"], "--window"),
    (["crossover", "--pair", "softmax:linear", "--L", "8"], "--L"),
    (["crossover", "--pair", "softmax:linear", "--r", "8"], "--r"),
    (["crossover", "--pair", "softmax:linear", "--scope", "block", "--depth", "8"], "--depth"),
    (["cheapest", "--variant", "softmax", "--variant", "linear", "--kv-heads", "1"], "--kv-heads"),
    (["decode", "--variant", "softmax-causal", "--kv-heads", "1"], "--kv-heads"),
    (["formula", "softmax", "--backward", "recompute"], "--backward"),
    (["heads", "--d-embed", "64", "--window", "8"], "--window"),
    (["io", "--proj-len", "8"], "--proj-len"),
    (["report", "--pair", "softmax:linear", "--bias", "none"], "--bias"),
    (["measure", "--variant", "softmax", "--n", "64", "--d", "8", "--features", "8"], "--features"),
    (["profile", "--pair", "softmax:linear", "--causal-count", "half"], "--causal-count"),
    (["validate", "--pair", "softmax:linear", "--tile", "64"], "--tile"),
]


@pytest.mark.parametrize(("args", "flag"), NOT_APPLYING, ids=[" ".join(a) for a, _ in NOT_APPLYING])
def test_an_option_that_cannot_apply_is_refused_in_every_command(tmp_path, capsys, args, flag) -> None:
    written = {"measure": "--store", "profile": "--store", "validate": "--store", "report": "--html"}
    where = [written[args[0]], str(tmp_path / "out")] if args[0] in written else []
    capsys.readouterr()
    line = _one_line(main([*args, *where]), capsys.readouterr().err)
    assert line.startswith(f"attn-cost: error: {flag} ")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["crossover", "--pair", "softmax:linear", "--causal", "--causal-count", "tiles", "--tile", "64"],
        ["crossover", "--pair", "softmax:linear", "--causal", "--mode", "training", "--backward", "recompute"],
        ["crossover", "--pair", "softmax:sliding-window", "--window", "8"],
        ["crossover", "--pair", "softmax:latte", "--L", "8"],
        ["crossover", "--pair", "softmax:linear", "--scope", "model", "--depth", "8", "--r", "2"],
        ["crossover", "--pair", "softmax:linear", "--scope", "layer", "--bias", "none"],
        ["crossover", "--pair", "softmax:softmax-fused", "--causal", "--n-kv", "64", "--align", "bottom-right"],
    ],
    ids=lambda a: " ".join(a[3:]),
)
def test_an_option_that_applies_is_taken_and_said(capsys, args) -> None:
    capsys.readouterr()
    assert main([*args, "--d", "64"]) == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "once"),
    [
        (["decode", "--n", "1024", "--n", "1024", "--n", "4096"], ["decode", "--n", "1024", "--n", "4096"]),
        (
            ["crossover", "--pair", "softmax:linear", "--pair", "softmax:linear", "--d", "64", "--d", "64"],
            ["crossover", "--pair", "softmax:linear", "--d", "64"],
        ),
        (
            ["crossover", "--causal", "--pair", "softmax:linear", "--pair", "softmax-causal:linear-causal"],
            ["crossover", "--causal", "--pair", "softmax:linear"],
        ),
        (
            [
                "cheapest",
                "--variant",
                "softmax",
                "--variant",
                "linear",
                "--variant",
                "linear",
                "--cost",
                "flops",
                "--cost",
                "flops",
            ],
            ["cheapest", "--variant", "softmax", "--variant", "linear", "--cost", "flops"],
        ),
        (
            [
                "io",
                "--against",
                "linear",
                "--against",
                "linear",
                "--variant",
                "softmax-fused",
                "--variant",
                "softmax-fused",
            ],
            ["io", "--against", "linear", "--variant", "softmax-fused"],
        ),
        (
            ["heads", "--d-embed", "64", "--variant", "softmax", "--variant", "softmax"],
            ["heads", "--d-embed", "64", "--variant", "softmax"],
        ),
    ],
    ids=lambda a: " ".join(a[:3]),
)
def test_a_repeated_value_is_used_once_with_a_note(capsys, args, once) -> None:
    """The answer to an option given twice is the answer to it given once; a note says so."""
    capsys.readouterr()
    assert main([*once, "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    assert main([*args, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == expected
    assert "is given twice" in err and "used once" in err


def test_every_repeatable_option_keeps_each_value_once() -> None:
    """The rule holds for every repeatable option of every command, as `main` builds them (`once_each`)."""
    from attn_cost.cli.app import _commands
    from attn_cost.cli.main import command_line

    root = command_line()
    repeatable = [(sub.name, p) for sub in _commands(root) for p in sub.params if getattr(p, "multiple", False)]
    assert len(repeatable) > 20
    for name, param in repeatable:
        assert getattr(param.callback, "__qualname__", "").startswith("_deduplicating"), (name, param.opts)


def test_init_with_one_key_twice_is_refused() -> None:
    from attn_cost.costmodel.errors import UserError

    pytest.importorskip("torch")
    from attn_cost.profilers.trace.load import parse_init

    assert parse_init(["dim=8", "dim=8"]) == {"dim": 8}
    with pytest.raises(UserError, match="--init gives dim twice"):
        parse_init(["dim=8", "dim=16"])
