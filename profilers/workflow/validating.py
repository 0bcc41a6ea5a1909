"""Validating a device: fit corrections on some head dims and check them on others, analytic, corrected, op-model,
datasheet and measured transition points side by side (`validate_device`, measuring what the store lacks), or the
same from records alone, timing nothing (`validate_from_records`). `attn-cost validate` and the campaign's
validation call them.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import BY_NAME
from attn_cost.costmodel.variants import all_variants
from attn_cost.profilers.devicemodel.calibrated.data import OpModel, check_device, load_opmodel, opmodel_for
from attn_cost.profilers.devicemodel.calibrated.fit import (
    Calibrator,
    cache_sizes,
    glue_points,
    missing_lines,
    time_lines,
)
from attn_cost.profilers.devicemodel.calibrated.model import predicted_seconds
from attn_cost.profilers.devicemodel.datasheet.data import for_device
from attn_cost.profilers.devicemodel.device import CALIBRATED, DATASHEET, Prediction, crossing, row_dims
from attn_cost.profilers.devicemodel.kinds import model_of
from attn_cost.profilers.devicemodel.measured.data import DeviceProfile, device_peak
from attn_cost.profilers.devicemodel.measured.fit import fit_memory, fit_time
from attn_cost.profilers.devicemodel.measured.model import corrected_points
from attn_cost.profilers.devicemodel.trend import spikes
from attn_cost.profilers.measure.machine import slug as slug_of
from attn_cost.profilers.measure.profile import Measurer, Stored, length_grain, profile_pair, snap, stored_pair
from attn_cost.profilers.measure.references import REFERENCES
from attn_cost.profilers.measure.search import replicate_interval
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.measure.standing import judge
from attn_cost.profilers.store.files import parse_json, read_input, text_of
from attn_cost.profilers.store.store import ResultStore, open_database, read_jsonl, select, shipped_records
from attn_cost.profilers.workflow.measuring import Events, longest

SWEEP = [2 ** (k / 2) for k in range(-6, 4)]
"""Lengths timed for a fit, as multiples of the transition point: N*/8 ... 2.8·N*."""


def catalogue_pairs() -> list[tuple[str, str]]:
    """Every registered variant with a reference implementation at core scope, against softmax of its own
    causality and against its family's alternative (the next variant of the same family and causality, in
    registration order): what `validate --catalogue` checks. Layer-only variants have no core to time."""
    timed = [v for v in all_variants() if (ref := REFERENCES.get(v.name)) is not None and ref.core is not None]
    pairs: list[tuple[str, str]] = []

    def add(a: str, b: str) -> None:
        if a != b and (a, b) not in pairs and (b, a) not in pairs:
            pairs.append((a, b))

    names = {v.name for v in timed}
    for v in timed:
        baseline = "softmax-causal" if v.causal else "softmax"
        if baseline in names:
            add(baseline, v.name)
    groups: dict[tuple[str, bool], list[str]] = defaultdict(list)
    for v in timed:
        groups[(v.family, v.causal)].append(v.name)
    for members in groups.values():
        for a, b in itertools.pairwise(members):
            add(a, b)
    return pairs


def sweep_lengths(center: float, n_max: int) -> list[int]:
    return sorted({min(n_max, max(8, round(center * f))) for f in SWEEP})


def fit_profile(
    measurer: Measurer, variants: list[str], fit_d: list[int], template: Sizes, notes: list[str] | None = None
) -> DeviceProfile:
    """Fit every variant on the stored measurements at the fit head dims (and the template's h, b, L). With `notes`,
    a variant with too few measurements to fit is left out of the profile with a line there, else it is an error."""
    time_samples: dict[str, list] = {v: [] for v in variants}
    memory_samples: dict[str, list] = {v: [] for v in variants}
    for rec in measurer.store.records.values():
        s = rec.get("sizes", {})
        if rec["variant"] not in time_samples or rec["status"] != "ok":
            continue
        if (rec["scope"], rec["dtype"]) != (measurer.scope, measurer.dtype) or s.get("d") not in fit_d:
            continue
        if (s.get("h"), s.get("b")) != (template.h, template.b) or (template.L and s.get("L") != template.L):
            continue
        if rec["kind"] == "time":
            time_samples[rec["variant"]].append((s, rec["time"]["median"]))
        else:
            memory_samples[rec["variant"]].append((s, rec["memory"]["peak_bytes"]))
    device = measurer.store.device
    profile = DeviceProfile(device, measurer.scope, measurer.dtype)
    peak = device_peak(device, measurer.dtype)
    for v in variants:
        try:
            profile.time[v] = fit_time(time_samples[v], v, measurer.scope, measurer.dtype, peak)
            profile.memory[v] = fit_memory(memory_samples[v], v, measurer.scope, measurer.dtype)
        except UserError as e:
            if notes is None:
                raise
            profile.time.pop(v, None)
            notes.append(f"{v} not fitted: {e}")
    return profile


def validate(
    pairs: list[tuple[str, str]],
    check_d: list[int],
    fit_d: list[int],
    template: Sizes,
    measurer: Measurer,
    setting: Setting,
    *,
    n_max: int = 16384,
    max_lengths: int = 15,
    existing: DeviceProfile | None = None,
    opmodel: OpModel | None = None,
    replicates: int = 4,
) -> tuple[DeviceProfile, list[dict]]:
    """Measure (reusing the store), fit on `fit_d` (or use an `existing` profile of this same
    device, to check it without refitting), and compare on every head dim. With an `calibrated.data` (fitted
    on op timings only, never on these variants: zero-shot), add its N0 with a bootstrap interval.
    `replicates`: re-timings of each found crossover's bracket (`profile_pair`)."""
    if existing is not None and existing.slug != measurer.store.slug:
        raise UserError(
            f"device profile {existing.slug} was fitted on {existing.device.get('name')} "
            f"(torch {existing.device.get('torch')}); this is {measurer.store.slug}: "
            "fit one here with `attn-cost validate`"
        )
    measured = {}
    for a, b in pairs:
        for dv in sorted(set(fit_d) | set(check_d)):
            sizes = replace(template, N=1, d=dv)
            measured[(a, b, dv)] = profile_pair(  # the whole range scanned: "always" and "never" measured
                a, b, sizes, measurer, setting, max_lengths=max_lengths, n_max=n_max, replicates=replicates, scan=True
            )
    for a, b in pairs:
        for dv in fit_d if existing is None else []:
            p = measured[(a, b, dv)]
            center = (p.speed.measured if p.speed else None) or p.analytic_n0 or 256
            grain = length_grain(measurer.device)  # the lengths the search probes
            for n in sorted({snap(n, grain) for n in sweep_lengths(center, n_max)}):
                measurer.time([a, b], replace(template, N=n, d=dv))
            for n in sweep_lengths(p.analytic_n1 or 256, n_max)[::3]:
                measurer.memory(a, replace(template, N=n, d=dv))
                measurer.memory(b, replace(template, N=n, d=dv))
    variants = sorted({v for pair in pairs for v in pair})
    recheck_spikes(measurer, variants, sorted(set(fit_d) | set(check_d)), template)
    profile = existing or fit_profile(measurer, variants, fit_d, template)
    missing = [v for v in variants if v not in profile.time]
    if missing:
        raise UserError(f"device profile {profile.slug} has no fit for {', '.join(missing)}")
    rows = compare(measured, profile, template, measurer, setting, n_max, opmodel)
    return profile, rows


def validate_records(
    pairs: list[tuple[str, str]],
    check_d: list[int],
    fit_d: list[int],
    template: Sizes,
    measurer: Measurer,
    setting: Setting,
    *,
    n_max: int = 16384,
    existing: DeviceProfile | None = None,
    opmodel: OpModel | None = None,
    replicates: int = 4,
    runs: list[dict] | None = None,
    made: str = "",
) -> tuple[DeviceProfile, list[dict], list[str]]:
    """`validate` from the records in the measurer's store alone, timing nothing: on any machine, after a GPU run
    (its exported measurements imported or read from the file). Each unit's transitions are read from its stored
    timings and replicates (`profile.stored_pair`), the fit uses the stored timings, and every unit is judged
    (`standing.judge`). `runs`: campaign summaries of these records; then the units are those they measured (a unit
    they cut off is left out) and rule 3 compares their verdicts. Returns the profile (`made` says how it was made),
    its rows, and a line for each unit or variant left out."""
    if existing is not None and existing.slug != measurer.store.slug:
        raise UserError(f"device profile {existing.slug} is of another device than the records ({measurer.store.slug})")
    stored = Stored(measurer.store)
    notes: list[str] = []
    by_unit = _run_rows(runs or [], measurer.dtype, template)
    measured = {}
    for a, b in pairs:
        for dv in sorted(set(fit_d) | set(check_d)):
            if runs and (a, b, dv) not in by_unit:
                continue
            p = stored_pair(a, b, replace(template, N=1, d=dv), measurer, setting, stored, replicates)
            if p is None:
                notes.append(f"{a} vs {b} at d = {dv}: no stored timings of both; left out")
                continue
            measured[(a, b, dv)] = p
    if runs:
        left = sorted({u for u in by_unit if u not in measured and u[:2] in pairs})
        notes += [f"{a} vs {b} at d = {dv}: in the runs but not in these records; left out" for a, b, dv in left]
    variants = sorted({v for a, b, _ in measured for v in (a, b)})
    profile = existing or fit_profile(measurer, variants, fit_d, template, notes)
    rows = compare(measured, profile, template, measurer, setting, n_max, opmodel)
    for row in rows:
        row.update(judged(row, stored, measurer, template, by_unit.get((row["a"], row["b"], row["d"]), [])))
    profile.measured = [_measured_row(r, template) for r in rows]
    profile.made = made
    return profile, rows, notes


def refit(
    records: Path | None,
    device: str | None,
    pairs: list[tuple[str, str]],
    check_d: list[int],
    fit_d: list[int],
    template: Sizes,
    setting: Setting,
    *,
    store: Path | None = None,
    summaries: Sequence[Path] = (),
    n_max: int | None = None,
    replicates: int = 4,
    made: str = "",
) -> tuple[DeviceProfile, list[dict], list[str]]:
    """Fit and validate a device from its records alone, timing nothing, on any machine (`validate --records FILE`
    or `--from-store`): the records of `device` (a slug; default: the only device in the file) in the results file
    `records`, or with `records` None in the store (`store`, default the user's) and the shipped measurements;
    `summaries`: the campaign summaries of those records (`validate_records`: their units are the ones judged)."""
    measurer = records_measurer(records, device, store, setting.scope, setting.dtype)
    runs = [read_summary(path) for path in summaries]
    n_max = longest(measurer.device, n_max)
    return validate_records(
        pairs, check_d, fit_d, template, measurer, setting, n_max=n_max, replicates=replicates, runs=runs, made=made
    )


def records_measurer(records: Path | None, device: str | None, store: Path | None, scope: str, dtype: str) -> Measurer:
    """A measurer over a device's stored records that never times (`validate_records` only reads through it): the
    records of `device` in the file `records` alone, or with `records` None those in the store and shipped."""
    if records is not None:
        found, problems = read_jsonl(records)
        by_device: dict[str, list] = defaultdict(list)
        for r in found:
            by_device[r.device].append(r)
        if not by_device:
            raise UserError(
                f"{records} holds no measurements" + (f" ({problems.warnings()[0]})" if problems.lines else "")
            )
        if device is None and len(by_device) > 1:
            raise UserError(f"{records} holds records of {len(by_device)} devices: give --device (one of "
                            f"{', '.join(sorted(by_device))})")  # fmt: skip
        slug_ = device or next(iter(by_device))
        if slug_ not in by_device and slug_.endswith(f"-{dtype}"):  # a profile's name: the slug and its dtype
            slug_ = slug_.removesuffix(f"-{dtype}")
        if slug_ not in by_device:
            raise UserError(f"{records} holds no records of {slug_} (it holds {', '.join(sorted(by_device))})")
        mine = by_device[slug_]
        results = ResultStore.of_records(mine[-1].data["device"], {r.key: r.data for r in mine})
    else:
        if device is None:
            raise UserError("--from-store reads one device's records: give --device (see `attn-cost results ls`)")
        fingerprint = _fingerprint(device.removesuffix(f"-{dtype}") if dtype != "fp32" else device, store)
        results = ResultStore(fingerprint, store, writable=False)
    return Measurer(results.device["kind"], results, scope=scope, dtype=dtype)


def _fingerprint(device: str, store: Path | None) -> dict:
    """The fingerprint of a device whose records are in the store or shipped, by its slug."""
    shipped, _ = shipped_records(device)
    if shipped:
        return next(reversed(shipped.values()))["device"]
    db = open_database(store, writable=False)
    rows = select(db, {"device": device})
    if not rows or slug_of(rows[-1][1]["device"]) != device:
        raise UserError(f"no records of the device {device} in {db.path} or shipped (see `attn-cost results ls`)")
    return rows[-1][1]["device"]


def read_summary(path: Path) -> dict:
    """A campaign's summary.json, read (one line if it is not one)."""
    try:
        data = parse_json(text_of(read_input(path, "a campaign summary"), path, "a campaign summary"))
    except (ValueError, RecursionError) as e:  # not JSON, a key given twice, a huge integer
        raise UserError(f"{path} is not a readable campaign summary ({e.__class__.__name__})") from None
    if not isinstance(data, dict) or data.get("kind") != "attn-cost campaign summary":
        raise UserError(f"{path} is not an attn-cost campaign summary")
    return data


MEASURED_KEYS = (
    "a", "b", "d", "heads", "batch", "measured_n0", "n0_uncertainty", "measured_n1", "n1_uncertainty", "n0_verdict",
    "n0_note", "n0_replicates", "n0_bracket", "n0_lengths", "n0_earlier", "n0_standing", "n0_launch_bound",
    "n0_tie", "n0_regret", "n0_range", "n1_verdict",
)  # fmt: skip
"""What a profile keeps of each measured unit (`crossover --device` shows them)."""


TIE_KEYS = ("n0_tie", "n0_regret", "n0_range")
"""What a tie adds to a measured row (`search.tie_of`); a row of another verdict is kept without them."""


def _measured_row(row: dict, template: Sizes) -> dict:
    """What a profile keeps of a measured unit: `MEASURED_KEYS`, and each size of the `template` it was measured at
    besides N, d, h and b that is not the default a unit naming none is read at (`device.measured_at`: L = d, the
    chunk 64, ...), so that a unit measured at --chunk 128 is shown under --chunk 128 only."""
    default = row_dims({"d": row["d"]})
    taken = replace(template, d=row["d"]).as_dict()
    sizes = {k: v for k, v in taken.items() if k not in ("N", "d", "h", "b") and default.get(BY_NAME[k]) != v}
    kept = (k for k in MEASURED_KEYS if k in row and (k not in TIE_KEYS or row.get("n0_verdict") == "tie"))
    out = {**{k: row[k] for k in kept}, **sizes}
    if row.get("n0_verdict") == "unsteady" and row.get("n0_replicates"):  # the crossings' median, marked not standing
        out["measured_n0"], out["n0_uncertainty"] = _centre(row["n0_replicates"], row.get("n0_bracket"))
    return out


def _centre(crossings: list[float], bracket: list[int] | None) -> tuple[float, float | None]:
    """The median of crossings that disagree, and its interval for one more run (none from one crossing)."""
    if len(crossings) < 2:
        return round(crossings[0], 1), None
    floor = (bracket[1] - bracket[0]) / 2 if bracket else 0.0
    centre, half = replicate_interval(crossings, floor=floor)
    return round(centre, 1), round(half, 1)


def _run_rows(runs: list[dict], dtype: str, template: Sizes) -> dict[tuple[str, str, int], list[list[dict]]]:
    """Per unit (a, b, d) at this dtype and the template's shape, its rows in each campaign summary (the profile
    step's and the validation's), one list per run."""
    out: dict[tuple[str, str, int], list[list[dict]]] = defaultdict(list)
    for summary in runs:
        rows = [*summary.get("transitions", []), *({**r, "dtype": dt} for dt, rs in
                                                    summary.get("validation", {}).items() for r in rs)]  # fmt: skip
        mine: dict[tuple[str, str, int], list[dict]] = defaultdict(list)
        for r in rows:
            if r.get("dtype") == dtype and (r.get("heads"), r.get("batch")) == (template.h, template.b):
                mine[(r["a"], r["b"], r["d"])].append(r)
        for unit, unit_rows in mine.items():
            out[unit].append(unit_rows)
    return out


def judged(row: dict, stored: Stored, measurer: Measurer, template: Sizes, runs: list[list[dict]]) -> dict:
    """`standing.judge` of one unit's row with its stored times."""
    sizes = replace(template, N=1, d=row["d"])
    times_at: dict[tuple[str, int], list[float]] = {}
    for v in (row["a"], row["b"]):
        for n in stored.at(measurer, "time", v, row["d"]):
            key = measurer.key("time", v, replace(sizes, N=n))
            got = [stored.by_key.get(key), *(stored.by_key.get(f"{key}|replicate={k}") for k in range(1, 9))]
            times_at[(v, n)] = [r["time"]["median"] for r in got if r is not None and r["status"] == "ok" and r["time"]]

    version = measurer.store.device.get("timer_version") if measurer.device == "cuda" else None
    timed = lambda v: stored.at(measurer, "time", v, row["d"])  # noqa: E731
    return judge(row, lambda v, n: times_at.get((v, n), []), timed, version, runs)


def compare(
    measured: dict, profile: DeviceProfile, template: Sizes, measurer: Measurer, setting: Setting, n_max: int,
    opmodel: OpModel | None,
) -> list[dict]:  # fmt: skip
    """The validation's rows: each unit's measured points beside the analytic, corrected (the profile), op-model and
    datasheet predictions, with their errors; the profile's measured rows set from them."""
    rows = []
    for (a, b, dv), p in measured.items():
        if opmodel is not None:  # a prediction takes seconds: a caller's time budget is checked before each
            measurer.notify(f"  op-model prediction of {a} vs {b} at d = {dv}")
        dims = replace(template, N=1, d=dv).symbols()
        fitted_on = profile.time[a].fit_d if a in profile.time else []
        row = {**p.as_json(), "held_out": dv not in fitted_on}
        row["corrected_n0"], row["corrected_n1"] = corrected_points(profile, a, b, dims, setting)
        row.update(_predicted(opmodel, a, b, dims, setting, n_max))
        row.update(_datasheet(measurer.store.device, a, b, dims, setting, n_max))
        for k in ("0", "1"):
            truth = row[f"measured_n{k}"]
            kinds = ["analytic", "corrected"] + (["predicted", "datasheet"] if k == "0" else [])
            for kind in (kind for kind in kinds if f"{kind}_n{k}" in row):
                guess = row[f"{kind}_n{k}"]
                row[f"{kind}_n{k}_error"] = None if truth in (None, 0) or guess is None else (guess - truth) / truth
        rows.append({k: v for k, v in row.items() if k not in ("speed", "memory")})
    profile.measured = [_measured_row(r, template) for r in rows]
    profile.validation = rows
    return rows


def _predicted(opmodel: OpModel | None, a: str, b: str, dims: dict, setting: Setting, n_max: int) -> dict:
    if opmodel is None or setting.dtype != opmodel.dtype:
        return Prediction(None, None, None, 0).as_json()
    return {**crossing(model_of(CALIBRATED, opmodel), a, b, dims, setting, n_max=n_max).as_json(),
            "predicted_by": CALIBRATED}


def _datasheet(device: dict, a: str, b: str, dims: dict, setting: Setting, n_max: int) -> dict:
    """The datasheet model's N0 for this GPU, where it has a datasheet (`devicemodel.datasheet.data`): predicted
    from the datasheet and published measurements, never fitted on this device's, beside what was measured."""
    sheet = for_device(device.get("name", "")) if device.get("kind") == "cuda" else None
    if sheet is None:
        return {}
    p = crossing(model_of(DATASHEET, sheet), a, b, dims, setting, n_max=n_max)
    return {"datasheet": sheet.name, "datasheet_n0": p.n0, "datasheet_n0_low": p.low, "datasheet_n0_high": p.high}


def _timings(measurer: Measurer, variants: list[str], ds: list[int], template: Sizes) -> Iterator[dict]:
    """Every stored timing of `variants` at head dims `ds` and the template's h, b, L (this thread count)."""
    for rec in measurer.store.records.values():
        s = rec.get("sizes", {})
        if rec["kind"] != "time" or rec["status"] != "ok" or rec["variant"] not in variants:
            continue
        if rec["device"].get("threads") != measurer.store.device.get("threads"):
            continue
        if (rec["scope"], rec["dtype"]) != (measurer.scope, measurer.dtype) or s.get("d") not in ds:
            continue
        if (s.get("h"), s.get("b")) != (template.h, template.b) or s.get("L") != (template.L or s.get("d")):
            continue
        yield rec


RECHECK_PASSES = 2
"""How many times `recheck_spikes` looks for timings off their trend: a slow spell can outlast the first re-timing."""


def recheck_spikes(measurer: Measurer, variants: list[str], ds: list[int], template: Sizes) -> int:
    """Time again every stored timing of `variants` that its neighbours along N (same variant and head dim)
    do not explain (`calibrated.data.off_trend`), keeping the faster, in up to `RECHECK_PASSES` passes; returns how
    many timings it took. The pairs' timings alternate the two variants, so a slow spell leaves their ratio
    (and N0) alone, but not each variant's time."""
    again = 0
    for _ in range(RECHECK_PASSES):
        series: dict[tuple[str, int], list[tuple[int, float, tuple]]] = defaultdict(list)
        confirmed = set()  # taken again RECHECK_PASSES times already (by an earlier run): off the trend for real
        for rec in _timings(measurer, variants, ds, template):
            v, s = rec["variant"], rec["sizes"]
            series[(v, s["d"])].append((s["N"], rec["time"]["median"], (v, s["d"], s["N"])))
            if rec.get("retimed", 0) >= RECHECK_PASSES:
                confirmed.add((v, s["d"], s["N"]))
        suspects = [x for x in spikes(series) if x not in confirmed]
        for variant, d, n in suspects:
            measurer.time_again(variant, replace(template, N=n, d=d))
        again += len(suspects)
        if not suspects:
            break
    return again


def time_errors(opmodel: OpModel, measurer: Measurer, variants: list[str], ds: list[int], template: Sizes) -> dict:
    """The op model's error on every stored timing of `variants` at head dims `ds` (the template's h, b, L):
    per variant the points, median and worst |error|, and each point (N, d, measured s, predicted s)."""
    points: dict[str, list[list[float]]] = {v: [] for v in variants}
    for rec in _timings(measurer, variants, ds, template):
        s = rec["sizes"]
        guess = predicted_seconds(opmodel, rec["variant"], s, measurer.scope, measurer.dtype)
        points[rec["variant"]].append([s["N"], s["d"], rec["time"]["median"], guess])
    return {v: timing_errors(pts) for v, pts in points.items() if pts}


def timing_errors(pts: list[list[float]]) -> dict:
    """Points (N, d, measured s, predicted s): their count, median and worst |relative error|, and the points."""
    err = [abs(g - t) / t for _, _, t, g in pts]
    return {"points": len(pts), "median_abs_error": statistics.median(err), "max_abs_error": max(err),
            "timings": sorted(pts)}  # fmt: skip


@dataclass
class Validated:
    """A validation's result: the device profile (fitted, or the existing one checked), one row per unit, and what
    else it found."""

    profile: DeviceProfile
    rows: list[dict]
    opmodel: OpModel | None = None
    """The op model whose zero-shot N0 the rows carry (None: no op calibration of this device)."""
    errors: dict = field(default_factory=dict)
    """The op model's error on every timed point, per variant (`time_errors`)."""
    notes: list[str] = field(default_factory=list)
    """A line for each unit or variant left out (a validation from records)."""
    path: Path | None = None
    """Where the profile was saved (None: not saved)."""


def calibration_of(name: str | None, device: dict, events: Events) -> OpModel | None:
    """The op model a validation checks: the one named (which must be of this device), else this device's own
    calibration where it has one (one of another setting is left out, with a warning)."""
    if name is not None:
        named = load_opmodel(name)
        check_device(named, device)
        return named
    model = opmodel_for(slug_of(device))
    if model is None:
        return None
    try:
        check_device(model, device)
    except UserError as e:
        events.warn(f"{e}; op-model columns left empty")
        return None
    return model


def complete_lines(opmodel: OpModel, measurer: Measurer, variants: list[str], ds: list[int], events: Events) -> OpModel:
    """The op model with the exact-shape lines it lacks for these variants at these head dims, timed now on this
    device (into its result store: a rerun reuses them), with a progress line; unchanged where it lacks none."""
    calibrator = Calibrator(measurer.store, measurer.device, opmodel.dtype, measurer.repeats)
    todo = missing_lines(opmodel, variants, sorted(set(ds)), cache_sizes(measurer.device), calibrator.rates)
    if not todo:
        return opmodel
    d_text = ", ".join(map(str, sorted(set(ds))))
    events.say(f"Timing {len(todo):,} exact shapes of ops the op calibration {opmodel.slug} lacks (d = {d_text}).")

    def step(message: str, done: int, total: int) -> None:
        measurer.notify(f"exact shapes {done:,}/{total:,}: {message}")

    points = time_lines(calibrator, todo, step)
    points += glue_points(calibrator, variants, [{"d": d} for d in sorted(set(ds))], step)
    return opmodel.with_lines(points)


def validate_device(
    measurer: Measurer,
    pairs: list[tuple[str, str]],
    check_d: list[int],
    fit_d: list[int],
    template: Sizes,
    setting: Setting,
    *,
    n_max: int | None = None,
    max_lengths: int = 15,
    replicates: int = 4,
    existing: DeviceProfile | None = None,
    opmodel: OpModel | None = None,
    exact: bool = False,
    op_errors: bool = True,
    save_to: Path | None = None,
    events: Events | None = None,
) -> Validated:
    """Measure what the store lacks, fit on `fit_d` (or check an `existing` profile of this device) and compare on
    every head dim (`validate`). With an `calibrated.data`: `exact` times the exact shapes of ops it lacks at these head
    dims first (`complete_lines`), `op_errors` adds its error on every timed point. `save_to`: the folder the fitted
    profile is saved in (None: not saved; an existing profile is never saved again)."""
    events = events or Events()
    variants = sorted({v for pair in pairs for v in pair})
    if opmodel is not None and exact:
        opmodel = complete_lines(opmodel, measurer, variants, check_d + fit_d, events)
    profile, rows = validate(
        pairs, check_d, fit_d, template, measurer, setting, n_max=longest(measurer.device, n_max),
        max_lengths=max_lengths, existing=existing, opmodel=opmodel, replicates=replicates,
    )  # fmt: skip
    errors = {}
    if opmodel is not None and op_errors:
        errors = time_errors(opmodel, measurer, variants, sorted(set(check_d + fit_d)), template)
    path = profile.save(save_to) if save_to is not None and existing is None else None
    return Validated(profile, rows, opmodel, errors, path=path)


def validate_from_records(
    records: Path | None,
    device: str | None,
    pairs: list[tuple[str, str]],
    check_d: list[int],
    fit_d: list[int],
    template: Sizes,
    setting: Setting,
    *,
    store: Path | None = None,
    summaries: Sequence[Path] = (),
    n_max: int | None = None,
    save_to: Path | None = None,
) -> Validated:
    """Fit and validate a device from its records alone, timing nothing (`refit`: the results file `records`, or
    with `records` None the store's and the shipped records of `device`), each unit judged; `save_to`: the folder
    the profile is saved in (None: not saved). The profile says how it was made."""
    source = f"--records {records}" if records is not None else f"--from-store --device {device}"
    made = f"attn-cost validate {source}: fitted and validated from stored records alone, nothing timed"
    profile, rows, notes = refit(records, device, pairs, check_d, fit_d, template, setting, store=store,
                                 summaries=summaries, n_max=n_max, made=made)  # fmt: skip
    path = profile.save(save_to) if save_to is not None else None
    return Validated(profile, rows, notes=notes, path=path)
