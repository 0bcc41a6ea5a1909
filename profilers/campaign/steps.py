"""What each step of a campaign does to one of its units, and which units it has: profile a pair at one head dim
and dtype, validate (fit) one dtype, check Latte's softmax in one dtype, calibrate the op model, report one dtype.

The runner (`run.run_step`) does what every step shares: the time budget, skips, errors, checkpoints. A function
here measures or writes one unit and keeps its outcome in the `Campaign`; it raises `UserError` (or
`NotStartedError`) for a unit that cannot run here, and lets a library's error through to the runner. The files
each step writes are declared here once (`PROFILE`, `OPMODEL`, `REPORT`): checked before a campaign measures
anything, and claimed again when written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from attn_cost.costmodel.conventions import DEFAULT as CONVENTION
from attn_cost.costmodel.crossover import Setting, crossover
from attn_cost.profilers.campaign.plan import CALIBRATE_SHARE, STOP_SHARE, Plan, fit_commands
from attn_cost.profilers.campaign.planning import Price, unit_cost
from attn_cost.profilers.campaign.state import Campaign, NotStartedError, OutOfTimeError, Output, Unit
from attn_cost.profilers.devicemodel.calibrated.data import OPMODEL_KIND, user_dir
from attn_cost.profilers.devicemodel.calibrated.fit import cache_sizes
from attn_cost.profilers.devicemodel.datasheet.data import for_device
from attn_cost.profilers.devicemodel.datasheet.model import DEVICE_ONLY, GpuModel, fitted
from attn_cost.profilers.devicemodel.device import row_dims
from attn_cost.profilers.devicemodel.kinds import resolve
from attn_cost.profilers.devicemodel.measured.data import PROFILE_KIND, profile_name
from attn_cost.profilers.devicemodel.tunables import DEFAULT, GPU_CAMPAIGN, QUICK
from attn_cost.profilers.measure import gpu_timing
from attn_cost.profilers.measure.gpu_record import record_launch_bound
from attn_cost.profilers.measure.opchecks import softmax_axes
from attn_cost.profilers.measure.profile import Measurer
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.report.gather import gather
from attn_cost.profilers.store.files import is_html_report, is_json_of
from attn_cost.profilers.workflow.calibrating import calibrate
from attn_cost.profilers.workflow.profiling import profile as profile_pairs
from attn_cost.profilers.workflow.validating import validate_device


def opmodel_file(device_slug: str) -> str:
    return f"opmodel-{device_slug}.json"


def report_file(dtype: str) -> str:
    return f"report-{dtype}.html"


PROFILE = Output(
    lambda plan, slug: [Path(plan.out) / f"{profile_name(slug, dtype)}.json" for dtype in plan.dtypes],
    is_json_of(PROFILE_KIND),
    "a device profile",
)
OPMODEL = Output(
    lambda plan, slug: [Path(plan.out) / opmodel_file(slug), user_dir() / f"{slug}.json"] if plan.calibrate else [],
    is_json_of(OPMODEL_KIND),
    "an op calibration",
)
"""The op calibration, in DIR and where `validate` and `crossover --device` look for it (`opmodel.user_dir`)."""
REPORT = Output(
    lambda plan, slug: [Path(plan.out) / report_file(dtype) for dtype in plan.dtypes], is_html_report, "an HTML report"
)


def _setting(dtype: str) -> Setting:
    return Setting(CONVENTION, dtype, "core", "inference")


# -- profile: measured N0 and N1 of a pair at one head dim and dtype -----------------------------------------------


def profile_units(camp: Campaign, tier: int, share: float) -> list[Unit]:
    """The units of `tier` this call profiles (`plan_units`), each with its dtype's measurer (one per dtype and
    step: its disturbance detector sees every timing of the step)."""
    measurers = {dtype: camp.measurer(dtype) for dtype in camp.plan.dtypes}
    units = []
    for dtype, dv, (a, b), reach in plan_units(camp, tier, share):
        what = f"{a} vs {b}, d = {dv}, {dtype}"
        units.append(Unit(f"profile {what}", what, (measurers[dtype], dv, a, b, reach)))
    return units


def profile(camp: Campaign, unit: tuple[Measurer, int, str, str, int]) -> None:
    """Measured N0 and N1 of one pair at one head dim and dtype, searched up to the unit's longest length."""
    measurer, dv, a, b, reach = unit
    plan, dtype = camp.plan, measurer.dtype
    what = f"{a} vs {b}, d = {dv}, {dtype}"
    camp.log(f"profile {what}" + (f": {camp.costs[what]}" if what in camp.costs else ""))
    heads, batch, _ = plan.shape()
    sizes = Sizes(N=1, d=dv, h=heads, b=batch)
    (p,) = profile_pairs(
        measurer, [(a, b)], [dv], sizes, _setting(dtype), max_lengths=plan.max_lengths, n_max=camp.n_max,
        reach=reach, replicates=plan.replicates,
    ).pairs  # fmt: skip
    row = {k: v for k, v in p.as_json().items() if k not in ("speed", "memory")}
    if camp.device == "cuda":
        row["host_bound"] = host_bound(measurer, (a, b), sizes, [q.n for q in (p.speed.probes if p.speed else [])])
    camp.units.append({"dtype": dtype, **row})
    camp.log(
        f"  N0 analytic {row['analytic_n0']}, measured {row['measured_n0']} ({row['n0_verdict']}); "
        f"N1 analytic {row['analytic_n1']}, measured {row['measured_n1']} ({row['n1_verdict']})"
    )


def profiled(camp: Campaign, results: list) -> str:
    return f"{len(camp.units)} of {len(camp.plan.units())} units"


def device_pricer(camp: Campaign) -> Callable[[dict, str], Price] | None:
    """On a GPU with a datasheet, a pricing of one call per unit (its dims and dtype): the datasheet model's
    device time, launches left out (the timer's device time is a graph replay); None elsewhere (no plan by cost)."""
    if camp.device != "cuda":
        return None
    sheet = for_device(str(camp.store.device.get("name", "")).removesuffix(" (simulated)"))
    if sheet is None:
        return None
    eff, _, _ = fitted()
    model = GpuModel(sheet, eff, host=DEVICE_ONLY)

    def pricer(dims: dict, dtype: str) -> Price:
        return lambda variant, ns: model.time(variant, dims, ns, "core", dtype)

    return pricer


def plan_units(camp: Campaign, tier: int, share: float) -> list[tuple[str, int, tuple[str, str], int]]:
    """The units of `tier` this call measures, in order, each with the longest length its search may time:
    on a GPU with a datasheet, each unit's device time predicted first (`planning.unit_cost`); a unit over its
    cap is not started, and the units past this step's share of the budget are left to the next call (both
    said). Elsewhere every unit, at the plan's longest length."""
    plan = camp.plan
    pricer = device_pricer(camp)
    units = plan.units(tier)
    if pricer is None:
        return [(dt, dv, pair, camp.n_max) for dt, dv, pair in units]
    left = share * 60 * plan.minutes - camp.log.elapsed
    heads, batch, repeats = plan.shape()
    planned, total, later, fresh = [], 0.0, [], 0
    for dtype, dv, (a, b) in units:
        what = f"{a} vs {b}, d = {dv}, {dtype}"
        dims = row_dims({"d": dv, "h": heads, "b": batch})
        start = crossover(a, b, "flops", dims, _setting(dtype), exact=False).n or 256
        cost = unit_cost(pricer(dims, dtype), a, b, start, camp.n_max, repeats=repeats,
                         replicates=plan.replicates, run_s=gpu_timing.REP_MS / 1e3)  # fmt: skip
        if camp.done(dtype, dv, a, b):
            planned.append((dtype, dv, (a, b), cost.n_cap))  # its timings are lookups now
        elif cost.seconds > plan.unit_s:
            camp.skip(f"profile {what} (not started: {cost.says()}, over its {plan.unit_s:g} s cap)")
        elif fresh and total + cost.seconds > left:  # the first new unit starts: its timings are kept if it is cut
            later.append(what)
        else:
            fresh += 1
            total += cost.seconds
            planned.append((dtype, dv, (a, b), cost.n_cap))
            camp.costs[what] = cost.says()
    camp.log(f"planned {len(planned)} units: {total:.0f} s of device time predicted, {max(0.0, left):.0f} s left")
    for what in later:
        camp.skip(f"profile {what} (its predicted time is past {share:.0%} of the budget: the next call measures it)")
    return planned


def host_bound(measurer: Measurer, variants: tuple[str, str], sizes: Sizes, lengths: list[int]) -> dict[str, list[int]]:
    """Per variant, the lengths of a unit's search at which its eager time measured the host's launches rather than
    the GPU (`gpu_record.launch_bound`: the eager loop waits on the host; its device time, by graph replay, is still
    the GPU's): where an eager caller's crossover moves with the host."""
    out = {}
    for variant in variants:
        records = (measurer.store.get(measurer.key("time", variant, replace(sizes, N=n))) for n in sorted(set(lengths)))
        out[variant] = [r["sizes"]["N"] for r in records if r is not None and record_launch_bound(r)]
    return out


# -- validate: fit the corrections in one dtype ------------------------------------------------------------------


def can_fit(camp: Campaign) -> str | None:
    """Why the corrections are not fitted in this run (None: they are)."""
    if not camp.plan.fit:
        return f"not on the device: fit afterwards, on any machine: {'; '.join(fit_commands(camp.plan))}"
    if len(camp.plan.fit_d) < 2:
        return "needs at least two head dims to fit on"
    return None


def validation_units(camp: Campaign) -> list[Unit]:
    return [Unit(f"validation in {dtype}", f"in {dtype}", dtype) for dtype in camp.plan.dtypes]


def validate(camp: Campaign, dtype: str) -> str:
    """Fit the corrections in one dtype on the plan's first two head dims, check them on the others, save the
    profile. A second validation (after the other head dims or the calibration) finds every timing in the store,
    apart from a re-timed spike."""
    plan = camp.plan
    # what was profiled: a pair is fitted where both fitted head dims were, checked on the dims all such were
    done = {(u["a"], u["b"], u["d"]) for u in camp.units if u["dtype"] == dtype}
    pairs = [(a, b) for a, b in plan.pairs if all((a, b, dv) in done for dv in plan.fit_d)]
    if not pairs:
        raise NotStartedError(f"no pair was profiled at both d = {plan.fit_d}")
    check = [dv for dv in plan.check_d if all((a, b, dv) in done for a, b in pairs)]
    camp.log(f"validate {dtype}: fit on d = {plan.fit_d}, check on d = {check or 'none'}")
    heads, batch, _ = plan.shape()
    args = (camp.measurer(dtype), pairs, check, plan.fit_d, Sizes(N=1, d=1, h=heads, b=batch), _setting(dtype))
    kwargs: dict[str, Any] = {"n_max": camp.n_max, "max_lengths": plan.max_lengths, "replicates": plan.replicates}
    try:
        validated = validate_device(*args, **kwargs, opmodel=camp.opmodel, op_errors=False)
    except (ValueError, ArithmeticError) as e:  # an op-model prediction gone wrong must not cost the fit
        camp.log(f"warning: the op model's prediction failed ({type(e).__name__}: {e}); validating without it")
        validated = validate_device(*args, **kwargs)  # every measurement is stored: lookups only
    profile = validated.profile
    path = camp.write(f"{profile.name}.json", json.dumps(profile.as_json(), indent=2) + "\n", PROFILE)
    camp.profiles[dtype] = str(path)
    camp.validation[dtype] = validated.rows
    camp.log(f"  wrote {path.name}")
    return dtype


def validated(camp: Campaign, dtypes: list[str]) -> str:
    return f"profiles for {', '.join(dtypes) or 'no dtype'}"


# -- op check: Latte's softmax along the sequence axis against the last -----------------------------------------


def has_latte(camp: Campaign) -> bool:
    return any("latte" in v for pair in camp.plan.pairs for v in pair)


def op_check_units(camp: Campaign) -> list[Unit]:
    return [Unit(f"op check in {dtype}", f"in {dtype}", dtype) for dtype in camp.plan.dtypes]


def op_check(camp: Campaign, dtype: str) -> None:
    """Latte's key softmax along the sequence axis against the same softmax along the last axis, at the plan's
    shape and first head dim, in one dtype (`measure.opchecks`): a few seconds, kept in the summary."""
    plan = camp.plan
    lengths = [n for n in (1024, 4096, 16384, 65536) if n <= camp.n_max]
    heads, batch, repeats = plan.shape()
    template = Sizes(N=1, d=plan.ds[0], h=heads, b=batch)
    rows = softmax_axes(camp.store, camp.device, dtype, template, lengths, repeats=repeats)
    camp.op_checks[dtype] = [r.as_json() for r in rows]
    for r in rows:
        ratio = f"{r.sequence_axis_s / r.last_axis_s:.2f}×" if r.sequence_axis_s and r.last_axis_s else "—"
        camp.log(f"  softmax along the sequence axis against the last, N = {r.n:,}, {dtype}: {ratio}")


# -- calibrate: the op model, in the first dtype -----------------------------------------------------------------


def asked_to_calibrate(camp: Campaign) -> str | None:
    return None if camp.plan.calibrate else "not asked for (--no-calibrate)"


def calibration_units(camp: Campaign) -> list[Unit]:
    dtype = camp.plan.dtypes[0]
    return [Unit("calibration", f"in {dtype}", dtype)]


def calibration_runs(plan: Plan, device: str) -> int:
    """Timed runs per calibration shape: 2 on a GPU (graph replays agree within a per cent, and a thousand shapes
    share a quarter of the call), else at most 3 (a shared CPU drifts)."""
    return 2 if device == "cuda" else min(plan.repeats or 3, 3)


def calibrate_op_model(camp: Campaign, dtype: str) -> None:
    """The op-level calibration of the device, cut off at its share of the budget (`CALIBRATE_SHARE`). Every timed
    shape is in the store as soon as it is measured, so a cut calibration resumes."""
    plan = camp.plan
    caches = cache_sizes(camp.device)
    tune = QUICK if plan.quick else GPU_CAMPAIGN if camp.device == "cuda" else DEFAULT
    grid_name = "quick" if plan.quick else "the GPU campaign's" if tune is GPU_CAMPAIGN else "full"
    camp.log(f"calibrate the op model in {dtype} ({grid_name} grid); caches {caches}")
    last = [0.0]

    def step(message: str, done: int, total: int) -> None:
        if camp.over(CALIBRATE_SHARE):
            raise OutOfTimeError(f"{done} of {total} shapes timed")
        if camp.log.elapsed - last[0] > 30 or done in (0, total):
            last[0] = camp.log.elapsed
            camp.notify(f"  calibration {done}/{total}: {message}")

    variants = sorted({v for pair in plan.pairs for v in pair})
    heads, batch, _ = plan.shape()
    sizes = [{"d": d, "h": heads, "b": batch} for d in plan.ds]
    runs = calibration_runs(plan, camp.device)
    try:
        done = calibrate(camp.store, camp.device, dtype, repeats=runs, tune=tune, variants=variants, sizes=sizes,
                         glue=False, caches=caches, out=user_dir(), step=step)  # fmt: skip
    except OutOfTimeError as e:
        camp.skip(f"rest of the calibration (over {CALIBRATE_SHARE:.0%} of the time budget; {e}, kept in the store)")
        camp.steps["calibrate"] = f"cut off: {e}"
        return
    except (RuntimeError, ValueError, ArithmeticError) as e:  # recorded by the runner (the step's errors); said here
        camp.steps["calibrate"] = f"error: {e}"
        raise
    model = camp.opmodel = done.model  # saved where validate and crossover --device look for it (user_dir)
    path = camp.write(opmodel_file(model.slug), model.to_text(), OPMODEL)
    shapes = f"{done.grid_shapes} grid, {done.exact_shapes} exact and {done.held_out_shapes} held-out shapes"
    camp.steps["calibrate"] = f"{shapes}, {done.measured} timed; {path.name}"
    camp.log(f"  wrote {path.name}; held-out error {model.held_out}")


# -- report: an offline HTML page per fitted dtype ---------------------------------------------------------------


def can_report(camp: Campaign) -> str | None:
    """Why no report is made (None: one is, per fitted dtype): plotly missing, or the time budget spent."""
    try:
        import plotly  # noqa: F401
    except ImportError:
        return "skipped: plotly is not installed (pip install plotly, or carry its wheel)"
    if camp.profiles and camp.over(STOP_SHARE):
        return "skipped: the time budget is spent (make it with `attn-cost report --device DIR/<profile>`)"
    return None


def report_units(camp: Campaign) -> list[Unit]:
    return [Unit(f"report in {dtype}", f"in {dtype}", (dtype, path)) for dtype, path in camp.profiles.items()]


def report(camp: Campaign, unit: tuple[str, str]) -> str:
    """The offline HTML report of one fitted dtype's profile; returns its file's name."""
    from attn_cost.profilers.report.page import render

    dtype, profile_path = unit
    variants = list(dict.fromkeys(v for pair in camp.plan.pairs for v in pair))
    model = resolve(profile_path)
    data = gather(variants, list(camp.plan.pairs), sorted(set(camp.plan.ds)), 256, 1024, model, _setting(dtype))
    path = camp.write(report_file(dtype), render(data), REPORT)
    camp.log(f"report: wrote {path.name} ({path.stat().st_size / 2**20:.1f} MiB)")
    return path.name


def reported(camp: Campaign, names: list[str]) -> str:
    return ", ".join(names) or "no device profile to report on"
