"""A device's N0 is the first whole N at which B is no slower (issue 47, class 4): `predict` on that device says A is
faster at N0 − 1 and B no slower at N0, wherever A's time steps (a tile, a wave), eager or graphs, inference or
training, on every kind of device. The expected side of each comparison is `predict`'s own answer at those two
lengths, never the crossing under test; a datasheet's interval edges are checked the same way against A's time
×/÷ the spread of the pair's kernel families (profilers/data/gpumodel_intervals.json, read by hand; a family it has
no figure for: e^(1.96σ), σ from the shipped fit)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from attn_cost.costmodel.crossover import Setting
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.device import crossing, row_dims
from attn_cost.profilers.devicemodel.kinds import resolve

DATASHEET_CASES = [
    # the README's example: A's time steps with its query blocks' waves just past N = 3,840
    ("a100-sxm4-80gb", "softmax-fused", "linear", ["--d", "128", "--h", "8", "--b", "4"]),
    ("a100-sxm4-80gb", "softmax-fused", "linear", ["--d", "128", "--h", "8", "--b", "4", "--launch", "graphs"]),
    ("h100-sxm5-80gb", "softmax-fused", "linear", ["--d", "64", "--h", "8", "--b", "4", "--mode", "training"]),
    ("h200-sxm-141gb", "softmax-fused-causal", "linear-chunked-fused", ["--d", "128", "--h", "4", "--b", "2",
                                                                       "--launch-us", "5"]),
    ("l4", "softmax-fused", "latte", ["--d", "64", "--h", "16", "--b", "1"]),
]  # fmt: skip


def _predict(cli, device: str, a: str, b: str, ns: list[int], sizes: list[str]) -> dict[tuple[str, int], dict]:
    args = [x for n in ns for x in ("--n", str(n))]
    r = cli("predict", "--device", device, "--variant", a, "--variant", b, *args, *sizes, "--json")
    assert r.code == 0, r.err
    return {(row["variant"], row["n"]): row for row in r.json()["results"]}


def _first_no_slower(at: dict, a: str, b: str, n: int, factor: float = 1.0) -> None:
    """At n B is no slower than A's time × `factor`, at n − 1 slower: n is where B's time first reaches it."""
    assert at[(b, n)]["seconds"] <= at[(a, n)]["seconds"] * factor, (n, at[(b, n)], at[(a, n)])
    assert at[(b, n - 1)]["seconds"] > at[(a, n - 1)]["seconds"] * factor, (n - 1, at[(b, n - 1)], at[(a, n - 1)])


FAMILY = {"softmax-fused": "fused attention", "softmax-fused-causal": "fused attention",
          "linear-chunked-fused": "chunked linear attention"}  # fmt: skip
"""The kernel family each case's variant runs (fused attention, fla's chunk kernels); `linear` and `latte` neither."""


def _spread(*variants: str) -> float:
    """e^q95 of the variants' family (one) or of their pair (two), else e^(1.96σ)."""
    q95 = json.loads((DATA / "gpumodel_intervals.json").read_text())["q95"]
    sigma = json.loads((DATA / "gpumodel.json").read_text())["sigma"]
    if not all(v in FAMILY for v in variants):
        return math.exp(1.96 * sigma)
    key = "|".join(sorted(FAMILY[v] for v in variants))
    return math.exp(q95[key]) if key in q95 else math.exp(1.96 * sigma)


@pytest.mark.parametrize(("device", "a", "b", "sizes"), DATASHEET_CASES)
def test_a_datasheet_crossing_is_the_first_whole_n_at_which_predict_says_b_is_no_slower(cli, device, a, b, sizes):
    r = cli("crossover", "--device", device, "--pair", f"{a}:{b}", *sizes, "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    n0, low, high = row["predicted_n0"], row["predicted_n0_low"], row["predicted_n0_high"]
    assert n0 is not None and n0 > 2 and low is not None and high is not None and 2 < low < n0 < high
    at = _predict(cli, device, a, b, [n0 - 1, n0, low - 1, low, high - 1, high], sizes)
    _first_no_slower(at, a, b, n0)
    for (variant, n), point in at.items():
        spread = _spread(variant)
        assert point["seconds_high"] == pytest.approx(point["seconds"] * spread, rel=1e-12), (variant, n)
        assert point["seconds_low"] == pytest.approx(point["seconds"] / spread, rel=1e-12), (variant, n)
    pair = _spread(a, b)  # the interval's edges: A slower by the ratio's spread, then faster
    _first_no_slower(at, a, b, low, pair)
    _first_no_slower(at, a, b, high, 1 / pair)


def test_the_readme_example_crosses_at_the_first_whole_n_after_the_step_in_as_time() -> None:
    """The README's example steps at N = 3,840 (a multiple of its 128-row query blocks): A is still faster there,
    and B from 3,841 on."""
    model = resolve("a100-sxm4-80gb")
    dims = row_dims({"d": 128, "heads": 8, "batch": 4})
    st = Setting(dtype="bf16")
    p = crossing(model, "softmax-fused", "linear", dims, st)
    ta, tb = (model.seconds(v, dims, np.array([3840.0, 3841.0]), st).seconds for v in ("softmax-fused", "linear"))
    assert tb[0] > ta[0] and tb[1] <= ta[1]
    assert p.n0 == 3841


def test_a_measured_devices_fitted_crossing_is_the_first_whole_n_at_which_predict_says_b_is_no_slower(cli) -> None:
    """A profile's crossing (exact polynomials) against `predict` on that profile."""
    device, a, b, sizes = "cpu-amd-epyc-5155e7", "taylorshift-direct", "taylorshift-efficient", ["--d", "32"]
    r = cli("crossover", "--device", device, "--pair", f"{a}:{b}", *sizes, "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    n0 = row["corrected_n0"]
    assert n0 is not None and n0 > 2
    _first_no_slower(_predict(cli, device, a, b, [n0 - 1, n0], sizes), a, b, n0)


def test_an_op_models_crossing_is_the_first_whole_n_at_which_its_times_say_b_is_no_slower() -> None:
    """An op calibration's crossing (point estimate, its times as `predict` computes them: `seconds`)."""
    model = resolve("cpu-amd-epyc-234b2f")
    st = Setting(dtype=model.dtype)
    for a, b, dv in (("softmax", "linear", 32), ("softmax", "taylorshift-efficient", 16)):
        dims = row_dims({"d": dv})
        n0 = crossing(model, a, b, dims, st, replicates=0).n0
        assert n0 is not None and n0 > 2
        ns = np.array([n0 - 1.0, float(n0)])
        ta, tb = (model.seconds(v, dims, ns, st, replicates=0).seconds for v in (a, b))
        assert tb[0] > ta[0] and tb[1] <= ta[1], (a, b, dv, n0, ta, tb)
