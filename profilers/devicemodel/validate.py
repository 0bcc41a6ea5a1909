"""Fit corrections on some head dims and check them on others: analytic, corrected and measured side by side."""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace

from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.variants import all_variants, derive
from attn_cost.profilers.devicemodel import gpumodel
from attn_cost.profilers.devicemodel.corrections import DeviceProfile, corrected_points, fit_memory, fit_time
from attn_cost.profilers.devicemodel.datasheet import for_device
from attn_cost.profilers.devicemodel.opmodel import OpModel
from attn_cost.profilers.devicemodel.oppredict import Prediction, predict_n0, predicted_seconds
from attn_cost.profilers.devicemodel.trend import spikes
from attn_cost.profilers.measure.profile import Measurer, length_grain, profile_pair, snap
from attn_cost.profilers.measure.reference import REFERENCES
from attn_cost.profilers.measure.sizes import Sizes

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


def fit_profile(measurer: Measurer, variants: list[str], fit_d: list[int], template: Sizes) -> DeviceProfile:
    """Fit every variant on the stored measurements at the fit head dims (and the template's h, b, L)."""
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
            sizes = Sizes(**{k: s[k] for k in ("N", "d", "h", "b", "L", "r", "D")})
            modelled = int(derive(rec["variant"], measurer.scope).peak(measurer.dtype).at(sizes.symbols())[0])
            memory_samples[rec["variant"]].append((modelled, rec["memory"]["peak_bytes"]))
    profile = DeviceProfile(measurer.store.device, measurer.scope, measurer.dtype)
    for v in variants:
        profile.time[v] = fit_time(time_samples[v], v, measurer.scope, measurer.dtype)
        profile.memory[v] = fit_memory(memory_samples[v])
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
    device, to check it without refitting), and compare on every head dim. With an `opmodel` (fitted
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
    rows = []
    for (a, b, dv), p in measured.items():
        if opmodel is not None:  # a prediction takes seconds: a caller's time budget is checked before each
            measurer.notify(f"  op-model prediction of {a} vs {b} at d = {dv}")
        dims = replace(template, N=1, d=dv).symbols()
        fitted_on = profile.time[a].fit_d
        row = {**p.as_json(), "held_out": dv not in fitted_on}
        row["corrected_n0"], row["corrected_n1"] = corrected_points(profile, a, b, dims, setting)
        row["fit_n0"], row["fit_n1"] = row["corrected_n0"], row["corrected_n1"]
        row.update(_predicted(opmodel, a, b, dims, setting, n_max))
        row.update(_datasheet(measurer.store.device, a, b, dims, setting, n_max))
        for k in ("0", "1"):
            truth = row[f"measured_n{k}"]
            kinds = ["analytic", "corrected", "fit"] + (["predicted", "datasheet"] if k == "0" else [])
            for kind in (kind for kind in kinds if f"{kind}_n{k}" in row):
                guess = row[f"{kind}_n{k}"]
                row[f"{kind}_n{k}_error"] = None if truth in (None, 0) or guess is None else (guess - truth) / truth
        rows.append({k: v for k, v in row.items() if k not in ("speed", "memory")})
    profile.measured = [
        {
            k: r[k]
            for k in ("a", "b", "d", "heads", "batch", "measured_n0", "n0_uncertainty", "measured_n1", "n1_uncertainty")
        }
        for r in rows
    ]
    profile.validation = rows
    return profile, rows


def _predicted(opmodel: OpModel | None, a: str, b: str, dims: dict, setting: Setting, n_max: int) -> dict:
    if opmodel is None or setting.dtype != opmodel.dtype:
        return Prediction(None, None, None, 0).as_json()
    return predict_n0(opmodel, a, b, dims, setting.scope, setting.dtype, n_max=n_max).as_json()


def _datasheet(device: dict, a: str, b: str, dims: dict, setting: Setting, n_max: int) -> dict:
    """The datasheet model's N0 for this GPU, where it has a datasheet (`profilers.devicemodel.datasheet`): predicted
    from the datasheet and published measurements, never fitted on this device's, beside what was measured."""
    sheet = for_device(device.get("name", "")) if device.get("kind") == "cuda" else None
    if sheet is None:
        return {}
    eff, sigma, _ = gpumodel.fitted()
    model = gpumodel.GpuModel(sheet, eff, sigma)
    p = gpumodel.predict_n0(model, a, b, dims, setting.scope, setting.dtype, setting.mode, n_max)
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
    do not explain (`opmodel.off_trend`), keeping the faster, in up to `RECHECK_PASSES` passes; returns how
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
