"""The op model's validation table and the issue's acceptance figures, from `attn-cost validate --json`.

    attn-cost validate --cpu --catalogue --fit-d 8 --fit-d 16 --fit-d 64 --d 40 --json > validation.json
    python benchmarks/opmodel_validation.py validation.json
    python benchmarks/opmodel_validation.py validation.json --into README.md --into docs/opmodel.md  # the tables
    python benchmarks/opmodel_validation.py validation.json --calibration OTHER.json   # score another calibration
    python benchmarks/opmodel_validation.py benchmarks/data/validation-*.json --calibration MODEL.json  # one line each
    python benchmarks/opmodel_validation.py benchmarks/data/validation-*.json \
        --calibration benchmarks/data/calibrations/one-pass-1935.json.gz   # a kept calibration (gzipped)
    python benchmarks/opmodel_validation.py benchmarks/data/validation-*.json --calibration MODEL.json --chain-per-op
    python benchmarks/opmodel_validation.py benchmarks/data/validation-*.json --reproducibility

Prints a Markdown table (pair, d, analytic / fitted / op-model / measured N0 with errors, and the gap: the
most the two variants' measured times differ at the lengths timed between the op model's and the measured N0)
and, over the rows whose measured N0 is below 8,192: how many op-model N0 are within 10 % of the measured one,
the median |error|, how often the bootstrap interval covers the measured point, how many misses have a gap of
at most 5 % (curves so close that a few per cent of error moves their crossing far); then the op model's error
on every timed point of the variants (median and worst, per variant and over all). Given several validations, it
prints one line of figures per validation and their totals (with --calibration: one model scored on every set
of measurements, so that two models are compared on the same machine states). With --reproducibility it scores
the measurements instead: each run's measured N0 predicted by the median of the other runs' measured N0 of
the same pair and d, the best a model can hope for on a machine whose state moves from run to run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docblock.py, beside this script

from docblock import check, fail, fill

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 8192
SMALL_GAP = 0.05
"""A missed N0 whose two curves stay this close between the predicted and the measured N0 costs little."""


def _n(x) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _err(x, truth) -> str:
    if x is None or not truth:
        return _n(x)
    return f"{x:,.0f} ({100 * (x - truth) / truth:+.1f} %)"


def gap(times: dict, a: str, b: str, d: int, lo: float, hi: float) -> float | None:
    """The most the measured times of a and b differ (|t_b / t_a − 1|) at the lengths both were timed at
    between lo and hi: what following a predicted N0 instead of the measured one can cost (None: no such length)."""
    ta = {n: t for n, dd, t, _ in (times.get(a) or {}).get("timings", []) if dd == d}
    tb = {n: t for n, dd, t, _ in (times.get(b) or {}).get("timings", []) if dd == d}
    apart = [abs(tb[n] / ta[n] - 1) for n in ta.keys() & tb.keys() if lo <= n <= hi]
    return max(apart) if apart else None


TARGET_N0, TARGET_GAP = 0.10, 0.05
"""The issue's target per row: the op model's N0 within 10 % of the measured one, or the two variants' measured
times at most 5 % apart between them (a miss that costs little)."""


N_MIN = 2
"""The shortest length the speed search times on a CPU: a predicted N0 there means B is cheaper throughout."""
MEASURED_STATES = {"b-cheaper-throughout": "always", "a-cheaper-throughout": "never"}
"""What a measured search verdict other than `found` says about N0; any other verdict (disturbed, inconsistent,
out-of-memory, budget) measured nothing, and its row is not judged."""


def _state(n0: float | None, verdict: str = "found") -> float | str | None:
    """A crossing as a number, 'always' (B cheaper from the shortest length), 'never' (not up to LIMIT) or None
    (not known)."""
    if verdict != "found":
        return MEASURED_STATES.get(verdict)
    if n0 is None or n0 >= LIMIT:
        return "never"
    return "always" if n0 <= N_MIN else n0


def row_verdicts(data: dict) -> list[dict]:
    """Per (pair, d): the measured and op-model N0 (a number, 'always' or 'never'), the relative error, the gap
    and whether the row meets the target: the same state, an N0 within 10 %, the two variants' measured times
    at most 5 % apart between the predicted and the measured crossing (a miss that costs little), or a predicted
    tie interval (`predicted_tie`) that holds the measured crossing and whose predicted regret is at most 5 % (a
    tie the model cannot call but whose choice costs little; a wide tie of a poor model meets nothing). A row
    whose search measured nothing (a disturbed machine) is not judged (`met` None)."""
    times = data.get("op_model_time_errors") or {}
    out = []
    for r in sorted(data["results"], key=lambda r: (r["a"], r["b"], r["d"])):
        truth = _state(r.get("measured_n0"), r.get("n0_verdict", "found"))
        guess = _state(r.get("predicted_n0"))
        error = apart = None
        if isinstance(truth, (int, float)) and isinstance(guess, (int, float)):
            error = (guess - truth) / truth
        if truth is not None and truth != guess:
            ends = [N_MIN if x == "always" else LIMIT if x == "never" else x for x in (truth, guess)]
            apart = gap(times, r["a"], r["b"], r["d"], min(ends), max(ends))
        tie = r.get("predicted_tie")
        regret = r.get("predicted_regret")
        tied = (bool(tie) and isinstance(truth, (int, float)) and tie[0] <= truth <= tie[1]
                and regret is not None and regret <= TARGET_GAP)  # fmt: skip
        if truth is None:
            met = None
        else:
            met = truth == guess or (error is not None and abs(error) <= TARGET_N0) or (
                apart is not None and apart <= TARGET_GAP
            ) or tied
        out.append({"a": r["a"], "b": r["b"], "d": r["d"], "measured": truth, "predicted": guess, "error": error,
                    "gap": apart, "met": met, "verdict": r.get("n0_verdict", "found"), "tie": tie,
                    "regret": regret, "tied": tied})  # fmt: skip
    return out


def markdown(data: dict) -> str:
    """The op model's record on a validation, as Markdown: the figures the issue judges, then one row per pair
    (its N0 per head dim: op model / measured, error) and each variant's time error on every timed point."""
    rows = row_verdicts(data)
    _, f = summarize(data)
    ds = sorted({r["d"] for r in rows})
    judged = [r for r in rows if r["met"] is not None]
    out = [
        f"{sum(r['met'] for r in judged)} of {len(judged)} rows meet the target (the same verdict, N0 within "
        f"{TARGET_N0:.0%}, the two variants' measured times at most {TARGET_GAP:.0%} apart between the predicted "
        f"and the measured crossing, or a predicted tie interval of regret at most {TARGET_GAP:.0%} holding the "
        f"measured crossing"
        f"{_ties(rows)}); {_unjudged(rows)}. "
        f"Median |N0 error| {_pct(f['median_abs_n0_error'])} over the {f['judged_rows']} rows where both cross "
        f"below {LIMIT:,}; the 95 % interval covers the measured N0 in {f['covered_rows']} of them. "
        f"Timed points: median |time error| "
        f"{_pct(f['median_abs_time_error'])}, worst {_pct(f['worst_abs_time_error'])} ({f['timed_points']:,} points).",
        "",
        "| pair | " + " | ".join(f"d = {d}" for d in ds) + " |",
        "|---|" + "---|" * len(ds),
    ]
    by_pair: dict[tuple[str, str], dict[int, dict]] = {}
    for r in rows:
        by_pair.setdefault((r["a"], r["b"]), {})[r["d"]] = r
    for (a, b), cells in by_pair.items():
        out.append(f"| {a} → {b} | " + " | ".join(_cell(cells.get(d)) for d in ds) + " |")
    per_variant = ", ".join(
        f"{v} {_pct(e['median_abs_error'])} (worst {_pct(e['max_abs_error'])})"
        for v, e in sorted(f["per_variant"].items())
    )
    out += ["", f"Median |time error| per variant over its timed points: {per_variant}."]
    return "\n".join(out) + "\n"


def _unjudged(rows: list[dict]) -> str:
    """The rows whose search placed no crossing, by its verdict: '14 rows not judged (inconsistent: 14)'."""
    verdicts = Counter(r["verdict"] for r in rows if r["met"] is None)
    if not verdicts:
        return "every row was measured"
    said = ", ".join(f"{v}: {n}" for v, n in sorted(verdicts.items()))
    return f"{sum(verdicts.values())} rows not judged, the machine too unsteady to place a crossing ({said})"


def _ties(rows: list[dict]) -> str:
    """How many rows only their tie interval meets, with the worst regret among them (empty where none)."""
    tied = [r for r in rows if r["tied"]]
    if not tied:
        return ""
    worst = max((r["regret"] or 0.0) for r in tied)
    return f": {len(tied)} rows, predicted regret at most {_pct(worst)}"


def _cell(r: dict | None) -> str:
    """One pair at one d: op-model N0 / measured N0 (error); ✗ where the row misses the target, ? where the
    search measured nothing."""
    if r is None:
        return ""
    shown = [x if isinstance(x, str) else _n(x) for x in (r["predicted"], r["measured"])]
    if r["measured"] is None:
        shown[1] = f"? ({r['verdict']})"
    error = f" ({100 * r['error']:+.0f} %)" if r["error"] is not None else ""
    tie = f" (tie {_n(r['tie'][0])}–{_n(r['tie'][1])})" if r["tied"] else ""
    return f"{shown[0]} / {shown[1]}{error}{tie}{' ✗' if r['met'] is False else ''}"


BEGIN, END = "<!-- opmodel-validation: begin -->", "<!-- opmodel-validation: end -->"
"""Markers of the generated block in a Markdown file (`--into`)."""
SOURCE = "<!-- generated by benchmarks/opmodel_validation.py from {} -->"
"""The block's first line: the validation it was written from (tests/test_docs.py checks the block against it)."""


def generated_block(source: Path, data: dict) -> str:
    """What `--into` writes between the markers for the validation `data` read from `source`."""
    return SOURCE.format(source.as_posix()) + "\n\n" + markdown(data)


def summarize(data: dict) -> tuple[list[str], dict]:
    """The table's lines and the acceptance figures."""
    lines = [
        "| pair | d | N0 analytic | N0 fit | N0 op model [95 %] | N0 measured | gap |",
        "|---|---|---|---|---|---|---|",
    ]
    times = data.get("op_model_time_errors") or {}
    errors, covered, judged, small_gaps = [], 0, 0, 0
    for r in sorted(data["results"], key=lambda r: (r["a"], r["b"], r["d"])):
        truth, guess = r.get("measured_n0"), r.get("predicted_n0")
        low, high = r.get("predicted_n0_low"), r.get("predicted_n0_high")
        span = f" [{_n(low)}–{_n(high)}]" if guess is not None else ""
        unc = f" ± {r['n0_uncertainty']:,.0f}" if r.get("n0_uncertainty") else ""
        apart = gap(times, r["a"], r["b"], r["d"], min(guess, truth), max(guess, truth)) if truth and guess else None
        lines.append(
            f"| {r['a']} → {r['b']} | {r['d']} | {_err(r.get('analytic_n0'), truth)} | "
            f"{_err(r.get('fit_n0', r.get('corrected_n0')), truth)} | {_err(guess, truth)}{span} | "
            f"{_n(truth)}{unc} | {_pct(apart)} |"
        )
        if truth is None or truth >= LIMIT or guess is None:
            continue
        judged += 1
        errors.append(abs(guess - truth) / truth)
        covered += (low is not None and low <= truth) and (high is None or truth <= high)
        small_gaps += errors[-1] > 0.10 and apart is not None and apart <= SMALL_GAP
    every = [abs(g - t) / t for v in times.values() for _, _, t, g in v["timings"]]
    figures = {
        "judged_rows": judged,
        "within_10_percent": sum(e <= 0.10 for e in errors),
        "median_abs_n0_error": statistics.median(errors) if errors else None,
        "worst_abs_n0_error": max(errors) if errors else None,
        "interval_coverage": covered / judged if judged else None,
        "covered_rows": covered,
        "misses_within_5_percent_in_time": small_gaps,
        "timed_points": len(every),
        "median_abs_time_error": statistics.median(every) if every else None,
        "worst_abs_time_error": max(every) if every else None,
        "per_variant": {
            v: {k: e[k] for k in ("points", "median_abs_error", "max_abs_error")} for v, e in times.items()
        },
    }
    return lines, figures


def per_op(model):
    """The model with its chain cost refitted per engine op rather than per dispatched ATen kernel (as fitted
    before dispatches were counted): the ablation of that choice on the same calibration."""
    from dataclasses import replace

    from attn_cost.profilers.devicemodel.calibrated.data import CALL, SEQUENCE, Chain, Point

    chains = [Point(p.kernel, {k: v for k, v in p.dims.items() if k != "dispatches"}, p.seconds, p.se)
              for p in model.points if p.kernel == SEQUENCE]  # fmt: skip
    fastest_call = min(p.seconds for p in model.points if p.kernel == CALL and not p.line)
    model.overheads = replace(model.overheads, chain=Chain.fit(chains, fastest_call))
    model.dispatches = {}
    return model


def rescore(data: dict, model) -> dict:
    """The validation with its op-model columns recomputed by another calibration's model (same measurements):
    point estimates of N0 (no bootstrap, so no interval) and the predicted time of every timed point."""
    from attn_cost.costmodel.crossover import Setting
    from attn_cost.profilers.devicemodel.calibrated.model import CalibratedDevice, predicted_seconds
    from attn_cost.profilers.devicemodel.device import crossing, row_dims
    from attn_cost.profilers.workflow.validating import timing_errors

    results = []
    for r in data["results"]:
        dims = row_dims({"d": r["d"], "h": r.get("heads", 1), "b": r.get("batch", 1)})
        point = crossing(CalibratedDevice(model), r["a"], r["b"], dims, Setting(dtype=model.dtype), replicates=0)
        results.append({**r, "predicted_n0": point.n0, "predicted_n0_low": None, "predicted_n0_high": None})
    times = {
        v: timing_errors(
            [
                [n, d, t, predicted_seconds(model, v, {"N": n, "d": d, "h": 1, "b": 1, "L": d})]
                for n, d, t, _ in e["timings"]
            ]
        )
        for v, e in (data.get("op_model_time_errors") or {}).items()
    }
    return {**data, "results": results, "op_model_time_errors": times}


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def _load(path: Path, model) -> dict:
    """A validation, rescored by `model` if one is given."""
    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.store.files import read_input

    try:
        data = json.loads(read_input(path, "a validate --json output"))
    except UserError as e:
        fail(str(e))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        fail(f"{path}: not a validate --json output ({e.__class__.__name__})")
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        fail(f"{path}: not a validate --json output (no results)")
    return rescore(data, model) if model is not None else data


def reproducibility(runs: list[dict]) -> tuple[int, int, float | None]:
    """(rows within 10 %, rows, median |error|) of each run's measured N0 (below LIMIT) against the median
    measured N0 of the same pair and d in the other runs."""
    measured = [
        {(r["a"], r["b"], r["d"]): r["measured_n0"] for r in run["results"] if 0 < (r.get("measured_n0") or 0) < LIMIT}
        for run in runs
    ]
    errors = []
    for i, rows in enumerate(measured):
        for key, truth in rows.items():
            others = [m[key] for j, m in enumerate(measured) if j != i and key in m]
            if others:
                errors.append(abs(statistics.median(others) / truth - 1))
    return sum(e <= 0.1 for e in errors), len(errors), statistics.median(errors) if errors else None


def _model(calibration: str | None, chain_per_op: bool):
    """The op model to rescore with (loaded once for every validation), or None."""
    if calibration is None:
        return None
    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.devicemodel.calibrated.data import load_opmodel

    try:
        model = load_opmodel(calibration, refit=True)  # the kept calibrations (gzipped) predate stored fits
    except UserError as e:
        fail(str(e))
    return per_op(model) if chain_per_op else model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("validation", type=Path, nargs="+", help="the output of `attn-cost validate --json`")
    parser.add_argument("--calibration", help="score this op calibration (path or device slug) instead")
    parser.add_argument("--chain-per-op", action="store_true",
                        help="with --calibration: refit its chain cost per op, not per dispatched kernel")  # fmt: skip
    parser.add_argument("--into", type=Path, action="append", default=[],
                        help="write the Markdown summary between the opmodel-validation markers of FILE")  # fmt: skip
    parser.add_argument("--reproducibility", action="store_true",
                        help="score each run's measured N0 by the other runs' median instead of a model")  # fmt: skip
    opts = parser.parse_args()
    if opts.chain_per_op and not opts.calibration:
        parser.error("--chain-per-op rescoring needs --calibration")
    if opts.reproducibility:
        if len(opts.validation) < 2 or opts.calibration:
            parser.error("--reproducibility needs two validations or more and no --calibration")
        within, rows, median = reproducibility([_load(path, None) for path in opts.validation])
        print(f"measured N0 against the other runs' median: {within} / {rows} within 10 %, median {_pct(median)}")
        return
    if opts.into:
        if len(opts.validation) != 1:
            parser.error("--into writes the summary of one validation")
        check(opts.into, BEGIN, END)
    model = _model(opts.calibration, opts.chain_per_op)
    if opts.into:
        source = opts.validation[0]
        block = generated_block(source.resolve().relative_to(ROOT) if source.resolve().is_relative_to(ROOT) else source,
                                _load(source, model))
        for path, changed in fill(dict.fromkeys(opts.into, block), BEGIN, END).items():
            print(f"{path}: {'updated' if changed else 'unchanged'}")
        return
    if len(opts.validation) == 1:
        lines, figures = summarize(_load(opts.validation[0], model))
        if opts.calibration:
            figures["interval_coverage"] = None  # rescored without the bootstrap
        print("\n".join(lines))
        print()
        print(json.dumps(figures, indent=2))
        return
    within = judged = 0
    print("validation: N0 within 10 % / rows, median N0 error, timed points' median and worst error;")
    print("  each variant's median signed time error (predicted − measured) / measured")
    for path in opts.validation:
        data = _load(path, model)
        _, f = summarize(data)
        within, judged = within + f["within_10_percent"], judged + f["judged_rows"]
        n0, tmed, tmax = (_pct(f[k]) for k in ("median_abs_n0_error", "median_abs_time_error", "worst_abs_time_error"))
        print(f"{path.name}: {f['within_10_percent']} / {f['judged_rows']}, {n0}, {tmed}, {tmax}")
        bias = {v: statistics.median((g - t) / t for _, _, t, g in e["timings"])
                for v, e in sorted((data.get("op_model_time_errors") or {}).items())}  # fmt: skip
        print("  " + ", ".join(f"{v} {100 * b:+.0f} %" for v, b in bias.items()))
    print(f"total: {within} / {judged} within 10 %")


if __name__ == "__main__":
    main()
