"""The kernel registry: one declaration per kernel, every engine op kind covered, no op priced by accident."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sympy as sp
from attn_cost.costmodel.errors import PricingWarning, UserError
from attn_cost.profilers.devicemodel import kernels
from attn_cost.profilers.devicemodel.kernels import KERNELS, kernel_of, twins
from attn_cost.profilers.devicemodel.opcalls import engine_features

SMALL = {"rows": 6, "cols": 5}
PRODUCT = {"batch": 2, "m": 3, "k": 4, "n": 5}


TIMED = [k.name for k in KERNELS.values() if kernels.runnable(k.name)]
"""The kernels the calibration runs (a family without a runner is never timed)."""


def _small(name: str) -> kernels.Shape:
    dims = kernels.FAMILIES[KERNELS[name].family].dims
    return kernels.shape(name, **(PRODUCT if "m" in dims else SMALL), **({"v": 6} if "v" in dims else {}))


def test_every_op_kind_the_engine_emits_has_a_kernel(monkeypatch) -> None:
    from attn_cost.costmodel import conventions

    kernels._check_coverage()
    monkeypatch.setitem(conventions.KINDS, "teleport", "a kind nobody declared")
    with pytest.raises(AssertionError, match="teleport"):
        kernels._check_coverage()


def test_every_catalogue_op_has_its_own_kernel_or_twin() -> None:
    """No op of the catalogue is priced by a stand-in (copy): Performer's row sum and Nyströmformer's row max
    were, before the registry."""
    from attn_cost.costmodel.variants import all_variants, derive

    catalogue = [v for v in all_variants() if (v.core or v.layer).__module__.startswith("attn_cost.costmodel.variants")]
    assert len(catalogue) >= 20  # other tests' traced or user variants may be registered too: not the catalogue
    for v in catalogue:
        for scope in ("core", "layer"):
            if scope not in v.scopes:
                continue
            for op in derive(v.name, scope).ops:
                name = kernel_of(op)  # every op of the catalogue, the gated and delta-rule layers' too
                assert twins(name), f"{v.name} {scope}: {op.label} runs {name}, which no kernel prices"
                kernel = KERNELS[twins(name)[0]]
                assert op.kind in (kernel.kind, *kernel.kinds), (v.name, op.label, name)


@pytest.mark.parametrize("name", TIMED)
def test_a_declaration_builds_its_own_op_and_torch_runs_it_at_that_shape(name: str) -> None:
    import torch

    at = _small(name)
    built, feats = engine_features(at, "fp32")
    assert built == name and feats["bytes"] > 0
    runner = kernels.build_runner(at, "fp32", "cpu")
    out = runner.run(runner.make())
    from attn_cost.costmodel.derive import Derived
    from attn_cost.costmodel.graph import Graph

    g = Graph("check")
    g.output(KERNELS[name].build(g, at))
    expected = Derived(g).ops[-1].output.numel if name != "store" else sp.Integer(SMALL["rows"] * SMALL["cols"])
    if isinstance(out, torch.Tensor):  # the PyTorch code makes the tensor the engine op says it makes
        assert out.numel() == int(expected), (name, tuple(out.shape))


def test_layout_twins_and_stand_ins() -> None:
    from attn_cost.profilers.devicemodel.calibrated.data import pricing

    assert twins("exp") == ["exp!"] and twins("sub!") == ["sub!", "sub"]
    assert twins("teleport") == []
    assert pricing("max") == ["max", "copy"]
    assert pricing("matmul-NT")[:1] == ["matmul-NT"] and "matmul-NN" in pricing("matmul-NT")


def test_a_kernel_the_calibration_never_timed_is_a_named_warning() -> None:
    """A calibration that predates the row-sum kernel (the synthetic one of test_opmodel.py times none):
    Performer's sum is priced, and said to be priced, as a copy; a pair without it gives no warning."""
    from attn_cost.profilers.devicemodel.device import row_dims
    from test_opmodel import op_crossing, synthetic_model

    model = synthetic_model()
    assert "sum" not in model.kernels and "copy" in model.kernels
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        op_crossing(model, "taylorshift-direct", "taylorshift-efficient", row_dims({"d": 16}), replicates=0)
        assert not [w for w in caught if issubclass(w.category, PricingWarning)]
        op_crossing(model, "softmax", "performer", row_dims({"d": 16}), replicates=0)
    messages = {str(w.message) for w in caught if issubclass(w.category, PricingWarning)}
    assert any("the sum kernel: priced as copy" in m for m in messages), messages


def test_the_cli_prints_a_pricing_warning_once_after_its_output(tmp_path, monkeypatch, capsys) -> None:
    from attn_cost.cli.main import main
    from test_opmodel import lean_synthetic_model

    model = lean_synthetic_model()  # no row-sum kernel either
    model.save(tmp_path / "home" / "opmodels")
    monkeypatch.setenv("ATTN_COST_HOME", str(tmp_path / "home"))
    device = model.slug
    assert main(["crossover", "--device", device, "--pair", "softmax:performer", "--d", "16"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if "sum kernel" in line] == [
        f"warning: the op calibration of {device} has no timings of the sum kernel: priced as copy; "
        "`attn-cost calibrate` times it"
    ]


def _product_kernel(make) -> str:
    from attn_cost.costmodel.derive import Derived
    from attn_cost.costmodel.graph import Graph
    from attn_cost.costmodel.symbols import N, d

    g = Graph("layout")
    q, k = g.input("Q", N, d), g.input("K", N, d)
    g.output(g.matmul("S", q, make(g, k)))
    return kernel_of(Derived(g).ops[-1])


def test_layout_is_data_not_a_name() -> None:
    """The same maths gets the same kernel however the tensors are named or the transpose is written."""
    from attn_cost.costmodel.symbols import N, d

    assert _product_kernel(lambda g, k: k.T) == "matmul-NT"
    assert _product_kernel(lambda g, k: k.swap(-1, -2)) == "matmul-NT"
    assert _product_kernel(lambda g, k: k.T.T.T) == "matmul-NT"
    assert _product_kernel(lambda g, k: g.input("Kᵀ", d, N)) == "matmul-NN"  # a plain tensor named Kᵀ
    assert _product_kernel(lambda g, k: g.input("KT", d, N).T.T) == "matmul-NN"  # transposed twice: plain


def test_a_product_of_two_transposed_operands_is_named_as_such() -> None:
    """Aᵀ·Bᵀ has no calibrated kernel: it is not taken for another layout (`test_opmodel` prices it, warning)."""
    from attn_cost.costmodel.derive import Derived
    from attn_cost.costmodel.graph import Graph
    from attn_cost.costmodel.symbols import N, d

    g = Graph("tt")
    a, b = g.input("A", d, N), g.input("B", N, d)
    g.output(g.matmul("Y", a.T, b.T))
    assert kernel_of(Derived(g).ops[-1]) == "matmul-TT" and not twins("matmul-TT")


def test_transposing_twice_gives_back_the_plain_tensor() -> None:
    from attn_cost.costmodel.graph import Graph
    from attn_cost.costmodel.symbols import N, d

    k = Graph("names").input("K", N, d)
    assert (k.T.name, k.T.transposed) == ("Kᵀ", True)
    assert (k.T.T.name, k.T.T.transposed, k.T.T.shape) == ("K", False, (N, d))


def test_traced_code_and_the_catalogue_price_the_same_product_alike(tmp_path, registry_restored) -> None:
    """`q @ k.transpose(-2, -1)` traced from PyTorch code is the catalogue's `Q @ K.T`: the same kernel, the
    same features, the same predicted time."""
    pytest.importorskip("torch")
    import numpy as np
    from attn_cost.costmodel.symbols import N
    from attn_cost.costmodel.variants import derive
    from attn_cost.profilers.devicemodel.opcalls import op_features
    from attn_cost.profilers.trace.register import register
    from test_opmodel import synthetic_model

    code = tmp_path / "plain.py"
    code.write_text(
        "import torch\n\ndef core(q, k, v):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n"
    )
    traced = derive(register(f"{code}:core"), "core")
    catalogue = derive("softmax", "core")
    (t_op,) = [op for op in traced.ops if op.kind == "matmul" and op.index == 0]
    (c_op,) = [op for op in catalogue.ops if op.kind == "matmul" and op.index == 0]
    assert kernel_of(t_op) == kernel_of(c_op) == "matmul-NT"
    _, tf = op_features(traced, t_op, "fp32")
    _, cf = op_features(catalogue, c_op, "fp32")
    free = {s for v in (*tf.values(), *cf.values()) for s in sp.sympify(v).free_symbols} - {N}
    sizes = {**{sym: 7 for sym in free}, N: 1000}
    at = {k: float(sp.sympify(v).subs(sizes)) for k, v in tf.items()}
    assert at == {k: float(sp.sympify(v).subs(sizes)) for k, v in cf.items()}
    model = synthetic_model()
    f = {k: np.array([v]) for k, v in at.items()}
    assert model.op_seconds(kernel_of(t_op), f) == pytest.approx(model.op_seconds(kernel_of(c_op), f))


@pytest.mark.parametrize("name", ["exp!", "cumsum!", "add!", "div!", "normalize_rows!"])
def test_an_in_place_kernel_gets_its_pristine_inputs_at_every_call(name: str) -> None:
    """Timed 300 times in a row, an in-place kernel still runs on the values it was made with: what it leaves
    after the last call is what PyTorch computes from the pristine input once (exp_ reused on one tensor is
    +inf after five calls, cumsum_ overflows after about twenty)."""
    import torch

    at = kernels.shape(name, rows=64, cols=40)
    runner = kernels.build_runner(at, "fp32", "cpu")
    box = runner.make()
    pristine = [x.clone() for x in box[:-1]]
    for _ in range(300):
        runner.run(box)
    assert torch.isfinite(box[0]).all()
    fresh = [x.clone() for x in pristine]
    KERNELS[name].torch(*fresh)  # the kernel once, on its pristine inputs
    torch.testing.assert_close(box[0], fresh[0])
    assert runner.restore is not None


def test_every_in_place_kernel_restores_its_input_and_no_other_does() -> None:
    for k in (KERNELS[name] for name in TIMED):
        runner = kernels.build_runner(_small(k.name), "fp32", "cpu")
        assert (runner.restore is not None) == k.inplace, k.name


@pytest.mark.parametrize("name", ["matmul-NT", "matmul-NN"])
def test_a_window_product_reads_overlapping_windows_of_one_buffer(name: str) -> None:
    """The band products of sliding-window: query i against rows i … i+w−1 of one padded buffer, as
    `references.sliding_window._band_bmm` reads them, not N separate w×d operands (the buffer is (N+w−1)·d,
    not N·w·d)."""
    import torch

    n, w, d = 9, 4, 3
    dims = {"batch": n, "m": 1, "k": d, "n": w} if name == "matmul-NT" else {"batch": n, "m": 1, "k": w, "n": d}
    at = kernels.shape(name, window=1, **dims)
    runner = kernels.build_runner(at, "fp32", "cpu")
    a, buf, _ = box = runner.make()
    assert buf.numel() == (n + w - 1) * d
    out = runner.run(box)
    rows = buf.reshape(n + w - 1, d)
    for i in range(n):
        window = rows[i : i + w]  # w × d
        want = a.reshape(n, 1, -1)[i] @ (window.T if name == "matmul-NT" else window)
        torch.testing.assert_close(out[i], want)
    _, feats = engine_features(at, "fp32")
    assert feats["bytes"] == 4 * (n * dims["k"] + (n + w - 1) * d + n * dims["n"])  # A, the buffer once, the output


def test_sliding_window_s_band_products_carry_the_window_layout() -> None:
    from attn_cost.profilers.devicemodel.device import row_dims
    from attn_cost.profilers.devicemodel.opcalls import kernel_calls

    calls = kernel_calls("sliding-window", "core", "fp32", row_dims({"d": 16}))
    products = [f for k, f in zip(calls.kernels, calls.features, strict=True) if k.startswith("matmul")]
    assert len(products) == 2 and all("window" in f for f in products)
    plain = kernel_calls("softmax", "core", "fp32", row_dims({"d": 16}))
    assert not any("window" in f for f in plain.features)


# -- the registry: a kernel family is one declaration ---------------------------------------------------------------


@pytest.fixture
def toy_family(monkeypatch):
    """A toy op kind and a toy kernel family registered for one test (its kernel, `toy`, runs the op `toyop`):
    what a new family is, one module's declarations. The registry is restored after the test."""
    from attn_cost.costmodel import opkinds
    from attn_cost.profilers.devicemodel.kernels import registry

    monkeypatch.setitem(opkinds.KINDS, "toyop", "a toy op for the registry's tests")
    saved = dict(registry.FAMILIES), dict(registry.KERNELS)

    def declare(priced: bool) -> None:
        def price(model, kernel, f, dtype, backward):
            return [np.asarray(f["rows"], dtype=float) * 1e-6]  # one µs a row: a price the test can check by hand

        registry.register_family(name="toy", dims=("rows", "cols"), price=price if priced else None,
                                 unpriced="the toy kernels")(
            lambda op: {"rows": op.inputs[0].rows * 10, "cols": op.inputs[0].shape[-1]})  # fmt: skip
        registry.declare(registry.Kernel("toyop", "toyop", "toy"))

    yield declare
    registry.FAMILIES.clear(), registry.FAMILIES.update(saved[0])
    registry.KERNELS.clear(), registry.KERNELS.update(saved[1])


def _toy_op():
    from attn_cost.costmodel.derive import Derived
    from attn_cost.costmodel.graph import Graph

    g = Graph("toy")
    x = g.input("X", 3, 5)
    g.output(g.traced("toyop", "Y", x.shape, (x,), label="Y = toy(X)"))
    derived = Derived(g)
    return derived, derived.ops[-1]


def test_a_kernel_family_declared_once_is_featured_and_priced(toy_family) -> None:
    from attn_cost.profilers.devicemodel.datasheet.model import GpuModel
    from attn_cost.profilers.devicemodel.opcalls import op_features

    toy_family(priced=True)
    derived, op = _toy_op()
    kernel, feats = op_features(derived, op, "fp32")
    assert kernel == "toyop" and kernels.family_of(kernel).name == "toy"
    assert (feats["rows"], feats["cols"]) == (30, 5)  # its own features: 3 rows times its 10, 5 columns
    seconds = GpuModel.named("a100-sxm4-80gb").kernel_seconds(kernel, {"rows": 30.0, "cols": 5.0}, "bf16")
    assert float(seconds) == pytest.approx(30e-6)  # its own price: a µs a row
    assert "toy" in kernels.priced_families()


def test_a_kernel_family_without_a_price_is_refused_in_one_line(toy_family) -> None:
    toy_family(priced=False)
    _, op = _toy_op()
    with pytest.raises(UserError, match=r"^Y = toy\(X\): the toy kernels are not priced on a device yet") as e:
        kernel_of(op)
    assert "\n" not in str(e.value)
    assert "toy" not in kernels.priced_families()


FAMILY_CONSTANTS = {
    "ELEMENTWISE", "ROWWISE", "PRODUCT", "ATTENTION", "CHUNKED", "LINEAR_RNN", "CHUNK_PRODUCTS", "PRODUCT_FORM",
}  # fmt: skip
"""The names the registry gives its families (a module comparing a kernel's family to one asks it by name)."""


def family_if_chains(root) -> list[str]:
    """`if`s (and conditional expressions) outside the kernel registry that compare something with a kernel
    family's name, as a string or as the registry's constant: where a family's behaviour is chosen by name."""
    import ast
    from pathlib import Path

    names = set(kernels.FAMILIES)

    def family_side(side: ast.AST) -> bool:  # a kernel's family: `x.family`, `family_of(k)`, `family_of(k).name`
        if isinstance(side, ast.Attribute) and side.attr == "name":
            side = side.value
        return ((isinstance(side, ast.Attribute) and side.attr == "family")
                or (isinstance(side, ast.Call) and getattr(side.func, "id", "") == "family_of"))  # fmt: skip

    found = []
    for layer in ("profilers", "cli", "costmodel"):
        for path in sorted((Path(root) / layer).rglob("*.py")):
            if "devicemodel/kernels" in path.as_posix() or path.name == "kernels.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, (ast.If, ast.IfExp)):
                    continue
                for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                    sides = [cmp.left, *cmp.comparators]
                    by_constant = any((isinstance(n, ast.Name) and n.id in FAMILY_CONSTANTS)
                                      or (isinstance(n, ast.Attribute) and n.attr in FAMILY_CONSTANTS)
                                      for s in sides for n in ast.walk(s))  # fmt: skip
                    by_string = any(family_side(s) for s in sides) and any(
                        isinstance(n, ast.Constant) and n.value in names for s in sides for n in ast.walk(s))
                    if by_constant or by_string:
                        found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_module_outside_the_registry_chooses_by_kernel_family_name() -> None:
    """The datasheet's price, the op model's form, the op list's features and the calibration grid are each the
    family's own declaration (`kernels/`): no if-chain on family names anywhere else."""
    from pathlib import Path

    assert family_if_chains(Path(__file__).resolve().parents[1]) == []
