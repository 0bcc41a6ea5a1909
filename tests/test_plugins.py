"""Variant files: --variants PATH, ATTN_COST_VARIANTS, the attn_cost.variants entry points, and their errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "my_variants.py"

HEADER = "from attn_cost.costmodel.variants import variant\n\n\n"


def _write(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(HEADER + textwrap.dedent(body))
    return p


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    """A copy of the documented example in a temporary directory."""
    p = tmp_path / "mine" / "my_variants.py"
    p.parent.mkdir()
    p.write_text(EXAMPLE.read_text())
    return p


def test_a_variant_file_is_visible_to_every_analytic_command(cli, user_file: Path, tmp_path: Path) -> None:
    flag = ["--variants", str(user_file)]
    r = cli("variants", "--json", *flag)
    assert r.code == 0, r.err
    listed = {v["name"]: v for v in r.json()}
    assert {"cosine", "cosine-inplace"} <= set(listed) and "softmax" in listed
    assert listed["cosine"]["scopes"] == ["core", "layer", "block", "model", "decode"]

    r = cli("formula", "cosine", "--convention", "matmul", "--json", *flag)
    assert r.code == 0, r.err
    # QKᵀ and PV: 2·N·d·N each, per head and sample (independent arithmetic)
    assert r.json()["flops"]["matmul"] == "4*N**2*b*d*h"

    r = cli("crossover", "--pair", "cosine:cosine-inplace", "--d", "64", "--json", *flag)
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    # same products; the in-place softmax saves one N×N matrix: cheaper in memory from the first N
    assert row["flops"]["verdict"] == "equal" and row["memory"]["verdict"] == "always"

    r = cli("heads", "--d-embed", "64", "--variant", "cosine", "--json", *flag)
    assert r.code == 0, r.err
    assert {x["variant"] for x in r.json()["results"]} == {"cosine"}

    html = tmp_path / "report.html"
    r = cli("report", "--html", str(html), "--pair", "softmax:cosine", "--d", "16", "--json", *flag)
    assert r.code == 0, r.err
    assert "cosine" in r.json()["variants"] and html.stat().st_size > 0


@pytest.mark.integration  # ATTN_COST_VARIANTS is read once, when a process starts
def test_environment_variable_loads_files(attn_cost, user_file: Path, tmp_path: Path) -> None:
    other = _write(
        tmp_path,
        "other.py",
        """
        @variant("scores-only", "QKᵀ and nothing else", source="test", family="test")
        def scores(g, Q, K, V):
            return g.matmul("S", Q, K.T)
        """,
    )
    import os

    r = attn_cost("variants", "--json", env={"ATTN_COST_VARIANTS": f"{user_file}{os.pathsep}{other}"})
    assert r.code == 0, r.err
    assert {"cosine", "scores-only"} <= {v["name"] for v in r.json()}


@pytest.mark.integration  # a package on PYTHONPATH: entry points are read when a process starts
def test_entry_point_plugin(attn_cost, tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "my_plugin").mkdir(parents=True)
    (site / "my_plugin" / "__init__.py").write_text(
        HEADER
        + textwrap.dedent(
            """
            @variant("plugged", "from an installed plugin", source="plugin", family="test")
            def plugged(g, Q, K, V):
                return g.matmul("Y", g.matmul("S", Q, K.T), V)
            """
        )
    )
    dist = site / "my_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[attn_cost.variants]\nplugged = my_plugin\n")
    r = attn_cost("formula", "plugged", "--json", env={"PYTHONPATH": str(site)})
    assert r.code == 0, r.err
    assert r.json()["source"] == "plugin"


@pytest.mark.parametrize(
    ("body", "line", "words"),
    [
        (  # wrong shape: S is N×N, Vᵀ is d×N
            """
            @variant("bad-shape", "V where K belongs", source="t", family="t")
            def bad(g, Q, K, V):
                S = g.matmul("S", Q, K.T)
                return g.matmul("Y", S, V.T)
            """,
            8,
            ["bad-shape", "inner dims differ", 'g.matmul("Y", S, V.T)'],
        ),
        (  # an op kind the engine does not know
            """
            @variant("bad-kind", "a misspelt kind", source="t", family="t")
            def bad(g, Q, K, V):
                S = g.matmul("S", Q, K.T)
                P = g.map("softmaxx", "P", S)
                return g.matmul("Y", P, V)
            """,
            8,
            ["unknown op kind 'softmaxx'", "softmax"],
        ),
        (  # a name of the catalogue
            """
            @variant("softmax", "a second softmax", source="t", family="t")
            def again(g, Q, K, V):
                return g.matmul("Y", g.matmul("S", Q, K.T), V)
            """,
            5,
            ["'softmax' is already registered"],
        ),
        (  # Python that does not parse
            """
            def broken(:
                pass
            """,
            5,
            ["syntax error"],
        ),
    ],
)
def test_a_broken_file_fails_with_file_and_line(cli, tmp_path: Path, body: str, line: int, words) -> None:
    p = _write(tmp_path, "broken.py", body)
    r = cli("crossover", "--d", "8", "--variants", str(p))
    assert r.code == 2
    assert r.out == "" and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert f"broken.py:{line}:" in r.err
    for w in words:
        assert w in r.err


def test_missing_file(cli, tmp_path: Path) -> None:
    r = cli("variants", "--variants", str(tmp_path / "nope.py"))
    assert r.code == 2 and "nope.py" in r.err and "no such file" in r.err


@pytest.mark.integration  # a fresh interpreter
def test_loading_a_variant_file_does_not_import_torch(user_file: Path) -> None:
    code = (
        "import sys; from attn_cost.cli.main import main; "
        f"code = main(['formula', 'cosine', '--json', '--variants', {str(user_file)!r}]); "
        "assert code == 0, code; assert 'torch' not in sys.modules, 'torch imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["variant"] == "cosine"


def _growing(ops: int):
    """X(N×d) → S = X Xᵀ → E₁ = exp(S) → ... → E_ops, every E kept to the end (a traced model's saved tensors):
    the live set grows by one N×N matrix a step, so every step's total is new."""
    from attn_cost.costmodel.graph import Graph
    from attn_cost.costmodel.symbols import N, d

    g = Graph("growing")
    x = g.input("X", N, d)
    t = g.matmul("S", x, x.T)
    kept = []
    for i in range(ops):
        t = g.map("exp", f"E{i}", t)
        kept.append(t)
    g.keep(*kept)
    g.output(g.matmul("Y", t, x))
    return g


def test_loading_and_deriving_a_graph_is_linear_in_its_ops(monkeypatch) -> None:
    """Twice the ops, at most about twice the work: the size checks see each distinct size once, the per-step totals
    add what starts and take what ends, and the peak's branches are pruned in one pass (each bounds the one before).
    The work is counted (sympy polynomial tests, per-storage terms), not timed. The totals are the ones the live sets
    sum to, step by step."""
    import sympy as sp
    from attn_cost.costmodel import derive as engine
    from attn_cost.costmodel import plugins
    from attn_cost.costmodel.derive import Derived, Step
    from attn_cost.costmodel.symbols import N, d

    calls = {"size": 0, "bound": 0, "share": 0}

    def counted(name, fn):
        def run(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return run

    monkeypatch.setattr(plugins, "_negative_at", counted("size", plugins._negative_at))
    monkeypatch.setattr(engine, "nonneg_when_at_least_one", counted("bound", engine.nonneg_when_at_least_one))
    monkeypatch.setattr(Step, "share", counted("share", Step.share))
    work = {}
    for ops in (20, 40):
        for key in calls:
            calls[key] = 0
        g = _growing(ops)
        plugins.check_sizes(g)
        peak = Derived(g).peak()
        assert peak.expr == sp.expand(ops * N**2 + 2 * N * d)  # while Y is made: X, every E (S is gone) and Y
        work[ops] = dict(calls)
    assert work[40]["size"] == work[20]["size"]  # the same few sizes
    assert work[40]["bound"] <= 2 * work[20]["bound"] + 2
    assert work[40]["share"] <= 2 * work[20]["share"] + 4
    steps = Derived(_growing(12)).steps
    monkeypatch.undo()
    assert Derived(_growing(12)).peak().per_step() == [s.elements() for s in steps]
