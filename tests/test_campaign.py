"""The campaign command, SDPA backend choices, the CUDA timing harness and Slurm submission, without a GPU.

CUDA-only paths are tested as far as they go without a device: the backend rules (PyTorch's
documented limits), what a measurement records, the warm-up logic with a fake clock. The campaign is
rehearsed on the CPU here and on a simulated H100 in test_gpu_fake.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.campaign.plan import resolved
from attn_cost.profilers.campaign.run import MAX_FILE_BYTES, PAIRS, Plan, check_outputs
from attn_cost.profilers.measure import gpu_timing, sdpa
from attn_cost.profilers.measure.cases import build_case
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.store.files import write_atomic

TS = "taylorshift-direct:taylorshift-efficient"
TINY = ["--pair", "softmax:linear", "--dtype", "fp32", "--d", "4", "--no-calibrate", "--repeats", "2",
        "--max-lengths", "3", "--max-n", "64"]  # fmt: skip
"""One pair at one head dim (so no fit): the fast end-to-end run."""


@pytest.fixture(autouse=True)
def _budget_from_the_call(monkeypatch) -> None:
    """The CLI runs in this process (`cli`): its budget counts from the call, as in a new process, not from when
    this test process started (a new process's age is tested in test_gpu_fake.py)."""
    from attn_cost.profilers.campaign import run as campaign

    monkeypatch.setattr(campaign, "process_age", lambda: 0.0)


# -- SDPA backends ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "device", "dtype", "d", "capability", "says"),
    [
        ("efficient", "cpu", "fp32", 64, None, "CUDA only"),
        ("cudnn", "cpu", "bf16", 64, None, "CUDA only"),
        ("flash", "cuda", "fp32", 64, (9, 0), "does not run in fp32"),  # FlashAttention-2: fp16/bf16 only
        ("flash", "cuda", "bf16", 512, (9, 0), "up to 256"),
        ("flash", "cuda", "fp16", 64, (7, 5), "capability 8.0+"),  # FA2 needs Ampere or newer
        ("cudnn", "cuda", "bf16", 36, (9, 0), "multiple of 8"),
        ("efficient", "cuda", "bf16", 64, (7, 0), "capability 8.0+"),  # bf16 itself needs sm80
        ("turbo", "cuda", "bf16", 64, (9, 0), "unknown SDPA backend"),
        ("efficient", "cuda", "bf16", 36, (9, 0), "multiple of 8"),  # minimum_gemm_alignment on sm80+
        ("efficient", "cuda", "fp32", 66, (9, 0), "multiple of 4"),
    ],
)
def test_a_backend_that_cannot_run_is_refused_in_one_line(backend, device, dtype, d, capability, says) -> None:
    with pytest.raises(UserError, match=says) as e:
        sdpa.check_backend(backend, device, dtype, d, capability)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("backend", "device", "dtype", "d", "capability"),
    [
        ("flash", "cuda", "bf16", 64, (9, 0)),
        ("flash", "cuda", "fp16", 256, (8, 0)),
        ("efficient", "cuda", "fp32", 64, (7, 0)),
        ("cudnn", "cuda", "bf16", 128, (9, 0)),
        ("math", "cuda", "fp32", 1000, (6, 0)),
        ("math", "cpu", "bf16", 8, None),
        ("flash", "cpu", "fp32", 8, None),  # the CPU's own flash kernel takes fp32
    ],
)
def test_a_backend_that_can_run_passes(backend, device, dtype, d, capability) -> None:
    assert sdpa.check_backend(backend, device, dtype, d, capability).name == backend


def test_cudnn_takes_head_dims_up_to_256_on_sm90_from_cudnn_9_10() -> None:
    assert sdpa.check_backend("cudnn", "cuda", "bf16", 192, (9, 0), 91000).name == "cudnn"
    for capability, version in (((9, 0), 90800), ((8, 0), 91000), ((9, 0), None)):
        with pytest.raises(UserError, match="up to 128"):
            sdpa.check_backend("cudnn", "cuda", "bf16", 192, capability, version)


def test_pytorchs_dispatcher_is_asked_too() -> None:
    assert sdpa.probe_backend("math", "cpu", "fp32", 8) == "math"
    assert sdpa.probe_backend("flash", "cpu", "bf16", 8) == "flash"
    with pytest.raises(UserError, match="PyTorch cannot run SDPA backend efficient"):
        sdpa.probe_backend("efficient", "cpu", "fp32", 8)


def _aten_ops(case) -> set[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        case.run(case.make_inputs())
    return {e.key for e in prof.key_averages()}


def test_the_forced_backend_is_the_kernel_that_runs() -> None:
    case = build_case("softmax-fused", "core", Sizes(N=32, d=8, h=2, b=2))
    flash = _aten_ops(sdpa.bind(case, "flash"))
    math_ = _aten_ops(sdpa.bind(case, "math"))
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in flash
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" not in math_
    assert "aten::_softmax" in math_
    a, b = sdpa.bind(case, "flash"), sdpa.bind(case, "math")
    torch.testing.assert_close(a.run(a.make_inputs()), b.run(b.make_inputs()), rtol=1e-5, atol=1e-6)
    other = build_case("linear", "core", Sizes(N=8, d=4))
    assert sdpa.bind(other, "math") is other


def test_every_softmax_fused_measurement_records_its_backend(tmp_path) -> None:
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.profile import Measurer
    from attn_cost.profilers.store.store import ResultStore

    store = ResultStore(prepare("cpu"), tmp_path / "store", shipped=False)
    forced = Measurer("cpu", store, sdpa_backend="math")
    chosen = Measurer("cpu", store)
    sizes = Sizes(N=16, d=8)
    forced.memory("softmax-fused", sizes)
    chosen.memory("softmax-fused", sizes)
    forced.memory("linear", sizes)
    recs = {(r["variant"], r.get("sdpa_chosen_by")): r for r in store.records.values()}
    user = recs[("softmax-fused", "user")]
    assert user["sdpa_backend"] == "math" and user["key"].endswith("|sdpa=math")
    auto = recs[("softmax-fused", "pytorch")]
    assert auto["sdpa_backend"] in sdpa.BACKENDS and "sdpa=" not in auto["key"]
    assert "sdpa_backend" not in recs[("linear", None)]


def test_measure_refuses_a_cuda_only_backend_on_the_cpu(cli) -> None:
    r = cli("measure", "--variant", "softmax-fused", "--n", "16", "--d", "8", "--cpu", "--sdpa-backend", "cudnn")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "CUDA only" in r.err


# -- the CUDA timing harness, without a GPU ----------------------------------------------------------


def test_warm_up_runs_until_three_calls_agree() -> None:
    times = iter([9.0, 4.0, 2.0, 1.3, 1.0, 1.02, 1.01, 1.0, 1.0])
    assert gpu_timing.warm_until_steady(lambda: None, lambda call: next(times)) == 7  # calls 5-7: 1.0, 1.02, 1.01
    never = iter(float(k % 2 + 1) for k in range(1000))
    assert gpu_timing.warm_until_steady(lambda: None, lambda call: next(never), maximum=20) == 20


def test_each_run_is_one_bench_median_and_runs_alternate() -> None:
    order = []

    def bench(call):
        call()
        return 2.5e-3

    calls = [lambda: order.append("a"), lambda: order.append("b")]
    stats = gpu_timing.time_calls(calls, 3, 2, bench=bench, clock=lambda c: 1.0)
    assert [s.median for s in stats] == [2.5e-3, 2.5e-3] and [s.runs for s in stats] == [3, 3]
    assert order == ["a", "b"] * 3


def test_the_timer_says_what_a_time_means() -> None:
    text = gpu_timing.describe_timer()
    assert f"v{gpu_timing.TIMER_VERSION}" in text and "back-to-back" in text and "CUDA graph" in text
    assert "no flush" in text and "eager" in text and "the same method at every length" in text


# -- the campaign ----------------------------------------------------------------------------------


def test_the_default_plan_is_the_issues_campaign() -> None:
    """Issue 37: bf16 and fp32 at d = 64 and 128 first, plain and fused softmax against TaylorShift, Latte, linear
    and chunked linear attention (chunked is causal: against causal softmax), the TaylorShift pair; then other d."""
    plan = Plan(out="x")
    assert ("taylorshift-direct", "taylorshift-efficient") in plan.pairs
    for a in ("softmax", "softmax-fused"):
        assert {b for x, b in plan.pairs if x == a} == {"linear", "latte", "taylorshift-efficient"}
        assert (f"{a}-causal", "linear-chunked") in plan.pairs
    # the comparison users ask about first: FlashAttention against flash-linear-attention's fused chunk kernel
    assert plan.pairs[0] == ("softmax-fused-causal", "linear-chunked-fused")
    assert plan.pairs[1] == ("softmax-fused-causal", "linear-chunked")
    assert plan.ds == [64, 128, 32] and plan.dtypes == ["bf16", "fp32"]
    gpu, cpu = resolved(plan, "cuda", 132), resolved(plan, "cpu", None)
    assert gpu.heads * gpu.batch >= 4 * 132 and gpu.repeats == 3 and gpu.fit is False  # loaded, not fitted there
    assert (cpu.heads, cpu.batch, cpu.repeats, cpu.fit) == (1, 32, 5, True)
    assert resolved(Plan(out="x", heads=1, batch=32), "cuda", 132).batch == 32  # a shape asked for is kept
    assert plan.fit_d == [64, 128] and plan.check_d == [32]
    units = plan.units()
    first = units[: 4 * len(plan.pairs)]
    assert {(dt, dv) for dt, dv, _ in first} == {(dt, dv) for dt in ("bf16", "fp32") for dv in (64, 128)}
    assert [dt for dt, _, _ in first] == sorted([dt for dt, _, _ in first])  # every bf16 unit before fp32's
    assert {dv for _, dv, _ in units[len(first) :]} == {32} and len(units) == 6 * len(plan.pairs)
    assert plan.minutes == 9  # one call of at most 9 minutes; the next call continues
    assert Plan.from_json(json.loads(json.dumps(plan.as_json()))) == plan


def test_outputs_beyond_what_the_device_tool_brings_back_are_flagged(tmp_path) -> None:
    for k in range(8):
        write_atomic(tmp_path / f"f{k}.txt", "x")
    assert check_outputs(tmp_path) == []
    with open(tmp_path / "big.bin", "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    problems = check_outputs(tmp_path)
    assert any("big.bin" in p for p in problems) and any("9 files" in p for p in problems)
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gpu", "--cpu"], "not both"),
        (["--d", "0"], "--d must be a positive integer"),
        (["--dtype", "fp64"], "unknown dtype"),
        (["--pair", "softmax:nope"], "nope"),
        (["--sdpa-backend", "turbo"], "unknown SDPA backend"),
        (["--partition", "h100"], "--partition goes with --slurm"),
        (["--max-n", "4"], "--max-n"),
        (["--cpu", "--sdpa-backend", "efficient"], "CUDA only"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(cli, tmp_path, args, says) -> None:
    out = tmp_path / "campaign"
    r = cli("campaign", "--out", str(out), *args)
    assert r.code == 2, r.err
    assert len(r.err.strip().splitlines()) == 1 and says in r.err
    assert not out.exists()


def test_gpu_without_cuda_is_one_line_and_exit_code_2(cli, tmp_path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = cli("campaign", "--gpu", "--out", str(tmp_path / "c"))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "needs CUDA" in r.err
    assert not (tmp_path / "c").exists()


def test_out_must_be_a_writable_folder(cli, tmp_path) -> None:
    (tmp_path / "file").write_text("")
    r = cli("campaign", "--cpu", "--out", str(tmp_path / "file"), *TINY)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "is a file" in r.err


def _read(out: Path) -> tuple[dict, list[dict]]:
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    return summary, records


def test_a_tiny_campaign_writes_its_files_and_a_rerun_resumes_from_them(cli, tmp_path) -> None:
    out = tmp_path / "c"
    r = cli("campaign", "--cpu", "--quick", "--out", str(out), *TINY, "--json")
    assert r.code == 0, r.err
    summary, records = _read(out)
    assert r.json()["transitions"] == summary["transitions"]
    assert [(u["a"], u["b"], u["d"], u["dtype"]) for u in summary["transitions"]] == [("softmax", "linear", 4, "fp32")]
    assert "two head dims" in summary["steps"]["validate"]
    # the traced memory crossing of softmax against linear attention is exact on the CPU
    assert all(u["measured_n1"] == u["analytic_n1"] for u in summary["transitions"])
    assert {rec["variant"] for rec in records} == {"softmax", "linear"}
    assert "profile softmax vs linear, d = 4, fp32" in (out / "campaign.log").read_text()
    assert len(list(out.iterdir())) <= 8 and check_outputs(out) == []
    assert "[" in r.err and "profile softmax vs linear" in r.err  # progress on stderr
    # a rerun in another store starts from the export in --out
    again = cli("campaign", "--cpu", "--quick", "--out", str(out), *TINY, "--json",
                env={"ATTN_COST_HOME": str(tmp_path / "elsewhere")})  # fmt: skip
    assert again.code == 0, again.err
    assert f"resumed: {len(records)} measurements imported" in again.err
    assert len(_read(out)[1]) >= len(records)


def test_a_spent_budget_stops_cleanly_and_says_how_to_continue(cli, tmp_path) -> None:
    out = tmp_path / "c"
    r = cli("campaign", "--cpu", "--quick", "--out", str(out), *TINY, "--minutes", "0.0001", "--json")
    assert r.code == 0, r.err
    summary, _ = _read(out)
    assert summary["transitions"] == [] and any("run the same command again" in s for s in summary["skipped"])


# -- the steps as data: one runner (`run_step`) for every step ---------------------------------------------------


def _toy_campaign(tmp_path, spent_s: float = 0.0):
    """A campaign on no device: a 1-minute budget of which `spent_s` is spent, its checkpoints counted."""
    from attn_cost.profilers.campaign.state import Campaign, Log

    lines: list[str] = []
    camp = Campaign(Plan(out=str(tmp_path), minutes=1.0), Log(tmp_path / "campaign.log", lines.append, spent_s), "cpu",
                    store=None)  # fmt: skip
    saved: list[tuple[int, int, int]] = []
    camp.checkpoint = lambda: saved.append((len(ran), len(camp.skipped), len(camp.errors)))
    ran: list[str] = []
    return camp, ran, saved, lines


def _toy_step(name: str, outcomes: dict, ran: list, **declared):
    """A step whose units are `outcomes`' keys: each unit returns its name or raises its outcome."""
    from attn_cost.profilers.campaign.run import Step
    from attn_cost.profilers.campaign.state import Unit

    def run(camp, unit: str) -> str:
        ran.append(unit)
        if isinstance(outcomes[unit], BaseException):
            raise outcomes[unit]
        return unit

    units = lambda camp: [Unit(f"{name} {u}", f"at {u}", u) for u in outcomes]  # noqa: E731
    return Step(name, units, run, says=lambda camp, done: f"{len(done)} done", **declared)


def test_a_unit_that_cannot_run_or_fails_is_recorded_and_the_next_one_runs(tmp_path) -> None:
    from attn_cost.profilers.campaign.run import run_steps
    from attn_cost.profilers.campaign.state import NotStartedError

    camp, ran, saved, _ = _toy_campaign(tmp_path)
    outcomes = {"u1": None, "u2": UserError("no such backend here"), "u3": RuntimeError("cuBLAS failed"),
                "u4": NotStartedError("nothing to fit on"), "u5": None}  # fmt: skip
    run_steps(camp, (_toy_step("a", outcomes, ran), _toy_step("b", {"v1": None}, ran)))
    assert ran == ["u1", "u2", "u3", "u4", "u5", "v1"]
    assert camp.skipped == ["a u2: no such backend here", "a u4 (nothing to fit on)"]
    assert camp.errors == [{"step": "a", "unit": "at u3", "status": "error", "message": "RuntimeError: cuBLAS failed"}]
    assert camp.steps == {"a": "2 done", "b": "1 done"}  # u1 and u5; v1
    # the summary is rewritten after every unit that ran to an outcome (u4 never started) and after every step
    assert saved == [(1, 0, 0), (2, 1, 0), (3, 1, 1), (5, 2, 1), (5, 2, 1), (6, 2, 1), (6, 2, 1)]


def test_an_unusable_device_or_a_spent_budget_stops_the_run_but_not_the_report(tmp_path) -> None:
    from attn_cost.profilers.campaign.run import run_steps

    def steps(ran: list) -> tuple:
        sticky = RuntimeError("CUDA error: an illegal memory access was encountered")
        return (_toy_step("a", {"u1": sticky, "u2": None}, ran), _toy_step("b", {"v1": None}, ran),
                _toy_step("report", {"r1": None}, ran, budgeted=False))  # fmt: skip

    camp, ran, _, _ = _toy_campaign(tmp_path)
    run_steps(camp, steps(ran))
    assert ran == ["u1", "r1"] and camp.errors[0]["unit"] == "at u1"
    assert camp.skipped[-1].startswith("the rest (the CUDA device is unusable after: RuntimeError: CUDA error")
    assert "report" in camp.steps and "b" not in camp.steps

    camp, ran, _, _ = _toy_campaign(tmp_path, spent_s=59.0)  # past 97 % of one minute
    run_steps(camp, steps(ran))
    assert ran == ["r1"] and camp.skipped == ["the rest (97% of the 1-minute budget spent): run the same command "
                                              "again to continue where this one stopped"]  # fmt: skip


def test_no_unit_starts_past_its_steps_share_and_a_step_that_cannot_run_says_why(tmp_path) -> None:
    from attn_cost.profilers.campaign.run import run_step

    camp, ran, _, lines = _toy_campaign(tmp_path, spent_s=31.0)  # past half of one minute
    assert run_step(camp, _toy_step("a", {"u1": None}, ran, share=0.5)) == []
    assert run_step(camp, _toy_step("b", {"v1": None}, ran, share=0.6)) == ["v1"]
    assert camp.skipped == ["a u1 (over 50% of the time budget)"] and ran == ["v1"]
    run_step(camp, _toy_step("c", {"w1": None}, ran, needs=lambda camp: "needs plotly", label="the c"))
    run_step(camp, _toy_step("d", {"x1": None}, ran, when=lambda camp: False))
    assert ran == ["v1"] and camp.steps["c"] == "needs plotly" and "d" not in camp.steps
    assert lines[-1].endswith("] the c: needs plotly")


def test_ctrl_c_goes_through_the_runner_and_ends_the_units_time_cap(tmp_path) -> None:
    from attn_cost.profilers.campaign.run import run_steps

    camp, ran, saved, _ = _toy_campaign(tmp_path)
    caps = []
    step = _toy_step("a", {"u1": None, "u2": KeyboardInterrupt(), "u3": None}, ran, capped=True)
    step = replace(step, run=lambda camp, unit, run=step.run: caps.append(camp.unit_ends) or run(camp, unit))
    with pytest.raises(KeyboardInterrupt):
        run_steps(camp, (step,))
    assert ran == ["u1", "u2"] and camp.unit_ends is None and saved == [(1, 0, 0)]
    assert all(cap is not None and cap <= 40 + 1 for cap in caps)  # Plan.unit_s: 40 s from the unit's start


@pytest.mark.slow
def test_the_rehearsal_runs_every_step_at_small_sizes(cli, tmp_path) -> None:
    """`campaign --cpu --quick`: every pair at three head dims in bf16 and fp32, calibration, validation, files.

    A 4-minute budget bounds it on a busy machine: what does not fit is skipped, and said so."""
    out = tmp_path / "rehearsal"
    r = cli("campaign", "--cpu", "--quick", "--out", str(out), "--minutes", "4", timeout=900)
    assert r.code == 0, r.err[-2000:]
    summary, records = _read(out)
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and check_outputs(out) == [], files
    units = {(u["a"], u["b"], u["d"], u["dtype"]) for u in summary["transitions"]}
    skipped = summary["skipped"]
    planned = [tuple(p) for p in summary["plan"]["pairs"]]
    assert ("softmax-fused-causal", "linear-chunked-fused") not in planned  # no fla on a CPU: left out, and said
    assert any(s.startswith("profile softmax-fused-causal vs linear-chunked-fused (") for s in skipped)
    assert len(planned) == len(PAIRS) - 1
    assert len(units) + sum(s.startswith("profile ") and " d = " in s for s in skipped) == len(planned) * 3 * 2
    stopped = any(s.startswith("the rest (") for s in skipped)
    for dtype in ("fp32", "bf16"):
        assert dtype in summary["profiles"] or stopped or any(f"validation in {dtype}" in s for s in skipped)
    assert {rec["variant"] for rec in records} >= {"taylorshift-direct", "taylorshift-efficient"}
    if "fp32" in summary["profiles"]:
        assert "report-fp32.html" in files or "skipped" in summary["steps"]["report"]
    ts = [u for u in summary["transitions"] if u["a"] == "taylorshift-direct" and u["d"] == 8]
    # TaylorShift's N1 = ¼[d² + 2d + 1 + sqrt(d⁴ + 12d³ + 14d² + 4d + 1)] = 46.7 at d = 8: the traced crossing is 47
    assert ts and all(u["measured_n1"] == 47 for u in ts)


def test_slurm_jobs_are_one_per_device_kind_or_per_pair(tmp_path) -> None:
    from attn_cost.profilers.campaign.slurm import job_plans

    plan = Plan(out=str(tmp_path))
    by_device = job_plans(plan, ["h100", "a100"], "device")
    assert [(label, part) for label, part, _ in by_device] == [("h100", "h100"), ("a100", "a100")]
    assert all(p.pairs == plan.pairs and Path(p.store).parent == Path(p.out) for _, _, p in by_device)
    by_pair = job_plans(plan, ["h100"], "pair")
    assert len(by_pair) == len(plan.pairs) and all(len(p.pairs) == 1 for _, _, p in by_pair)
    assert len({p.out for _, _, p in by_pair}) == len(plan.pairs)
    with pytest.raises(UserError, match="--split"):
        job_plans(plan, [], "node")


@pytest.mark.slow
def test_submitit_local_executor_runs_the_jobs_and_prints_the_merge(cli, tmp_path) -> None:
    pytest.importorskip("submitit")
    out = tmp_path / "cluster"
    r = cli("campaign", "--cpu", "--quick", "--out", str(out), *TINY, "--slurm", "--executor", "local",
            "--json", timeout=900)  # fmt: skip
    assert r.code == 0, r.err
    (job,) = r.json()["jobs"]
    assert job["error"] is None and Path(job["out"]) == out / "local"
    assert (out / "local" / "measurements.jsonl").exists() and (out / "local" / "summary.json").exists()
    merge = r.json()["merge"]
    assert merge.startswith("attn-cost results import ")
    imported = cli(*merge.split()[1:], "--store", str(tmp_path / "merged"))
    assert imported.code == 0, imported.err


# -- on a GPU (skipped without CUDA; the next GPU session runs them first) ----------------------------

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

SDPA_OPS = {
    "flash": "aten::_scaled_dot_product_flash_attention",
    "efficient": "aten::_scaled_dot_product_efficient_attention",
    "cudnn": "aten::_scaled_dot_product_cudnn_attention",
    "math": "aten::_scaled_dot_product_attention_math",
}


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("d", [16, 64, 96])
def test_every_backend_the_rules_allow_runs_on_this_gpu_and_is_the_kernel_that_runs(dtype, d) -> None:
    capability = torch.cuda.get_device_capability(0)
    case = build_case("softmax-fused", "core", Sizes(N=256, d=d, h=4, b=2), dtype, "cuda")
    for name in sdpa.BACKENDS:
        try:
            sdpa.check_backend(name, "cuda", dtype, d, capability)
        except UserError:
            continue
        assert sdpa.probe_backend(name, "cuda", dtype, d) == name  # PyTorch agrees with the rules
        assert SDPA_OPS[name] in _aten_ops(sdpa.bind(case, name))


@pytest.mark.gpu
@cuda
def test_cuda_timing_goes_through_the_harness_and_the_device_record_holds_its_clocks() -> None:
    from attn_cost.profilers.measure.machine import fingerprint
    from attn_cost.profilers.measure.memory import cuda_peak
    from attn_cost.profilers.measure.timing import time_cases

    cases = [build_case(v, "core", Sizes(N=512, d=64, b=32), "bf16", "cuda") for v in ("softmax", "linear")]
    stats = time_cases(cases, 3, 2)
    assert [s.runs for s in stats] == [3, 3] and all(s.median > 0 for s in stats)
    info = fingerprint("cuda")
    assert info["sm_count"] > 0 and info["timer"] == gpu_timing.describe_timer()
    # the N×N scores of materialised softmax are allocated: at least b·N² bf16 elements above the baseline
    assert cuda_peak(cases[0])["requested"] >= 32 * 512 * 512 * 2
