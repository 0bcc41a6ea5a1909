"""The analytic commands as a user runs them: in this process through the CLI's entry (`cli`), and the README's
first command through the installed script in a new process (integration)."""

from __future__ import annotations

import pytest


@pytest.mark.integration  # the installed console script, in a new process
def test_crossover_table_for_d_64(attn_cost) -> None:
    r = attn_cost("crossover", "--d", "64")
    assert r.code == 0, r.err
    assert "4,161" in r.out and "2,174" in r.out  # Table 2, d = 64
    assert "d² + d + 1/2" in r.out


def test_crossover_json_reproduces_table_2(cli) -> None:
    r = cli("crossover", *[a for v in (8, 16, 32, 64, 128) for a in ("--d", str(v))], "--json")
    assert r.code == 0, r.err
    rows = [x for x in r.json()["results"] if (x["a"], x["b"]) == ("taylorshift-direct", "taylorshift-efficient")]
    assert [(x["d"], x["n0"], x["n1"]) for x in rows] == [
        (8, 73, 47),
        (16, 273, 159),
        (32, 1057, 574),
        (64, 4161, 2174),
        (128, 16513, 8446),
    ]
    assert rows[0]["flops"]["exact"] == "d**2 + d + 1/2"


def test_crossover_pair_and_convention(cli) -> None:
    r = cli("crossover", "--d", "16", "--pair", "softmax:softmax-fused", "--convention", "matmul", "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    assert (row["a"], row["b"], row["convention"]) == ("softmax", "softmax-fused", "matmul")
    # FLOPs under the matmul convention are identical: B is never more expensive
    assert row["flops"]["verdict"] == "equal" and row["n0"] == 1
    # memory: softmax N² + 3Nd or 2N² + Nd against 4Nd + N: equal at N = 17, cheaper after
    assert row["n1"] == 17


def test_crossover_from_embedding_width(cli) -> None:
    r = cli("crossover", "--d-embed", "256", "--h", "4", "--json")
    assert r.code == 0, r.err
    assert {x["d"] for x in r.json()["results"]} == {64}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["crossover", "--d", "0"], "--d must be a positive integer"),
        (["crossover", "--d", "-4"], "--d must be a positive integer"),
        (["crossover", "--d", "6.5"], "--d"),
        (["crossover", "--d", "sixty"], "--d"),
        (["crossover", "--pair", "softmx:taylorshift-efficient"], "did you mean 'softmax'"),
        (["crossover", "--pair", "softmax"], "A:B"),
        (["crossover", "--d-embed", "256", "--h", "3"], "does not divide"),
        (["crossover", "--convention", "nope"], "unknown convention"),
        (["crossover", "--dtype", "fp8"], "unknown dtype"),
        (["formula", "taylorshift"], "did you mean"),
        (["heads", "--d-embed", "-1"], "positive integer"),
        (["no-such-command"], "No such command"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(cli, args: list[str], needle: str) -> None:
    r = cli(*args)
    assert r.code == 2
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.err
    assert "Traceback" not in r.err


@pytest.mark.integration  # the installed console script, in a new process: its exit status
def test_bad_input_to_the_installed_script_is_one_line_and_exit_code_2(attn_cost) -> None:
    r = attn_cost("crossover", "--d", "0")
    assert r.code == 2 and r.out == ""
    assert r.err.startswith("attn-cost: error: ") and len(r.err.splitlines()) == 1 and "--d must be a positive" in r.err


def test_formula_json_shows_ops_conventions_and_the_paper(cli) -> None:
    r = cli("formula", "taylorshift-efficient", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert set(data["flops"]) >= {"taylorshift-v1", "taylorshift-icpr", "matmul", "full"}
    assert data["ops"][0]["kind"] and data["peak_elements"]["large_n_step"] == 5
    assert all(p["matches"] for p in data["published"]) and len(data["published"]) == 6
    assert data["left_out"]["taylorshift-v1"] != "0"


def test_formula_pretty_and_latex(cli) -> None:
    pretty = cli("formula", "taylorshift-direct")
    assert pretty.code == 0 and "4N²d + 6N²" in pretty.out and "✓ equal" in pretty.out
    tex = cli("formula", "taylorshift-direct", "--latex")
    assert tex.code == 0 and "N^{2}" in tex.out


def test_heads_json(cli) -> None:
    r = cli("heads", "--d-embed", "256", "--n", "1024", "--json")
    assert r.code == 0, r.err
    res = {(x["variant"], x["cost"]): x for x in r.json()["results"]}
    eff = res[("taylorshift-efficient", "flops")]
    assert eff["best_h"] == 256 and abs(eff["d_star"][0] - 0.47) < 0.005
    assert [row["h"] for row in eff["table"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert res[("taylorshift-direct", "flops")]["best_h"] == 1


def test_heads_pretty(cli) -> None:
    r = cli("heads", "--d-embed", "64")
    assert r.code == 0, r.err
    assert "8d³ + 10d² − 3 = 0" in r.out


def test_variants_lists_every_variant(cli) -> None:
    r = cli("variants", "--json")
    assert r.code == 0
    names = {v["name"] for v in r.json()}
    assert {"softmax", "softmax-fused", "taylorshift-direct", "taylorshift-efficient"} <= names


def test_no_arguments_prints_help(cli) -> None:
    r = cli()
    assert r.code == 0 and "crossover" in r.out


@pytest.mark.integration  # a fresh interpreter
def test_the_analytic_path_never_imports_torch_or_plotly() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from attn_cost.cli.main import main; "
        "main(['crossover', '--d', '8', '--d', '128', '--json']); main(['formula', 'softmax', '--json']); "
        "main(['heads', '--d-embed', '64', '--json']); "
        "bad = [m for m in ('torch', 'plotly') if m in sys.modules]; sys.exit(3 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_formula_latte_json(cli) -> None:
    r = cli("formula", "latte", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["variant"] == "latte" and data["params"] == "0"
    assert [op["kind"] for op in data["ops"]] == ["softmax", "matmul", "softmax", "matmul"]
    assert data["flops"]["matmul"] == "4*L*N*b*d*h"


def test_crossover_softmax_linear_json(cli) -> None:
    """Full-rule counts: softmax 4N²d + 6N², linear 4Nd² + 8Nd: they meet at N = (4d² + 8d)/(4d + 6)."""
    r = cli("crossover", "--d", "64", "--pair", "softmax:linear", "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    assert row["n0"] == -(-(4 * 64**2 + 8 * 64) // (4 * 64 + 6))  # ceil
    assert row["flops"]["exact"] is not None and row["scope"] == "core"


def test_crossover_scopes_modes_and_causal(cli) -> None:
    r = cli(
        "crossover", "--d", "32", "--h", "8", "--pair", "softmax:taylorshift-efficient", "--scope", "model", "--json"
    )
    assert r.code == 0, r.err
    assert r.json()["results"][0]["n0"] == 32 * 32 + 32 + 1
    r = cli("crossover", "--d", "64", "--pair", "softmax:linear", "--causal", "--json")
    assert r.code == 0, r.err
    assert (r.json()["results"][0]["a"], r.json()["results"][0]["b"]) == ("softmax-causal", "linear-causal")
    r = cli("crossover", "--d", "64", "--pair", "softmax:efficient-attention", "--json")
    assert r.code == 0 and r.json()["results"][0]["scope"] == "layer"  # lifted: it only exists as a layer
    r = cli("crossover", "--d", "64", "--pair", "softmax:linear", "--mode", "training", "--json")
    assert r.code == 0 and r.json()["results"][0]["mode"] == "training"


def test_crossover_all_and_cheapest_and_decode(cli) -> None:
    r = cli("crossover", "--d", "64", "--all", "--json")
    assert r.code == 0, r.err
    assert {x["b"] for x in r.json()["results"]} >= {"linear", "latte", "taylorshift-efficient", "softmax-fused"}
    r = cli("cheapest", "--d", "64", "--cost", "flops", "--json")
    assert r.code == 0, r.err
    (res,) = r.json()["results"]
    assert res["intervals"][0]["cheapest"] == ["softmax"] and res["intervals"][-1]["to"] is None
    r = cli("decode", "--d", "64", "--n", "1000", "--n", "2000", "--json")
    assert r.code == 0, r.err
    growth = {x["variant"]: x["flops"]["growth_when_context_doubles"] for x in r.json()["results"]}
    assert growth["linear-recurrent"] == 1.0 and growth["latte-recurrent"] == 1.0
    assert abs(growth["softmax-causal"] - 2.0) < 1e-3


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["crossover", "--scope", "galaxy"], "unknown scope"),
        (["crossover", "--mode", "eval"], "unknown mode"),
        (["crossover", "--pair", "softmax:latte", "--L", "0"], "--L must be a positive integer"),
        (["crossover", "--causal"], "taylorshift-direct has no causal form"),
        (["crossover", "--pair", "softmax:efficient-attention", "--scope", "core"], "has no core scope"),
        (
            ["crossover", "--pair", "softmax:efficient-attention", "--convention", "hosseini-eq24"],
            "--scope layer --mode training",
        ),
        (["cheapest", "--variant", "softmax"], "at least two"),
        (["decode", "--variant", "linear"], "has no decode scope"),
        (["formula", "latte", "--scope", "decode"], "has no decode scope"),
    ],
)
def test_bad_catalogue_input(cli, args: list[str], needle: str) -> None:
    r = cli(*args)
    assert r.code == 2 and r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.err


def test_closed_forms_follow_latents_tied_to_d(cli) -> None:
    """softmax 4N²d + 6N² against Latte 4NLd + 10NL: N = (4Ld + 10L)/(4d + 6), with L = d unless --L is given."""
    import sympy as sp

    d = sp.Symbol("d", positive=True, integer=True)
    tied = cli("crossover", "--d", "64", "--pair", "softmax:latte", "--json").json()["results"][0]
    fixed = cli("crossover", "--d", "64", "--pair", "softmax:latte", "--L", "32", "--json").json()["results"][0]
    for row, latents in ((tied, d), (fixed, 32)):
        exact = sp.sympify(row["flops"]["exact"], locals={"d": d})
        assert sp.simplify(exact - (4 * latents * d + 10 * latents) / (4 * d + 6)) == 0
