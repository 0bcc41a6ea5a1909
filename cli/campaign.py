"""`attn-cost campaign`: the whole measuring job on one device (or a cluster) in one command.

Everything is checked before torch is imported: sizes, names, dtypes, the backend's name; then
`--gpu` without CUDA, a backend that cannot run and an unwritable --out end in one line, exit 2.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import Status, app, fail, typed
from attn_cost.cli.render import emit
from attn_cost.profilers.measure.standing import cell
from attn_cost.profilers.store.files import not_stdout
from attn_cost.profilers.workflow.measuring import Measuring, check_measurable
from attn_cost.profilers.workflow.measuring import measuring as read_measuring


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


REPEATS = typer.Option(None, "--repeats", help="Timed runs per length (default 3 on a GPU, 5 on a CPU).")


@app.command()
@o.with_measuring(read_measuring, REPEATS, fresh=False)
def campaign(
    out: Path = typer.Option(..., "--out", help="Folder for the log, measurements, device profiles and reports."),
    measuring: Measuring = o.MEASURING,
    quick: bool = typer.Option(False, "--quick", help="A rehearsal at small sizes (d 4, 8, 12; b 1; N <= 1024)."),
    d_values: Optional[list[int]] = typer.Option(None, "--d", help="Head dims; repeatable (default 64, 128, 32)."),
    dtypes: Optional[list[str]] = typer.Option(None, "--dtype", help="Repeatable (default bf16 and fp32)."),
    pair: Optional[list[str]] = typer.Option(
        None,
        "--pair",
        help="A:B, repeatable (default: fused and plain softmax against linear attention, Latte, "
        "efficient TaylorShift; the TaylorShift pair).",
    ),
    heads: Optional[int] = typer.Option(
        None, "--h", help="Heads (default: on a GPU 8, the batch then filling every SM for 4 waves; on a CPU 1)."
    ),
    batch: Optional[int] = typer.Option(
        None,
        "--b",
        help="Batch (default: on a GPU 4 waves of heads over its SMs; on a CPU 32). A shape that leaves "
        "SMs idle is measured and labelled launch-bound.",
    ),
    max_lengths: Optional[int] = typer.Option(None, "--max-lengths", help="Lengths timed per pair and d (12)."),
    max_n: Optional[int] = typer.Option(None, "--max-n", help="Longest N (default 65536 on CUDA, 16384 on CPU)."),
    minutes: Optional[float] = typer.Option(
        None,
        "--minutes",
        help="Time budget of this call in minutes, start-up included (default 9; 10 with"
        " --quick); a rerun continues where it stopped.",
    ),
    calibrate: bool = typer.Option(
        True, "--calibrate/--no-calibrate", help="Calibrate the op model after the profiles."
    ),
    fit: Optional[bool] = typer.Option(
        None,
        "--fit/--no-fit",
        help="Fit the corrections at the end (default: on a CPU; on a GPU its time is for "
        "measuring: fit afterwards on any machine, `attn-cost validate --records DIR/measurements.jsonl`).",
    ),
    slurm: bool = typer.Option(False, "--slurm", help="Submit jobs through submitit instead of running here."),
    partition: Optional[list[str]] = typer.Option(
        None, "--partition", help="Slurm partition, one per device kind; repeatable (with --slurm)."
    ),
    executor: str = typer.Option("slurm", "--executor", help="slurm, or local (jobs as local processes; tests)."),
    split: str = typer.Option("device", "--split", help="One job per device kind (device) or per pair (pair)."),
    timeout_min: int = typer.Option(60, "--timeout-min", help="Wall-time limit of each Slurm job in minutes."),
    wait: bool = typer.Option(True, "--wait/--no-wait", help="With --slurm: wait for the jobs and summarise them."),
    as_json: bool = o.JSON,
) -> None:
    """Profile the TaylorShift pair and softmax against linear, Latte and efficient TaylorShift at several d and
    dtypes, fit and check the device's corrections, and write the measurements, profiles, report and log to --out."""

    plan = _plan(out, measuring, quick, d_values, dtypes, pair, heads, batch, max_lengths, max_n, minutes)
    plan.calibrate = calibrate
    plan.fit = fit
    if partition and not slurm:
        fail("--partition goes with --slurm")
    if slurm:
        _submit(plan, partition or [], executor, split, timeout_min, wait, as_json)
        return
    from attn_cost.profilers.campaign.run import process_age, run_campaign

    plan.spent_s = round(process_age(), 1)  # the budget counts the start-up: Python, imports
    summary = run_campaign(plan, sink=_err)
    if as_json:
        emit(summary)
        return
    _summary_tables(summary)


def _plan(out, measuring: Measuring, quick, d_values, dtypes, pair, heads, batch, max_lengths, max_n, minutes):
    from attn_cost.profilers.campaign.run import DTYPES, PAIRS, Plan

    not_stdout(out, "--out")
    pairs = o.pairs(pair, list(PAIRS))
    repeats = measuring.repeats
    for value, flag in ((heads, "--h"), (batch, "--b"), (repeats, "--repeats"), (max_lengths, "--max-lengths")):
        o.positive(value, flag)
    o.positive(max_n, "--max-n")
    if max_n is not None and max_n < 8:
        fail(f"--max-n must be at least 8, got {typed('--max-n', max_n)}")
    if minutes is not None and not 0 < minutes < math.inf:
        fail(f"--minutes must be a positive number of minutes, got {typed('--minutes', minutes)}")
    ds = o.head_dims(d_values, None, heads or 1, default=[]) or None
    names = sorted({v for p in pairs for v in p})
    for dt in dtypes or DTYPES:
        check_measurable(names, o.setting(o.DEFAULT, dt, "core", "inference", names))
    fields = {
        "ds": ds, "dtypes": list(dict.fromkeys(dtypes)) if dtypes else None, "heads": heads, "batch": batch,
        "repeats": repeats, "max_lengths": max_lengths, "n_max": max_n, "minutes": minutes,
    }  # fmt: skip
    if quick:
        plan = Plan.quick_plan(str(out), **fields)
    else:
        plan = Plan(out=str(out), **{k: v for k, v in fields.items() if v is not None})
    plan.pairs = pairs
    plan.device, plan.threads, plan.sdpa_backend = measuring.device, measuring.threads, measuring.sdpa_backend
    plan.store = str(measuring.store) if measuring.store else None
    return plan


def _submit(plan, partitions: list[str], executor: str, split: str, timeout_min: int, wait: bool, as_json: bool):
    from attn_cost.profilers.campaign import slurm

    o.positive(timeout_min, "--timeout-min")
    if executor == "slurm" and not partitions:
        fail("--slurm --executor slurm needs at least one --partition (one job per device kind)")
    jobs = slurm.submit(plan, partitions, executor=executor, split=split, timeout_min=timeout_min)
    for s in jobs:
        _err(f"submitted {s.label}: job {s.job_id}, writing to {s.out}")
    results = slurm.wait(jobs) if wait else [(s, None, None) for s in jobs]
    rows: list[dict[str, Any]] = [
        {"label": s.label, "job": s.job_id, "out": str(s.out), "error": error, "summary": summary}
        for s, summary, error in results
    ]
    if as_json:
        emit({"jobs": rows, "merge": slurm.merge_command(jobs)})
    else:
        render.table(
            "Campaign jobs",
            [render.Col("job"), render.Col("id"), render.Col("state"), render.Col("folder")],
            [[r["label"], r["job"], _state(r, wait), r["out"]] for r in rows],
        )
        render.line(f"Merge their measurements with: {slurm.merge_command(jobs)}", markup=False)
    if any(r["error"] for r in rows):
        raise typer.Exit(Status.FAILED)


def _state(row: dict, waited: bool) -> str:
    if row["error"]:
        return f"failed: {row['error']}"
    return "done" if waited else "submitted"


def _summary_tables(summary: dict) -> None:
    """Measured against predicted transition points, one table per dtype (with the fitted points once validated)."""
    dev = summary["device"]
    corrected = {(r["a"], r["b"], r["d"], dtype): r for dtype, rows in summary["validation"].items() for r in rows}
    for dtype in summary["plan"]["dtypes"]:
        units = [u for u in summary["transitions"] if u["dtype"] == dtype]
        if not units:
            continue
        fitted = dtype in summary["validation"]
        ops = fitted and any(r.get("predicted_n0") is not None for r in summary["validation"][dtype])
        heads = ["N0 model", "N0 fit", "N0 ops", "N0 measured", "N1 model", "N1 fit", "N1 measured"]
        rows = []
        for u in units:
            c = corrected.get((u["a"], u["b"], u["d"], dtype), {})
            cells = [_n(u["analytic_n0"]), _n(c.get("corrected_n0")), _n(c.get("predicted_n0")), _measured(u, "n0"),
                     _n(u["analytic_n1"]), _n(c.get("corrected_n1")), _measured(u, "n1")]  # fmt: skip
            rows.append([u["a"], u["b"], str(u["d"]), *_keep(cells, heads, fitted, ops)])
        heads = _keep(heads, heads, fitted, ops)
        plan = summary["plan"]
        render.table(
            f"Transition points on {dev['name']} ({dev['kind']}, {dtype}, b = {plan['batch']}, h = {plan['heads']})",
            [render.Col("A"), render.Col("B"), render.right("d")] + [render.right(h) for h in heads],
            rows,
            keys=3,
        )
    for what in summary["skipped"]:
        render.line(f"skipped: {what}", markup=False)
    for e in summary.get("errors", []):
        render.line(f"error: {e['step']} {e['unit']}: {e['message']}", markup=False)
    render.sentence(_usable(summary["usable"]), indent=0)
    files = ", ".join(summary["files"])
    render.line(f"Wrote {files} to {summary['plan']['out']} in {summary['elapsed_s']:.0f} s.", markup=False)


def _usable(usable: dict) -> str:
    """One sentence on what the run produced that can be used, and what to do when it is nothing."""
    planned = usable["units_planned"]
    found = f"N0 measured for {usable['n0_measured']} of {planned} units, N1 for {usable['n1_measured']}"
    profiles = ", ".join(usable["profiles"]) or "none"
    calibration = "written" if usable["opmodel"] else "none"
    text = f"Usable: {found}; device profiles: {profiles}; op calibration: {calibration}."
    if not (usable["n0_measured"] or usable["n1_measured"] or usable["profiles"] or usable["opmodel"]):
        text += (" Nothing usable yet (a disturbed machine or too short a budget): every measurement made is "
                 "kept; run the same command again to continue.")  # fmt: skip
    return text


def _keep(cells: list, heads: list[str], fitted: bool, ops: bool) -> list:
    """Drop the fitted columns before a validation, the op model's before a calibration."""
    return [c for c, h in zip(cells, heads, strict=True) if (fitted or "fit" not in h) and (ops or "ops" not in h)]


def _n(value) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _measured(row: dict, which: str) -> str:
    value, unc, verdict = row[f"measured_{which}"], row[f"{which}_uncertainty"], row[f"{which}_verdict"]
    if verdict == "tie":  # where either is as fast
        return cell(value, unc, verdict, tie=row.get(f"{which}_tie"))
    if value is None:
        return verdict or "—"
    return render.with_spread(value, unc)
