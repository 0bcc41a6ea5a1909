"""Every bad input is answered with one line on stderr and exit code 2: no traceback, no hang, no
wrong answer under a right-looking heading (issue 9's 32 bad cases and the class around each).

Most cases run in-process through `main` (fast); what needs a real process (a full disk, a closed
pipe, Ctrl-C while Python imports, a would-be hang) runs as one, under a timeout.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attn_cost.cli.main import main

PROFILE = min((Path(__file__).parent / "data" / "devices").glob("*.json"))
"""The tests' own device profile (tests/data/make_device.py), never the shipped measurements of one CPU."""
DEVICE = PROFILE.stem
ENTRY = [sys.executable, "-c", "from attn_cost.cli.entry import run; run()"]


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ATTN_COST_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "100")


def _one_line_error(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("attn-cost: error: ")


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


# -- sizes, names and options ---------------------------------------------------------------------

ARGUMENTS = [
    (["crossover", "--d", "0"], "--d must be a positive integer"),
    (["crossover", "--d", "-4"], "--d must be a positive integer"),
    (["crossover", "--d", "sixty"], "--d"),
    (["crossover", "--d", "100000000"], "beyond what attn-cost models"),  # was a hang: N stepped by 1
    (["crossover", "--d", "65537"], "at most 65,536"),
    (["crossover", "--h", "70000"], "--h"),
    (["crossover", "--b", "0"], "--b must be a positive integer"),
    (["crossover", "--L", "0", "--pair", "softmax:latte"], "--L must be a positive integer"),
    (["crossover", "--d-embed", "256", "--h", "3"], "does not divide"),
    (["crossover", "--d-embed", "256", "--d", "64"], "either --d or --d-embed"),
    (["crossover", "--pair", "softmax"], "A:B"),
    (["crossover", "--pair", "softmx:linear"], "did you mean"),
    (["crossover", "--pair", "softmax:linear", "--all"], "not both"),
    (["crossover", "--convention", "nope"], "unknown convention"),
    (["crossover", "--dtype", "fp8"], "unknown dtype"),
    (["crossover", "--scope", "galaxy"], "unknown scope"),
    (["crossover", "--mode", "sleeping"], "unknown mode"),
    (["crossover", "--device", "cpu-nonexistent"], "unknown device"),
    (["cheapest", "--variant", "softmax"], "at least two"),
    (["cheapest", "--cost", "joules"], "unknown cost"),
    (["decode", "--n", "0"], "--n must be a positive integer"),
    (["decode", "--n", "10000000000000"], "beyond what attn-cost models"),
    (["formula", "taylorshift"], "did you mean"),
    (["heads", "--d-embed", "0"], "--d-embed must be a positive integer"),
    (["heads", "--d-embed", "1000000007"], "beyond what attn-cost models"),  # was a hang: O(n) divisors
    (["heads", "--d-embed", "256", "--n", "0"], "--n must be a positive integer"),
    (["no-such-command"], "No such command"),
    (["crossover", "--no-such-option"], "No such option"),
    (["crossover", "--d"], "requires an argument"),
    # measuring commands: answered before any measurement (and before torch, see below)
    (["profile", "--max-n", "0"], "--max-n must be a positive integer"),
    (["profile", "--max-n", "1"], "--max-n 1 leaves nothing to search"),
    (["profile", "--scope", "model"], "use --scope block"),
    (["profile", "--gpu", "--cpu"], "not both"),
    (["profile", "--threads", "0"], "--threads must be a positive integer"),
    (["profile", "--repeats", "0"], "--repeats must be a positive integer"),
    (["profile", "--cost", "joules"], "--cost takes time, memory or both"),
    (["measure", "--variant", "softmax", "--n", "0"], "--n must be a positive integer"),
    (["measure", "--variant", "nope", "--n", "8"], "unknown variant"),
    (["validate", "--fit-d", "8"], "at least two head dims"),
    (["validate", "--scope", "model"], "use --scope block"),
    (["check-flops", "--variant", "super-attention", "--scope", "core"], "has no core scope"),
    (["check-flops", "--scope", "galaxy"], "unknown scope"),
]


@pytest.mark.parametrize(("args", "needle"), ARGUMENTS, ids=[" ".join(a) for a, _ in ARGUMENTS])
def test_bad_arguments_get_one_line_and_exit_2(args: list[str], needle: str, capsys) -> None:
    code, _, err = _run(args, capsys)
    _one_line_error(code, err)
    assert needle in err


@pytest.mark.integration  # a fresh interpreter
def test_measuring_commands_answer_bad_arguments_before_importing_torch() -> None:
    script = (
        "import sys; from attn_cost.cli.main import main\n"
        "for args in (['profile', '--max-n', '1'], ['measure', '--variant', 'softmax', '--n', '0'],"
        " ['validate', '--gpu', '--cpu'], ['check-flops', '--variant', 'super-attention', '--scope', 'core']):\n"
        "    assert main(args) == 2, args\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_gpu_without_cuda_is_one_line(capsys) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, _, err = _run(["measure", "--variant", "softmax", "--n", "8", "--d", "8", "--gpu"], capsys)
    _one_line_error(code, err)
    assert "needs CUDA" in err


# -- device profiles: one schema, checked field by field -------------------------------------------


def _profile(tmp_path: Path, change) -> str:
    data = json.loads(PROFILE.read_text())
    change(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data, allow_nan=True))
    return str(path)


def _set(path: str, value):
    def change(data: dict) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        if value is _DROP:
            del node[last]
        else:
            node[last] = value

    return change


_DROP = object()
PROFILES = [
    ("device name missing", _set("device.name", _DROP), "device.name"),
    ("device name empty", _set("device.name", ""), "device.name"),
    ("device not an object", _set("device", "AMD"), "device must be an object"),
    ("launch_s fast", _set("time.linear.launch_s", "fast"), "time.linear.launch_s"),
    ("launch_s NaN", _set("time.linear.launch_s", math.nan), "time.linear.launch_s"),
    ("launch_s negative", _set("time.linear.launch_s", -1.0), "time.linear.launch_s"),
    ("launch_s boolean", _set("time.linear.launch_s", True), "time.linear.launch_s"),
    ("points a float", _set("time.linear.points", 1.5), "time.linear.points"),
    ("fit_d a string", _set("time.linear.fit_d", "8,16"), "time.linear.fit_d"),
    ("time a list", _set("time", []), "time must be an object"),
    ("memory scale infinite", _set("memory.linear.scale", math.inf), "memory.linear.scale"),
    ("memory fit missing a field", _set("memory.linear.offset_bytes", _DROP), "memory.linear.offset_bytes"),
    ("measured [{a: 1}]", _set("measured", [{"a": 1}]), "measured[0].a"),
    ("measured abc", _set("measured", "abc"), "measured must be a list"),
    ("measured d a string", lambda p: p["measured"][0].update(d="16"), "measured[0].d"),
    ("measured n0 a string", lambda p: p["measured"][0].update(measured_n0="many"), "measured[0].measured_n0"),
    ("scope unknown", _set("scope", "galaxy"), "scope must be one of"),
    ("dtype unknown", _set("dtype", "fp8"), "dtype must be one of"),
    ("mode unknown", _set("mode", "sleeping"), "mode must be one of"),
    ("schema 2", _set("schema", 2), "schema must be 1"),
    ("no schema", _set("schema", _DROP), "schema must be 1"),
]


@pytest.mark.parametrize(("change", "needle"), [p[1:] for p in PROFILES], ids=[p[0] for p in PROFILES])
def test_an_ill_formed_device_profile_is_one_line(change, needle: str, tmp_path, capsys) -> None:
    path = _profile(tmp_path, change)
    code, _, err = _run(["crossover", "--d", "16", "--device", path], capsys)
    _one_line_error(code, err)
    assert "is not an attn-cost device profile" in err and needle in err


@pytest.mark.parametrize(
    ("content", "needle"),
    [("{not json", "not a readable device profile"), ("[1, 2]", "the file must be an object"), ("", "readable")],
    ids=["not JSON", "a list", "empty"],
)
def test_an_unreadable_device_profile_is_one_line(content: str, needle: str, tmp_path, capsys) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, _, err = _run(["crossover", "--d", "16", "--device", str(path)], capsys)
    _one_line_error(code, err)
    assert needle in err


def test_a_folder_named_like_a_profile_is_one_line(tmp_path, capsys) -> None:
    folder = tmp_path / "folder.json"
    folder.mkdir()
    code, _, err = _run(["crossover", "--d", "16", "--device", str(folder)], capsys)
    _one_line_error(code, err)


# -- stored points only at the setting they were measured at -----------------------------------------


def _device_rows(capsys, *extra: str) -> list[dict]:
    code, out, err = _run(["crossover", "--d", "16", "--device", DEVICE, "--json", *extra], capsys)
    assert code == 0, err
    return json.loads(out)["results"]


def test_measured_points_show_at_their_own_setting(fixture_device, capsys) -> None:
    (row,) = [r for r in _device_rows(capsys) if r["a"] == "taylorshift-direct"]
    assert row["measured_n0"] == 4321.0 and row["corrected_n0"] is not None  # tests/data/make_device.py


@pytest.mark.parametrize(
    "extra",
    [["--scope", "layer"], ["--dtype", "bf16"], ["--mode", "training"], ["--b", "2"], ["--h", "2"]],
    ids=["scope layer", "dtype bf16", "mode training", "batch 2", "heads 2"],
)
def test_no_measured_or_corrected_point_under_another_setting(extra: list[str], fixture_device, capsys) -> None:
    rows = _device_rows(capsys, *extra)
    for row in rows:
        assert row["measured_n0"] is None and row["measured_n1"] is None, row
        if extra[0] in ("--scope", "--dtype", "--mode"):
            assert row["corrected_n0"] is None and row["corrected_n1"] is None, row


def test_another_setting_is_marked_not_measured_in_the_table(fixture_device, capsys) -> None:
    code, out, _ = _run(["crossover", "--d", "16", "--device", DEVICE], capsys)
    assert code == 0 and "4,321 ± 6" in out  # the measured point, at the setting it was measured at
    code, out, _ = _run(["crossover", "--d", "16", "--device", DEVICE, "--dtype", "bf16"], capsys)
    assert code == 0
    assert "no value at this setting" in out
    assert "4,321" not in out and "4321" not in out  # the fp32 point is not shown under bf16


def test_shipped_measurements_of_a_same_named_cpu_are_offered_as_reference(tmp_path, monkeypatch) -> None:
    """Shipped here: the tests' own profile and a second CPU of the same name, core count and model apart."""
    from attn_cost.profilers.devicemodel.measured import data as corrections
    from attn_cost.profilers.measure.machine import slug

    mine = json.loads(PROFILE.read_text())["device"]
    sibling = {**mine, "model": "17", "cpus": 8}
    stranger = {**mine, "name": "Some Other CPU", "model": "17", "cpus": 64}
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for device in (mine, sibling, stranger):
        (shipped / f"{slug(device)}.json").write_text(json.dumps({**json.loads(PROFILE.read_text()), "device": device}))
    monkeypatch.setattr(corrections, "SHIPPED", shipped)

    assert corrections.shipped_elsewhere(mine) is None  # the very device: its data is used, nothing to say
    other = {**mine, "model": "17", "cpus": 64}  # cpus apart from the sibling; model and cpus from mine
    note = corrections.shipped_elsewhere(other)
    assert note is not None and "not reused" in note and f"--device {slug(sibling)}" in note  # the closest
    assert "\n" not in note
    assert slug(mine) in note and slug(sibling) in note  # every shipped device of that name is offered
    assert slug(stranger) not in note
    assert corrections.shipped_elsewhere({**mine, "name": "Yet Another CPU"}) is None


# -- output paths ----------------------------------------------------------------------------------


def _report_targets(tmp_path: Path) -> list[tuple[str, str]]:
    (tmp_path / "dir.html").mkdir()
    (tmp_path / "plain").write_text("x")
    return [
        ("/proc/report.html", "cannot write"),
        ("/sys/report.html", "cannot write"),
        (str(tmp_path / "dir.html"), "is a folder"),
        (str(tmp_path), "ending in .html"),
        (str(tmp_path / "missing" / "r.html"), "does not exist"),
        (str(tmp_path / "plain" / "r.html"), "not a folder"),
        (str(tmp_path / "r.txt"), "ending in .html"),
    ]


def test_report_into_unwritable_or_odd_paths_is_one_line(tmp_path, capsys) -> None:
    if os.geteuid() == 0 and not Path("/proc").exists():
        pytest.skip("no /proc")
    for target, needle in _report_targets(tmp_path):
        code, _, err = _run(["report", "--html", target], capsys)
        _one_line_error(code, err)
        assert needle in err, (target, err)


MEASURE = ["measure", "--variant", "softmax", "--n", "16", "--d", "8", "--repeats", "1", "--cpu"]


def test_unwritable_or_odd_store_paths_are_one_line(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("torch")
    (tmp_path / "db.sqlite").mkdir()
    for store, needle in (
        ("/proc/x", "cannot create the results directory"),
        ("/sys/x", "cannot create the results directory"),
        (str(tmp_path / "db.sqlite"), "is a directory"),
    ):
        code, _, err = _run([*MEASURE, "--store", store], capsys)
        _one_line_error(code, err)
        assert needle in err, (store, err)
    home = tmp_path / "a-file"
    home.write_text("x")
    monkeypatch.setenv("ATTN_COST_HOME", str(home))
    code, _, err = _run(MEASURE, capsys)
    _one_line_error(code, err)


@pytest.mark.parametrize(
    "record",
    [
        {"kind": "time", "status": "ok"},  # no device
        {"device": {"kind": "cpu", "name": "X"}, "kind": "time", "time": {"median": 1}},  # no status
        {"device": {"kind": "cpu", "name": "X"}, "kind": "time", "status": "ok"},  # no time
        {"device": {"kind": "cpu", "name": "X"}, "kind": "time", "status": "ok", "sizes": "abc"},
    ],
    ids=["no device", "no status", "no time", "sizes a string"],
)
def test_records_that_miss_fields_are_one_line(record: dict, tmp_path, capsys) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(record) + "\n")
    code, _, err = _run(["results", "import", str(path)], capsys)
    _one_line_error(code, err)
    assert "not an attn-cost results file" in err


# -- the process edge: full disk, closed pipe, Ctrl-C, would-be hangs ------------------------------


def _proc(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run([*ENTRY, *args], capture_output=True, text=True, timeout=60, env=env, **kwargs)


@pytest.mark.integration  # the console script in a new process
@pytest.mark.parametrize("args", [["variants"], ["crossover", "--d", "64", "--json"]], ids=["table", "json"])
def test_output_to_a_full_disk_is_one_line(args: list[str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([*ENTRY, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    _one_line_error(proc.returncode, proc.stderr)
    assert "No space left on device" in proc.stderr


@pytest.mark.integration  # the console script in a new process
def test_output_into_a_closed_pipe_ends_quietly_as_sigpipe_would() -> None:
    """`attn-cost ... | head`: the reader chose to stop; no error line, exit status 128 + SIGPIPE."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([*ENTRY, "conventions"], stdout=write, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert proc.returncode == 128 + signal.SIGPIPE and proc.stderr == "", (proc.returncode, proc.stderr)


@pytest.mark.integration  # a signal to a new process
@pytest.mark.parametrize("delay", [0.1, 0.15, 0.2, 0.3, 0.5])
def test_ctrl_c_early_is_one_line_without_traceback(delay: float) -> None:
    """Ctrl-C while the CLI imports typer and sympy: `delay` after Python itself has started and imported `site`
    (outside attn-cost's code; a bare interpreter's start, timed just before, on a busy machine can take longer than
    the delay itself)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=60)
    interpreter = time.perf_counter() - started
    proc = subprocess.Popen(
        [*ENTRY, "crossover", "--d", "64"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(interpreter + delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 1, err
    assert "saved" not in err  # an analytic command has nothing to resume
    if proc.returncode not in (0, -signal.SIGINT):  # it may finish first, or die before Python's handler exists
        assert proc.returncode == 130 and err.strip() == "attn-cost: error: interrupted", (proc.returncode, err)


def test_ctrl_c_mid_import_is_one_line_even_when_the_cli_cannot_be_imported_again(monkeypatch, capsys) -> None:
    """Ctrl-C while typer is half imported leaves a module without its attributes: the handler's own import of the
    CLI then fails (AttributeError: module 'typer' has no attribute 'core', seen once in CI), and the run still ends
    in the one line and exit 130."""
    from attn_cost.cli import entry, exits, main

    def interrupt() -> int:
        raise KeyboardInterrupt

    def half_imported() -> int:
        raise AttributeError("module 'typer' has no attribute 'core'")

    monkeypatch.setattr(main, "main", interrupt)
    monkeypatch.setattr(exits, "interrupted", half_imported)
    with pytest.raises(SystemExit) as ended:
        entry.run()
    assert ended.value.code == 130
    assert capsys.readouterr().err == "attn-cost: error: interrupted\n"


def test_ctrl_c_that_python_ignores_in_a_callback_is_delivered_again(monkeypatch) -> None:
    """A KeyboardInterrupt Python reports as unraisable (raised in importlib's module-lock callback mid-import) is
    sent again as SIGINT, not printed as "Exception ignored ... Traceback"; any other unraisable goes to Python's
    own hook."""
    from types import SimpleNamespace

    from attn_cost.cli import entry

    sent, passed = [], []
    monkeypatch.setattr(entry.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(entry.sys, "__unraisablehook__", passed.append)
    entry.interrupt_again(SimpleNamespace(exc_value=KeyboardInterrupt()))
    assert sent == [(os.getpid(), signal.SIGINT)] and passed == []
    other = SimpleNamespace(exc_value=ValueError("x"))
    entry.interrupt_again(other)
    assert passed == [other] and len(sent) == 1


def test_ctrl_c_message_says_saved_only_for_measuring_commands(monkeypatch, capsys) -> None:
    import attn_cost.cli.analytic as analytic

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(analytic, "transition_row", interrupt)
    code, _, err = _run(["crossover", "--d", "8"], capsys)
    assert code == 130 and err == "attn-cost: error: interrupted\n"

    from types import SimpleNamespace

    from attn_cost.cli import app
    from attn_cost.cli.exits import interrupted

    store = SimpleNamespace(path="/tmp/results.db", session={})
    app.measuring_started(store)
    assert interrupted() == 130
    assert capsys.readouterr().err == "attn-cost: error: interrupted; nothing had been measured yet\n"
    store.session.update(a={}, b={})
    assert interrupted() == 130
    err = capsys.readouterr().err
    assert "the 2 measurements made so far are saved in /tmp/results.db" in err and "resume" in err


@pytest.mark.integration  # a new process under a timeout
@pytest.mark.parametrize(
    "args",
    [["crossover", "--d", "65536", "--json"], ["heads", "--d-embed", str((1 << 24) - 3), "--json"]],
    ids=["crossover at the largest d", "heads at a large prime d_embed"],
)
def test_the_largest_accepted_sizes_finish(args: list[str]) -> None:
    """The former hangs, at the largest sizes still accepted: they must answer (the timeout is only a
    guard against a hang, not a performance claim)."""
    proc = _proc(args)
    assert proc.returncode == 0, proc.stderr


def test_integer_crossover_is_exact_at_large_d(capsys) -> None:
    """N0 of the TaylorShift pair is the ceiling of d² + d + 1/2 (TaylorShift Eq. 7); at d = 65536 a
    float root is off by far more than 1, so this checks the exact integer search."""
    code, out, err = _run(["crossover", "--d", "65536", "--json"], capsys)
    assert code == 0, err
    (row,) = [r for r in json.loads(out)["results"] if r["a"] == "taylorshift-direct"]
    d = 65536
    assert row["n0"] == d * d + d + 1


def test_first_integer_search_takes_logarithmically_many_steps() -> None:
    from attn_cost.costmodel.crossover import first_integer_from

    for true, estimate in ((10**18 + 7, 10**18 * 1.001), (10**18 + 7, 10**18 * 0.999), (5, 5.0), (1, 0.3)):
        calls = []

        def holds(n: int, true=true, calls=calls) -> bool:
            calls.append(n)
            return n >= true

        assert first_integer_from(holds, estimate) == true
        assert len(calls) < 4 * 64  # doubling then bisection: O(log N), never a walk


def test_divisors_of_a_large_prime() -> None:
    from attn_cost.costmodel.heads import divisors

    assert divisors(1_000_000_007) == [1, 1_000_000_007]
    assert divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]


# -- special files and link loops: refused or passed over, never waited on (issues 32 and 33) ----------

CODE = Path(__file__).parent / "traced_code.py"
RESULTS = Path(__file__).parent / "data" / "results.jsonl"


@contextlib.contextmanager
def _within(seconds: int):
    """Fail instead of hanging: SIGALRM interrupts a blocking open or an endless read in this (the main) thread."""

    def expired(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _special(path: Path, kind: str) -> Path:
    """A FIFO, an endless device (a link to /dev/zero), a loop of links or a folder at `path`."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "endless":
        path.symlink_to("/dev/zero")
    elif kind == "loop":
        path.symlink_to(path.name)
    else:
        path.mkdir()
    return path


def _unchanged(path: Path, kind: str) -> bool:
    import stat

    mode = os.lstat(path).st_mode
    return {"fifo": stat.S_ISFIFO, "endless": stat.S_ISLNK, "loop": stat.S_ISLNK, "folder": stat.S_ISDIR}[kind](mode)


NAMED_INPUTS = [
    ("x.jsonl", lambda p: ["results", "import", p]),
    ("x.json", lambda p: ["crossover", "--d", "16", "--device", p]),
    ("x.json", lambda p: ["calibrate", "--refit", p]),
    ("x.py", lambda p: ["crossover", "--d", "16", "--variants", p]),
    ("x.db", lambda p: ["results", "ls", "--store", p]),
    ("x.db", lambda p: ["results", "import", str(RESULTS), "--store", p]),
    ("x", lambda p: ["results", "rm", "--all", "--store", p]),
    ("x.py", lambda p: ["trace", f"{p}:f"]),
    ("x.json", lambda p: ["trace", f"{CODE}:ref_softmax", "--config", p]),
]


SPECIAL_INPUTS = [
    (name, command, kind)
    for name, command in NAMED_INPUTS
    for kind in ("fifo", "endless", "loop", "folder")
    if not (kind == "folder" and "--store" in command("P"))  # a folder is a --store: the database goes in it
]


@pytest.mark.parametrize(
    ("name", "command", "kind"), SPECIAL_INPUTS, ids=[f"{c('P')[:2]} {n}-{k}" for n, c, k in SPECIAL_INPUTS]
)
def test_a_special_file_given_as_input_is_one_line(tmp_path, capsys, kind, name, command) -> None:
    path = _special(tmp_path / name, kind)
    with _within(60):
        code, _, err = _run(command(str(path)), capsys)
    _one_line_error(code, err)
    assert str(path.name) in err and _unchanged(path, kind)
    if kind == "loop":
        assert "loop of symbolic links" in err


def test_a_fifo_given_as_input_is_refused_unopened(tmp_path) -> None:
    """The one reader (`files.read_input`) refuses a FIFO before opening it: a writer waiting on the FIFO stays
    waiting (an open for reading, even one that does not block, would let it through to a reader that is gone)."""
    import threading

    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.store.files import read_input

    fifo = _special(tmp_path / "x.md", "fifo")
    through = threading.Event()

    def writer() -> None:
        fd = os.open(fifo, os.O_WRONLY)  # waits for a reader
        through.set()
        os.close(fd)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    time.sleep(0.3)  # the writer is waiting in open()
    with _within(60), pytest.raises(UserError, match="is a FIFO"):
        read_input(fifo, "a doc with a generated block")
    assert not through.wait(0.5)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # let the writer go
    thread.join(10)
    os.close(reader)
    assert through.is_set()


@pytest.mark.parametrize("kind", ["fifo", "endless", "loop", "folder"])
def test_special_files_in_the_folders_attn_cost_scans_are_passed_over(tmp_path, capsys, kind) -> None:
    home = tmp_path / "home"
    (home / "results").mkdir(parents=True)
    shutil.copytree(PROFILE.parent, home / "devices")
    (home / "opmodels").mkdir()
    found = [_special(home / "results" / "cpu-old-0a1b2c.jsonl", kind), _special(home / "devices" / "odd.json", kind),
             _special(home / "opmodels" / "odd.json", kind)]  # fmt: skip
    for args in (["results", "import", str(RESULTS)], ["results", "ls"], ["devices"], ["report", "--help"],
                 ["crossover", "--d", "16", "--device", DEVICE], ["results", "ls", "--shipped"]):  # fmt: skip
        with _within(60):
            code, _, err = _run(args, capsys)
        assert code == 0 and "Traceback" not in err, (args, err)
    assert all(_unchanged(p, kind) for p in found)


@pytest.mark.parametrize("option", [["results", "export", "-o"], ["report", "--html"]])
def test_a_loop_of_links_at_an_output_path_is_one_line(tmp_path, capsys, option) -> None:
    loop = tmp_path / "loop.html"
    loop.symlink_to(loop.name)
    code, _, err = _run([*option, str(loop)], capsys)
    _one_line_error(code, err)
    assert "loop of symbolic links" in err and loop.is_symlink()


def test_export_to_dash_is_stdout_and_a_folder_option_refuses_it(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "r.db"
    assert _run(["results", "import", str(RESULTS), "--store", str(db)], capsys)[0] == 0
    code, out, err = _run(["results", "export", "-o", "-", "--store", str(db)], capsys)
    assert code == 0 and out == RESULTS.read_text(), err  # both are sorted by key: the same bytes
    assert not (tmp_path / "-").exists()  # the working folder: no file named "-"
    for args in (["campaign", "--cpu", "--quick", "--out", "-"], ["calibrate", "--quick", "--out", "-"]):
        code, _, err = _run(args, capsys)
        _one_line_error(code, err)
        assert "takes a folder" in err


# -- help ------------------------------------------------------------------------------------------


def test_version_and_short_help(capsys) -> None:
    from attn_cost import __version__

    code, out, _ = _run(["--version"], capsys)
    assert code == 0 and out.strip() == f"attn-cost {__version__}"
    code, out, _ = _run(["-h"], capsys)
    assert code == 0
    for term in ("N0", "N1", "traffic"):
        assert any(line.strip().startswith(term) for line in out.splitlines()), term
    code, out, _ = _run(["crossover", "-h"], capsys)
    assert code == 0 and "--d INT [--d ...]" in out and "--pair A:B [--pair ...]" in out
    assert "(8,16,32,64,128)" in out


def test_profile_scope_help_does_not_offer_model(capsys) -> None:
    code, out, _ = _run(["profile", "-h"], capsys)
    assert code == 0
    scope_help = out.split("--scope", 1)[1].split("\n  --", 1)[0]
    assert "model" not in scope_help and "decode" in scope_help
    assert "(16)" in out  # profile's own --d default


def test_a_gpu_named_in_part_is_offered_the_rows_that_hold_it_first(cli) -> None:
    """`h100` is part of three shipped rows' names (SXM5, PCIe, NVL); `h200`, `h800` and `h20-96gb` only look like it.
    The suggestions are the three H100 rows, the shortest first."""
    r = cli("predict", "--device", "h100", "--variant", "softmax", "--n", "1024", "--d", "64")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    said = r.err.split("did you mean ", 1)[1].split("?", 1)[0]
    assert said == "'h100-nvl-94gb', 'h100-pcie-80gb' or 'h100-sxm5-80gb'", r.err
