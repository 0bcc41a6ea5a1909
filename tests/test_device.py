"""One device interface: a profile, an op calibration and a datasheet model answer the same questions (time with
its interval, peak memory, the time per kernel call, where B gets faster than A) for the same variant and sizes,
each against independent arithmetic on a synthetic device of round numbers; every shipped device answers every
--device command, which says the model that answered."""

from __future__ import annotations

import math

import numpy as np
import pytest
from attn_cost.costmodel.crossover import Setting
from attn_cost.profilers.devicemodel.calibrated.data import OpModel
from attn_cost.profilers.devicemodel.calibrated.forms import Curve, Gemm, Overheads, Streaming
from attn_cost.profilers.devicemodel.calibrated.model import CalibratedDevice
from attn_cost.profilers.devicemodel.datasheet.data import Datasheet, Peaks
from attn_cost.profilers.devicemodel.datasheet.model import Efficiency, GpuModel, Host
from attn_cost.profilers.devicemodel.device import (
    CALIBRATED,
    DATASHEET,
    MEASURED,
    DeviceModel,
    crossing,
    row_dims,
)
from attn_cost.profilers.devicemodel.kinds import kinds, resolve
from attn_cost.profilers.devicemodel.measured.data import DeviceProfile, MemoryFit, TimeFit
from attn_cost.profilers.devicemodel.measured.model import MeasuredDevice, ProfileDevice

D = 16
DIMS = row_dims({"d": D})
FP32 = Setting(dtype="fp32")
CPU = {"kind": "cpu", "name": "Round CPU", "torch": "2.13.0", "threads": 1, "cache": "1 MB"}

# softmax's core, b = h = 1, fp32, as the paper's algorithm runs it: S = QKᵀ (N×d by d×N), S scaled in place,
# P = softmax(S), O = PV (N×N by N×d). Each op reads its inputs and writes its output once (4 bytes an element).


def qk_bytes(n: float) -> float:
    return 4 * (2 * n * D + n * n)  # Q, K read; S written


def pv_bytes(n: float) -> float:
    return 4 * (n * n + 2 * n * D)  # P, V read; O written


def map_bytes(n: float) -> float:
    return 8 * n * n  # an N×N map: read and written


def product_flops(n: float) -> float:
    return 2 * n * n * D  # each of the two products


# -- a profile of round constants -----------------------------------------------------------------------------

LAUNCH, PER_FLOP, PER_BYTE, MEDIAN_ERR, OFFSET = 1e-5, 1e-11, 1e-10, 0.1, 1000.0


def profile_device() -> ProfileDevice:
    p = DeviceProfile(CPU, "core", "fp32")
    for v in ("softmax", "linear"):
        p.time[v] = TimeFit(LAUNCH, PER_FLOP, PER_BYTE, 10, [8, 16], 1.0, MEDIAN_ERR, 0.2, flops="performed")
    p.memory["softmax"] = MemoryFit(1.0, OFFSET, 0.0, 4)
    return ProfileDevice(p)


def profile_seconds(n: float) -> float:
    """t = t_launch·K + F/P + B/W: four kernels, 4N²d FLOPs, the four ops' bytes."""
    moved = qk_bytes(n) + 2 * map_bytes(n) + pv_bytes(n)
    return 4 * LAUNCH + 2 * product_flops(n) * PER_FLOP + moved * PER_BYTE


# -- an op calibration of hand-set curves ---------------------------------------------------------------------

STREAM_LAUNCH, BANDWIDTH, GEMM_LAUNCH, GEMM_PEAK = 2e-6, 1e10, 3e-6, 1e11


def line(launch: float) -> Streaming:
    """t = launch + bytes / BANDWIDTH, as a calibrated curve of two points (exact between them)."""
    sizes = np.array([1.0, 1e12])
    return Streaming(launch, np.array([6.0]), [Curve(sizes, launch + sizes / BANDWIDTH)])


def calibrated_device() -> CalibratedDevice:
    copy = line(STREAM_LAUNCH)
    gemm = Gemm(GEMM_LAUNCH, 0.0, GEMM_PEAK, (0.0, 0.0, 0.0), np.zeros((0, 4)), np.zeros(0), copy)
    maps = ("scale!", "softmax", "elu1", "sum-axis2", "div!")  # softmax's and linear attention's
    products = {f"matmul-{layout}": gemm for layout in ("NT", "NN", "TN")}
    kernels = {"copy": copy, **{k: line(STREAM_LAUNCH) for k in maps}, **products}
    return CalibratedDevice(OpModel(CPU, "fp32", [], kernels=kernels, overheads=Overheads()))


def calibrated_kernels(n: float) -> list[float]:
    """A product: its launch, then the longer of its FLOPs at the peak and its bytes at the bandwidth (the half
    sizes 0: every dimension at full efficiency); a map: its launch and its bytes at the bandwidth."""
    qk = GEMM_LAUNCH + max(product_flops(n) / GEMM_PEAK, qk_bytes(n) / BANDWIDTH)
    pv = GEMM_LAUNCH + max(product_flops(n) / GEMM_PEAK, pv_bytes(n) / BANDWIDTH)
    return [qk, STREAM_LAUNCH + map_bytes(n) / BANDWIDTH, STREAM_LAUNCH + map_bytes(n) / BANDWIDTH, pv]


# -- a datasheet of round numbers -----------------------------------------------------------------------------

SHEET = Datasheet(
    "round-gpu", "Round GPU", "nvidia", "sm80", Peaks(fp32=10, tf32=100, bf16=100, fp16=100), bandwidth_gbs=1000,
    memory_gb=1, l2_mb=10, sms=100, smem_per_sm_kb=164, smem_per_block_kb=163, clock_mhz=1000, source="made up",
)  # fmt: skip
EFF = Efficiency(matmul=1.0, stream=1.0, attention=1.0, flash_v1=1.0)
HOST = Host("test", launch_s=1e-5, call_s=2e-5, triton_s=1e-5)
SIGMA = 0.1


def datasheet_device() -> GpuModel:
    return GpuModel(SHEET, EFF, SIGMA, host=HOST)


def datasheet_kernels(n: int) -> list[float]:
    """On 100 SMs at 10 TFLOP/s (fp32: the CUDA cores) and 1 TB/s. QKᵀ: 128×128 tiles, (N/128)² of them, one a
    slot per SM, in ⌈tiles/100⌉ waves of 2·128·128·d FLOPs at 10¹⁰/100 per slot, or its bytes if longer. PV (N×N by
    N×16): 16-wide tiles, four slots an SM, N/128 tiles in one wave of 2·128·16·N FLOPs at 10¹³/400 per slot."""
    tiles = (n // 128) ** 2
    qk = max(math.ceil(tiles / 100) * 2 * 128 * 128 * D / (10e12 / 100), qk_bytes(n) / 1e12)
    pv = max(math.ceil((n // 128) / 400) * 2 * 128 * 16 * n / (10e12 / 400), pv_bytes(n) / 1e12)
    return [qk, map_bytes(n) / 1e12, map_bytes(n) / 1e12, pv]


def datasheet_seconds(n: int) -> float:
    """Host and device on two timelines: after the call, the host issues a kernel every launch; each kernel runs
    once it is issued and the one before it has run."""
    issued = done = HOST.call_s
    for t in datasheet_kernels(n):
        issued += HOST.launch_s
        done = max(done, issued) + t
    return max(issued, done)


NS = [1280, 2560]


@pytest.mark.parametrize("kind", [MEASURED, CALIBRATED, DATASHEET])
def test_every_kind_answers_the_same_questions_against_hand_arithmetic(kind: str) -> None:
    model: DeviceModel = {MEASURED: profile_device, CALIBRATED: calibrated_device, DATASHEET: datasheet_device}[kind]()
    assert model.kind == kind and model.answered_by and model.applies("softmax", FP32) is None
    times = model.seconds("softmax", DIMS, np.array(NS, dtype=float), FP32)
    peak = model.peak_bytes("softmax", DIMS, np.array(NS, dtype=float), FP32)
    kernels = model.kernel_times("softmax", DIMS, np.array(NS, dtype=float), FP32)
    for i, n in enumerate(NS):
        # peak memory: S and P alive together while V waits for the second product (2N² + Nd elements)
        assert peak[i] == 4 * (2 * n * n + n * D) + (OFFSET if kind == MEASURED else 0)
        if kind == MEASURED:
            assert times.seconds[i] == pytest.approx(profile_seconds(n), rel=1e-12)
            spread = math.exp(1.96 * 1.4826 * MEDIAN_ERR)  # the fit's median error as a robust σ
            edges = (profile_seconds(n) / spread, profile_seconds(n) * spread)
            assert (times.low[i], times.high[i]) == pytest.approx(edges, rel=1e-12)
            assert kernels is None  # a profile prices whole variants
        elif kind == CALIBRATED:
            assert times.seconds[i] == pytest.approx(sum(calibrated_kernels(n)), rel=1e-9)
            assert times.low[i] == times.high[i] == times.seconds[i]  # no calibration points to resample
            assert kernels is not None
            assert [k.kernel for k in kernels] == ["matmul-NT", "scale!", "softmax", "matmul-NN"]
            assert [k.family for k in kernels] == ["product", "elementwise", "rowwise", "product"]
            assert [float(k.seconds[i]) for k in kernels] == pytest.approx(calibrated_kernels(n), rel=1e-9)
        else:
            assert times.seconds[i] == pytest.approx(datasheet_seconds(n), rel=1e-12)
            spread = math.exp(1.96 * SIGMA)
            edges = (datasheet_seconds(n) / spread, datasheet_seconds(n) * spread)
            assert (times.low[i], times.high[i]) == pytest.approx(edges, rel=1e-12)
            assert kernels is not None
            assert [float(k.seconds[i]) for k in kernels] == pytest.approx(datasheet_kernels(n), rel=1e-12)
            assert all(float(k.repeat[i]) == 1 for k in kernels)


@pytest.mark.parametrize("kind", [MEASURED, CALIBRATED, DATASHEET])
def test_the_crossing_is_where_the_predicted_times_cross(kind: str) -> None:
    """Whatever the model, N0 is the first whole N from which B's predicted time is no more than A's: at N0 − 1 A is
    faster, at N0 B no slower, by the model's own times at those whole N (what `predict` prints), inside its
    interval. A datasheet's interval edges are the same at A's time ×/÷ e^(1.96σ), A's time by hand."""
    model: DeviceModel = {MEASURED: profile_device, CALIBRATED: calibrated_device, DATASHEET: datasheet_device}[kind]()
    if kind == MEASURED:  # a profile's crossing is exact: the fits are polynomials in N
        model.profile.time["linear"] = TimeFit(8 * LAUNCH, 0.0, 4 * PER_BYTE, 10, [8, 16], 1.0, 0.1, 0.2)
    p = crossing(model, "softmax", "linear", DIMS, FP32)
    assert p.n0 is not None

    def gap(n: int) -> float:
        at = np.array([float(n)])
        ta, tb = (model.seconds(v, DIMS, at, FP32, replicates=0).seconds[0] for v in ("softmax", "linear"))
        return ta - tb

    assert gap(p.n0) >= 0 and gap(p.n0 - 1) < 0
    if kind == DATASHEET:
        assert p.low is not None and p.high is not None and p.low < p.n0 < p.high  # the band's two edges

        def linear(n: int) -> float:
            return float(model.seconds("linear", DIMS, np.array([float(n)]), FP32).seconds[0])

        spread = math.exp(1.96 * SIGMA)  # A slower by it: B catches up first (low); faster by it: last (high)
        assert linear(p.low) <= datasheet_seconds(p.low) * spread
        assert linear(p.low - 1) > datasheet_seconds(p.low - 1) * spread
        assert linear(p.high) <= datasheet_seconds(p.high) / spread
        assert linear(p.high - 1) > datasheet_seconds(p.high - 1) / spread
    if kind == MEASURED:
        assert (p.low, p.high) == (None, None)  # fitted constants carry no interval of the crossing


def test_a_measured_device_answers_with_its_profile_and_else_its_op_calibration() -> None:
    """The profile for the variants it fitted at its setting, the op calibration for the others; neither: one line
    naming why."""
    both = MeasuredDevice(profile_device(), calibrated_device())
    assert both.answering("softmax", FP32).label == "profile"
    assert both.answering("softmax-fused", FP32).label == "op model"
    assert both.answering("softmax", Setting(dtype="fp32", scope="layer")).label == "op model"
    alone = MeasuredDevice(profile_device(), None)
    why = alone.applies("softmax-fused", FP32)
    assert why is not None and "no time fit of softmax-fused" in why and "no op calibration" in why
    assert "profile" in both.answered_by and "op calibration" in both.answered_by


# -- every shipped device through every --device command ----------------------------------------------------------


SHIPPED = sorted(kinds())


def test_every_kind_ships() -> None:
    assert set(kinds().values()) == {MEASURED, CALIBRATED, DATASHEET}


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_device_predicts_and_names_the_model_that_answered(cli, name: str) -> None:
    model = resolve(name)
    variant = "softmax-fused" if model.kind == DATASHEET else "softmax"
    r = cli("predict", "--device", name, "--variant", variant, "--n", "256", "--n", "1024", "--d", "16", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["device"] == name and data["kind"] == model.kind
    answering = model.answering(variant, Setting(dtype=model.dtype))
    assert data["predicted_by"] == answering.kind and data["answered_by"][answering.kind] == answering.answered_by
    for row in data["results"]:
        assert row["seconds_low"] <= row["seconds"] <= row["seconds_high"] and row["peak_bytes"] > 0
    table = " ".join(cli("predict", "--device", name, "--variant", variant, "--n", "256", "--d", "16").out.split())
    assert "predicted from" in table or "fitted to the device's own timings" in table


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_device_crosses_over_and_names_the_model(cli, few_replicates, name: str) -> None:
    model = resolve(name)
    pair = "softmax-fused:linear" if model.kind == DATASHEET else "softmax:linear"
    r = cli("crossover", "--device", name, "--pair", pair, "--d", "16", "--dtype", model.dtype, "--json")
    assert r.code == 0, r.err
    data = r.json()
    launch = data["device"].pop("launch", None)  # a datasheet GPU says which host priced its launches
    assert data["device"] == {"name": model.name, "kind": model.kind, "answered_by": model.answered_by}
    assert (launch is not None and launch["setting"] == "eager") == (model.kind == DATASHEET)
    (row,) = data["results"]
    assert row["device"] == model.slug


@pytest.mark.parametrize("name", ["h100-sxm5-80gb", "cpu-amd-epyc-5155e7", "cpu-amd-epyc-234b2f",
                                  "cuda-nvidia-h200-12fde9-bf16"])  # fmt: skip
def test_a_report_on_each_kind_names_the_model(few_replicates, monkeypatch, name: str) -> None:
    """Every part of the report on the device (its transitions, the N0 over d, the predicted curves) is built; the
    paper claims, which no device changes (tests/test_counting_and_claims.py checks them), are left out."""
    from attn_cost.profilers.report import gather as gathering
    from attn_cost.profilers.report.gather import gather

    monkeypatch.setattr(gathering, "claims", list)

    model = resolve(name)
    pair = ("softmax", "linear")
    data = gather(list(pair), [pair], [16], 64, 256, model, Setting(dtype=model.dtype))
    assert data["device"] == {"name": model.name, "kind": model.kind, "answered_by": model.answered_by}
    (row,) = data["transitions"]
    assert row["device"] == model.slug


def test_predict_refuses_in_one_line_what_the_device_has_no_model_of(cli) -> None:
    r = cli("predict", "--device", "cpu-amd-epyc-5155e7", "--variant", "softmax", "--n", "64", "--dtype", "bf16")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "bf16" in r.err, r.err
    r = cli("predict", "--device", "cpu-amd-epyc-5155e7", "--variant", "softmax", "--n", "64", "--launch-us", "5")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "--launch-us" in r.err, r.err
