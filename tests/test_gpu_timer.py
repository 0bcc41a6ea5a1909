"""The CUDA timer on the simulated H100 (tests/fakecuda.py), which tells its methods apart: a warm and a cold L2,
launches the host pays, graph capture and replay, calls counted between events, kernels counted by the profiler.

Expected values come from the simulation's own model (`call_seconds`: the kernels' time with a warm L2 and no
launch cost; `eager_seconds`: the larger of that and the host's launches), never from the timer under test.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from attn_cost.profilers.measure import gpu_timing
from attn_cost.profilers.measure.gpu_record import EAGER_ONLY, GRAPH, L2_POLICY, launch_bound, record_launch_bound
from attn_cost.profilers.measure.machine import fingerprint
from attn_cost.profilers.measure.profile import Measurer
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.measure.timing import time_cases
from attn_cost.profilers.store.store import Record
from fakecuda import (
    H100_L2,
    KERNEL_MIN_S,
    LAUNCH_S,
    MANY,
    MANY_KERNELS,
    QUEUE,
    SWEEP,
    SimGPU,
    call_seconds,
    device_seconds,
    eager_seconds,
    fake_case,
    install,
    model,
)

SHIPPED = Path(__file__).resolve().parents[1] / "profilers" / "data" / "results" / "cuda-nvidia-h200-12fde9.jsonl"
"""The H200's records, timed by timer v2."""

STEP = 0.01
"""How far two neighbouring points may step beyond the smooth model's own change."""


@pytest.fixture
def sim(monkeypatch) -> SimGPU:
    gpu = SimGPU()
    install(monkeypatch, gpu)
    monkeypatch.setattr(gpu_timing, "REP_MS", 2.0)  # short runs: the simulation's answers do not need long ones
    return gpu


def _sweep_lengths() -> list[int]:
    """Lengths whose device time runs from the kernel's floor (2.5 µs) to about 10 ms, 25 % apart."""
    lengths, n = [], 64
    while call_seconds(SWEEP, n, 1, 1, 1, "fp32") < 10e-3:
        lengths.append(n)
        n = math.ceil(1.25 * n)
    return lengths


def _steps(lengths: list[int], measured: list[float], modelled) -> list[str]:
    """Neighbouring points whose measured ratio departs from the model's by more than STEP."""
    out = []
    points = list(zip(lengths, measured, strict=True))
    for (n0, t0), (n1, t1) in itertools.pairwise(points):
        expected = modelled(SWEEP, n1, 1, 1, 1, "fp32") / modelled(SWEEP, n0, 1, 1, 1, "fp32")
        if abs((t1 / t0) / expected - 1) > STEP:
            out.append(f"N {n0:,} -> {n1:,}: {1e6 * t0:.2f} -> {1e6 * t1:.2f} µs (model ×{expected:.3f})")
    return out


def test_a_kernel_whose_time_crosses_every_threshold_gives_continuous_device_and_eager_curves(sim) -> None:
    """From 2.5 µs to 10 ms (through the old 200 µs switch and every block length), the device time and the eager
    time of each point change between neighbours as the simulation's smooth model does, within 1 %."""
    lengths = _sweep_lengths()
    assert call_seconds(SWEEP, lengths[0], 1, 1, 1, "fp32") < 3e-6 and len(lengths) > 30
    build = fake_case(sim)
    stats = [time_cases([build(SWEEP, "core", Sizes(N=n, d=1, b=1), "fp32", "cuda")], 3, 2)[0] for n in lengths]
    assert _steps(lengths, [s.median for s in stats], call_seconds) == []
    assert _steps(lengths, [s.eager.median for s in stats], eager_seconds) == []


# -- device time, eager time, the host's launches -----------------------------------------------------------------


def test_a_short_call_is_timed_on_the_device_without_launches_and_its_launches_on_the_host(sim) -> None:
    """Efficient TaylorShift's 21 kernels at a small N: the graph replay reads the kernels' time, the eager loop the
    host's 21 launches, and the host's cost per launch read back is the simulation's LAUNCH_S."""
    variant, n, d = "taylorshift-efficient", 64, 16
    m = model(variant, n, d, 1, 1, "fp32")
    assert m.kernels == 21 and m.kernels * LAUNCH_S > 2 * call_seconds(variant, n, d, 1, 1, "fp32")  # launch-bound
    (stats,) = time_cases([fake_case(sim)(variant, "core", Sizes(N=n, d=d), "fp32", "cuda")], 3, 2)
    assert stats.method == GRAPH
    assert stats.median == pytest.approx(call_seconds(variant, n, d, 1, 1, "fp32"), rel=1e-3)
    assert stats.eager.median == pytest.approx(m.kernels * LAUNCH_S, rel=1e-3)
    assert stats.kernels == 21 and stats.issue_s == pytest.approx(21 * LAUNCH_S, rel=1e-6)
    assert stats.launch_s == pytest.approx(LAUNCH_S, rel=1e-6)


def test_a_long_call_reads_the_device_both_ways_and_its_issue_cost_is_not_its_device_time(sim) -> None:
    """softmax at N = 8,192, b = 32 (about 11 ms of kernels): device and eager time are the kernels' time; the host's
    issue time stays its four launches (the queue never fills, so the host never waits for the device)."""
    sizes = Sizes(N=8192, d=64, b=32)
    (stats,) = time_cases([fake_case(sim)("softmax", "core", sizes, "fp32", "cuda")], 3, 2)
    expected = call_seconds("softmax", 8192, 64, 32, 1, "fp32")
    assert expected > 5e-3
    assert stats.median == pytest.approx(expected, rel=1e-3)
    assert stats.eager.median == pytest.approx(eager_seconds("softmax", 8192, 64, 32, 1, "fp32"), rel=1e-3)
    assert stats.issue_s == pytest.approx(4 * LAUNCH_S, rel=1e-6) and stats.launch_s == pytest.approx(LAUNCH_S)


def test_a_launch_bound_call_longer_than_the_old_switch_is_still_timed_by_graph_replay(sim) -> None:
    """100 kernels at the device's floor: 100 · 2.5 µs = 250 µs of kernels, 100 · 6 µs = 600 µs of the host's
    launches, both beyond the 200 µs at which timer v2 changed method. The device time is the kernels' (graph
    replay) and the method recorded is graph replay, the eager time the launches: a timer that let a call's duration
    choose its method (eager above 200 µs) would record the host's 600 µs as the device time."""
    device, eager = MANY_KERNELS * KERNEL_MIN_S, MANY_KERNELS * LAUNCH_S
    assert (call_seconds(MANY, 64, 1, 1, 1, "fp32"), eager_seconds(MANY, 64, 1, 1, 1, "fp32")) == (device, eager)
    assert 200e-6 < device < eager / 2  # long, and launch-bound
    (stats,) = time_cases([fake_case(sim)(MANY, "core", Sizes(N=64, d=1), "fp32", "cuda")], 3, 2)
    assert stats.median == pytest.approx(device, rel=1e-3)
    assert stats.eager.median == pytest.approx(eager, rel=1e-3)
    assert stats.record_fields()["method"] == GRAPH and stats.kernels == MANY_KERNELS


def test_the_simulated_host_waits_once_the_launch_queue_is_full(sim) -> None:
    """The simulation itself: issuing more launches than its queue holds makes the host wait for the device, so a
    timer that read its issue time over too many calls would read the device's time."""
    for _ in range(QUEUE // 2):
        sim.launch(1, 1e-4)
    assert sim.host == pytest.approx(QUEUE // 2 * LAUNCH_S)
    for _ in range(QUEUE):
        sim.launch(1, 1e-4)
    assert sim.host > QUEUE * 1e-4 / 2


def test_every_timed_block_lasts_a_block_and_is_divided_by_the_calls_it_held(sim) -> None:
    """Each pair of events around a timed block saw k calls (counted by the simulated events) and lasted at least
    BLOCK_S; the times reported are those blocks per call: the graph's the kernels' time, the eager ones the
    host's launches (linear's 9 kernels at a small N are launch-bound). The first block of a run may start on an
    idle device (slower): the median never takes it."""
    variant, sizes = "linear", Sizes(N=128, d=16, b=2)
    device, eager = (f(variant, 128, 16, 2, 1, "fp32") for f in (call_seconds, eager_seconds))
    assert eager > 2 * device
    (stats,) = time_cases([fake_case(sim)(variant, "core", sizes, "fp32", "cuda")], 3, 2)
    blocks = Counter(round(s / c, 12) for s, c in sim.readings if c > 1 and s >= gpu_timing.BLOCK_S)
    (first, n_first), (second, n_second) = blocks.most_common(2)
    assert sorted([first, second]) == [pytest.approx(device, rel=1e-6), pytest.approx(eager, rel=1e-6)]
    assert min(n_first, n_second) >= 3 * (gpu_timing.MIN_BLOCKS - 1)
    assert (stats.median, stats.eager.median) == (pytest.approx(device, rel=1e-6), pytest.approx(eager, rel=1e-6))


# -- the L2 policy ------------------------------------------------------------------------------------------------


def _reads_warm(stats, n: int) -> None:
    """The device time is the simulation's time for a call that finds its working set in the L2."""
    warm, cold = (device_seconds(model(SWEEP, n, 1, 1, 1, "fp32"), "fp32", warm=w) for w in (True, False))
    assert cold > 1.1 * warm  # the two states differ well beyond the tolerance below
    assert stats.median == pytest.approx(warm, rel=0.01)


def test_the_l2_is_warm_at_every_point_as_the_policy_says_and_a_flushing_timer_would_show(sim, monkeypatch) -> None:
    n = 1000  # a working set of 32 MiB (it fits in the L2) and 22 µs of kernels
    build = fake_case(sim)
    (stats,) = time_cases([build(SWEEP, "core", Sizes(N=n, d=1), "fp32", "cuda")], 3, 2)
    _reads_warm(stats, n)
    assert stats.l2 == L2_POLICY and L2_POLICY in gpu_timing.describe_timer()
    assert fingerprint("cuda")["l2_policy"] == L2_POLICY

    real = gpu_timing.chained  # a timer that flushes the L2 before each block, against its policy, fails the check
    monkeypatch.setattr(gpu_timing, "chained", lambda block, n: real(lambda: (sim.write(2 * H100_L2), block()), n))
    (flushed,) = time_cases([build(SWEEP, "core", Sizes(N=n, d=1), "fp32", "cuda")], 3, 2)
    with pytest.raises(AssertionError):
        _reads_warm(flushed, n)


# -- calls that cannot be captured, kernels that cannot be counted -------------------------------------------------


def test_a_call_that_cannot_be_captured_is_eager_only_at_every_length_with_its_reason(sim, tmp_path) -> None:
    sim.uncapturable = {"linear"}
    m = Measurer("cuda", _store(tmp_path))
    for n in (64, 512, 4096):
        m.time(["softmax", "linear"], Sizes(N=n, d=16, b=4))
    records = [r for r in m.store.records.values() if r["kind"] == "time"]
    assert len(records) == 6
    for r in records:
        n = r["sizes"]["N"]
        if r["variant"] == "linear":
            assert r["method"] == EAGER_ONLY + "CUDA error: operation not permitted when stream is capturing"
            assert r["time"]["median"] == r["eager"]["median"]
            assert r["time"]["median"] == pytest.approx(eager_seconds("linear", n, 16, 4, 1, "fp32"), rel=1e-3)
        else:
            assert r["method"] == GRAPH
            assert r["time"]["median"] == pytest.approx(call_seconds("softmax", n, 16, 4, 1, "fp32"), rel=1e-3)
    assert sim.refused == 1  # tried at the first length only: the curve keeps one method


def test_kernels_are_counted_once_per_shape_and_a_profiler_that_cannot_count_is_said(sim) -> None:
    """Counted by the profiler's device events that are launches (not its synchronisations, not the host's events),
    with or without activity types on them (older torch), once per shape; a profiler that fails leaves a reason."""
    build = fake_case(sim)
    for n in (64, 64, 128):
        (stats,) = time_cases([build("softmax", "core", Sizes(N=n, d=16), "fp32", "cuda")], 3, 2)
        assert stats.kernels == 4
    assert sim.profiles == 2
    sim.profiler_kinds = False
    assert gpu_timing.count_kernels(lambda: sim.launch(21, 1e-5)) == (21, None)
    sim.profiler_error = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES\x1b[0m\nsee the driver's notes"
    (stats,) = time_cases([build("softmax", "core", Sizes(N=256, d=16), "fp32", "cuda")], 3, 2)
    host = stats.record_fields()["host"]
    assert host["kernels"] is None and host["launch_s"] is None
    assert host["uncounted"] == "torch.profiler failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES [0m"  # one printable line
    assert host["issue_s"] == pytest.approx(4 * LAUNCH_S, rel=1e-6)  # the issue time is measured all the same


# -- records --------------------------------------------------------------------------------------------------------


def _store(tmp_path, name: str = "store"):
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.store.store import ResultStore

    return ResultStore(prepare("cuda"), tmp_path / name, shipped=False)


def test_records_carry_eager_host_method_and_l2_and_survive_export_and_import(sim, tmp_path, cli) -> None:
    m = Measurer("cuda", _store(tmp_path))
    m.time(["softmax", "taylorshift-efficient"], Sizes(N=256, d=16, b=2))
    records = sorted((r for r in m.store.records.values() if r["kind"] == "time"), key=lambda r: r["variant"])
    for r, kernels in zip(records, (4, 21), strict=True):
        v = r["variant"]
        assert r["time"]["median"] == pytest.approx(call_seconds(v, 256, 16, 2, 1, "fp32"), rel=1e-3)
        assert r["eager"]["median"] == pytest.approx(eager_seconds(v, 256, 16, 2, 1, "fp32"), rel=1e-3)
        assert r["host"] == {"issue_s": pytest.approx(kernels * LAUNCH_S), "kernels": kernels,
                             "launch_s": pytest.approx(LAUNCH_S)}  # fmt: skip
        assert r["method"] == GRAPH and r["l2"] == L2_POLICY
        assert Record.check(json.loads(json.dumps(r))).data["host"]["kernels"] == kernels
    m.store.close()
    exported = cli("results", "export", "--store", str(tmp_path / "store"))
    assert exported.code == 0, exported.err
    (tmp_path / "out.jsonl").write_text(exported.out)
    assert cli("results", "import", str(tmp_path / "out.jsonl"), "--store", str(tmp_path / "again")).code == 0
    again = cli("results", "export", "--store", str(tmp_path / "again"))
    assert again.out == exported.out and again.err == ""


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"host": {"issue_s": -1e-6, "kernels": 4, "launch_s": 1e-6}}, "host.issue_s"),
        ({"host": {"issue_s": 1e-6, "kernels": 2.5, "launch_s": 1e-6}}, "host.kernels"),
        ({"host": {"issue_s": 1e-6, "kernels": None, "launch_s": float("nan")}}, "host.launch_s"),
        ({"eager": {"median": -1.0, "q1": 1, "q3": 1, "min": 1, "max": 1, "runs": 3}}, "eager.median"),
        ({"method": "fast"}, "method"),
        ({"method": "eager-only: "}, "method"),
        ({"method": "eager-only: \x1b[31mred"}, "control characters"),
        ({"host": {"issue_s": 1e-6, "kernels": None, "launch_s": None, "uncounted": "\x1b[2J"}}, "control characters"),
        ({"retimed": -1}, "retimed"),
    ],
)
def test_the_store_refuses_a_time_record_whose_cuda_fields_are_not_numbers_it_can_trust(change, reason) -> None:
    record = json.loads(SHIPPED.read_text().splitlines()[0])
    Record.check(record)
    with pytest.raises(ValueError, match=reason):
        Record.check({**record, **change})


def test_v2_records_still_load_under_their_own_name_and_are_never_mixed_with_v3(tmp_path) -> None:
    from attn_cost.profilers.measure.machine import slug
    from attn_cost.profilers.store.store import ResultStore, read_jsonl

    records, problems = read_jsonl(SHIPPED)
    assert problems.lines == {} and len(records) > 2000
    assert {r.device for r in records} == {"cuda-nvidia-h200-12fde9"}
    device = records[0].data["device"]
    assert device["timer_version"] == 2 and "method" not in records[0].data
    v3 = {**device, "timer_version": gpu_timing.TIMER_VERSION}
    assert gpu_timing.TIMER_VERSION == 3 and slug(v3) != slug(device)
    key = records[0].key
    assert ResultStore(device, tmp_path / "v2").get(key) is not None  # the shipped v2 records, under their name
    assert ResultStore(v3, tmp_path / "v3").get(key) is None  # the same GPU timed by v3 starts from nothing


# -- which points measure the host ---------------------------------------------------------------------------------


def test_a_point_is_launch_bound_when_its_eager_time_is_the_hosts_issue_time(sim, tmp_path) -> None:
    m = Measurer("cuda", _store(tmp_path))
    m.time(["taylorshift-efficient"], Sizes(N=64, d=16))  # 21 launches: 126 µs of host for 52 µs of kernels
    m.time(["softmax"], Sizes(N=4096, d=64, b=32))  # 4 launches for about 3 ms of kernels
    labels = {r["variant"]: record_launch_bound(r) for r in m.store.records.values()}
    assert labels == {"taylorshift-efficient": True, "softmax": False}
    assert launch_bound(110e-6, 100e-6) and not launch_bound(111e-6, 100e-6)  # within 10 % above the host's time
    assert launch_bound(5e-3, 10e-6, blocks=32, sms=132) and not launch_bound(5e-3, 10e-6, blocks=264, sms=132)
    assert record_launch_bound({"time": {"median": 1e-3}}) is None  # an older timer's record says nothing


# -- on a real GPU (skipped without one) ---------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_a_real_gpu_a_call_is_captured_and_its_kernels_counted() -> None:
    """PyTorch's own graphs and profiler, as the timer uses them: one in-place add is one kernel and captures;
    materialised softmax (QKᵀ, softmax, PV, and its scaling) is timed by graph replay with its kernels counted, its
    eager time no shorter than its graph time (launches only add), and the host's issue time positive."""
    from attn_cost.profilers.measure.cases import build_case

    x = torch.zeros(1, device="cuda")
    assert gpu_timing.count_kernels(lambda: x.add_(1)) == (1, None)
    stream = torch.cuda.Stream()
    gpu_timing.warm_side_stream(lambda: x.add_(1), stream)
    graph, why = gpu_timing.capture(lambda: x.add_(1), 3, stream)
    assert why is None
    before = x.item()
    graph.replay()
    torch.cuda.synchronize()
    assert x.item() == before + 3  # the three captured calls ran on replay
    (stats,) = time_cases([build_case("softmax", "core", Sizes(N=256, d=64, b=8), "bf16", "cuda")], 3, 2)
    assert stats.method == GRAPH and stats.kernels is not None and stats.kernels >= 3
    assert stats.eager.median >= 0.95 * stats.median and stats.issue_s > 0 and stats.launch_s > 0
