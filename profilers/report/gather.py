"""The report's data: everything the engine derives and the profiler measured, as JSON-ready data, built by the
same functions as the terminal commands (`transition_row` is what `crossover --json` prints). `attn-cost report`
and the campaign both call `gather`; `page.render` turns it into one offline page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from attn_cost.costmodel.claims import claims
from attn_cost.costmodel.crossover import (
    COSTS,
    Setting,
    at_sizes,
    cost_branches,
    depends_on,
    evaluate,
    transition_row,
)
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.formula import formula_data
from attn_cost.costmodel.heads import heads as head_tradeoff
from attn_cost.costmodel.symbols import DEFAULT_DEPTH, DEFAULTS, D, L, b, d, h, r, with_defaults
from attn_cost.costmodel.variants import get_variant
from attn_cost.profilers.devicemodel.columns import add_device_columns
from attn_cost.profilers.devicemodel.datasheet.data import for_device
from attn_cost.profilers.devicemodel.datasheet.model import GpuModel
from attn_cost.profilers.devicemodel.device import DeviceModel, measured_at, row_dims
from attn_cost.profilers.devicemodel.measured.data import DeviceProfile, load_profile, measured_here, measured_point
from attn_cost.profilers.devicemodel.measured.model import MeasuredDevice
from attn_cost.profilers.devicemodel.names import known_profiles
from attn_cost.profilers.measure.standing import shown_n0
from attn_cost.profilers.store.store import ResultStore


def report_dims(dv: int) -> dict:
    """The report's sizes at head dim `dv`: one head, batch 1, Latte's L = d, an encoder of the default depth, the
    variant-specific sizes (window, chunk, ...) at their defaults."""
    return with_defaults({d: dv, h: 1, b: 1, L: dv, r: 4, D: DEFAULT_DEPTH})


def length_grid(top: int, points: int = 64) -> list[int]:
    """Geometric sequence lengths from 8 to `top`."""
    return sorted({round(8 * (top / 8) ** (i / (points - 1))) for i in range(points)})


def gather(
    variants: list[str],
    pairs: list[tuple[str, str]],
    ds: list[int],
    embed: int,
    n_heads: int,
    model: DeviceModel | None,
    setting: Setting,
) -> dict:
    """All the report's numbers, JSON-ready; `model`: the device the caller resolved (`kinds.resolve`), or None."""
    measured = model if isinstance(model, MeasuredDevice) else None
    dims = {dv: report_dims(dv) for dv in ds}
    rows = [transition_row(a, bb, dims[dv], setting, (L,)) for a, bb in pairs for dv in ds]
    if model is not None:
        add_device_columns(rows, model)
    predictor = model if measured is None else None  # a measured device's times are its measured points
    ends = [n for row in rows for n in (row.n0, row.n1)]
    ends += [row.device.predicted_n0 for row in rows if predictor is not None and row.device]
    top = max([4096] + [4 * (n or 0) for n in ends])
    grid = length_grid(min(top, 1 << 20))
    curves = {
        str(dv): {
            v: {
                c: [float(evaluate(at_sizes(cost_branches(v, c, setting), dims[dv], v), n)) for n in grid]
                for c in COSTS
            }
            for v in variants
        }
        for dv in ds
    }
    d_grid = [4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    versus_d = [{"a": a, "b": bb, "d": d_grid, **_versus_d(a, bb, d_grid, setting, model)} for a, bb in pairs]
    head_rows = [
        {
            "variant": v,
            "cost": c,
            "table": [{"h": hv, "d": dv, "value": val} for hv, dv, val in res.table],
            "best_h": res.best_h,
        }
        for v in variants
        if "core" in _scopes(v)
        for c in ("flops", "memory")
        for res in [
            head_tradeoff(
                v,
                c,
                embed,
                n=n_heads,
                convention=setting.convention,
                dtype=setting.dtype,
                counting=setting.counting,
                extra=dict(DEFAULTS),
            )
        ]
    ]
    return {
        "setting": setting.as_json(),
        "variants": variants,
        "pairs": [list(p) for p in pairs],
        "d": ds,
        "grid": grid,
        "curves": curves,
        "transitions": [row.as_json() for row in rows],
        "versus_d": versus_d,
        "heads": {"d_embed": embed, "n": n_heads, "results": head_rows},
        "formulas": {
            v: formula_data(v, setting.convention, setting.dtype, setting.scope, setting.mode, setting.counting)
            for v in variants
        },
        "measured": _measured(measured, variants, ds, setting) if measured else {},
        "predicted": _predicted(predictor, variants, {str(dv): dims[dv] for dv in ds}, grid, setting),
        "twins": _twins(model, variants, pairs, setting) if isinstance(model, GpuModel) else [],
        "devices": [] if model is not None and measured is None else _devices(measured),
        "datasheet": _datasheet(model),
        "device": {"name": model.name, "kind": model.kind, "answered_by": model.answered_by} if model else None,
        "claims": claims(),
    }


def _scopes(variant: str) -> list[str]:

    return get_variant(variant).scopes


def _datasheet(model: DeviceModel | None) -> dict | None:
    """A datasheet GPU chosen as the report's device: its name and what its predictions are (None otherwise)."""
    if not isinstance(model, GpuModel):
        return None
    return {"name": model.name, "title": model.sheet.title, "about": f"N0 datasheet: {model.answered_by}."}


def _versus_d(a: str, bb: str, d_grid: list[int], setting: Setting, device: DeviceModel | None) -> dict:
    rows = [transition_row(a, bb, report_dims(dv), setting, (L,)) for dv in d_grid]
    out: dict[str, list | str] = {"n0": [row.n0 for row in rows], "n1": [row.n1 for row in rows]}
    if device is not None:
        add_device_columns(rows, device, replicates=0)  # a curve over d: point estimates, no intervals
        columns = [row.device for row in rows]
        out["corrected_n0"] = [c.profile.corrected_n0 if c and c.profile else None for c in columns]
        if any(c and c.profile for c in columns):  # measured where the row's own sizes were measured and it stands
            fits = [c.profile.as_json() if c and c.profile else {} for c in columns]
            out["measured_n0"] = [shown_n0(f) for f in fits]
            out["measured_n1"] = [f.get("measured_n1") for f in fits]
        if any(c and c.predicted_n0 is not None for c in columns):
            out["predicted_n0"] = [c.predicted_n0 if c else None for c in columns]
            out["predicted_by"] = next(c.predicted_by for c in columns if c)
    return out


def _records(profile: DeviceProfile, variants: list[str], setting: Setting) -> Iterator[dict]:
    """The measured device's records of `variants` that succeeded, at the setting's scope and dtype."""
    for rec in ResultStore(profile.device, writable=False).records.values():
        ok = rec["status"] == "ok" and rec["variant"] in variants
        if ok and (rec["scope"], rec["dtype"]) == (setting.scope, setting.dtype):
            yield rec


def _measured(device: MeasuredDevice, variants: list[str], ds: list[int], setting: Setting) -> dict:
    """Measured time and memory points of the device, per head dim and variant, where they were measured at the
    panel's sizes (`report_dims`: one head, batch 1, ...)."""
    profile = device.profile.profile
    out: dict[str, Any] = {str(dv): {v: {"time": [], "memory": []} for v in variants} for dv in ds}
    for rec in _records(profile, variants, setting):
        s = rec.get("sizes", {})
        if s.get("d") not in ds or not measured_at(s, depends_on((rec["variant"],), report_dims(s["d"]), setting)):
            continue  # measured at sizes other than the panel's (another batch, heads, latents, chunk, ...)
        slot = out[str(s["d"])][rec["variant"]]
        if rec["kind"] == "time":
            t = rec["time"]
            slot["time"].append([s["N"], t["median"], t["q1"], t["q3"]])
        else:
            slot["memory"].append([s["N"], rec["memory"]["peak_bytes"]])
    for by_variant in out.values():
        for slot in by_variant.values():
            slot["time"].sort()
            slot["memory"].sort()
    if device.calibration is not None:
        _predicted_times(out, device.calibration, variants, ds, setting)
    return out


def _curves(model: DeviceModel, variant: str, dims: dict, grid: list[int], setting: Setting) -> dict | None:
    """A variant's predicted seconds over `grid` with its 95 % band (None where the model does not answer)."""
    if model.applies(variant, setting) is not None:
        return None
    try:
        t = model.seconds(variant, dims, np.array(grid, dtype=float), setting)
    except UserError:  # a size the model is not given
        return None
    return {"seconds": t.seconds.tolist(), "low": t.low.tolist(), "high": t.high.tolist()}


def _predicted(
    model: DeviceModel | None, variants: list[str], dims: dict[str, dict], grid: list[int], setting: Setting
) -> dict:
    """A device that was not measured (a datasheet GPU, an op calibration): each variant's predicted time over the
    report's lengths, per head dim, with its 95 % band, by the model whose N0 the transition table shows."""
    if model is None:
        return {}
    curves = {key: {v: c for v in variants if (c := _curves(model, v, dv, grid, setting)) is not None}
              for key, dv in dims.items()}  # fmt: skip
    return {"by": model.kind, "answered_by": model.answered_by, "curves": curves}


def _twins(model: GpuModel, variants: list[str], pairs: list[tuple[str, str]], setting: Setting) -> list[dict]:
    """The measured profiles of the datasheet GPU itself (a profile whose datasheet row, `for_device`, is this very
    row: by the row's name, never by a name a row gives itself), at the report's setting: per size they were
    measured at, each variant's measured times beside its datasheet curve over the measured lengths, and each
    pair's measured N0 beside the datasheet's (`measured_point`: measured at those sizes; drawn where it stands)."""
    out = []
    for path in known_profiles().values():
        profile = load_profile(str(path))
        if not measured_here(profile, setting) or profile.device.get("kind") != "cuda":
            continue
        sheet = for_device(str(profile.device.get("name", "")))
        if sheet is None or sheet.name != model.sheet.name:
            continue
        groups: dict[tuple, dict[str, list]] = {}
        for rec in _records(profile, variants, setting):
            if rec["kind"] == "time":
                s, t = rec["sizes"], rec["time"]
                at = groups.setdefault(tuple(sorted((k, v) for k, v in s.items() if k != "N")), {})
                at.setdefault(rec["variant"], []).append([s["N"], t["median"], t["q1"], t["q3"]])
        for key, by_variant in sorted(groups.items()):
            sizes = dict(key)
            dims = row_dims(sizes)
            top = max(n for points in by_variant.values() for n, *_ in points)
            grid = length_grid(top)
            curves = {v: c for v in by_variant if (c := _curves(model, v, dims, grid, setting)) is not None}
            rows = [transition_row(a, bb, dims, setting, (L,)) for a, bb in pairs if {a, bb} <= set(curves)]
            add_device_columns(rows, model)
            points = [measured_point(profile, r) or {} for r in rows]
            marks = [{"a": r.a, "b": r.b, "predicted_n0": r.device.predicted_n0 if r.device else None,
                      "measured_n0": m.get("measured_n0"), "n0_standing": m.get("n0_standing")}
                     for r, m in zip(rows, points, strict=True)]  # fmt: skip
            out.append({"profile": profile.name, "device": profile.device["name"], "sizes": sizes, "grid": grid,
                        "measured": {v: sorted(p) for v, p in by_variant.items()}, "predicted": curves,
                        "transitions": marks})  # fmt: skip
    return out


def _predicted_times(out: dict, model: DeviceModel, variants: list[str], ds: list[int], setting: Setting) -> None:
    """The op model's predicted time of every variant over the measured range (lines beside the markers), counted
    as the measurements were (the default counting)."""
    setting = Setting(setting.convention, setting.dtype, setting.scope, setting.mode)
    for dv in ds:
        for v in variants:
            if model.applies(v, setting) is not None:
                return
            slot = out[str(dv)][v]
            top = max([n for n, *_ in slot["time"]] + [4096])
            grid = sorted({max(2, round(2 ** (k / 8))) for k in range(8, 8 * (top.bit_length() + 1))})
            try:
                times = model.seconds(v, report_dims(dv), np.array(grid, dtype=float), setting, replicates=0).seconds
            except UserError:  # a size the op model is not given
                continue
            slot["predicted"] = [[n, float(t)] for n, t in zip(grid, times, strict=True)]


def _devices(device: MeasuredDevice | None) -> list[dict]:
    """The chosen device's profile, or every one available when none is chosen: constants and predicted vs
    measured (a report on one device never shows another's numbers beside its own)."""
    profiles = [device.profile.profile] if device else [load_profile(str(p)) for p in known_profiles().values()]
    return [
        {
            "name": prof.slug,
            "device": prof.device,
            "created": prof.created,
            "time": {k: v.as_json() for k, v in prof.time.items()},
            "validation": prof.validation,
        }
        for prof in profiles
    ]
