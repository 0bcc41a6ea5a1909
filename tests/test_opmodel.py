"""The op-level device model: fitting on synthetic ops with known constants, summing a variant's ops,
crossovers from curves with known roots, calibration plumbing, and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import BY_NAME
from attn_cost.profilers.devicemodel.calibrated.data import (
    COPY,
    Gemm,
    Line,
    OpModel,
    Point,
    Streaming,
    fit_points,
    kernel_calls,
    load_opmodel,
)
from attn_cost.profilers.devicemodel.calibrated.model import CalibratedDevice, predicted_seconds
from attn_cost.profilers.devicemodel.device import Prediction, crossing, last_crossing, row_dims
from attn_cost.profilers.devicemodel.tunables import DEFAULT

DEVICE = {"kind": "cpu", "name": "Test CPU", "torch": "2.13.0", "threads": 2, "family": "1"}
LAUNCH, PER_BYTE = 2e-6, 1e-10  # 2 µs per kernel, 10 GB/s


def op_crossing(model: OpModel, a: str, b: str, dims: dict, **options) -> Prediction:
    """The op model's predicted crossover: `device.crossing` over the calibration as a device, at its dtype."""
    return crossing(CalibratedDevice(model), a, b, dims, Setting(dtype=model.dtype), **options)


def streaming_points(kernel: str, width: int = 64, launch: float = LAUNCH, per_byte: float = PER_BYTE) -> list[Point]:
    return [
        Point(kernel, {"bytes": float(b), "rows": b / (8 * width), "cols": float(width)}, launch + b * per_byte)
        for b in (2.0**k for k in range(8, 28, 2))
    ]


def dims_of(d: int) -> dict:
    return {BY_NAME["d"]: d, BY_NAME["h"]: 1, BY_NAME["b"]: 1, BY_NAME["L"]: d}


# -- fitting -----------------------------------------------------------------------------------------


def test_streaming_model_recovers_launch_and_bandwidth_between_grid_points() -> None:
    model = Streaming.fit(streaming_points("copy"))
    assert model.launch == pytest.approx(LAUNCH + 256 * PER_BYTE)
    for b in (1000.0, 3e5, 7.7e6, 1e8):  # none of them on the grid
        t = model.predict({"bytes": np.array([b]), "cols": np.array([64.0])})[0]
        assert t == pytest.approx(LAUNCH + b * PER_BYTE, rel=1e-9)
    far = model.predict({"bytes": np.array([2.0**34])})[0]  # 64× past the grid: the last point's bandwidth
    assert far == pytest.approx(LAUNCH + 2.0**34 * PER_BYTE, rel=0.01)


def test_streaming_model_interpolates_between_row_widths() -> None:
    points = streaming_points("softmax", 8, per_byte=4e-10) + streaming_points("softmax", 512, per_byte=1e-10)
    model = Streaming.fit(points)
    f = {"bytes": np.array([2.0**20]), "cols": np.array([64.0])}  # log2 64 is halfway between log2 8 and log2 512
    expected = LAUNCH + 2.0**20 * (4e-10 + 1e-10) / 2
    assert model.predict(f)[0] == pytest.approx(expected, rel=1e-9)


def test_a_page_aligned_row_stride_is_its_own_class_of_widths() -> None:
    """A column scan down rows whose stride is a multiple of 4 KiB runs through one cache set: on the shipped CPU
    cumsum down rows of 1,024 floats ran at 1.5 GB/s, down rows of 576 at 16. Rows of 1,600 (6,400 B) are priced
    between the fast widths 64 and 2,000, never from 1,024's curve; rows of 2,048 between 1,024 and 4,096; a width
    past its class's widest is held there and said to be (`beyond`)."""
    fast, slow = 1e-10, 1e-9
    points = [*streaming_points("cumsum!", 64, per_byte=fast), *streaming_points("cumsum!", 2000, per_byte=fast),
              *streaming_points("cumsum!", 1024, per_byte=slow), *streaming_points("cumsum!", 4096, per_byte=3 * slow)]
    model = Streaming.fit(points)
    at = 2.0**20

    def price(cols: float) -> float:
        return float(model.predict({"bytes": np.array([at]), "cols": np.array([cols])})[0])

    assert price(1600) == pytest.approx(LAUNCH + at * fast, rel=1e-9)
    assert price(2048) == pytest.approx(LAUNCH + at * 2 * slow, rel=1e-9)  # log2 2048 halfway from 1024 to 4096
    beyond = model.beyond({"bytes": np.full(4, at), "cols": np.array([1600.0, 2048.0, 3000.0, 8192.0])})
    assert beyond.tolist() == [False, False, True, True]
    assert price(3000) == pytest.approx(LAUNCH + at * fast, rel=1e-9)  # held at 2,000, not at 4,096's curve


def gemm_time(m: float, k: float, n: float, peak: float = 1e11, half: float = 16.0) -> float:
    eff = (m / (m + half)) * (k / (k + half)) * (n / (n + half))
    return 3e-6 + max(2 * m * k * n / (peak * eff), 4 * (m * k + k * n + m * n) * PER_BYTE)


def test_gemm_model_recovers_its_constants_and_predicts_shapes_off_the_grid() -> None:
    sizes = (1, 8, 32, 128, 512, 2048)
    points = [
        Point(
            "matmul-NN",
            {"batch": 1.0, "m": m, "k": k, "n": n, "bytes": 4.0 * (m * k + k * n + m * n)},
            gemm_time(m, k, n),
        )
        for m in sizes
        for k in sizes
        for n in sizes
    ]
    copy = Streaming.fit(streaming_points(COPY, launch=0.0))
    model = Gemm.fit(points, copy)
    assert model.peak == pytest.approx(1e11, rel=0.05)
    assert model.launch == pytest.approx(3e-6, rel=0.1)
    for m, k, n in ((300, 24, 300), (1000, 48, 49), (2304, 700, 25)):
        f = {x: np.array([float(v)]) for x, v in zip(("batch", "m", "k", "n"), (1, m, k, n), strict=True)}
        f["bytes"] = np.array([4.0 * (m * k + k * n + m * n)])
        assert model.predict(f)[0] == pytest.approx(gemm_time(m, k, n), rel=0.03)


# -- a variant is the sum of its ops -------------------------------------------------------------------


class PerByte(OpModel):
    """Every kernel costs 1 µs plus 0.1 ns per byte it moves: the sum can be checked by hand."""

    def __init__(self) -> None:
        super().__init__(DEVICE, "fp32", [], kernels={"stub": None})

    def op_seconds(self, kernel, f):
        return 1e-6 + f["bytes"] * 1e-10


def test_softmax_time_is_the_sum_of_its_four_ops() -> None:
    n, d = 300.0, 16.0
    # S = QKᵀ reads 2Nd, writes N²; S/√d in place reads and writes N²; softmax reads N², writes N²;
    # Y = PV reads N² + Nd, writes Nd: fp32 bytes 4·(6N² + 4Nd), four kernels.
    expected = 4e-6 + 1e-10 * 4 * (6 * n * n + 4 * n * d)
    got = PerByte().time(kernel_calls("softmax", "core", "fp32", dims_of(16)), np.array([n]))[0]
    assert got == pytest.approx(expected, rel=1e-12)


class Constant(OpModel):
    def __init__(self) -> None:
        super().__init__(DEVICE, "fp32", [], kernels={"stub": None})

    def op_seconds(self, kernel, f):
        return np.full_like(f["bytes"], 1e-6)


def test_loop_bodies_count_once_per_iteration() -> None:
    # linear-recurrent: 3 buffers made before the loop, then per token elu1, outer, two adds, elu1,
    # two products, a division and the store of the row: 9 kernels per token.
    calls = kernel_calls("linear-recurrent", "core", "fp32", dims_of(8))
    got = Constant().time(calls, np.array([10.0, 1000.0]))
    assert got == pytest.approx([1e-6 * (3 + 9 * 10), 1e-6 * (3 + 9 * 1000)])


# -- exact shapes: a variant's ops timed along N ------------------------------------------------------------


def test_the_same_op_of_two_variants_shares_a_line() -> None:
    softmax = kernel_calls("softmax", "core", "fp32", dims_of(32))
    direct = kernel_calls("taylorshift-direct", "core", "fp32", dims_of(32))
    other_d = kernel_calls("softmax", "core", "fp32", dims_of(24))
    # S = QKᵀ: an N×32 by 32×N product in both; at d = 24 another line
    qk = softmax.lines[softmax.kernels.index("matmul-NT")]
    assert qk == direct.lines[direct.kernels.index("matmul-NT")]
    assert qk != other_d.lines[other_d.kernels.index("matmul-NT")]
    assert len(set(softmax.lines)) == len(softmax.lines)  # scale!, softmax, PV: each its own


def _line_points(calls, i: int, ns, seconds) -> list[Point]:
    """Points along op i of a variant at lengths ns (dims as the variant has them there)."""
    out = []
    for n, t in zip(ns, seconds, strict=True):
        f = {k: float(fn(float(n))) for k, fn in calls.features[i].items() if k != "repeat"}
        out.append(Point(calls.kernels[i], f, t, 0.0, calls.lines[i], float(n)))
    return out


def test_a_line_replaces_the_kernel_model_along_it_and_nowhere_else() -> None:
    base = synthetic_model()
    calls = kernel_calls("taylorshift-efficient", "core", "fp32", dims_of(8))
    i = calls.kernels.index("matmul-NN")  # QQᵀ-term product with n = d + 1 = 9, which a grid would miss
    ns = [64, 256, 1024, 4096]
    slow = 2.0 * base.op_seconds(
        calls.kernels[i], calls.at(np.array(ns, dtype=float))[i][1]
    )  # this shape runs twice as slow as the grid says
    model = fit_points(DEVICE, "fp32", base.points + _line_points(calls, i, ns, slow))
    n = np.array([64.0, 300.0, 4096.0, 20000.0])  # on the line, between, at and past its end
    extra = model.time(calls, n) - base.time(calls, n)
    assert extra == pytest.approx(
        base.op_seconds(calls.kernels[i], calls.at(n)[i][1]), rel=1e-9
    )  # the op's time, doubled
    other = kernel_calls("taylorshift-efficient", "core", "fp32", dims_of(16))
    assert model.time(other, n) == pytest.approx(base.time(other, n), rel=1e-12)  # another d: no line


def test_a_line_interpolates_in_log_n_and_reports_its_leave_one_out_error() -> None:
    base = synthetic_model()
    calls = kernel_calls("softmax", "core", "fp32", dims_of(16))
    i = calls.kernels.index("softmax")
    ns = np.array([64.0, 128.0, 256.0, 512.0])
    ratio = ns / 64.0  # measured / kernel model: 1, 2, 4, 8 (linear in log N)
    timed = base.op_seconds("softmax", calls.at(ns)[i][1]) * ratio
    model = fit_points(DEVICE, "fp32", base.points + _line_points(calls, i, ns, timed))
    (line,) = model.lines.values()
    mid = np.array([181.0])  # ≈ 2^7.5: halfway in log N between 128 and 256, so the ratio is 2^2.5
    g = calls.at(mid)[i][1]
    assert line.along(model, mid, base.op_seconds("softmax", g))[0] == pytest.approx(
        base.op_seconds("softmax", g)[0] * 2 ** (1 + math.log2(181 / 128)), rel=1e-9
    )
    assert line.leave_one_out(model) == pytest.approx([0.0, 0.0], abs=1e-12)  # a power law is interpolated exactly


def test_line_points_round_trip_and_stay_out_of_the_kernel_fit(tmp_path) -> None:
    base = synthetic_model()
    calls = kernel_calls("linear", "core", "fp32", dims_of(16))
    i = calls.kernels.index("elu1")
    ns = [100, 1000]
    model = fit_points(DEVICE, "fp32", base.points + _line_points(calls, i, ns, [1.0, 2.0]))  # absurd times
    n = np.array([50.0, 5000.0])
    feats = calls.at(n)[i][1]
    assert model.op_seconds("elu1", feats) == pytest.approx(base.op_seconds("elu1", feats))  # kernel fit unmoved
    again = load_opmodel(str(model.save(tmp_path)))
    assert isinstance(again.lines[calls.lines[i]], Line)
    assert again.time(calls, n) == pytest.approx(model.time(calls, n))


def test_a_line_point_without_a_length_is_refused(tmp_path) -> None:
    data = synthetic_model().as_json()
    data["points"].append({**data["points"][0], "line": "copy|cols=64/64", "n": 0})
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="not an attn-cost op calibration"):
        load_opmodel(str(path))


def test_a_gzipped_calibration_loads_like_the_plain_one(tmp_path) -> None:
    import gzip

    model = synthetic_model()
    plain = model.save(tmp_path)
    zipped = tmp_path / "kept.json.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    calls, n = kernel_calls("softmax", "core", "fp32", dims_of(16)), np.array([64.0, 4096.0])
    assert load_opmodel(str(zipped)).time(calls, n) == pytest.approx(load_opmodel(str(plain)).time(calls, n))
    torn = tmp_path / "torn.json.gz"
    torn.write_bytes(zipped.read_bytes()[:40])
    with pytest.raises(UserError, match="not a readable op calibration"):
        load_opmodel(str(torn))


def test_line_grid_times_a_variant_s_ops_at_their_shapes() -> None:
    from attn_cost.profilers.devicemodel.calibrated import fit as cal

    points = cal.line_grid(["softmax"], [{"d": 24}], {"L3": 1 << 20})
    qk = [p for p in points if p.shape.kernel == "matmul-NT"]
    assert [p.n for p in qk] == [n for n in DEFAULT.line_lengths if 4 * (2 * n * 24 + n * n) <= 8 << 20]
    assert all(dict(p.shape.dims) == {"batch": 1, "m": p.n, "k": 24, "n": p.n} for p in qk)
    assert {p.shape.kernel for p in points} == {"matmul-NT", "scale!", "softmax", "matmul-NN"}
    # variants needing sizes they are not given are skipped; those with defaults are not
    assert cal.line_grid(["optimized-attention"], [{"d": 24}], {"L3": 1 << 20}) == []
    assert cal.line_grid(["gqa"], [{"d": 24}], {"L3": 1 << 20})


def test_off_trend_finds_slow_spikes_but_not_dips_a_power_law_or_a_step() -> None:
    from attn_cost.profilers.devicemodel.trend import off_trend

    n = [100, 200, 400, 800, 1600]
    assert off_trend(n, [x**1.5 for x in n]) == []
    bent = [x * (1.2 if x >= 800 else 1.0) for x in n]  # a cache cliff: 1.2× from 800 on, less than 1.25×
    assert off_trend(n, bent) == []
    assert 2 in off_trend(n, [x * (1.3 if x == 400 else 1.0) for x in n])  # a spike of 1.3×
    assert off_trend(n, [x / (1.3 if x == 400 else 1.0) for x in n]) == []  # a dip: no disturbance is fast
    assert off_trend([1, 2], [1.0, 9.0]) == []  # two points: nothing to compare with
    n = [64 * 2 ** (j / 4) for j in range(16)]
    slow = {5, 6, 7}  # a slow spell over three lengths in a row: 1.6×, each beside another slow one
    assert off_trend(n, [x * (1.6 if j in slow else 1.0) for j, x in enumerate(n)]) == sorted(slow)
    cliff = [x * (1.5 if j >= 8 else 1.0) for j, x in enumerate(n)]  # a real step along N: none re-timed
    assert off_trend(n, cliff) == []


def test_a_spike_along_a_line_is_timed_again_and_the_faster_timing_kept() -> None:
    from attn_cost.profilers.devicemodel.calibrated import fit as cal

    class Again:
        """Times a shape again as 10 µs per 64 rows (the undisturbed power law), and remembers which."""

        def __init__(self) -> None:
            self.asked: list = []

        def point(self, shape, tag="op"):
            self.asked.append((shape, tag))
            return Point(shape.kernel, {}, 1e-5 * shape.get("rows") / 64)

    ns = [64, 128, 256, 512, 1024]
    law = [1e-5, 2e-5, 4e-5, 8e-5, 1.6e-4]
    shapes = [cal._s("softmax", rows=n, cols=24) for n in ns]
    grid_point = (Point("softmax", {}, 1.0, 0.0), cal._s("softmax", rows=1, cols=24))  # never checked
    for disturbed in (2, 0, 4):  # an inner point, the first, the last: 2.25× the law
        seconds = [t * (2.25 if i == disturbed else 1.0) for i, t in enumerate(law)]
        points = [Point("softmax", {}, t, 0.0, "line", float(n)) for n, t in zip(ns, seconds, strict=True)]
        points.append(grid_point[0])
        again = Again()
        cal._recheck_lines(again, points, [*shapes, grid_point[1]], lambda *a: None)
        # the spike (and neighbours it made look off their trend) are timed again, the faster timing kept
        assert shapes[disturbed] in [shape for shape, _ in again.asked]
        assert grid_point[1] not in [shape for shape, _ in again.asked]
        assert {tag for _, tag in again.asked} == {"op-again"}
        assert [p.seconds for p in points] == pytest.approx([*law, 1.0])
    undisturbed = [Point("softmax", {}, t, 0.0, "line", float(n)) for n, t in zip(ns, law, strict=True)]
    again = Again()
    cal._recheck_lines(again, undisturbed, shapes, lambda *a: None)
    assert again.asked == []  # a power law is left alone


def test_the_chain_cost_recovers_its_fixed_part_and_its_share() -> None:
    from attn_cost.profilers.devicemodel.calibrated.data import CALL, SEQUENCE, Chain

    call, launch, share = 1e-6, 2e-6, 0.05
    alone = [2e-5, 4e-5, 5e-4, 3e-3]  # eight ops alone, from launch-bound to large
    chains = [
        Point(SEQUENCE, {"bytes": 1.0, "ops": 8.0, "isolated_s": a}, call + a + 8 * launch + share * a) for a in alone
    ]
    fitted = Chain.fit(chains, call)
    assert (fitted.launch, fitted.share) == pytest.approx((launch, share), rel=1e-6)
    alike = Chain.fit(chains[:2], call)  # 20 and 40 µs: no share can be told from a fixed cost
    assert alike.share == 0.0 and alike.launch == pytest.approx(launch + share * 3e-5 / 8, rel=0.2)
    # in a variant: Σ ops + call + launch per op + share of the ops' time
    model = fit_points(
        DEVICE, "fp32", synthetic_model().points + chains + streaming_points(CALL, launch=call, per_byte=0)
    )
    calls = kernel_calls("softmax", "core", "fp32", dims_of(16))
    n = np.array([100.0, 3000.0])
    ops = sum(model.op_seconds(k, f) for k, f in calls.at(n))
    assert model.time(calls, n) == pytest.approx(ops * (1 + share) + call + 4 * launch, rel=1e-6)


def test_the_chain_cost_is_paid_per_dispatched_kernel() -> None:
    from attn_cost.profilers.devicemodel.calibrated.data import CALL, SEQUENCE, Chain

    call, launch = 1e-6, 5e-7
    alone = [2e-5, 4e-5]
    chains = [  # eight ops that dispatch fourteen ATen kernels
        Point(SEQUENCE, {"bytes": 1.0, "ops": 8.0, "dispatches": 14.0, "isolated_s": a}, call + a + 14 * launch)
        for a in alone
    ]
    assert Chain.fit(chains, call).launch == pytest.approx(launch, rel=1e-6)
    model = fit_points(
        DEVICE, "fp32", synthetic_model().points + chains + streaming_points(CALL, launch=call, per_byte=0)
    )
    calls = kernel_calls("linear", "core", "fp32", dims_of(16))
    n = np.array([100.0])
    ops = sum(model.op_seconds(k, f) for k, f in calls.at(n))
    # linear: φ(K), KᵀV, Σ φ(K), φ(Q), φ(Q)·KV, φ(Q)·z, divide; φ = elu + 1 is two kernels
    model.dispatches = {"elu1": 2}
    assert model.time(calls, n) == pytest.approx(ops + call + 9 * launch, rel=1e-6)
    again = OpModel.from_json(json.loads(model.to_text()), "here")
    assert again.dispatches == {"elu1": 2}
    for bad in ({"elu1": 0}, {"elu1": "two"}, ["elu1"]):
        with pytest.raises(UserError, match="dispatches"):
            OpModel.from_json({**model.as_json(), "dispatches": bad}, "bad.json")


def test_dispatches_are_counted_from_what_pytorch_runs() -> None:
    from attn_cost.profilers.devicemodel.calibrated import fit as cal

    # l2normalize: vector_norm, reciprocal_, mul_, mul; poly2: x·x, ·0.5, +x, +1; a product is one bmm (its
    # transposes, expands and reshapes are views); augment: new_empty, fill_ of the first column, mul into the rest
    assert cal.dispatches(cal._s("l2normalize", rows=8, cols=8)) == 4
    assert cal.dispatches(cal._s("poly2", rows=8, cols=8)) == 4
    assert cal.dispatches(cal._s("matmul-NT", batch=1, m=8, k=8, n=8)) == 1
    assert cal.dispatches(cal._s("augment", rows=8, cols=8)) == 3
    table = cal.dispatch_table([cal._s("elu1", rows=64, cols=64), cal._s("elu1", rows=1, cols=8)], "fp32")
    assert table == {"elu1": 2}  # F.elu, then add_(1)


def test_operand_layout_is_read_from_the_op_list() -> None:
    from attn_cost.costmodel.variants import derive
    from attn_cost.profilers.devicemodel.calibrated.data import kernel_of, operand_layout

    def layouts(variant: str) -> list[tuple[str, dict]]:
        return [(kernel_of(op), operand_layout(op)) for op in derive(variant, "core").ops if operand_layout(op)]

    # TaylorShift's Algorithm 1: Ŷ += α²·Q(KᵀV) accumulates, Ŷ += α⁴·ΣV adds one row to every row, and
    # Y = Ŷ[:, 1:] / Ŷ[:, :1] divides a slice by a one-column slice of the same tensor
    assert layouts("taylorshift-efficient") == [
        ("matmul-NN", {"accumulate": 1}),
        ("add!", {"bcast": 2}),
        ("div", {"bcast": 1, "xview": 1, "zview": 1}),
    ]
    assert layouts("linear") == [("div!", {"bcast": 1})]  # the numerator over its N×1 normaliser
    assert layouts("softmax") == []
    # a loop's own slicing of token t is a loop step, not a view of the op
    assert layouts("linear-recurrent") == [("div!", {"bcast": 1})]


def test_an_op_is_timed_with_the_operands_its_variant_gives_it() -> None:
    import torch
    from attn_cost.profilers.devicemodel.calibrated import fit as cal

    calls = kernel_calls("taylorshift-efficient", "core", "fp32", dims_of(8))
    timed = 0
    for kernel, feats in calls.at(np.array([300.0]))[: len(calls.kernels)]:
        f = {k: float(v[0]) for k, v in feats.items()}
        shape = cal.shape_of(kernel, f)
        # the op built from the shape to time moves the bytes the variant's op moves
        assert cal.engine_op(shape, "fp32").dims["bytes"] == f["bytes"], kernel
        run, make = cal._runner(shape, "fp32", "cpu")
        inputs = make()
        before = [t.clone() for t in inputs]
        out = run(inputs)
        if kernel == "div":  # a slice over a one-column slice, each made from a tensor one column wider
            assert [tuple(t.shape) for t in before] == [(1, 1, 300, 9), (1, 1, 300, 2)]
            torch.testing.assert_close(out, before[0][..., 1:] / before[1][..., 1:])
            timed += 1
        if kernel == "add!":  # one row added to every row
            torch.testing.assert_close(out, before[0] + before[1])
            assert before[1].shape[-2] == 1
            timed += 1
        if dict(shape.dims).get("accumulate"):  # C += A·B, in place
            torch.testing.assert_close(out.view(1, 1, 300, 9), before[2] + before[0] @ before[1])
            timed += 1
    assert timed == 3
    # the grid's plain operands keep their shapes (and their stored timings)
    assert dict(cal.shape_of("div", {"rows": 8.0, "cols": 8.0, "bytes": 768.0}).dims) == {"rows": 8, "cols": 8}
    assert "bcast" not in cal.engine_op(cal._s("div", rows=8, cols=8), "fp32").dims


# -- crossovers ------------------------------------------------------------------------------------------


def test_last_crossing_finds_known_roots() -> None:
    assert last_crossing(lambda x: x * x - 1e6, 2, 65536) == pytest.approx(1000, abs=0.01)
    assert last_crossing(lambda x: np.log(x / 1234.5), 2, 65536) == pytest.approx(1234.5, abs=0.01)
    # B cheaper, dearer, cheaper again: the transition is the last crossing (from which B stays cheaper)
    assert last_crossing(lambda x: (x - 10) * (x - 100) * (x - 5000), 2, 65536) == pytest.approx(5000, abs=0.01)
    assert last_crossing(lambda x: x + 1, 2, 65536) == 2  # B never dearer
    assert last_crossing(lambda x: -x, 2, 65536) is None  # B still dearer at the end


def synthetic_model(noise: float = 0.0, seed: int = 1) -> OpModel:
    """Every streaming kernel the catalogue's cores use at 2 µs + 10 GB/s, every product through Gemm."""
    rng = np.random.default_rng(seed)
    kernels = (
        "copy",
        "scale!",
        "softmax",
        "softmax-axis2",
        "elu1",
        "sum-axis2",
        "div!",
        "l2normalize",
        "poly2",
        "normalize_rows!",
        "augment",
        "outer",
        "add!",
        "div",
    )
    points = [p for k in kernels for p in streaming_points(k)]
    sizes = (1, 8, 16, 32, 64, 256, 1024, 4096)
    for layout in ("NN", "NT", "TN"):
        points += [
            Point(
                f"matmul-{layout}",
                {"batch": 1.0, "m": m, "k": k, "n": n, "bytes": 4.0 * (m * k + k * n + m * n)},
                gemm_time(m, k, n),
            )
            for m in sizes
            for k in sizes
            for n in sizes
            if min(m, k, n) <= 64
        ]
    for p in points:
        p.seconds *= math.exp(noise * rng.standard_normal())
        p.se = noise * p.seconds
    return fit_points(DEVICE, "fp32", points)


def lean_synthetic_model() -> OpModel:
    """synthetic_model with its products timed on a coarser grid (1, 16, 64, 256, 4096 for m, k and n): the same
    kernels and constants from a third of the points, so that the 100 bootstrap refits behind each predicted interval
    take half the time (for tests of what is done with a prediction, not of the prediction itself)."""
    full, grid = synthetic_model(), (1, 16, 64, 256, 4096)
    kept = [p for p in full.points if not p.kernel.startswith("matmul") or all(p.dims[k] in grid for k in "mkn")]
    return OpModel(full.device, "fp32", kept)


def test_predicted_crossover_lies_in_its_bootstrap_interval() -> None:
    model = synthetic_model(noise=0.03)
    pred = op_crossing(model, "taylorshift-direct", "taylorshift-efficient", dims_of(32), replicates=30)
    assert pred.n0 is not None and pred.low is not None and pred.high is not None
    assert pred.low <= pred.n0 <= pred.high
    # the difference of the two predicted times changes sign at N0
    ca = kernel_calls("taylorshift-direct", "core", "fp32", dims_of(32))
    cb = kernel_calls("taylorshift-efficient", "core", "fp32", dims_of(32))
    below, above = np.array([pred.n0 * 0.9]), np.array([pred.n0 * 1.1])
    assert model.time(ca, below)[0] < model.time(cb, below)[0]
    assert model.time(ca, above)[0] > model.time(cb, above)[0]


def test_a_tie_is_the_stretch_where_the_ratio_is_within_its_error_of_one() -> None:
    """Independent arithmetic: ln(tB/tA) falls linearly in log N through 0 at N = 100; with σ = 0.05 the tie is
    where |ratio| ≤ 1.96 · 0.05, i.e. the lengths within 2^±(0.098/0.1) octaves of 100... read on the grid."""
    from attn_cost.profilers.devicemodel.device import tie_interval

    xs = np.geomspace(2.0, 65536.0, 240)
    ratio = -0.1 * np.log2(xs / 100.0)  # 10 % per octave
    tie = tie_interval(xs, ratio, np.full_like(xs, 0.05), 100.0)
    half = 1.96 * 0.05 / 0.1  # octaves either side
    assert tie is not None
    assert tie[0] == pytest.approx(100 * 2**-half, rel=0.05) and tie[1] == pytest.approx(100 * 2**half, rel=0.05)
    assert tie_interval(xs, ratio, np.full_like(xs, 1e-6), 100.0) is None  # no grid point that close
    far = np.where(xs > 5000, 0.0, 1.0)  # never crosses; a near-tie at the end of the range
    assert tie_interval(xs, far, np.full_like(xs, 0.01), None) == (math.floor(xs[xs > 5000][0]), 65536)


def test_a_prediction_says_which_ops_it_priced_off_their_own_shape() -> None:
    """Without exact-shape lines every timeable op is named; with a line for an op that op is not."""
    base = synthetic_model()
    pred = op_crossing(base, "softmax", "linear", dims_of(16), replicates=0)
    assert "matmul-NT (no exact-shape line)" in pred.extrapolated
    calls = kernel_calls("softmax", "core", "fp32", dims_of(16))
    i = calls.kernels.index("matmul-NT")
    ns = [64, 256, 1024]
    timed = base.op_seconds("matmul-NT", calls.at(np.array(ns, dtype=float))[i][1])
    lined = fit_points(DEVICE, "fp32", base.points + _line_points(calls, i, ns, timed))
    n = np.array([100.0, 1000.0])
    assert "matmul-NT (no exact-shape line)" in base.extrapolated(calls, n)
    assert "matmul-NT (no exact-shape line)" not in lined.extrapolated(calls, n)
    assert "softmax (no exact-shape line)" in lined.extrapolated(calls, n)
    assert pred.as_json()["predicted_extrapolated"] == list(pred.extrapolated)


def test_an_op_slower_than_a_copy_of_its_bytes_allows_is_named_at_calibration(tmp_path) -> None:
    """exp! at 30× the copy's time for the same bytes (it was timed on its own overflow) is a suspect; one at 5×
    is not, nor a softmax over rows of 8 (per-row work); a product 3× faster than the grid's best FLOP rate is."""
    from attn_cost.profilers.devicemodel.calibrated.data import sanity

    base = synthetic_model()
    b = 2.0**22
    copy_s = float(base.kernels[COPY].predict({"bytes": np.array([b])})[0])
    best = max(2 * p.dims.get("batch", 1) * p.dims["m"] * p.dims["k"] * p.dims["n"] / p.seconds
               for p in base.points if p.kernel.startswith("matmul"))  # fmt: skip
    m = k = n = 256.0
    extra = [
        Point("exp!", {"bytes": b, "rows": b / 512, "cols": 64.0}, 30 * copy_s),
        Point("gelu", {"bytes": b, "rows": b / 512, "cols": 64.0}, 5 * copy_s),
        Point("softmax", {"bytes": b, "rows": b / 64, "cols": 8.0}, 50 * copy_s),
        Point("glue", {"bytes": 1.0, "rows": 1.0}, 1e-3, 0.0, "glue|softmax", 8.0),  # a whole variant: not an op
        Point("matmul-NN", {"bytes": 4 * 3 * m * k, "batch": 1.0, "m": m, "k": k, "n": n},
              2 * m * k * n / (3 * best), 0.0, "matmul-NN|line", 256.0),
    ]
    found = sanity(fit_points(DEVICE, "fp32", base.points + extra))
    assert len(found) == 2, found
    assert found[0].startswith("exp! over rows of 64: up to 30×")
    assert found[1].startswith("matmul-NN: up to 3.0×")
    model = fit_points(DEVICE, "fp32", base.points)
    model.suspects = found
    model.save(tmp_path)
    assert load_opmodel(str(tmp_path / f"{model.slug}.json")).suspects == found


def test_glue_is_measured_per_variant_and_kept_beside_kernel_time(tmp_path) -> None:
    """softmax timed whole at N = 8, 16, 32 at 5 µs above its ops' device time: the model keeps 5 µs of glue for
    softmax at every N (held past 32), adds it on a CPU and overlaps it on a GPU; a variant without glue keeps the
    chain's fitted overheads; the glue points survive a save and load."""
    from attn_cost.profilers.devicemodel.calibrated.data import GLUE, glue_line, timeline

    base = synthetic_model()
    calls = kernel_calls("softmax", "core", "fp32", dims_of(16))
    ns = np.array([8.0, 16.0, 32.0])
    kernel_s = base._kernel_seconds(base._ops(calls, ns))
    glue = [Point(GLUE, {"bytes": 1.0, "rows": 1.0}, float(t) + 5e-6, 0.0, glue_line(calls.key), float(n))
            for n, t in zip(ns, kernel_s, strict=True)]  # fmt: skip
    model = fit_points(DEVICE, "fp32", base.points + glue)
    n = np.array([8.0, 100.0, 4096.0])
    assert model.glue_seconds(calls, n) == pytest.approx([5e-6] * 3, rel=1e-6)
    assert model.time(calls, n) == pytest.approx(model._kernel_seconds(model._ops(calls, n)) + 5e-6, rel=1e-9)
    linear = kernel_calls("linear", "core", "fp32", dims_of(16))
    assert model.glue_seconds(linear, n) is None
    assert model.time(linear, n) == pytest.approx(base.time(linear, n), rel=1e-12)
    assert timeline("cpu", np.array([2.0]), np.array([3.0])) == pytest.approx([5.0])
    assert timeline("cuda", np.array([2.0]), np.array([3.0])) == pytest.approx([3.0])
    model.save(tmp_path)
    again = load_opmodel(str(tmp_path / f"{model.slug}.json"))
    assert again.time(calls, n) == pytest.approx(model.time(calls, n), rel=1e-9)


def test_glue_is_timed_under_the_key_predictions_ask_for(tmp_path, monkeypatch) -> None:
    """calibrate keys a variant's glue by its op lines, so validate's sizes (h, b, L spelt out) find it."""
    from dataclasses import replace

    from attn_cost.profilers.devicemodel.calibrated import fit as cal
    from attn_cost.profilers.devicemodel.calibrated.data import glue_line
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.sizes import Sizes
    from attn_cost.profilers.measure.timing import TimeStats
    from attn_cost.profilers.store.store import ResultStore

    monkeypatch.setattr(cal, "time_cases", lambda cases, repeats, warmup, **kw: [TimeStats(*[2e-5] * 5, 3, 1)])
    store = ResultStore(prepare("cpu"), tmp_path / "results", shipped=False)
    calibrator = cal.Calibrator(store, "cpu", rates=cal.Rates(1e-6, 1e9, 1e9))
    points = cal.glue_points(calibrator, ["softmax", "no-such-reference-variant"], [{"d": 8}])
    asked = kernel_calls("softmax", "core", "fp32", replace(Sizes(N=1, d=8), N=1).symbols())
    assert [(p.n, p.line) for p in points] == [(n, glue_line(asked.key)) for n in DEFAULT.glue_lengths]


def test_a_saved_model_round_trips(tmp_path) -> None:
    model = synthetic_model()
    path = model.save(tmp_path)
    again = load_opmodel(str(path))
    calls = kernel_calls("linear", "core", "fp32", dims_of(16))
    n = np.array([10.0, 1e3, 1e5])
    assert again.time(calls, n) == pytest.approx(model.time(calls, n))


# -- bad input -----------------------------------------------------------------------------------------


def test_too_few_points_is_bad_input() -> None:
    with pytest.raises(UserError, match="at least 3"):
        fit_points(DEVICE, "fp32", streaming_points(COPY)[:2])


def _write_model(path, device: dict, points: list[Point]) -> str:
    model = OpModel(device, "fp32", points)
    path.write_text(json.dumps(model.as_json()))
    return str(path)


def test_validate_refuses_a_calibration_of_another_device(cli, tmp_path) -> None:
    other = {**DEVICE, "name": "Some Other CPU"}
    path = _write_model(tmp_path / "other.json", other, streaming_points(COPY))
    r = cli("validate", "--pair", "softmax:linear", "--cpu", "--calibration", path)
    assert r.code == 2 and "was made on Some Other CPU" in r.err
    assert r.err.strip().splitlines()[-1].startswith("attn-cost: error:")


def test_validate_with_no_calibration_by_that_name(cli) -> None:
    r = cli("validate", "--pair", "softmax:linear", "--cpu", "--calibration", "cpu-nothing-000000")
    assert r.code == 2 and "no op calibration for device 'cpu-nothing-000000'" in r.err


def test_a_calibration_with_too_few_points_is_refused(cli, tmp_path) -> None:
    path = tmp_path / "few.json"
    data = OpModel(DEVICE, "fp32", streaming_points(COPY)).as_json()
    data["points"] = data["points"][:2]
    path.write_text(json.dumps(data))
    r = cli("validate", "--pair", "softmax:linear", "--cpu", "--calibration", str(path))
    assert r.code == 2 and "needs at least 3" in r.err and "Traceback" not in r.err


def test_crossover_device_without_profile_or_calibration(cli) -> None:
    r = cli("crossover", "--pair", "softmax:linear", "--d", "16", "--device", "cpu-nothing-000000")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1


def test_crossover_device_uses_the_op_model_without_torch(cli, tmp_path) -> None:
    model = lean_synthetic_model()
    model.save(tmp_path / "home" / "opmodels")
    r = cli(
        "crossover", "--pair", "taylorshift-direct:taylorshift-efficient", "--d", "32", "--device", model.slug, "--json"
    )
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    pred = op_crossing(model, "taylorshift-direct", "taylorshift-efficient", dims_of(32))
    assert (row["predicted_n0"], row["predicted_n0_low"], row["predicted_n0_high"]) == (pred.n0, pred.low, pred.high)


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--variant", "softmaxx"], "softmaxx"), (["--d", "0"], "--d must be a positive integer")],
)
def test_calibrate_rejects_bad_exact_shape_options(cli, args, message) -> None:
    r = cli("calibrate", "--cpu", *args)
    assert r.code == 2 and message in r.err and len(r.err.strip().splitlines()) == 1


def test_calibrate_rejects_an_output_that_is_a_file(cli, tmp_path) -> None:
    (tmp_path / "afile").write_text("x")
    r = cli("calibrate", "--cpu", "--out", str(tmp_path / "afile"))
    assert r.code == 2 and "is not a directory" in r.err


# -- calibration plumbing: grid points through the store, resumable --------------------------------------


def test_calibration_stores_points_and_resumes(monkeypatch, tmp_path) -> None:
    from attn_cost.profilers.devicemodel.calibrated import fit as cal
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.timing import TimeStats
    from attn_cost.profilers.store.store import ResultStore

    shapes = [cal._s(COPY, rows=r, cols=64) for r in (1, 16, 256, 4096)]
    shapes += [cal._s("matmul-NT", batch=1, m=m, k=8, n=m) for m in (8, 64, 512)]
    monkeypatch.setattr(cal, "grid", lambda caches, dtype, tune: shapes)
    monkeypatch.setattr(cal, "held_out_grid", lambda caches, dtype, tune: [cal._s(COPY, rows=100, cols=64)])
    timed: list[str] = []

    def fake_time_cases(cases, repeats, warmup, **options):
        if not cases[0].variant.startswith("probe:"):  # the device's rates, probed once per calibration
            timed.append(cases[0].variant)
        return [TimeStats(1e-5, 0.9e-5, 1.1e-5, 0.8e-5, 1.2e-5, repeats, warmup)]

    monkeypatch.setattr(cal, "time_cases", fake_time_cases)
    store = ResultStore(prepare("cpu"), tmp_path / "results", shipped=False)
    model, n_grid, n_lines, n_held = cal.calibrate(cal.Calibrator(store, "cpu"), {"L3": 1 << 20})
    assert (n_grid, n_lines, n_held, len(timed)) == (7, 0, 1, 8)
    assert set(model.kernels) == {COPY, "matmul-NT"} and model.held_out["other kernels"]["shapes"] == 1
    timed.clear()
    again = cal.Calibrator(ResultStore(prepare("cpu"), tmp_path / "results", shipped=False), "cpu")
    cal.calibrate(again, {"L3": 1 << 20})
    assert timed == [] and again.measured == 0  # every point came back from the store


def test_every_exact_shape_is_timed_twice_and_the_faster_timing_kept(monkeypatch, tmp_path) -> None:
    from attn_cost.profilers.devicemodel.calibrated import fit as cal
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.timing import TimeStats
    from attn_cost.profilers.store.store import ResultStore

    monkeypatch.setattr(cal, "grid", lambda caches, dtype, tune: [cal._s(COPY, rows=r, cols=64) for r in (1, 16, 256)])
    monkeypatch.setattr(cal, "held_out_grid", lambda caches, dtype, tune: [])
    ns = (64, 128, 256, 512)
    lines = [cal.LinePoint(cal._s("softmax", rows=n, cols=24), "softmax|line", n) for n in ns]
    # a slow spell slows the first pass at N = 128 and 512 and the second at 64 and 256, each by 1.4×
    slow = {"op": (128, 512), "op-pass2": (64, 256)}
    timed: list[str] = []

    def fake_time_cases(cases, repeats, warmup, **options):
        tag, rows = cases[0].variant.split(":")[0], cases[0].sizes.N
        if tag != "probe":
            timed.append(tag)
        t = 1e-5 * max(rows, 1) / 64 * (1.4 if rows in slow.get(tag, ()) else 1.0)
        return [TimeStats(t, t, t, t, t, repeats, warmup)]

    monkeypatch.setattr(cal, "time_cases", fake_time_cases)
    store = ResultStore(prepare("cpu"), tmp_path / "results", shipped=False)
    calibrator = cal.Calibrator(store, "cpu")
    model, *_ = cal.calibrate(calibrator, {"L3": 1 << 20}, lines=lines)
    assert timed.count("op-pass2") == len(ns) == DEFAULT.line_passes * len(ns) - len(ns)
    assert "op-again" not in timed  # with the faster timings kept, no point is off its neighbours' trend
    seconds = model.lines["softmax|line"].seconds
    per_call = [calibrator.rates.inner(cal.engine_op(lp.shape, "fp32")) for lp in lines]  # calls in one sample
    assert seconds == pytest.approx([1e-5 * n / 64 / k for n, k in zip(ns, per_call, strict=True)])


@pytest.mark.slow
def test_quick_calibration_of_this_cpu(cli, tmp_path) -> None:
    r = cli("calibrate", "--cpu", "--quick", "--threads", "1", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["grid_shapes"] > 100 and data["measured"] >= data["grid_shapes"]
    assert {"copy", "matmul-NT", "softmax", "l2normalize"} <= set(data["kernels"])


def test_report_draws_predicted_time_beside_measured(cli, fixture_device, tmp_path) -> None:
    import re

    from attn_cost.profilers.devicemodel.measured.data import load_profile

    profile = load_profile(fixture_device)
    model = lean_synthetic_model()
    OpModel(profile.device, "fp32", model.points).save(tmp_path / "home" / "opmodels")
    out = tmp_path / "r.html"
    r = cli("report", "--html", str(out), "--pair", "softmax:linear", "--d", "16", "--device", profile.slug)
    assert r.code == 0, r.err
    text = out.read_text(encoding="utf-8")
    payload = re.search(r"<script type='application/json' id='attn-cost-data'>(.*?)</script>", text, re.S).group(1)
    slot = json.loads(payload.replace("<\\/", "</"))["measured"]["16"]["softmax"]
    n, t = slot["predicted"][-1]
    sizes = {"N": n, "d": 16, "h": 1, "b": 1, "L": 16}
    assert t == pytest.approx(predicted_seconds(model, "softmax", sizes))
    assert "softmax op model" in text


def test_off_grid_error_widens_the_interval() -> None:
    model = synthetic_model()
    args = (model, "softmax", "linear", dims_of(32))
    exact = op_crossing(*args, replicates=20)
    model.held_out = {f: {"shapes": 10, "median_abs_error": 0.1} for f in ("matmul", "other kernels")}
    loose = op_crossing(*args, replicates=20)
    assert loose.n0 == exact.n0  # the estimate itself does not move
    assert loose.high - loose.low > exact.high - exact.low


def test_the_chain_error_widens_the_interval() -> None:
    from attn_cost.profilers.devicemodel.calibrated.forms import Chain, Overheads

    model = synthetic_model()
    args = (model, "taylorshift-direct", "taylorshift-efficient", dims_of(16))
    model.overheads = Overheads(chain=Chain(1e-6, 0.0, 0.0))
    exact = op_crossing(*args, replicates=20)
    model.overheads = Overheads(chain=Chain(1e-6, 0.0, 0.1))  # chains timed whole miss their ops' sum by ~10 %
    loose = op_crossing(*args, replicates=20)
    assert loose.n0 == exact.n0
    assert loose.high - loose.low > exact.high - exact.low


def _with_copy_curve(per_byte) -> OpModel:
    """The synthetic model with its copy kernel replaced by seconds = bytes × per_byte(bytes)."""
    model = synthetic_model()
    sizes = [2.0**k for k in range(8, 34)]
    copy = [Point(COPY, {"bytes": b, "rows": b / 512, "cols": 64.0}, 1e-9 + b * per_byte(b)) for b in sizes]
    points = [p for p in model.points if p.kernel != COPY] + copy
    out = fit_points(DEVICE, "fp32", points)
    out.context = True
    return out


def test_no_cache_levels_no_context_cost() -> None:
    model = _with_copy_curve(lambda b: 1e-10)
    calls = kernel_calls("taylorshift-direct", "core", "fp32", dims_of(32))
    assert model.context_seconds(calls, np.array([64.0, 1400.0, 20000.0])) == pytest.approx([0, 0, 0], abs=1e-12)


def test_context_cost_appears_when_the_call_outgrows_the_cache() -> None:
    cache = 2.0**24  # 16.8 MB
    model = _with_copy_curve(lambda b: 1e-11 if b <= cache else 1e-10)
    calls = kernel_calls("softmax", "core", "fp32", dims_of(16))
    small, large = model.context_seconds(calls, np.array([400.0, 1900.0]))  # call footprints 1.3 MB and 29 MB
    assert small == 0.0
    assert large > 0.0  # S and P (14 MB each) fit alone, not together with what the call touched since
    model.context = False
    without = model.time(calls, np.array([1900.0]))[0]
    model.context = True
    assert model.time(calls, np.array([1900.0]))[0] == pytest.approx(without + large)


def _validation_script(name: str = "opmodel_validation"):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent.parent / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_another_calibration_is_scored_on_the_same_measurements(tmp_path) -> None:
    model = synthetic_model()
    path = model.save(tmp_path)
    row = {"a": "taylorshift-direct", "b": "taylorshift-efficient", "d": 32, "measured_n0": 1000}
    data = {"results": [row], "op_model_time_errors": {"softmax": {"timings": [[300, 16, 1e-4, 5.0]]}}}
    script = _validation_script()
    out = script.rescore(data, script._model(str(path), chain_per_op=False))
    (scored,) = out["results"]
    assert scored["predicted_n0"] == op_crossing(model, row["a"], row["b"], dims_of(32), replicates=0).n0
    ((n, d, t, guess),) = out["op_model_time_errors"]["softmax"]["timings"]
    assert (n, d, t) == (300, 16, 1e-4)
    assert guess == pytest.approx(predicted_seconds(model, "softmax", {"N": 300, "d": 16, "h": 1, "b": 1, "L": 16}))


def test_reproducibility_scores_each_run_by_the_others(tmp_path) -> None:
    mod = _validation_script()

    def run(*n0: float) -> dict:
        return {
            "results": [
                {"a": "softmax", "b": "linear", "d": d, "measured_n0": x} for d, x in zip((8, 16), n0, strict=True)
            ]
        }

    # d = 8: 100, 104, 130 -> others' medians 117 (+17 %), 115 (+10.6 %), 102 (-21.5 %); d = 16: 9,000 is past
    # the limit and the other two predict each other within 10 % (200 and 210)
    within, rows, median = mod.reproducibility([run(100, 200), run(104, 210), run(130, 9000)])
    assert (within, rows) == (2, 5)
    assert median == pytest.approx(abs(115 / 104 - 1))


@pytest.mark.integration  # runs the benchmark script
def test_calibration_spread_compares_each_shape_across_calibrations(tmp_path) -> None:
    import gzip
    import json
    import subprocess
    import sys
    from pathlib import Path

    mod = _validation_script("calibration_spread")

    def calibration(*seconds: float) -> dict:
        shapes = [("matmul-NT", {"bytes": 4e3, "m": 8.0}), ("copy", {"bytes": 1e3}), ("copy", {"bytes": 1e6})]
        points = [{"kernel": k, "dims": d, "seconds": t} for (k, d), t in zip(shapes, seconds, strict=True)]
        return {"kind": "attn-cost op model", "caches": {"L2": 1e4}, "points": points}

    first, second = calibration(1.0, 2.0, 3.0), calibration(1.5, 1.0, 3.0)
    second["points"].append({"kernel": "copy", "dims": {"bytes": 5.0}, "seconds": 1.0})  # in one calibration only
    rows = sorted(mod.spread([first, second]))
    assert [(g, round(r, 6)) for g, _, r in rows] == [("beyond cache", 1.0), ("in cache", 2.0), ("products", 1.5)]
    plain, zipped = tmp_path / "a.json", tmp_path / "b.json.gz"
    plain.write_text(json.dumps(first))
    zipped.write_bytes(gzip.compress(json.dumps(second).encode()))
    assert mod.read(zipped) == second
    script = str(Path(__file__).parent.parent / "benchmarks" / "calibration_spread.py")
    ok = subprocess.run([sys.executable, script, str(plain), str(zipped)], capture_output=True, text=True)
    assert ok.returncode == 0 and "3 shapes timed in every one" in ok.stdout
    bad = subprocess.run([sys.executable, script, str(plain), str(tmp_path / "missing.json")], capture_output=True,
                         text=True)  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "missing.json" in bad.stderr


def test_validation_summary_counts_what_the_issue_judges() -> None:
    mod = _validation_script()
    row = {"a": "softmax", "b": "linear", "analytic_n0": 33, "fit_n0": 190, "n0_uncertainty": 2}
    data = {
        "results": [
            {**row, "d": 8, "measured_n0": 100, "predicted_n0": 105, "predicted_n0_low": 95, "predicted_n0_high": 110},
            {
                **row,
                "d": 16,
                "measured_n0": 200,
                "predicted_n0": 230,
                "predicted_n0_low": 210,
                "predicted_n0_high": 250,
            },
            {**row, "d": 32, "measured_n0": 9000, "predicted_n0": 1, "predicted_n0_low": 1, "predicted_n0_high": 2},
        ],
        "op_model_time_errors": {
            "softmax": {
                "points": 2,
                "median_abs_error": 0,
                "max_abs_error": 0,
                "timings": [[8, 8, 1.0, 1.1], [9, 8, 2.0, 1.0]],
            }
        },
    }
    lines, figures = mod.summarize(data)
    assert len(lines) == 5 and "105 (+5.0 %) [95–110]" in lines[2]
    assert figures["judged_rows"] == 2 and figures["within_10_percent"] == 1  # 9,000 is past the 8,192 limit
    assert figures["median_abs_n0_error"] == pytest.approx((0.05 + 0.15) / 2)
    assert figures["interval_coverage"] == 0.5
    assert figures["median_abs_time_error"] == pytest.approx(0.3) and figures["worst_abs_time_error"] == 0.5


def test_a_row_whose_predicted_tie_holds_the_measured_crossing_meets_the_target() -> None:
    """N0 200 % off (a near-tie: a 2 % ratio error moves it that far), but the measured 1,000 lies in the
    predicted tie interval [800, 1,500]: met, and said to be met by the tie; the same row without it is not."""
    mod = _validation_script()
    row = {"a": "softmax", "b": "linear", "d": 8, "measured_n0": 1000, "predicted_n0": 3000}
    tied = {**row, "predicted_tie": [800, 1500], "predicted_regret": 0.02}
    outside = {**row, "d": 16, "predicted_tie": [1200, 1500], "predicted_regret": 0.02}
    costly = {**row, "d": 64, "predicted_tie": [800, 1500], "predicted_regret": 0.3}  # a poor model's wide tie
    verdicts = mod.row_verdicts({"results": [tied, outside, {**row, "d": 32}, costly]})
    assert [(v["met"], v["tied"]) for v in verdicts] == [(True, True), (False, False), (False, False), (False, False)]
    assert "(tie 800–1,500)" in mod._cell(verdicts[0])


def test_the_gap_is_what_following_a_missed_n0_costs() -> None:
    """The most the pair's measured times differ between the predicted and the measured N0 (lengths outside that
    span, other head dims and the op model's own guesses do not count); a miss with a gap ≤ 5 % is counted."""
    mod = _validation_script()
    row = {"a": "softmax", "b": "latte", "d": 32, "measured_n0": 200, "predicted_n0": 240}
    a = [[150, 32, 1.0, 9.0], [200, 32, 1.0, 9.0], [220, 32, 1.0, 9.0], [240, 32, 1.0, 9.0], [220, 64, 1.0, 9.0]]
    b = [[150, 32, 2.0, 9.0], [200, 32, 1.01, 9.0], [220, 32, 0.96, 9.0], [240, 32, 0.98, 9.0], [220, 64, 3.0, 9.0]]
    seen = {"points": 5, "median_abs_error": 8.0, "max_abs_error": 8.0}
    data = {
        "results": [row],
        "op_model_time_errors": {"softmax": {**seen, "timings": a}, "latte": {**seen, "timings": b}},
    }
    assert mod.gap(data["op_model_time_errors"], "softmax", "latte", 32, 200, 240) == pytest.approx(0.04)
    lines, figures = mod.summarize(data)
    assert lines[2].endswith("| 4.0 % |") and figures["misses_within_5_percent_in_time"] == 1
    assert mod.gap(data["op_model_time_errors"], "softmax", "latte", 32, 300, 400) is None


def test_a_chain_takes_the_first_kinds_of_the_chain_list() -> None:
    """The grid's chains keep their eight ops (and their stored keys); a chain of `kinds` takes that many
    distinct runnable ops, every one at r × r."""
    from attn_cost.profilers.devicemodel.calibrated import fit as cal
    from attn_cost.profilers.devicemodel.calibrated.data import SEQUENCE

    eight = cal.sequence_parts(cal._s(SEQUENCE, rows=16))
    assert [p.kernel for p in eight] == ["matmul-NT", "scale!", "softmax", "matmul-NN", "l2normalize", "poly2",
                                         "div!", "sum-axis2"]  # fmt: skip
    assert dict(eight[0].dims) == {"batch": 1, "m": 16, "k": 16, "n": 16}
    long = cal.sequence_parts(cal._s(SEQUENCE, rows=16, kinds=24))
    assert len({p.kernel for p in long}) == 24 and all(cal.runnable(p.kernel) for p in long)
    assert all(dict(p.dims) in ({"rows": 16, "cols": 16}, {"batch": 1, "m": 16, "k": 16, "n": 16}) for p in long)


def test_the_calibration_is_sized_to_the_device_it_probes() -> None:
    """A device a thousand times faster (a GPU's rates) gets exact-shape lines to lengths the first calibrations'
    CPU rates stop far short of, and fewer calls per timed sample at the same shape."""
    from attn_cost.profilers.devicemodel.calibrated import fit as cal

    fast = cal.Rates(launch_s=5e-6, bytes_per_s=2e12, flops_per_s=5e13)
    slow_lines = cal.line_grid(["softmax"], [{"d": 64}], {"L2": 50 << 20}, rates=cal.FIRST_RATES)
    fast_lines = cal.line_grid(["softmax"], [{"d": 64}], {"L2": 50 << 20}, rates=fast)
    longest = {name: max(lp.n for lp in lines) for name, lines in (("slow", slow_lines), ("fast", fast_lines))}
    assert longest["slow"] < 4096 <= longest["fast"]
    p = cal.engine_op(cal._s("matmul-NN", batch=1, m=2048, k=64, n=2048), "fp32")
    expected_slow = 5e-6 + p.dims["bytes"] / 4e9 + 2 * 2048 * 64 * 2048 / 3e10  # the first calibrations' arithmetic
    assert cal.FIRST_RATES.estimate(p) == pytest.approx(expected_slow)
    assert cal.FIRST_RATES.inner(p) == max(1, int(DEFAULT.sample_s / expected_slow)) < fast.inner(p)


def test_stored_timings_are_divided_by_the_calls_they_were_timed_with(tmp_path, monkeypatch) -> None:
    from attn_cost.profilers.devicemodel.calibrated import fit as cal
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.timing import TimeStats
    from attn_cost.profilers.store.store import ResultStore

    stats = TimeStats(1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 3, 1)
    monkeypatch.setattr(cal, "time_cases", lambda cases, repeats, warmup, **kw: [stats])
    store = ResultStore(prepare("cpu"), tmp_path / "results", shipped=False)
    at = cal._s("copy", rows=4, cols=64)
    first = cal.Calibrator(store, "cpu", rates=cal.Rates(1e-6, 1e9, 1e9)).point(at)
    inner = cal.Rates(1e-6, 1e9, 1e9).inner(cal.engine_op(at, "fp32"))
    assert first.seconds == pytest.approx(1e-3 / inner)
    again = cal.Calibrator(store, "cpu", rates=cal.Rates(1e-3, 1e9, 1e9)).point(at)  # other rates, stored timing
    assert again.seconds == pytest.approx(first.seconds)


def test_an_in_place_kernel_is_priced_net_of_the_copy_that_restores_its_input(tmp_path, monkeypatch) -> None:
    """exp! is timed together with the copy that gives it fresh inputs, and that copy alone in alternation: the
    point is their difference (3 ms − 1 ms per sample), keyed apart from timings made on reused inputs."""
    from attn_cost.profilers.devicemodel.calibrated import fit as cal
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.timing import TimeStats
    from attn_cost.profilers.store.store import ResultStore

    seen: list[list[str]] = []

    def fake(cases, repeats, warmup, **options):
        seen.append([c.variant for c in cases])
        return [TimeStats(t, t, t, t, t, 3, 1) for t in (3e-3, 1e-3)[: len(cases)]]

    monkeypatch.setattr(cal, "time_cases", fake)
    store = ResultStore(prepare("cpu"), tmp_path / "results", shipped=False)
    rates = cal.Rates(1e-6, 1e9, 1e9)
    at = cal._s("exp!", rows=4, cols=64)
    p = cal.Calibrator(store, "cpu", rates=rates).point(at)
    inner = rates.inner(cal.engine_op(at, "fp32"))
    assert seen == [["op:exp!", "op:exp!:restore"]]
    assert p.seconds == pytest.approx(2e-3 / inner)
    assert "fresh=1" in cal.Calibrator(store, "cpu", rates=rates).key(at, "op")
    assert "fresh" not in cal.Calibrator(store, "cpu", rates=rates).key(cal._s("copy", rows=4, cols=64), "op")


def test_a_calibration_loads_its_fitted_parameters_without_refitting(tmp_path, monkeypatch) -> None:
    """A change to the fitting code cannot change what a saved calibration predicts: loading never fits."""
    from attn_cost.profilers.devicemodel.calibrated import data as om

    model = om.load_opmodel(str(synthetic_model().save(tmp_path / "fitted")))
    calls = om.kernel_calls("taylorshift-efficient", "core", "fp32", row_dims({"d": 16}))
    n = np.geomspace(8, 8192, 20)
    before = model.time(calls, n)
    path = model.save(tmp_path)

    def no_fitting(*args, **kwargs):
        raise AssertionError("a stored calibration was refitted")

    monkeypatch.setattr(om.Gemm, "fit", no_fitting)
    monkeypatch.setattr(om.Streaming, "fit", no_fitting)
    assert om.load_opmodel(str(path)).time(calls, n) == pytest.approx(before, rel=0, abs=0)


def test_a_calibration_of_another_fit_version_is_refitted_only_when_asked(tmp_path, cli) -> None:
    import json
    from pathlib import Path

    from attn_cost.profilers.devicemodel.calibrated import data as om

    data = json.loads(synthetic_model().save(tmp_path / "fitted").read_text())
    data.pop("fitted")
    data["fit_version"] = 0
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    refused = cli("validate", "--calibration", str(old), "--cpu")
    assert refused.code == 2 and "calibrate --refit" in refused.err and len(refused.err.splitlines()) == 1
    refitted = cli("calibrate", "--refit", str(old), "--out", str(tmp_path / "new"), "--json")
    assert refitted.code == 0, refitted.err
    saved = json.loads(Path(refitted.json()["saved_to"]).read_text())
    assert saved["fit_version"] == om.FIT_VERSION and set(saved["fitted"]) >= {"copy", "matmul-NT"}
    assert old.read_text() == json.dumps(data)  # the old file is left as it was


def test_a_product_without_a_kernel_is_priced_with_a_named_warning() -> None:
    import warnings

    from attn_cost.costmodel.errors import PricingWarning

    model = synthetic_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.kernel("matmul-TT")
    assert any(issubclass(w.category, PricingWarning) and "matmul-TT" in str(w.message) for w in caught)


def test_a_timing_without_its_variant_specific_sizes_is_predicted_at_their_defaults() -> None:
    """A stored GQA timing records no h_kv when it was measured at the default (multi-query): its prediction
    takes that default, as the measurement did."""
    from attn_cost.costmodel.symbols import DEFAULTS, h_kv

    model = synthetic_model()
    plain = {"N": 300, "d": 16, "h": 4, "b": 1, "L": 16}
    assert predicted_seconds(model, "gqa", plain) == predicted_seconds(model, "gqa", {**plain, "h_kv": DEFAULTS[h_kv]})
