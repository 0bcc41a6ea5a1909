"""Issue 41's ten classes of hostile inputs, one test (or more) per class, each trying inputs of the class other
than the issue's example: every bad input one line on stderr and exit code 2 (or a documented behaviour), the
user's files byte for byte unchanged, every stored record kept, nothing hanging on sizes within the caps, and
every option applied to every number it could change or refused."""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import textwrap
import time
from fractions import Fraction
from pathlib import Path

import pytest
from attn_cost.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
VALIDATION = BENCH / "data" / "validation-catalogue-round3-quick-cpu-intel-xeon-1f5011.json"


@pytest.fixture(autouse=True)
def _restored(registry_restored):
    """Variant files loaded in-process here are taken back after each test."""


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


def _script(
    args: list[str], cwd: Path, file_limit: int | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    def limit() -> None:
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    env = {**os.environ, "ATTN_COST_HOME": str(cwd / "home")}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout, preexec_fn=limit
    )


# -- 1. the scripts users are told to run keep the promises the CLI keeps -------------------------------------


def _doc(path: Path, begin: str, end: str, eol: str = "\r\n", tail: bytes = b"") -> bytes:
    data = eol.join(["# notes", begin, "old block", end, "after the block " * 600, ""]).encode() + tail
    path.write_bytes(data)
    return data


@pytest.mark.integration  # the scripts in new processes
def test_scripts_users_run_keep_the_clis_promises(tmp_path) -> None:
    """A file-size limit, a second target without markers, a target that is no regular file (a FIFO among them):
    one line, exit 2, every target byte for byte as it was, no temporary file left; gpu_table.py refuses a bad
    target before its commands run (nothing printed); a good CRLF target keeps CRLF and every byte outside its
    block. The file-size limit is met in the scripts' one writer (docblock.fill) through the quickest script."""
    begin, end = "<!-- opmodel-validation: begin -->", "<!-- opmodel-validation: end -->"
    limited = tmp_path / "limited.md"
    before = _doc(limited, begin, end, tail=b"\xff not UTF-8\r\n")
    proc = _script([str(BENCH / "opmodel_validation.py"), str(VALIDATION), "--into", "limited.md"], tmp_path,
                   file_limit=4096)  # fmt: skip
    _one_line(proc.returncode, proc.stderr, "limited.md")
    assert limited.read_bytes() == before

    begin, end = "<!-- gpu-table: begin -->", "<!-- gpu-table: end -->"
    notes = tmp_path / "notes.md"
    before = _doc(notes, begin, end, tail=b"\xff not UTF-8\r\n")
    (tmp_path / "plain.md").write_text("no markers here\n")
    (tmp_path / "reversed.md").write_text(f"{end}\n{begin}\n")
    os.mkfifo(tmp_path / "fifo")
    for second in ["plain.md", "reversed.md", "missing.md", ".", "fifo"]:
        proc = _script([str(BENCH / "gpu_table.py"), "--into", "notes.md", "--into", second], tmp_path, timeout=60)
        _one_line(proc.returncode, proc.stderr, second.strip("."))
        assert proc.stdout == "", second  # refused before the tables were made
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
    (tmp_path / "recorded").mkdir()
    (tmp_path / "primed").mkdir()
    os.mkfifo(tmp_path / "recorded" / "00-profile.stdout")  # where same_outputs.py writes its first output
    proc = _script([str(BENCH / "same_outputs.py"), "record", "recorded", "--home", "primed"], tmp_path, timeout=60)
    _one_line(proc.returncode, proc.stderr, "FIFO")  # refused before any command runs (docblock.check_output)


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


# -- 3. sizes a user may type answer fast, whatever the padding ----------------------------------------------


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _brute_n0(a: str, b: str, cost: str, dims: dict, top: int) -> int:
    """One past the largest N <= top where b costs more than a, evaluating the engine's symbolic costs at every N
    (exact fractions, ⌈N/C⌉ as Python computes it): no polynomial bounds, no classes, no stretches."""
    import sympy as sp
    from attn_cost.costmodel.crossover import Setting, cost_branches
    from attn_cost.costmodel.symbols import N, Pads
    from sympy.printing.pycode import PythonCodePrinter

    class Exact(PythonCodePrinter):  # rationals as fractions, not floats
        def _print_Rational(self, e):  # noqa: N802 (sympy's printer hook)
            return f"Fraction({e.p}, {e.q})"

    def plain(e: sp.Expr) -> sp.Expr:  # [m ∤ n] as ⌈n/m⌉ − ⌊n/m⌋, its definition
        return e.xreplace(dims).replace(lambda x: isinstance(x, Pads), lambda x: sp.ceiling(x.args[0] / x.args[1])
                                        - sp.floor(x.args[0] / x.args[1]))  # fmt: skip

    def at(name: str):
        fns = [sp.lambdify(N, plain(e), modules=[{"Fraction": Fraction, "math": math}], printer=Exact)
               for e in cost_branches(name, cost, Setting())]  # fmt: skip
        return lambda n: max(f(Fraction(n)) for f in fns)

    fa, fb = at(a), at(b)
    losing = [n for n in range(1, top + 1) if fb(n) > fa(n)]
    return losing[-1] + 1 if losing else 1


@pytest.mark.parametrize("chunk", [37, 300, 4096])
def test_padded_crossovers_are_exact_and_do_not_grow_with_the_padding(capsys, chunk) -> None:
    from attn_cost.costmodel.symbols import BY_NAME, DEFAULTS, D, L, b, d, h, r

    t0 = time.monotonic()
    code, out, err = _run(["crossover", "--pair", "softmax-causal:linear-chunked", "--d", "16", "--chunk", str(chunk),
                           "--json"], capsys)  # fmt: skip
    assert code == 0, err
    row = json.loads(out)["results"][0]
    dims = {**DEFAULTS, d: 16, h: 1, b: 1, L: 16, r: 4, D: 2, BY_NAME["C"]: chunk}
    for cost in ("flops", "memory", "traffic"):
        found = row[cost]["n"]
        assert found == _brute_n0("softmax-causal", "linear-chunked", cost, dims, 3 * found + 3 * chunk)
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize(
    "args",
    [
        ["crossover", "--pair", "softmax-causal:linear-chunked", "--pair", "linear-causal:linear-chunked", "--d", "64",
         "--chunk", str(1 << 32)],
        ["cheapest", "--variant", "softmax-causal", "--variant", "linear-chunked", "--variant", "linear-causal",
         "--d", "128", "--chunk", "65536"],
        ["crossover", "--pair", "linear-causal:linear-chunked", "--d", "8", "--chunk", "3001"],
    ],
    ids=["chunk-2^32", "cheapest-65536", "mixed-classes-3001"],
)  # fmt: skip
def test_large_paddings_answer_in_seconds(capsys, args) -> None:
    """Before issue 41 a chunk of 4,096 took 37 s (one pass per residue class of N) and 2^32 never ended."""
    t0 = time.monotonic()
    code, _, err = _run(args, capsys)
    assert code == 0, err
    assert time.monotonic() - t0 < 30


def test_a_variant_that_pads_to_a_huge_multiple_answers(tmp_path, capsys) -> None:
    path = tmp_path / "pads.py"
    path.write_text(
        textwrap.dedent("""
        from attn_cost.costmodel.variants import variant

        @variant("pads-far", "test", source="test", family="test")
        def core(g, Q, K, V):
            Qp = g.pad("Qp", Q, 2, 10**9)
            return g.matmul("Y", g.matmul("S", Qp, K.T), V)
    """)
    )
    t0 = time.monotonic()
    code, _, err = _run(["crossover", "--pair", "softmax:pads-far", "--d", "64", "--variants", str(path)], capsys)
    assert code == 0, err
    assert time.monotonic() - t0 < 30


def test_padding_guards_are_read_in_time_that_does_not_grow_with_the_multiple() -> None:
    import sympy as sp
    from attn_cost.costmodel.symbols import N
    from attn_cost.profilers.trace.record import _threshold, pads_at, points
    from attn_cost.profilers.trace.symbolic import ceil_symbol, on_padding_branch

    for m in (7, 512, 10**6, 10**9):
        assert len(points(m)) <= 8 * 33 + 40
        t0 = time.monotonic()
        assert _threshold(sp.ceiling(N / m) > 1, m, {}) == m + 1  # a guard on ⌈N/m⌉ > 1 reads N >= m + 1
        assert _threshold(N > 3, m, {}) == 4
        assert pads_at(sp.Ne(sp.Mod(N, m), 0), m, {}) is True
        q = ceil_symbol(m)
        assert sp.expand(on_padding_branch(sp.floor(N / m), m) - (q - 1)) == 0  # ⌊N/m⌋ = ⌈N/m⌉ − 1 off multiples
        assert sp.expand(on_padding_branch(sp.floor((N + m - 1) / m), m) - q) == 0
        assert time.monotonic() - t0 < 5


# -- 4. one bad row of a user's GPU table costs that row only ------------------------------------------------

GOOD_ROW = {
    "name": "my-gpu", "device_names": [], "title": "My GPU", "vendor": "nvidia", "arch": "sm80",
    "peak_tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}, "bandwidth_gbs": 1555, "memory_gb": 40,
    "l2_mb": 40, "sms": 108, "smem_per_sm_kb": 164, "smem_per_block_kb": 163, "clock_mhz": 1410, "source": "mine",
}  # fmt: skip


def _gpu_table(home: Path, rows: list, name: str = "mine.json", raw: str | None = None) -> Path:
    folder = home / "gpus"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(raw if raw is not None else json.dumps({"kind": "attn-cost datasheet GPUs", "schema": 1,
                                                              "gpus": rows}))  # fmt: skip
    return path


BAD_ROWS = {
    "bad-notes": {"notes": ["a list of remarks"], "memory_gb": 1e-9},  # a key not read, a memory of 1 byte
    "bad-l2": {"l2_mb": 10**30},
    "bad-clock": {"clock_mhz": 0},
    "bad-sms": {"sms": 2.5},
    "bad-smem": {"smem_per_block_kb": 500},  # more per block than per SM
    "bad-peak": {"peak_tflops": {"fp32": float("inf"), "tf32": 156, "bf16": 312, "fp16": 312}},
    "bad-missing": {"bandwidth_gbs": None},
}


def test_one_bad_row_of_a_users_gpu_table_costs_that_row_only(tmp_path, capsys, few_replicates) -> None:
    home = tmp_path / "home"
    rows = [{**GOOD_ROW, **change, "name": name} for name, change in BAD_ROWS.items()]
    rows += [{**GOOD_ROW, "comment": "bought 2026", "peak_tflops": {**GOOD_ROW["peak_tflops"], "fp4": 2000}}, 17]
    path = _gpu_table(home, rows)
    _gpu_table(home, [], name="digits.json", raw='{"kind": "attn-cost datasheet GPUs", "schema": 1, "gpus": [' +
               "7" * 4400 + "]}")  # fmt: skip
    before = path.read_bytes()
    code, _, err = _run(["crossover", "--pair", "softmax:linear", "--d", "8"], capsys)  # no device: no table read
    assert code == 0 and not err, err
    for args in (["devices"], ["devices", "--json"],
                 ["crossover", "--pair", "softmax:linear", "--d", "8", "--device", "cpu-amd-epyc-5155e7"],
                 ["crossover", "--pair", "softmax:linear", "--d", "8", "--device", "a10"],
                 ["predict", "--device", "my-gpu", "--variant", "softmax", "--n", "1024", "--json"]):  # fmt: skip
        code, out, err = _run(args, capsys)
        assert code == 0 and "Traceback" not in err, err
        assert f"{path}, row 1" in err and "digits.json" in err and "keys attn-cost does not read" in err, (args, err)
        assert "fp4" in err and "comment" in err
    data = json.loads(out)
    assert data["device"] == "my-gpu" and all(math.isfinite(r["seconds"]) for r in data["results"])
    assert "Infinity" not in out and "NaN" not in out
    for name, change in BAD_ROWS.items():
        code, _, err = _run(["predict", "--device", name, "--variant", "softmax", "--n", "64"], capsys)
        field = next(k for k in change if k != "notes") if name != "bad-notes" else "memory_gb"
        _one_line(code, err, "left out")
        assert field in err or "shared memory per block" in err, err
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("where", "change", "says"),
    [
        ("profile", lambda d: d["time"]["linear"].update(launch_s=10**400), "time.linear.launch_s"),
        ("profile", lambda d: d["memory"]["linear"].update(scale=1e300), "memory.linear.scale"),
        ("calibration", lambda d: d["fitted"]["copy"].update(launch=10**400), "fitted.copy.launch"),
        ("calibration", lambda d: d["fitted"]["matmul-NN"].update(peak=1e300), "fitted.matmul-NN.peak"),
    ],
)
def test_huge_numbers_in_profiles_and_calibrations_are_one_line(tmp_path, capsys, where, change, says) -> None:
    path = _user_copy(tmp_path, where, change)
    code, _, err = _run(["crossover", "--pair", "softmax:linear", "--d", "8", "--device", DEVICE_SLUG], capsys)
    _one_line(code, err, says)
    assert str(path) in err


DEVICE_SLUG = "cpu-amd-epyc-5155e7"
SHIPPED_DATA = ROOT / "profilers" / "data"


def _user_copy(tmp_path: Path, where: str, change) -> Path:
    """A user's copy of the shipped profile or op calibration of DEVICE_SLUG, changed (it overrides the shipped)."""
    folder = tmp_path / "home" / ("devices" if where == "profile" else "opmodels")
    folder.mkdir(parents=True, exist_ok=True)
    data = json.loads((SHIPPED_DATA / ("devices" if where == "profile" else "opmodels") / f"{DEVICE_SLUG}.json")
                      .read_text())  # fmt: skip
    change(data)
    path = folder / f"{DEVICE_SLUG}.json"
    path.write_text(json.dumps(data))
    return path


# -- 5. no traceback on any shipped variant, at the edge sizes, in any command --------------------------------

SIZE_OF = {"linear-chunked": "--chunk", "sliding-window": "--window", "sliding-window-fused": "--window",
           "linformer": "--proj-len", "performer": "--features", "nystromformer": "--landmarks"}  # fmt: skip


def _shipped_variants() -> list[str]:
    from attn_cost.costmodel.variants import all_variants

    return [v.name for v in all_variants()]


@pytest.mark.parametrize("name", _shipped_variants())
def test_every_shipped_variant_answers_every_command_at_the_edge_sizes(capsys, name) -> None:
    """formula, crossover (analytic and on a datasheet GPU), cheapest, decode, io, predict and heads at d = 1, 2 and
    the cap, with the variant's own size at 1, 2 and its cap: an answer or one line, never a traceback."""
    from attn_cost.cli.options import LIMITS

    flag = SIZE_OF.get(name)
    sizes = [[flag, str(v)] for v in (1, 2, LIMITS[flag])] if flag else [[]]
    for extra in sizes:
        runs = [["formula", name, *extra], ["heads", name, "--d-embed", "64", *extra]]
        for d in ("1", "2", str(LIMITS["--d"])):
            runs += [
                ["crossover", "--pair", f"softmax:{name}", "--d", d, *extra],
                ["crossover", "--pair", f"softmax:{name}", "--d", d, "--device", "a100-sxm4-80gb", *extra],
                ["cheapest", "--variant", "softmax", "--variant", name, "--d", d, *extra],
                ["decode", "--variant", name, "--d", d, *extra],
                ["io", "--against", name, "--d", d, *extra],
                ["predict", "--device", "h100-sxm5-80gb", "--variant", name, "--n", "1", "--n", "2", "--n",
                 str(LIMITS["--n"]), "--d", d, "--json", *extra],
            ]  # fmt: skip
        for args in runs:
            code, out, err = _run(args, capsys)
            assert "Traceback" not in err, (args, err)
            if code == 2:
                _one_line(code, err)
            else:
                assert code == 0, (args, err)
            if "--json" in args and code == 0:
                assert "Infinity" not in out and "NaN" not in out


@pytest.mark.parametrize(
    ("multiple", "says"),
    [("2.5", "whole number"), ("N", "sequence length"), ("C / 2", "whole number"), ("0", "whole number"),
     ("-8", "whole number"), ("2**40", "whole number"), ("sp.Rational(7, 2)", "whole number"),
     ("'C'", "whole number")],
)  # fmt: skip
def test_a_variant_files_padding_to_no_whole_multiple_is_one_line(tmp_path, capsys, multiple, says) -> None:
    text = textwrap.dedent(f"""
        import sympy as sp
        from attn_cost.costmodel.symbols import C, N
        from attn_cost.costmodel.variants import variant

        @variant("pads-odd", "test", source="test", family="test")
        def core(g, Q, K, V):
            Qp = g.pad("Qp", Q, 2, {multiple})
            return g.matmul("Y", g.matmul("S", Qp, K.T), V)
    """)
    for i, args in enumerate((["formula", "pads-odd"], ["crossover", "--pair", "softmax:pads-odd", "--d", "8"])):
        path = tmp_path / f"pads{i}.py"  # a file loaded in this process is not loaded again
        path.write_text(text)
        code, _, err = _run([*args, "--variants", str(path)], capsys)
        _one_line(code, err, says)


@pytest.mark.parametrize("change", [
    lambda f: f["copy"]["curves"][0].update(bytes=[], seconds=[]),
    lambda f: f["copy"].update(curves=[], widths=[]),
    lambda f: f["matmul-NN"].update(half=[1.0]),
    lambda f: f["add"]["curves"][0].update(bytes=list(reversed(f["add"]["curves"][0]["bytes"]))),
], ids=["empty-curve", "no-curves", "short-half", "bytes-falling"])  # fmt: skip
def test_a_calibration_with_an_empty_or_broken_fitted_model_is_one_line(tmp_path, capsys, change) -> None:
    path = _user_copy(tmp_path, "calibration", lambda d: change(d["fitted"]))
    code, _, err = _run(["crossover", "--pair", "softmax:linear", "--d", "8", "--device", DEVICE_SLUG], capsys)
    _one_line(code, err, str(path))
    assert "fitted." in err


# -- 6. every option reaches every number it could change, or is refused -------------------------------------


def _n0(args: list[str], capsys) -> tuple[int | None, int | None]:
    code, out, err = _run([*args, "--json"], capsys)
    assert code == 0, err
    row = json.loads(out)["results"][0]
    return row.get("predicted_n0"), row.get("corrected_n0")


def test_counting_options_reach_the_device_columns(capsys, few_replicates) -> None:
    base = ["crossover", "--pair", "softmax:linear", "--d", "64"]
    on_gpu = [*base, "--device", "h100-sxm5-80gb"]
    assert _n0(on_gpu, capsys)[0] != _n0([*on_gpu, "--n-kv", "100000"], capsys)[0]
    assert _n0([*on_gpu, "--n-kv", "100000"], capsys)[0] != _n0([*on_gpu, "--n-kv", "1000"], capsys)[0]
    training = [*on_gpu, "--mode", "training"]
    assert _n0(training, capsys)[0] != _n0([*training, "--backward", "recompute"], capsys)[0]
    layer = ["crossover", "--pair", "softmax:linear", "--d", "64", "--scope", "layer", "--device", "a100-sxm4-80gb"]
    assert _n0([*layer, "--h", "8", "--bias", "all"], capsys)[0] is not None  # taken, not refused
    on_cpu = ["crossover", "--pair", "softmax:linear", "--d", "8", "--device", DEVICE_SLUG]
    plain, kv = _n0(on_cpu, capsys), _n0([*on_cpu, "--n-kv", "1000"], capsys)
    assert plain[1] is not None and kv[1] is None  # the profile was measured with keys as long as queries
    assert kv[0] is not None and kv[0] != plain[0]  # the op model prices the keys' own length


@pytest.mark.parametrize(
    "args",
    [
        ["predict", "--device", "l4", "--variant", "softmax", "--n", "64", "--h", "2", "--h", "4"],
        ["predict", "--device", "l4", "--variant", "softmax", "--n", "64", "--scope", "core", "--scope", "layer"],
        ["predict", "--device", "l4", "--variant", "softmax", "--n", "64", "--launch-us", "3", "--launch-us", "9"],
        ["crossover", "--pair", "softmax:linear", "--b", "1", "--b", "8"],
        ["formula", "softmax", "--convention", "matmul", "--convention", "full"],
    ],
    ids=["h", "scope", "launch-us", "crossover-b", "formula-convention"],
)
def test_an_option_of_one_value_given_twice_is_refused(capsys, args) -> None:
    code, _, err = _run(args, capsys)
    _one_line(code, err, "give it once")


def test_the_same_value_twice_is_used_once_with_a_note(capsys) -> None:
    code, _, err = _run(["predict", "--device", "l4", "--variant", "softmax", "--n", "64", "--b", "4", "--b=4"], capsys)
    assert code == 0 and "--b 4 is given 2 times: used once" in err, err


def test_predict_records_the_launch_cost_it_was_given(capsys) -> None:
    args = ["predict", "--device", "a10", "--variant", "linear", "--n", "4096"]
    _, out, _ = _run([*args, "--launch-us", "2.5", "--json"], capsys)
    given = json.loads(out)
    _, out, _ = _run([*args, "--json"], capsys)
    default = json.loads(out)
    assert given["launch_us"] == 2.5 and given["launch_us_given"] and not default["launch_us_given"]
    assert given["results"][0]["seconds"] != default["results"][0]["seconds"]
    _, out, _ = _run([*args, "--launch-us", "2.5"], capsys)
    assert "2.5 µs a kernel (--launch-us" in " ".join(out.split())


@pytest.mark.parametrize("extra", [["--repeats", "3"], ["--cpu"], ["--d", "8"], ["--dtype", "fp32"], ["--no-exact"]])
def test_calibrate_refit_refuses_the_measuring_options_it_ignores(tmp_path, capsys, extra) -> None:
    source = SHIPPED_DATA / "opmodels" / f"{DEVICE_SLUG}.json"
    code, _, err = _run(["calibrate", "--refit", str(source), "--out", str(tmp_path / "out"), *extra], capsys)
    _one_line(code, err, extra[0].replace("--no-", "--"))
    assert not (tmp_path / "out").exists()


def test_calibrate_refit_refits_from_the_points(tmp_path, capsys) -> None:
    """A stored parameter edited (within its bounds) comes back as the points fit it: the refit reads the
    points, not the parameters it says it replaced."""
    edited = tmp_path / "edited.json"
    data = json.loads((SHIPPED_DATA / "opmodels" / f"{DEVICE_SLUG}.json").read_text())
    original = data["fitted"]["matmul-NN"]["peak"]
    data["fitted"]["matmul-NN"]["peak"] = original / 3
    edited.write_text(json.dumps(data))
    code, out, err = _run(["calibrate", "--refit", str(edited), "--out", str(tmp_path / "out")], capsys)
    assert code == 0 and "Refitted" in out, err
    refitted = json.loads((tmp_path / "out" / f"{DEVICE_SLUG}.json").read_text())["fitted"]["matmul-NN"]["peak"]
    # the least-squares fit stops at scipy's tolerance (a few parts per billion apart between BLAS builds); the edit
    # it must undo is a factor of 3
    assert refitted == pytest.approx(original, rel=1e-6)


# -- 7. stored numbers are checked when they are loaded ------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "change", "says"),
    [
        ("calibration", lambda d: d["fitted"]["add"].update(launch=-1e-6), "fitted.add.launch"),
        ("calibration", lambda d: d["fitted"]["matmul-TN"].update(residuals=[1e9] * len(d["fitted"]["matmul-TN"]
                                                                             ["residuals"])), "residuals"),
        ("calibration", lambda d: d["fitted"]["op-sequence"].update(share=float("nan")), "fitted.op-sequence.share"),
        ("calibration", lambda d: d["fitted"]["copy"]["curves"][0]["seconds"].__setitem__(0, 0.0), "seconds[0]"),
        ("profile", lambda d: d["measured"][0].update(n1_uncertainty=-3), "measured[0].n1_uncertainty"),
        ("profile", lambda d: d["measured"][0].update(measured_n1=0), "measured[0].measured_n1"),
        ("profile", lambda d: d["time"]["softmax"].update(launch_s=0, seconds_per_flop=0, seconds_per_byte=0),
         "time.softmax"),
        ("profile", lambda d: d["memory"]["softmax"].update(scale=0), "memory.softmax.scale"),
        ("profile", lambda d: d["validation"][0].update(d=-8) if d["validation"] else d["measured"][0].update(d=-8),
         ".d"),
    ],
    ids=["negative-launch", "huge-residuals", "nan-share", "zero-seconds", "negative-uncertainty", "zero-n1",
         "zero-time-fit", "zero-scale", "negative-d"],
)  # fmt: skip
def test_a_stored_number_out_of_range_is_one_line_naming_file_and_field(tmp_path, capsys, where, change, says):
    path = _user_copy(tmp_path, where, change)
    for args in (["crossover", "--pair", "softmax:linear", "--d", "8", "--device", DEVICE_SLUG],
                 ["report", "--html", str(tmp_path / "r.html"), "--device", DEVICE_SLUG]):  # fmt: skip
        code, _, err = _run(args, capsys)
        line = _one_line(code, err, says)
        assert str(path) in line
    assert not (tmp_path / "r.html").exists()


# -- 8. an answer beyond the device's memory says so ---------------------------------------------------------


def test_a_size_beyond_the_gpus_memory_is_marked(capsys) -> None:
    """softmax keeps its b·h·N² scores: at b = h = 32, N = 65,536 in bf16 that is 32·32·65,536²·2 bytes ≈ 8.8 TB,
    beyond the L4's 24 GB; at N = 256, 32·32·256²·2 bytes = 134 MB fits."""
    args = ["predict", "--device", "l4", "--variant", "softmax", "--n", "256", "--n", "65536", "--h", "32", "--b",
            "32", "--d", "64"]  # fmt: skip
    code, out, err = _run([*args, "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["memory_bytes"] == 24 * 10**9
    fits = {r["n"]: r["fits_in_memory"] for r in data["results"]}
    assert fits == {256: True, 65536: False}
    code, out, _ = _run(args, capsys)
    text = " ".join(out.split())
    assert "†" in out and "does not fit in the 24 GB" in text
    code, out, _ = _run(["crossover", "--pair", "softmax:linear", "--d", "64", "--h", "64", "--b", "65536",
                         "--dtype", "bf16", "--device", "l4", "--json"], capsys)  # fmt: skip
    row = json.loads(out)["results"][0]
    assert row["memory_bytes"] == 24 * 10**9 and row["fits_in_memory"] is False


# -- 9. a name means one device, in every command ------------------------------------------------------------


def test_a_gpu_row_named_like_a_measured_device_is_left_out_everywhere(tmp_path, capsys, few_replicates) -> None:
    home = tmp_path / "home"
    path = _gpu_table(home, [{**GOOD_ROW, "name": DEVICE_SLUG}, {**GOOD_ROW, "name": "cpu-amd-epyc-234b2f"},
                             {**GOOD_ROW, "name": "a10"}, {**GOOD_ROW, "name": "mine-too"}])  # fmt: skip
    code, out, err = _run(["devices", "--json"], capsys)
    names = [d["name"] for d in json.loads(out)]
    assert len(names) == len(set(names)) and "mine-too" in names
    assert err.count("already names") == 3 and f"{path}, row 1" in err
    code, out, _ = _run(["crossover", "--pair", "softmax:linear", "--d", "8", "--device", DEVICE_SLUG, "--json"],
                        capsys)  # fmt: skip
    assert code == 0 and json.loads(out)["results"][0]["corrected_n0"] is not None  # the profile
    code, out, _ = _run(["predict", "--device", DEVICE_SLUG, "--variant", "softmax", "--n", "64", "--json"], capsys)
    assert code == 0 and json.loads(out)["kind"] == "measured"  # the profile answers, not the user's row
    code, out, _ = _run(["predict", "--device", "a10", "--variant", "softmax", "--n", "64", "--json"], capsys)
    assert json.loads(out)["device"] == "a10" and json.loads(out)["memory_bytes"] == 24 * 10**9  # the shipped A10
    from attn_cost.profilers.report import gather

    with pytest.MonkeyPatch.context() as m:
        m.setattr(gather, "claims", list)  # the paper claims: no device changes them (test_counting_and_claims)
        code, _, err = _run(["report", "--html", str(tmp_path / "r.html"), "--device", "cpu-amd-epyc-234b2f", "--d",
                             "16", "--pair", "softmax:linear"], capsys)  # fmt: skip
    assert code == 0, err  # an op calibration alone: the report takes it as crossover does


# -- 10. messages that lead to the answer --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "close"),
    [("a100-sxm4", "a100-sxm4-40gb"), ("h200", "h200-sxm-141gb"), ("cpu-amd-epyc-5155", DEVICE_SLUG),
     ("rtx4090", "rtx-4090")],
)  # fmt: skip
def test_an_unknown_device_suggests_the_closest_of_every_kind(capsys, name, close) -> None:
    for args in (["crossover", "--pair", "softmax:linear", "--d", "8", "--device", name],
                 ["predict", "--device", name, "--variant", "softmax", "--n", "64"]):  # fmt: skip
        code, _, err = _run(args, capsys)
        _one_line(code, err, repr(close))


def test_an_unknown_device_among_thousands_is_a_short_line(tmp_path, capsys) -> None:
    _gpu_table(tmp_path / "home", [{**GOOD_ROW, "name": f"lab-gpu-{i}"} for i in range(5000)])
    code, _, err = _run(["predict", "--device", "lab-gpu-x", "--variant", "softmax", "--n", "64"], capsys)
    line = _one_line(code, err, "more")
    assert len(line) < 600 and "lab-gpu-" in line


@pytest.mark.parametrize(
    ("args", "absent"),
    [
        (["report", "--causal-count", "triangle", "--html", "{tmp}/r.html"], "--causal)"),
        (["heads", "--variant", "softmax", "--d-embed", "64", "--causal-count", "half"], "--causal)"),
    ],
    ids=["report-causal-count", "heads-causal-count"],
)
def test_an_error_names_only_options_its_command_has(tmp_path, capsys, args, absent) -> None:
    code, _, err = _run([a.format(tmp=tmp_path) for a in args], capsys)
    line = _one_line(code, err)
    assert absent not in line


def test_calibrate_does_not_name_an_out_it_was_not_given(tmp_path, capsys, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder would be")
    monkeypatch.setenv("ATTN_COST_HOME", str(blocker))
    code, _, err = _run(["calibrate", "--refit", str(SHIPPED_DATA / "opmodels" / f"{DEVICE_SLUG}.json")], capsys)
    line = _one_line(code, err)
    assert "--out" not in line and "op calibrations' folder" in line


def test_a_full_disk_during_an_import_says_so_and_keeps_every_record(tmp_path, capsys, monkeypatch) -> None:
    """SQLite's page limit answers as a full disk does (SQLITE_FULL): the import is one line that says the disk is
    full, and the database keeps every record it had."""
    from attn_cost.profilers.store.store import Database

    store = ["--store", str(tmp_path / "db")]
    first = _jsonl(tmp_path / "first.jsonl", [_record(n, "2026-11-24T00:00:00+00:00") for n in range(1, 6)])
    assert main(["results", "import", first, *store]) == 0
    many = _jsonl(tmp_path / "many.jsonl", [_record(n, "2026-11-25T00:00:00+00:00") for n in range(1, 3000)])
    merge = Database.merge

    def full(self, *args, **kwargs):
        pages = self.con.execute("PRAGMA page_count").fetchone()[0]
        self.con.execute(f"PRAGMA max_page_count = {pages}")
        return merge(self, *args, **kwargs)

    monkeypatch.setattr(Database, "merge", full)
    code, _, err = _run(["results", "import", many, *store], capsys)
    line = _one_line(code, err, "the disk is full")
    assert "rollback" not in line
    monkeypatch.setattr(Database, "merge", merge)
    assert sorted(_stored(tmp_path, capsys)) == [1, 2, 3, 4, 5]


def test_a_measured_device_named_like_a_shipped_gpu_wins_in_every_command(tmp_path, capsys, few_replicates):
    folder = tmp_path / "home" / "devices"
    folder.mkdir(parents=True)
    (folder / "l4.json").write_text((SHIPPED_DATA / "devices" / f"{DEVICE_SLUG}.json").read_text())
    code, out, err = _run(["devices", "--json"], capsys)
    kinds = [d["kind"] for d in json.loads(out) if d["name"] == "l4"]
    assert code == 0 and kinds == ["measured"] and "'l4' is left out" in err, err
    code, out, _ = _run(["crossover", "--pair", "softmax:linear", "--d", "8", "--device", "l4", "--json"], capsys)
    assert code == 0 and json.loads(out)["results"][0]["corrected_n0"] is not None
    code, out, _ = _run(["predict", "--device", "l4", "--variant", "softmax", "--n", "64", "--json"], capsys)
    assert code == 0 and json.loads(out)["kind"] == "measured"  # the user's profile, not the shipped L4
