"""The CUDA path rehearsed on a simulated H100 (tests/fakecuda.py): timing semantics, out-of-memory retries,
exact peak memory, the device's identity, and the whole campaign with its resume and its time budget.

Expected values come from the simulated device's own model (a roofline with a warm or cold L2, a floor per kernel),
never from the code under test: a measured N0 must land near the model's crossover, a measured N1 on it exactly.
What each CUDA time means (device, eager, the host's launches, the L2) is tested in tests/test_gpu_timer.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from attn_cost.profilers.measure import gpu_timing
from attn_cost.profilers.measure.sizes import Sizes
from fakecuda import BYTES, LAUNCH_S, SimGPU, call_seconds, device_seconds, fake_case, install, model, sim_n0, sim_n1

TS = ("taylorshift-direct", "taylorshift-efficient")


@pytest.fixture
def sim(monkeypatch) -> SimGPU:
    gpu = SimGPU()
    install(monkeypatch, gpu)
    monkeypatch.setattr(gpu_timing, "REP_MS", 2.0)  # short runs: the simulation's answers do not need long ones
    monkeypatch.setattr(gpu_timing, "BLOCK_S", 2e-4)
    return gpu


def _store(tmp_path):
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.store.store import ResultStore

    return ResultStore(prepare("cuda"), tmp_path / "store", shipped=False)


# -- what a time means -------------------------------------------------------------------------------


def test_a_call_that_launches_nothing_is_refused_when_measured_and_timed_on_the_host(sim) -> None:
    with pytest.raises(gpu_timing.NonPositiveTimeError, match="host clock"):
        gpu_timing.bench_seconds(lambda: None)
    assert gpu_timing.host_seconds(lambda: sim.spend_host(7e-6)) == pytest.approx(7e-6, rel=1e-6)


# -- out of memory ----------------------------------------------------------------------------------


def test_a_variant_that_fits_alone_is_stored_ok_after_the_pair_ran_out_of_memory(sim, tmp_path) -> None:
    from attn_cost.profilers.measure.profile import Measurer

    sizes = Sizes(N=2048, d=16, b=32)
    dry = SimGPU()
    case = fake_case(dry)(TS[1], "core", sizes, "fp32", "cuda")
    case.run(case.make_inputs())
    sim.cap = dry.peak_blocks  # efficient TaylorShift fits alone, exactly; not beside direct's inputs
    assert model(TS[0], 2048, 16, 32, 1, "fp32").peak > sim.cap
    m = Measurer("cuda", _store(tmp_path))
    ta, tb = m.time(list(TS), sizes)
    assert sim.ooms >= 1 and ta is None
    assert tb is not None and tb.median == pytest.approx(call_seconds(TS[1], 2048, 16, 32, 1, "fp32"), rel=0.03)
    status = {r["variant"]: r["status"] for r in m.store.records.values() if r["kind"] == "time"}
    assert status == {TS[0]: "oom", TS[1]: "ok"}
    assert sim.requested == 0  # nothing left behind


def test_a_speed_crossover_that_is_a_memory_limit_says_so(sim, tmp_path) -> None:
    """softmax against latte where latte is slower until softmax no longer fits: no N0, a memory-limit note."""
    from attn_cost.costmodel.conventions import DEFAULT
    from attn_cost.costmodel.crossover import Setting
    from attn_cost.profilers.measure.profile import Measurer, profile_pair

    sim.cap = 4 << 30
    m = Measurer("cuda", _store(tmp_path), repeats=3)
    setting = Setting(DEFAULT, "fp32", "core", "inference")
    p = profile_pair("softmax", "taylorshift-efficient", Sizes(N=1, d=64, b=32), m, setting, costs=("time",),
                     n_max=65536, replicates=1)  # fmt: skip
    assert p.speed.verdict == "memory-limit" and p.speed.measured is None
    assert "softmax runs out of memory" in p.speed.note and "not a speed crossover" in p.speed.note
    lo, hi = p.speed.bracket
    assert model("softmax", lo, 64, 32, 1, "fp32").peak < sim.cap < model("softmax", hi, 64, 32, 1, "fp32").peak
    assert sim_n0("softmax", "taylorshift-efficient", 64, 32, 1, "fp32", 65536) > hi  # really no crossover there


# -- peak memory ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("variant", "n"), [("softmax", 300), ("linear", 1000), (TS[1], 77)])
def test_peak_memory_is_the_requested_bytes_and_the_allocators_blocks_are_kept(sim, tmp_path, variant, n) -> None:
    from attn_cost.profilers.measure.profile import Measurer

    m = Measurer("cuda", _store(tmp_path), dtype="bf16")
    sim.allocate(5 << 20)  # what ran before stays cached: it must not count
    assert m.memory(variant, Sizes(N=n, d=16, b=4)) == model(variant, n, 16, 4, 1, "bf16").peak
    (rec,) = [r for r in m.store.records.values() if r["kind"] == "memory"]
    assert rec["memory"]["method"] == "cuda-requested-bytes"
    assert rec["memory"]["allocated_peak_bytes"] >= rec["memory"]["peak_bytes"]
    assert rec["memory"]["allocated_peak_bytes"] % (2 << 20) == 0  # the simulated allocator's blocks
    assert "tf32_matmul" in rec["precision"]


# -- the device's identity -------------------------------------------------------------------------


def test_the_cuda_fingerprint_records_the_timer_and_precision_and_tf32_is_part_of_the_name(sim, monkeypatch) -> None:
    from attn_cost.profilers.measure.machine import fingerprint, slug

    info = fingerprint("cuda")
    assert info["timer_version"] == gpu_timing.TIMER_VERSION and "back-to-back" in info["timer"]
    assert info["l2_bytes"] == 50 << 20 and "tf32_matmul" in info and "cudnn_benchmark" in info
    matmul = torch.backends.cuda.matmul
    matmul.allow_tf32 = not info["tf32_matmul"]
    try:
        assert slug(fingerprint("cuda")) != slug(info)
    finally:
        matmul.allow_tf32 = info["tf32_matmul"]
    for older in (1, 2):  # do_bench's times, and the timer that switched method at 200 µs, never mix with these
        assert slug({**info, "timer_version": older}) != slug(info)


def test_shipped_cpu_profiles_keep_their_names() -> None:
    from attn_cost.profilers.measure.machine import CPU_TIMER_VERSION, slug

    root = Path(__file__).resolve().parents[1] / "profilers" / "data" / "devices"
    for path in root.glob("*.json"):
        profile = json.loads(path.read_text())
        device, dtype = profile["device"], profile.get("dtype", "fp32")
        name = path.stem.removesuffix(f"-{dtype}") if dtype != "fp32" else path.stem  # the campaign's names
        assert slug(device) == name
        if device.get("cpu_timer"):  # a fingerprint taken today says its version instead: the same name
            assert slug({**device, "timer_version": CPU_TIMER_VERSION}) == name


def test_a_unit_says_where_its_eager_times_measured_the_hosts_launches(sim, tmp_path) -> None:
    """At one head of N = 64 the 21 kernels of efficient TaylorShift take less device time than their launches take
    the host (host-bound); at 528 heads of N = 4,096 softmax's 4 kernels do not."""
    from attn_cost.profilers.campaign.steps import host_bound
    from attn_cost.profilers.measure.profile import Measurer

    m = Measurer("cuda", _store(tmp_path), repeats=3)
    small, large = Sizes(N=64, d=16, b=1), Sizes(N=4096, d=16, b=66, h=8)
    m.time(list(TS), small)
    m.time(["softmax", "linear"], large)
    for v in TS:
        k = model(v, 64, 16, 1, 1, "fp32")
        assert device_seconds(k, "fp32") < k.kernels * LAUNCH_S  # the simulation's own verdict, by hand
    assert host_bound(m, TS, small, [64]) == {TS[0]: [64], TS[1]: [64]}
    assert host_bound(m, ("softmax", "linear"), large, [4096]) == {"softmax": [], "linear": []}


# -- the campaign ------------------------------------------------------------------------------------


def _plan(out: Path, **changes):
    from attn_cost.profilers.campaign.run import Plan

    base = {"out": str(out), "device": "cuda", "pairs": [TS, ("softmax", "linear")], "ds": [16, 32, 64],
            "dtypes": ["fp32"], "calibrate": False, "store": str(out.parent / f"store-{out.name}")}  # fmt: skip
    return Plan(**{**base, **changes})


def _run(plan) -> dict:
    from attn_cost.profilers.campaign.run import run_campaign

    return run_campaign(plan, sink=lambda line: None)


@pytest.mark.slow  # a whole campaign on the simulated H100: 1-1.5 min each on 2 cores
def test_the_campaign_on_a_simulated_h100_finds_the_devices_own_crossovers(sim, tmp_path, cli) -> None:
    out = tmp_path / "c"
    summary = _run(_plan(out, ds=[16, 32]))  # at d = 64 the TaylorShift pair crosses beyond the loaded shape's reach
    assert summary["errors"] == [] and summary["device"]["kind"] == "cuda"
    assert len(summary["transitions"]) == 4
    plan = summary["plan"]
    assert plan["heads"] * plan["batch"] >= 4 * 132  # the default shape loads the simulated H100's 132 SMs
    for u in summary["transitions"]:
        assert (u["heads"], u["batch"]) == (plan["heads"], plan["batch"])
        expected = sim_n0(u["a"], u["b"], u["d"], u["batch"], u["heads"], "fp32", 65536)
        assert u["n0_verdict"] == "found"
        assert abs(u["measured_n0"] - expected) <= max(0.03 * expected, u["n0_uncertainty"]), (u, expected)
        assert u["measured_n1"] == sim_n1(u["a"], u["b"], u["d"], u["batch"], u["heads"], "fp32", 65536)
        for v, lengths in u["host_bound"].items():  # the eager loop waited on the host's launches there
            for n in lengths:
                m = model(v, n, u["d"], u["batch"], u["heads"], "fp32")
                assert device_seconds(m, "fp32") <= 1.1 * m.kernels * LAUNCH_S, (v, n)
    records = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    timed = {r["sizes"]["N"] for r in records if r["kind"] == "time"}
    assert all(n % 8 == 0 for n in timed)  # CUDA probes multiples of 8 tokens
    assert len(list(out.iterdir())) <= 8
    # nothing fitted on the GPU: the summary names the fit, made afterwards from the records alone
    assert summary["profiles"] == {} and "attn-cost validate --records" in summary["steps"]["validate"]
    from attn_cost.profilers.measure.machine import slug

    (command,) = summary["fit_afterwards"]
    result = cli(*command.split()[1:], "--json", "--no-save")
    assert result.code == 0, result.err
    fitted = json.loads(result.out)
    assert fitted["slug"] == slug(summary["device"]) and len(fitted["measured"]) == 4


@pytest.mark.slow  # a whole campaign on the simulated H100: 1-1.5 min each on 2 cores
def test_a_rerun_resumes_and_keeps_another_devices_records(sim, tmp_path, monkeypatch) -> None:
    out = tmp_path / "c"
    h200 = SimGPU(name="NVIDIA H200")
    install(monkeypatch, h200)
    _run(_plan(out, pairs=[TS], ds=[16]))  # a call on another GPU first, into the same folder
    install(monkeypatch, sim)
    first = _run(_plan(out, pairs=[TS], ds=[16, 64]))
    calls = sim.calls
    again = _run(_plan(out, pairs=[TS], ds=[16, 64], store=str(tmp_path / "fresh-store")))
    drop = lambda units: [{k: v for k, v in u.items() if k != "seconds"} for u in units]  # noqa: E731
    assert drop(again["transitions"]) == drop(first["transitions"])
    assert again["new_records"] == 0 and sim.calls == calls  # every timing a lookup: nothing ran again
    names = {json.loads(line)["device"]["name"] for line in (out / "measurements.jsonl").read_text().splitlines()}
    assert names == {"NVIDIA H200 (simulated)", "NVIDIA H100 80GB HBM3 (simulated)"}


@pytest.mark.slow  # a whole campaign on the simulated H100: 1-1.5 min each on 2 cores
def test_the_budget_counts_start_up_and_calls_continue_each_other(sim, tmp_path) -> None:
    """4-second calls with 1 s of start-up each (simulated time): no timing starts after 97 % of a call's budget
    (the one under way then ends the call: at most the longest timing of the uncut plan, a few seconds here, where
    a sweep times calls of 100 ms; a real 9-minute call keeps 16 s for it); together the calls finish the plan,
    with the transitions of the simulated device."""
    from attn_cost.profilers.campaign.run import STOP_SHARE, run_campaign

    out = tmp_path / "c"
    begin = sim.host
    starts: list[float] = []
    pairs = [TS, ("softmax", "linear")]
    whole = run_campaign(_plan(tmp_path / "whole", pairs=pairs, ds=[16, 32]),
                         sink=lambda line: starts.append(sim.host) if "] timing " in line else None)  # fmt: skip
    assert sim.host - begin > 5.0  # longer than one 4-second call below, with room
    longest = max(b - a for a, b in zip(starts, [*starts[1:], sim.host], strict=True))  # a timing and its search
    calls = 0
    while True:
        calls += 1
        begin = sim.host
        started: list[float] = []  # simulated seconds into the call (start-up included) at each timing's start

        def sink(line: str, begin: float = begin, started: list[float] = started) -> None:
            if "] timing " in line or "] peak memory " in line:
                started.append(sim.host - begin + 1.0)

        summary = run_campaign(_plan(out, pairs=pairs, ds=[16, 32], minutes=4 / 60, spent_s=1.0), sink=sink)
        assert max(started, default=0.0) <= STOP_SHARE * 4.0, f"call {calls} started a timing past its budget"
        assert sim.host - begin + 1.0 <= 4.0 + longest, f"call {calls} overran its budget by more than a timing"
        if not summary["skipped"]:  # nothing left for a further call
            break
        assert calls < 40
    assert calls > 1
    key = lambda u: (u["a"], u["b"], u["d"])  # noqa: E731
    assert sorted(map(key, summary["transitions"])) == sorted(map(key, whole["transitions"]))
    for u in summary["transitions"]:
        assert u["measured_n1"] == sim_n1(u["a"], u["b"], u["d"], u["batch"], u["heads"], "fp32", 65536)
        expected = sim_n0(u["a"], u["b"], u["d"], u["batch"], u["heads"], "fp32", 65536)
        assert abs(u["measured_n0"] - expected) <= max(0.03 * expected, u["n0_uncertainty"])


def test_a_library_error_ends_its_unit_not_the_run(sim, tmp_path, monkeypatch) -> None:
    from attn_cost.profilers.measure import profile

    build = profile.build_case

    def failing(variant, scope, sizes, *args, **kwargs):
        case = build(variant, scope, sizes, *args, **kwargs)
        if variant == "linear":

            def run(inputs):
                raise RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED when calling cublasSgemm")

            return type(case)(**{**case.__dict__, "run": run})
        return case

    monkeypatch.setattr(profile, "build_case", failing)
    summary = _run(_plan(tmp_path / "c", ds=[16]))
    assert [e["unit"] for e in summary["errors"]] == ["softmax vs linear, d = 16, fp32"]
    assert summary["errors"][0]["status"] == "error" and "CUBLAS_STATUS" in summary["errors"][0]["message"]
    assert [(u["a"], u["d"]) for u in summary["transitions"]] == [(TS[0], 16)]


def test_an_error_that_breaks_the_device_stops_the_run_cleanly(sim, tmp_path, monkeypatch) -> None:
    from attn_cost.profilers.measure import profile

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(profile, "build_case", broken)
    summary = _run(_plan(tmp_path / "c", ds=[16]))
    assert len(summary["errors"]) == 1 and any("new process" in s for s in summary["skipped"])
    assert (tmp_path / "c" / "summary.json").exists()


def test_inputs_are_drawn_on_the_device_when_there_is_one(monkeypatch) -> None:
    """build_case draws CUDA inputs with a generator on the device, in the case's dtype (no host copy)."""
    from attn_cost.profilers.measure.cases import build_case

    seen = []
    real = torch.randn

    def randn(*shape, generator=None, device=None, dtype=None):
        seen.append((str(generator.device), device, dtype))
        return real(*shape, dtype=dtype)

    monkeypatch.setattr(torch, "randn", randn)
    monkeypatch.setattr(torch, "Generator", lambda device="cpu": torch._C.Generator())
    case = build_case("softmax", "core", Sizes(N=8, d=4), "bf16", "cuda")
    case.make_inputs()
    assert [s[1:] for s in seen] == [("cuda", torch.bfloat16)] * 3


def test_byte_sizes_of_the_simulation_are_the_dtypes() -> None:
    assert {"fp32": torch.finfo(torch.float32).bits // 8, "bf16": torch.finfo(torch.bfloat16).bits // 8} == BYTES


@pytest.mark.integration  # a new process's age
def test_the_budget_starts_with_the_process() -> None:
    """The CLI hands the process's age to the plan: Python's start-up and imports count against --minutes."""
    import subprocess
    import sys

    code = (
        "import time; time.sleep(1.5); from attn_cost.profilers.campaign.run import process_age; print(process_age())"
    )
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout)
    assert 1.5 <= age < 30


def test_the_calibration_times_host_terms_on_the_host_clock_on_a_gpu(tmp_path, monkeypatch) -> None:
    """The op model's call, loop-step and chain costs are host work: on a GPU, events around them see ~0 (and are
    refused), so the calibration times them with the host clock; kernels keep the device's events."""
    from attn_cost.profilers.devicemodel.calibrated import fit as cal
    from attn_cost.profilers.devicemodel.kernels import CALL, LOOP_STEP
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.timing import TimeStats
    from attn_cost.profilers.store.store import ResultStore

    asked: dict[str, dict] = {}

    def fake_time_cases(cases, repeats, warmup, **options):
        asked[cases[0].variant.split(":")[1]] = options
        return [TimeStats(1e-5, 1e-5, 1e-5, 1e-5, 1e-5, repeats, warmup)]

    monkeypatch.setattr(cal, "time_cases", fake_time_cases)
    store = ResultStore(prepare("cpu"), tmp_path / "store", shipped=False)
    for device in ("cuda", "cpu"):
        calibrator = cal.Calibrator(store, device, rates=cal.Rates(5e-6, 2e12, 5e13))
        for at in (cal._s(CALL, rows=1, cols=8), cal._s(LOOP_STEP, iterations=8), cal._s("copy", rows=4, cols=64)):
            calibrator._measure(at, cal.engine_op(at, "fp32"), f"{device}-{at.kernel}", f"op-{device}")
        on_host = device == "cuda"
        assert asked[CALL] == asked[LOOP_STEP] == ({"host_clock": True, "count_kernels": False} if on_host else
                                                   {"count_kernels": False})  # fmt: skip
        assert asked["copy"] == {"count_kernels": False}  # a sample runs the op many times: no per-call count
