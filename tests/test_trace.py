"""`attn-cost trace`: PyTorch code exported with symbolic sizes becomes an engine graph.

Expected values come from elsewhere: the hand-written op lists of the catalogue (matmul FLOPs),
torch.utils.flop_counter.FlopCounterMode and the live-tensor tracer run on the same code (numbers at
concrete sizes), and the TaylorShift authors' code's memory crossovers quoted in issue 13.
"""

from __future__ import annotations

import gc
import textwrap
from pathlib import Path

import pytest
import sympy as sp

torch = pytest.importorskip("torch")

from attn_cost.costmodel.conventions import MATMUL  # noqa: E402
from attn_cost.costmodel.symbols import BY_NAME, L, N, b, d, h  # noqa: E402

HERE = Path(__file__).resolve().parent
CODE = HERE / "traced_code.py"
NAIVE = HERE.parent / "docs" / "examples" / "naive_taylorshift.py"
FAST = ["softmax", "taylorshift-direct", "taylorshift-efficient"]
OTHERS = ["softmax-causal", "softmax-fused", "softmax-fused-causal", "linear", "linear-causal", "latte", "latte-causal"]


def _register(spec: str) -> str:
    from attn_cost.profilers.trace.register import register

    return register(spec)


def _measure(fn, n: int, dd: int, hh: int = 2, bb: int = 1) -> tuple[int, int]:
    """Peak live bytes (tracer) and FlopCounterMode's count of one call fn(q, k, v), the caller holding q, k, v."""
    from attn_cost.profilers.measure.memory import LiveTensorTracer
    from torch.utils.flop_counter import FlopCounterMode

    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(bb, hh, n, dd, generator=gen) for _ in range(3))
    with torch.no_grad():
        fn(q.clone(), k.clone(), v.clone())
        gc.collect()
        tracer = LiveTensorTracer()
        for t in (q, k, v):
            tracer.track(t)
        with tracer:
            out = fn(q, k, v)
        del out
        with FlopCounterMode(display=False) as mode:
            fn(q, k, v)
    return tracer.peak, mode.get_total_flops()


def _at(expr: sp.Expr, n: int, dd: int, hh: int = 2, bb: int = 1) -> int:
    return int(sp.sympify(expr).xreplace({N: n, d: dd, h: hh, b: bb}))


@pytest.mark.parametrize(
    "variant", [*FAST, *(pytest.param(v, marks=pytest.mark.slow) for v in OTHERS)]
)  # fmt: skip
def test_tracing_the_references_reproduces_the_op_lists(variant: str) -> None:
    """matmul FLOPs symbol for symbol as the catalogue's hand-written op list (Latte's L = d, the
    catalogue's default), and peak bytes exactly as the live-tensor tracer measures the same code."""
    import traced_code
    from attn_cost.costmodel.variants import derive

    fn_name = "ref_" + variant.replace("-", "_")
    name = _register(f"{CODE}:{fn_name}")
    traced, written = derive(name), derive(variant)
    assert sp.expand(traced.flops(MATMUL) - written.flops(MATMUL).xreplace({L: d})) == 0
    peak = traced.peak("fp32").expr
    for n in (7, 16, 33):
        measured, _ = _measure(getattr(traced_code, fn_name), n, 8)
        assert _at(peak, n, 8) == measured, (variant, n)


def test_naive_taylorshift_matches_flopcounter_and_tracer() -> None:
    import importlib.util

    from attn_cost.costmodel.variants import derive

    spec = importlib.util.spec_from_file_location("naive_taylorshift_test", NAIVE)
    naive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(naive)
    for form in ("direct", "efficient"):
        dv = derive(_register(f"{NAIVE}:{form}"))
        for n, dd in ((9, 4), (24, 8), (40, 8)):
            peak, flops = _measure(getattr(naive, form), n, dd)
            assert _at(dv.peak("fp32").expr, n, dd) == peak, (form, n, dd)
            assert _at(dv.flops(MATMUL), n, dd) == flops, (form, n, dd)


def test_naive_taylorshift_crossovers_are_the_authors_code_not_the_papers(cli) -> None:
    """Issue 13: the authors' code has N1 = 50/185/710 for d = 8/16/32, the paper 47/159/574."""
    r = cli(
        "crossover",
        *("--trace", f"{NAIVE}:direct", "--trace", f"{NAIVE}:efficient"),
        *("--pair", "direct:efficient", "--pair", "taylorshift-direct:taylorshift-efficient"),
        *("--d", "8", "--d", "16", "--d", "32", "--json"),
    )
    assert r.code == 0, r.err
    n1 = {(x["a"], x["d"]): x["n1"] for x in r.json()["results"]}
    assert [n1["direct", dv] for dv in (8, 16, 32)] == [50, 185, 710]
    assert [n1["taylorshift-direct", dv] for dv in (8, 16, 32)] == [47, 159, 574]


def test_trace_json_has_the_shape_of_formula_json(cli, tmp_path: Path) -> None:
    (tmp_path / "my_attn.py").write_text(
        "import torch\n\n\ndef my_attn(q, k, v):\n"
        "    return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1) @ v\n"
    )
    r = cli("trace", "my_attn.py:my_attn", "--json")
    assert r.code == 0, r.err
    data = r.json()
    reference = cli("formula", "softmax", "--json").json()
    assert set(data) == set(reference) | {"traced"}
    assert set(data["flops"]) == set(reference["flops"]) and "matmul" in data["flops"]
    for key in ("peak_bytes", "traffic_bytes", "params", *(f"flops.{c}" for c in data["flops"])):
        value = data["flops"][key.split(".")[1]] if "." in key else data[key]
        sp.sympify(value, locals=dict(BY_NAME))  # parses back
    assert data["flops"]["matmul"] == "4*N**2*b*d*h"
    assert [op["kind"] for op in data["ops"]] == ["matmul", "scale", "softmax", "matmul"]

    r = cli("crossover", "--trace", "my_attn.py:my_attn", "--pair", "softmax:my_attn", "--d", "64", "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    assert row["b"] == "my_attn" and row["flops"]["verdict"] == "equal"


def test_a_layer_module_traces_with_its_projections(tmp_path: Path) -> None:
    (tmp_path / "layer.py").write_text(
        textwrap.dedent(
            """
            import torch


            class TinyAttention(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.qkv = torch.nn.Linear(16, 48)
                    self.out = torch.nn.Linear(16, 16)

                def forward(self, x):
                    q, k, v = self.qkv(x).chunk(3, dim=-1)
                    y = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
                    return self.out(y)
            """
        )
    )
    from attn_cost.costmodel.variants import derive, get_variant

    name = _register(f"{tmp_path / 'layer.py'}:TinyAttention")
    assert get_variant(name).layer is not None
    dv = derive(name, "layer")
    # projections 2·N·16·48 + 2·N·16·16, scores and values 2·N·N·16 each (independent arithmetic)
    assert sp.expand(dv.flops(MATMUL) - b * (2 * N * 16 * 48 + 2 * N * 16 * 16 + 4 * N**2 * 16)) == 0
    assert dv.params == 16 * 48 + 48 + 16 * 16 + 16


def test_a_python_loop_over_n_is_reported(cli) -> None:
    r = cli("trace", f"{CODE}:ref_linear_recurrent")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "N cannot stay symbolic" in r.err and "Python loop" in r.err


def test_an_op_it_cannot_map_is_named_with_its_line(cli, tmp_path: Path) -> None:
    (tmp_path / "odd.py").write_text(
        "import torch\n\n\ndef odd(q, k, v):\n    s = q @ k.transpose(-1, -2)\n    return torch.special.erfcx(s) @ v\n"
    )
    r = cli("trace", "odd.py:odd")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "odd.py:6" in r.err and "aten.special_erfcx" in r.err


@pytest.mark.parametrize(
    ("spec", "words"),
    [("nothing.py:f", "no such file"), ("odd", "PATH:NAME"), ("{code}:missing", "has no 'missing'")],
)
def test_bad_trace_specs(cli, spec: str, words: str) -> None:
    r = cli("trace", spec.format(code=CODE))
    assert r.code == 2 and words in r.err and "Traceback" not in r.err


def test_arguments_are_held_through_the_call_only() -> None:
    """Inside a layer, the traced core's q, k, v (the split heads) live until the core returns, not to the end."""
    from attn_cost.costmodel.variants import derive

    layer = derive(_register(f"{CODE}:ref_softmax"), "layer")
    live = {step.op.label: {s.name for s in step.live} for step in layer.steps}
    core_last = next(s for s in reversed(layer.steps) if s.op.kind == "matmul")
    assert {"Qₕ", "Kₕ", "Vₕ"} <= live[core_last.op.label]
    assert not {"Qₕ", "Kₕ", "Vₕ"} & live[layer.steps[-1].op.label]
