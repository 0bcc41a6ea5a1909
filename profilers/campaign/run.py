"""The one command a user runs on their GPU: profile, op checks, calibrate; on a CPU also validate and report.

A campaign measures, on one device and in one process, fused softmax against flash-linear-attention's fused chunk
kernel and chunked linear attention (causal), plain and fused softmax against linear attention, Latte and
efficient TaylorShift, and the TaylorShift pair (`PAIRS`; a pair whose variant would run a stand-in here, the
fused chunk kernel without fla-core, is left out with a line), at core scope, at a shape that loads the device
(`planning.loaded_shape`: b·h four waves of one-block-per-head kernels over the SMs; b = 32, h = 1 on a CPU). It goes
in the order a short allocation needs: bf16, then fp32, at the plan's first two head dims (64 and 128 by default),
every pair in turn; Latte's softmax in its two layouts (`measure.opchecks`); the op-level calibration on the
shapes its variants run at its sizes (`tunables.GPU_CAMPAIGN` on a GPU); then the other head dims (32). On a GPU
every unit is priced before it starts (`plan_units`, `planning.unit_cost`: the datasheet model's device time over
the lengths its search is expected to time): one over its cap is not started, one past the step's share is left
to the next call, and each says so. Nothing is fitted on a GPU: its summary names the commands that fit it
afterwards from the records on any machine (`validate --records DIR/measurements.jsonl --summary
DIR/summary.json`); a CPU run (`Plan.fit`) fits and validates the corrections in the run, as before. It writes:

    DIR/campaign.log            every progress line, with the seconds since the start
    DIR/measurements.jsonl      every measurement of this device (JSON lines: `attn-cost results import`)
    DIR/summary.json            the plan, the device, measured and predicted transition points, op checks, skipped
    DIR/opmodel-<device>.json   the op calibration (also saved where `validate` looks for it)
    DIR/<device>.json           a fitted device profile, per dtype (`-bf16` ...), where the run fits (a CPU)
    DIR/report-<dtype>.html     the offline HTML report per fitted dtype, where plotly is installed

That is at most 8 files of a few MiB.

It checkpoints as it goes: the measurements and the summary are rewritten (atomically: a
temporary file, then os.replace) after every pair and head dim and every CHECKPOINT_S seconds
inside longer steps, so a run cut off at any moment leaves what it measured in DIR. A rerun with
the same DIR first imports DIR/measurements.jsonl into the store, reads which units DIR/summary.json holds, and
measures only what is missing. A time budget (`minutes`, 9 by default, counted from the process's start) keeps one
call inside a limit: no profiling unit at the fitted head dims starts after 50 % of it, no validation after 60 %,
the calibration stops at 78 %, no unit at the other head dims starts after 94 %, and at 97 % the run stops by
itself, each with a line in the log; the next call continues. A unit that has had `Plan.unit_s` seconds stops, its
timings kept, and the next unit starts. A CUDA error
other than out-of-memory ends its unit (status `error`, the message kept in the summary), not the run,
unless the device is unusable after it (an illegal address): then the run stops and a rerun continues.

The steps are data: `STEPS`, in order, each a `Step` (its name, when it runs, what it needs, its units, the function
it calls on each, the files it writes), and one runner, `run_step`, that does for every step what they share. What
each step does to a unit is in `steps`; the plan in `plan`; the run's state and its checkpoints in `state`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.campaign import steps
from attn_cost.profilers.campaign.plan import (
    DTYPES,
    LATER_SHARE,
    PAIRS,
    PROFILE_SHARE,
    STOP_SHARE,
    VALIDATE_SHARE,
    Plan,
    resolved,
)
from attn_cost.profilers.campaign.planning import WAVES, launch_bound_shape
from attn_cost.profilers.campaign.state import (
    EXPORT,
    LOG,
    SUMMARY,
    BrokenDeviceError,
    Campaign,
    Log,
    NotStartedError,
    OutOfTimeError,
    Output,
    Unit,
    UnitOutOfTimeError,
    settle_garbage,
)
from attn_cost.profilers.measure.machine import slug
from attn_cost.profilers.measure.references import stand_in
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.store.files import claim, make_folder, read_input
from attn_cost.profilers.store.store import read_jsonl
from attn_cost.profilers.workflow.measuring import Events, check_cases, open_device, open_store, searched

__all__ = ["DTYPES", "PAIRS", "STEPS", "STOP_SHARE", "Plan", "Step", "open_campaign", "process_age", "run_campaign"]

MAX_FILES = 8
MAX_FILE_BYTES = 16 << 20
"""What the device tool brings back from its output folder."""


def _always(camp: Campaign) -> bool:
    return True


def _ready(camp: Campaign) -> str | None:
    return None


@dataclass(frozen=True)
class Step:
    """One step of a campaign, declared: what `run_step` needs to run it."""

    name: str
    """Its key in the summary's `steps` and its name in an error's `step`."""
    units: Callable[[Campaign], list[Unit]]
    """Its units of work, in order (a pair at one head dim and dtype; a dtype), from the plan and what ran."""
    run: Callable[[Campaign, Any], object]
    """The function it calls on each unit: measures, keeps the outcome in the campaign, returns what `says` reads."""
    when: Callable[[Campaign], bool] = _always
    """Whether this run has the step at all (a plan without Latte has no op check); False: nothing said."""
    needs: Callable[[Campaign], str | None] = _ready
    """Why the step cannot run here (plotly missing, one head dim to fit on), said in the summary and the log;
    None: it runs."""
    label: str = ""
    """How the log names the step when it cannot run (its name where empty)."""
    says: Callable[[Campaign, list], str] | None = None
    """Its line in the summary's `steps`, from the results of its units that ran."""
    writes: tuple[Output, ...] = ()
    """The files it writes, checked before anything is measured (`outputs`)."""
    share: float | None = None
    """No unit starts after this share of the time budget (None: any time before the run stops)."""
    capped: bool = False
    """Each unit stops after `Plan.unit_s` seconds, its timings kept for the next call."""
    errors: tuple[type[BaseException], ...] = (RuntimeError,)
    """Library errors that end a unit, not the run (a CUDA error other than out-of-memory; kept in the summary)."""
    budgeted: bool = True
    """Whether the run's stop (`STOP_SHARE`) ends the step; False for the report made after the stop."""


def run_step(camp: Campaign, step: Step) -> list:
    """Run one step on each of its units in turn: a unit past the step's share of the budget is skipped, as is one
    that cannot run here (`UserError`, `NotStartedError`) or has had its time (its timings kept); a library error
    (`Step.errors`) ends the unit, kept in the summary, and the next one runs. After every unit that started, its
    outcome is in DIR/summary.json (`Campaign.checkpoint`). The run's stop (`OutOfTimeError`), an unusable device
    (`BrokenDeviceError`) and Ctrl-C go through to the caller. Returns the results of the units that ran."""
    if not step.when(camp):
        return []
    why = step.needs(camp)
    if why is not None:
        camp.steps[step.name] = why
        camp.log(f"{step.label or step.name}: {why}")
        return []
    results = []
    for unit in step.units(camp):
        if step.budgeted:
            camp.check_time()
        if step.share is not None and camp.over(step.share):
            camp.skip(f"{unit.said} (over {step.share:.0%} of the time budget)")
            continue
        settle_garbage()
        camp.unit_ends = camp.log.elapsed + camp.plan.unit_s if step.capped else None
        try:
            results.append(step.run(camp, unit.arg))
        except UnitOutOfTimeError as e:
            camp.skip(f"{unit.said} ({e}; its timings are kept: the next call continues it)")
        except NotStartedError as e:
            camp.skip(f"{unit.said} ({e})")
            continue
        except UserError as e:  # a disturbed machine, a backend that cannot run: record, go on
            camp.skip(f"{unit.said}: {e}")
        except step.errors as e:
            camp.error(step.name, unit.where, e)  # checkpoints; stops the run if the device is unusable now
            continue
        finally:
            camp.unit_ends = None
        camp.checkpoint()
    if step.says is not None:
        camp.steps[step.name] = step.says(camp, results)
    return results


def _later_units(camp: Campaign) -> bool:
    """Whether the other head dims (`Plan.units(1)`) have units: the fit is checked on them."""
    return bool({u["d"] for u in camp.units} & {dv for _, dv, _ in camp.plan.units(1)})


STEPS = (
    Step("profile", lambda camp: steps.profile_units(camp, 0, PROFILE_SHARE), steps.profile, says=steps.profiled,
         share=PROFILE_SHARE, capped=True),
    Step("validate", steps.validation_units, steps.validate, when=lambda camp: bool(camp.plan.fit),
         needs=steps.can_fit, label="validation", says=steps.validated, writes=(steps.PROFILE,), share=VALIDATE_SHARE),
    Step("op check", steps.op_check_units, steps.op_check, when=steps.has_latte),
    Step("calibrate", steps.calibration_units, steps.calibrate_op_model, needs=steps.asked_to_calibrate,
         label="calibration", writes=(steps.OPMODEL,), errors=(RuntimeError, ValueError, ArithmeticError)),
    Step("profile", lambda camp: steps.profile_units(camp, 1, LATER_SHARE), steps.profile, says=steps.profiled,
         share=LATER_SHARE, capped=True),
    # again, with the held-out head dims and the op model's zero-shot N0 (lookups); where the run does not fit,
    # it says how to fit afterwards
    Step("validate", steps.validation_units, steps.validate,
         when=lambda camp: not camp.plan.fit or _later_units(camp) or camp.opmodel is not None,
         needs=steps.can_fit, label="validation", says=steps.validated, writes=(steps.PROFILE,)),
    Step("report", steps.report_units, steps.report, needs=steps.can_report, says=steps.reported,
         writes=(steps.REPORT,), budgeted=False),
)  # fmt: skip
"""A campaign's steps in the order they run: the fitted head dims' units first (a GPU allocation may end soon),
their fit, the op checks, the op calibration, the other head dims and the check of the fit on them; the report
last, also after the run's stop (from the profiles written)."""


def run_steps(camp: Campaign, declared: tuple[Step, ...]) -> None:
    """Run the steps in order until the time budget is spent or the device is unusable (said: a rerun continues);
    the report (a step not `budgeted`) is made either way. The summary is rewritten after every step."""
    stopped = False
    for step in declared:
        if stopped and step.budgeted:
            continue
        try:
            run_step(camp, step)
        except OutOfTimeError as e:
            stopped = True
            camp.skip(f"the rest ({e}): run the same command again to continue where this one stopped")
        except BrokenDeviceError as e:
            stopped = True
            camp.skip(f"the rest ({e}): run the same command again in a new process to continue")
        camp.checkpoint()


def outputs(plan: Plan, device_slug: str) -> list[tuple[Path, Callable[[Path], bool], str]]:
    """Every file a campaign may write, with the recogniser of its kind and what it is: DIR's log, export and
    summary, and the files its steps write (`Step.writes`)."""
    kinds = dict.fromkeys([LOG, EXPORT, SUMMARY, *(kind for step in STEPS for kind in step.writes)])
    return [(path, kind.recognise, kind.what) for kind in kinds for path in kind.paths(plan, device_slug)]


def resume_from(camp: Campaign, path: Path) -> None:
    """Import an earlier run's DIR/measurements.jsonl, so that a rerun measures only what is missing; the
    devices found there are kept in every later rewrite of the file (an H200 rerun keeps the H100's records)."""
    if not path.exists():
        return

    claim(path, EXPORT.recognise, EXPORT.what)
    summary = path.with_name("summary.json")
    if summary.exists() and SUMMARY.recognise(summary):
        units = json.loads(read_input(summary, SUMMARY.what)).get("transitions", [])
        camp.earlier = {(u["dtype"], u["d"], u["a"], u["b"]) for u in units if isinstance(u, dict) and _unit_keys(u)}
    records, _ = read_jsonl(path)
    count = camp.store.db.put_many(records)
    camp.devices |= {r.device for r in records}
    others = sorted(camp.devices - {camp.store.slug})
    kept = f"; records of {', '.join(others)} kept in it" if others else ""
    camp.log(f"resumed: {count} measurements imported from {path}{kept}")


def _unit_keys(unit: dict) -> bool:
    return isinstance(unit.get("d"), int) and all(isinstance(unit.get(k), str) for k in ("dtype", "a", "b"))


def open_campaign(plan: Plan, sink: Callable[[str], None]) -> Campaign:
    """Resolve the device, fix the threads, open DIR, the log and the store (importing an earlier export).
    Every file the campaign may write is checked first: a user's file among them ends the run before anything
    is measured or written."""

    device, fingerprint = open_device(plan.measuring(), plan.dtypes, plan.ds)
    shaped = resolved(plan, device, fingerprint.get("sm_count"))  # the heads and batch the units measure at
    names = sorted({v for pair in plan.pairs for v in pair})
    for dtype in plan.dtypes:  # sizes no unit could run at: one line before anything is written
        heads, batch, _ = shaped.shape()
        template = Sizes(N=1, d=1, h=heads, b=batch)
        check_cases(device, "core", dtype, searched(names, template, plan.ds, plan.n_max)(device))
    out = make_folder(Path(plan.out), f"--out {plan.out}")
    for path, recognise, what in outputs(plan, slug(fingerprint)):
        if os.path.lexists(path):  # an absent one (its folder yet to be made) holds nothing to lose
            claim(path, recognise, what)
    warnings: list[str] = []
    store = open_store(fingerprint, plan.measuring(), Events(warn=warnings.append), shipped=False)
    try:
        log = Log(out / "campaign.log", sink, plan.spent_s)
    except OSError as e:
        store.close()
        raise UserError(f"cannot write into --out {out}: {e.strerror or e}") from None
    for w in warnings:
        log(f"warning: {w}")
    pairs, dropped = runnable_pairs(plan, device)
    camp = Campaign(replace(resolved(plan, device, store.device.get("sm_count")), pairs=pairs), log, device, store)
    for line in dropped:
        camp.skip(f"profile {line}")
    info = store.device
    log(f"device: {info['name']} ({device}), torch {info['torch']}, {info['threads']} threads; store {store.path}")
    if device == "cuda":
        log(f"timer: {info.get('timer', 'CUDA events')}")
    resume_from(camp, out / "measurements.jsonl")
    return camp


def runnable_pairs(plan: Plan, device: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The plan's pairs whose variants run their own kernels on this device, and a line for each pair left out
    because one would run a stand-in (`references.stand_in`: linear-chunked-fused without fla-core)."""
    kept, dropped = [], []
    for a, b in plan.pairs:
        others = {v: stand_in(v, Sizes(N=64, d=64), device) for v in (a, b)}
        if all(v == s for v, s in others.items()):
            kept.append((a, b))
        else:
            instead = ", ".join(f"{v} would run {s}'s code" for v, s in others.items() if v != s)
            dropped.append(f"{a} vs {b} ({instead}: flash-linear-attention, fla-core, runs on CUDA; see doctor)")
    return kept, dropped


def run_campaign(plan: Plan, sink: Callable[[str], None] = print) -> dict:
    """Run every step of the plan (`STEPS`); returns the summary (also in DIR/summary.json)."""
    camp = open_campaign(plan, sink)
    plan = camp.plan
    try:
        camp.log(
            f"plan: {len(plan.pairs)} pairs × d {plan.ds} × {plan.dtypes}, b = {plan.batch}, h = {plan.heads}, "
            f"N up to {camp.n_max:,}, budget {plan.minutes:g} min"
        )
        sms = camp.store.device.get("sm_count")
        if camp.device == "cuda" and sms:
            heads, batch, _ = plan.shape()
            camp.log(f"shape: {launch_bound_shape(sms, heads, batch) or _loaded_words(sms, heads * batch)}")
        run_steps(camp, STEPS)
        for problem in check_outputs(camp.out):
            camp.log(f"warning: {problem}")
        camp.checkpoint()
        camp.log(f"done in {camp.log.elapsed:.0f} s")
        return camp.summary()
    finally:
        camp.log.close()


def _loaded_words(sm_count: int, bh: int) -> str:
    return (f"b·h = {bh} heads: {bh / sm_count:.1f} waves over {sm_count} SMs for a kernel with one block per head "
            f"(at least {WAVES} asked for)")  # fmt: skip


def check_outputs(out: Path) -> list[str]:
    """What the device tool would not bring back: more than MAX_FILES files or one over MAX_FILE_BYTES."""
    files = [p for p in out.iterdir() if p.is_file() and not p.name.startswith(".")]
    problems = [
        f"{p.name} is {p.stat().st_size / 2**20:.1f} MiB (over 16 MiB)"
        for p in files
        if p.stat().st_size > MAX_FILE_BYTES
    ]
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files in {out} (the device tool brings back {MAX_FILES})")
    return problems


def process_age() -> float:
    """Seconds since this process started (its Python start-up and imports), from /proc; 0 where unknown."""
    try:
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - started / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
