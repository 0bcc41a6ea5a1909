"""Analytic commands: crossover, cheapest, decode, formula, heads, variants, conventions.

No torch, no plotly on this path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import sympy as sp
import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import app, fail
from attn_cost.cli.render import Col, emit, glue, progress, right
from attn_cost.cli.settings import Settings
from attn_cost.costmodel import display
from attn_cost.costmodel.conventions import CONVENTIONS, PUBLISHED_CONVENTIONS, Convention, get_convention
from attn_cost.costmodel.counting import (
    ALIGNS,
    BACKWARDS,
    CAUSAL_COUNTS,
    F_bwd,
    F_causal,
    F_chunk,
    N_kv,
    describe,
)
from attn_cost.costmodel.counting import SYMBOLS as COUNTING_NAMES
from attn_cost.costmodel.crossover import (
    COSTS,
    DEFAULT_PAIRS,
    TABLE_COSTS,
    CostPoint,
    DeviceColumns,
    ProfileColumns,
    Setting,
    TransitionRow,
    at_sizes,
    cost_branches,
    evaluate,
    transition_row,
)
from attn_cost.costmodel.crossover import cheapest as cheapest_of
from attn_cost.costmodel.crossover import crossover as crossing
from attn_cost.costmodel.derive import multihead
from attn_cost.costmodel.formula import formula_data, own_counting
from attn_cost.costmodel.heads import heads as head_tradeoff
from attn_cost.costmodel.opkinds import KINDS
from attn_cost.costmodel.scopes import MODES, SCOPES
from attn_cost.costmodel.symbols import BY_NAME, L, b
from attn_cost.costmodel.symbols import DESCRIPTIONS as SYMBOLS
from attn_cost.costmodel.variants import all_variants, derive_counted, get_variant
from attn_cost.profilers.measure.standing import cell as measured_cell
from attn_cost.profilers.measure.standing import op_model_n0, open_edges_said
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from attn_cost.profilers.devicemodel.device import DeviceModel

console = Console(highlight=False)
COUNTING_SYMBOLS = {str(x): x for x in (F_causal, F_bwd, F_chunk, N_kv)}
DECODE_DEFAULT = ["softmax-causal", "softmax-fused-causal", "linear-recurrent", "latte-recurrent"]
COST_SHORT = {"flops": "N0", "memory": "N1", "traffic": "N_traffic"}


# -- crossover -----------------------------------------------------------------------------------


@app.command()
@o.with_counting()
@o.with_sizes()
def crossover(
    d_values: Optional[list[int]] = o.head_dim_option("crossover"),
    pair: Optional[list[str]] = typer.Option(
        None, "--pair", help="A:B, repeatable. Default: the TaylorShift pair and softmax:taylorshift-efficient."
    ),
    every: bool = typer.Option(False, "--all", help="Every variant against --baseline."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="The A side for --all.", show_default="softmax"),
    heads: int = o.HEADS,
    batch: int = o.BATCH,
    embed: Optional[int] = o.EMBED,
    latents: Optional[int] = o.LATENTS,
    ratio: Optional[int] = o.RATIO,
    depth: Optional[int] = o.DEPTH,
    convention: str = o.CONVENTION,
    dtype: Optional[str] = o.DEVICE_DTYPE,
    scope: Optional[str] = o.SCOPE,
    mode: str = o.MODE,
    causal: bool = o.CAUSAL,
    device: Optional[str] = typer.Option(
        None,
        "--device",
        help="Add a device's points (`attn-cost devices`): a measured profile's corrected and measured N0/N1, or a"
        " datasheet GPU's predicted N0 (h100-sxm5-80gb, a100-sxm4-80gb, ...).",
    ),
    launch: Optional[str] = o.LAUNCH,
    launch_us: Optional[float] = o.LAUNCH_US,
    kernel: Optional[str] = o.KERNEL,
    pytorch: Optional[str] = o.PYTORCH,
    as_json: bool = o.JSON,
) -> None:
    """From which sequence length N variant B is no more expensive than A: N0 (FLOPs), N1 (peak memory), traffic."""
    ds = o.head_dims(d_values, embed, heads, default=o.D_DEFAULT["crossover"])
    pairs = _pairs(pair, every, baseline, causal, scope)
    names = sorted({n for p in pairs for n in p})

    ds, heads = o.own_widths(names, ds, heads)  # a traced module is compared at its own width and heads
    given = {"--L": latents, "--r": ratio, "--depth": depth}
    settings = Settings.resolve(device, dtype, lambda dt: o.setting(convention, dt, scope, mode, names, given),
                                launch, launch_us, kernel, pytorch)  # fmt: skip
    st, model = settings.setting, settings.model
    tied = () if latents else (L,)  # L defaults to d, so closed forms follow d with it
    rows = [
        transition_row(a, bb, o.sizes(dv, heads, batch, latents, ratio, depth), st, tied)
        for a, bb in pairs
        for dv in ds
    ]
    first = o.sizes(ds[0], heads, batch, latents, ratio, depth)
    settings.check_kernel(names, first)
    if model is not None:
        with progress() as notify:  # the op model's bootstrap intervals take seconds a row
            notify(f"predicting on {device}: corrected fits, op model with its 95 % interval")
            settings.add_columns(rows)
    if as_json:
        about = ({"device": {"name": model.name, "kind": model.kind, "answered_by": model.answered_by,
                             **settings.launch_json()}} if model else {})  # fmt: skip
        emit({**about, "results": [row.as_json() for row in rows]})
        return
    if model is not None and settings.datasheet:
        _datasheet_table(rows, heads, batch, model)
        if caption := settings.kernel_caption(names, first):
            render.prose(caption)
    elif model is not None:
        _device_table(rows, heads, batch, model.name)
    else:
        _crossover_table(rows, heads, batch)


def _pairs(
    pair: list[str] | None, every: bool, baseline: str | None, causal: bool, scope: str | None
) -> list[tuple[str, str]]:
    if baseline is not None and not every:
        fail("--baseline is the A side of --all, and changes nothing without it: give --all, or --pair A:B")
    if every:
        if pair:
            fail("give either --pair or --all, not both")
        (base,) = o.variant_names([baseline or "softmax"], causal)
        wanted = scope or "core"
        others = [v.name for v in all_variants() if v.name != base and wanted in v.scopes and (v.causal or not causal)]
        return [(base, other) for other in others]
    return o.pairs(pair, list(DEFAULT_PAIRS), causal)


def _crossover_table(rows: list[TransitionRow], heads: int, batch: int) -> None:
    first = rows[0].setting
    columns = [Col("A"), Col("B"), right("d"), right("N0"), right("N1"), right("N traffic")]
    cells = [[row.a, row.b, str(row.d), *(_cell(row.costs[cost]) for cost in TABLE_COSTS)] for row in rows]
    render.table(
        f"B is no more expensive than A from N = …  ({first.scope}, {first.mode}, h={heads}, b={batch})",
        columns,
        cells,
        keys=3,
        caption=f"N0: FLOPs ({first.convention}). N1: peak memory ({first.dtype}). "
        "N traffic: unfused bytes moved. " + describe(first.counting.as_json()),
    )
    _closed_forms(rows)


STANDING = (
    "✗: the measured crossover does not stand by the rules of docs/measuring.md (replicates that disagree, a timer "
    "that changed method inside it, a verdict changed on re-measurement; --json: n0_standing says which); lb: "
    "launch-bound, one variant's time there mostly a fixed cost (n0_launch_bound). "
)
TIE = (
    "tie: the lengths where the two measured times were within the noise, either as fast (--json: n0_regret, the "
    "most they differ there, and n0_range, the N0 it implies). "
)
EXTRAPOLATED = (
    "*: the op model priced some op without a timing of its shape (no exact-shape line at this head dim, or a row "
    "width beyond the calibrated ones; `--json`: predicted_extrapolated); `attn-cost calibrate --d D` times them. "
)


def _device_table(rows: list[TransitionRow], heads: int, batch: int, device: str) -> None:
    """One table per pair: N0 and N1 per head dim, analytic beside the device's corrected, op-model and
    measured values (one narrow table instead of the wide one stacked four times at 80 columns)."""
    first = rows[0].setting
    slug = rows[0].device.device if rows[0].device is not None else device
    render.line(
        f"B is no more expensive than A from N = …  on {slug}  "
        f"({first.scope}, {first.mode}, {first.dtype}, h={heads}, b={batch})"
    )
    columns = [right("d"), Col(""), right("analytic"), right("corrected"), right("op model [95 %]"), right("measured")]
    dashes = False
    all_cells: list[list[str]] = []
    for pair in dict.fromkeys((row.a, row.b) for row in rows):
        cells = []
        for row in (r for r in rows if (r.a, r.b) == pair):
            dev = row.device or DeviceColumns(device)
            fit = dev.profile or ProfileColumns()
            cells.append(
                [str(row.d), "N0 time", _cell(row.costs["flops"]), _num(fit.corrected_n0),
                 op_model_n0(dev.predicted_n0, dev.predicted_n0_low, dev.predicted_n0_high)
                 + ("*" if dev.extrapolated else ""),
                 measured_cell(fit.measured_n0, fit.n0_uncertainty, fit.n0_verdict, fit.n0_standing,
                               fit.n0_launch_bound, compact=True, tie=fit.n0_tie)
                 if fit.n0_verdict else _measured(fit.measured_n0, fit.n0_uncertainty)]
            )  # fmt: skip
            cells.append(
                ["", "N1 memory", _cell(row.costs["memory"]), _num(fit.corrected_n1), "",
                 _measured(fit.measured_n1, fit.n1_uncertainty)]
            )  # fmt: skip
        dashes = dashes or any("—" in cell for cell_row in cells for cell in cell_row)
        all_cells += cells
        render.table(f"\n{pair[0]} → {pair[1]}", columns, cells, keys=2)
    judged = any(r.device is not None and r.device.profile is not None and r.device.profile.n0_standing
                 for r in rows)  # fmt: skip
    tied = any(r.device is not None and r.device.profile is not None and r.device.profile.n0_verdict == "tie"
               for r in rows)  # fmt: skip
    render.sentence(
        f"analytic: N0 where B needs no more FLOPs ({first.convention}), N1 no more peak memory. corrected: "
        "the device profile's fitted times and memory. op model: time predicted from the device's op "
        "calibration, zero-shot. measured: found by timing on the device (± its spread). "
        + (STANDING if judged else "")
        + (TIE if tied else "")
        + ("—: the device has no value at this setting. " if dashes else "")
        + (f"{said} " if (said := open_edges_said(c[4] for c in all_cells)) else "")
        + (EXTRAPOLATED if any(r.device is not None and r.device.extrapolated for r in rows) else "")
        + describe(first.counting.as_json())
    )
    _closed_forms(rows)


def _datasheet_table(rows: list[TransitionRow], heads: int, batch: int, device: DeviceModel) -> None:
    """N0 per pair and head dim: FLOPs beside the datasheet model's prediction for a GPU one does not own."""

    first = rows[0].setting
    columns = [Col("A"), Col("B"), right("d"), right("N0 FLOPs"), right("N0 datasheet [95 %]"), right("N1")]
    cells = [
        [row.a, row.b, str(row.d), _cell(row.costs["flops"]),
         op_model_n0(row.device.predicted_n0, row.device.predicted_n0_low, row.device.predicted_n0_high)
         + ("†" if row.device.fits_in_memory is False else "") if row.device else "—", _cell(row.costs["memory"])]
        for row in rows
    ]  # fmt: skip
    over = [r.device.memory_bytes or 0 for r in rows if r.device is not None and r.device.fits_in_memory is False]
    beyond = (f" †: at that N, A or B needs more memory than the GPU's {over[0] / 1e9:g} GB: the run would not fit, "
              "and the time predicted is of a run that cannot happen." if over else "")  # fmt: skip
    if said := open_edges_said(cell[4] for cell in cells):
        beyond += f" {said}"
    render.table(
        f"B is faster than A from N = …  on {device.name}, predicted "
        f"({first.scope}, {first.mode}, {first.dtype}, h={heads}, b={batch})",
        columns,
        cells,
        keys=3,
        caption=f"N0 FLOPs: where B needs no more FLOPs. N1: no more peak memory. N0 datasheet: {device.answered_by}."
        + beyond,
    )


def _measured(value: float | None, spread: float | None) -> str:
    return "—" if value is None else render.with_spread(value, spread)


def _closed_forms(rows: list[TransitionRow]) -> None:
    """The exact crossings behind the table's integers, and why a pair never or repeatedly crosses."""
    closed: dict[str, str] = {}
    notes: list[str] = []
    for row in rows:
        for cost in TABLE_COSTS:
            info = row.costs[cost]
            if info.exact and info.verdict in ("crosses", "multiple"):
                closed[f"{COST_SHORT[cost]}({row.a} → {row.b})"] = display.text(
                    sp.sympify(info.exact, locals=dict(BY_NAME))
                )
            elif info.verdict in ("never", "multiple"):
                notes.append(f"{cost}, d = {row.d}: {info.summary}")
    if closed:
        render.line("Closed forms (the crossing before rounding up, large-N branches):")
        for key, value in closed.items():
            render.formula(key, value)
    for note in notes:
        render.sentence(note)


def _cell(info: CostPoint) -> str:
    if info.n is None:
        return "never"
    mark = {"always": " (always)", "equal": " (equal)", "multiple": " (*)"}.get(info.verdict, "")
    return f"{info.n:,}{mark}"


def _num(value: object) -> str:
    return "—" if value is None else f"{value:,.0f}" if isinstance(value, (int, float)) else str(value)


# -- cheapest ------------------------------------------------------------------------------------


@app.command()
@o.with_counting()
@o.with_sizes()
def cheapest(
    variant: Optional[list[str]] = typer.Option(
        None, "--variant", help="Repeatable. Default: softmax, linear, taylorshift-efficient, latte."
    ),
    d_values: Optional[list[int]] = o.head_dim_option("cheapest"),
    cost: Optional[list[str]] = typer.Option(
        None, "--cost", help="flops, memory, traffic; repeatable (default: all three)."
    ),
    heads: int = o.HEADS,
    batch: int = o.BATCH,
    embed: Optional[int] = o.EMBED,
    latents: Optional[int] = o.LATENTS,
    ratio: Optional[int] = o.RATIO,
    depth: Optional[int] = o.DEPTH,
    convention: str = o.CONVENTION,
    dtype: str = o.DTYPE,
    scope: Optional[str] = o.SCOPE,
    mode: str = o.MODE,
    causal: bool = o.CAUSAL,
    as_json: bool = o.JSON,
) -> None:
    """Which of several variants is cheapest on each interval of N (a many-way crossover)."""
    names = o.variant_names(variant or ["softmax", "linear", "taylorshift-efficient", "latte"], causal)
    if len(names) < 2:
        fail("give at least two --variant")
    costs = cost or list(COSTS)
    for c in costs:
        if c not in COSTS:
            fail(f"unknown cost {c!r} (known: {', '.join(COSTS)})")
    ds = o.head_dims(d_values, embed, heads, default=o.D_DEFAULT["cheapest"])
    st = o.setting(convention, dtype, scope, mode, names, {"--L": latents, "--r": ratio, "--depth": depth})
    results: list[dict[str, Any]] = []
    for dv in ds:
        dims = o.sizes(dv, heads, batch, latents, ratio, depth)
        for c in costs:
            res = cheapest_of(names, c, dims, st)
            results.append(
                {
                    "d": dv,
                    "cost": c,
                    "intervals": [{"from": lo, "to": hi, "cheapest": w} for lo, hi, w in res.intervals],
                }
            )
    if as_json:
        emit({"variants": names, **st.as_json(), "results": results})
        return
    for item in results:
        cells = [
            [f"{iv['from']:,.1f}", "∞" if iv["to"] is None else f"{iv['to']:,.1f}", " = ".join(iv["cheapest"])]
            for iv in item["intervals"]
        ]
        render.table(
            f"Cheapest in {item['cost']} (d = {item['d']}, {st.scope}, {st.mode})",
            [right("N from"), right("to"), Col("cheapest")],
            cells,
            keys=2,
            caption=st.counting.caption(),
        )


# -- decode --------------------------------------------------------------------------------------


@app.command()
@o.with_counting(scopes=("decode",))
@o.with_sizes(scopes=("decode",))
def decode(
    variant: Optional[list[str]] = typer.Option(
        None, "--variant", help="Repeatable. Default: every variant with a decoding step."
    ),
    n: Optional[list[int]] = typer.Option(
        None, "--n", help="Tokens already in context; repeatable (default 1k, 4k, 16k, 64k)."
    ),
    d_values: Optional[list[int]] = o.head_dim_option("decode"),
    heads: int = o.HEADS,
    batch: int = o.BATCH,
    embed: Optional[int] = o.EMBED,
    latents: Optional[int] = o.LATENTS,
    convention: str = o.CONVENTION,
    dtype: Optional[str] = o.DEVICE_DTYPE,
    device: Optional[str] = typer.Option(
        None,
        "--device",
        help="Also the time per token on a device (`attn-cost devices`): a datasheet GPU (h100-sxm5-80gb, ...), a "
        "calibrated or measured one.",
    ),
    launch: Optional[str] = o.LAUNCH,
    launch_us: Optional[float] = o.LAUNCH_US,
    kernel: Optional[str] = o.KERNEL,
    pytorch: Optional[str] = o.PYTORCH,
    as_json: bool = o.JSON,
) -> None:
    """Cost of generating token N+1: a KV cache (softmax) against a recurrent state (linear, Latte); with --device,
    its predicted time on that device."""
    names = [get_variant(x).name for x in (variant or DECODE_DEFAULT)]
    contexts = [o.positive(x, "--n") for x in (n or [1024, 4096, 16384, 65536])]
    ds = o.head_dims(d_values, embed, heads, default=o.D_DEFAULT["decode"])
    settings = Settings.resolve(device, dtype, lambda dt: o.setting(convention, dt, "decode", "inference", names,
                                                                     {"--L": latents}), launch, launch_us,
                               kernel, pytorch)  # fmt: skip
    st, model, dtype = settings.setting, settings.model, settings.dtype
    if model is not None:
        for name in names:  # one line on a variant the device has no model of, before any work
            model.check(name, st)
    rows: list[dict[str, Any]] = []
    for dv in ds:
        dims = o.sizes(dv, heads, batch, latents, 4, 1)
        for name in names:
            row: dict[str, Any] = {"variant": name, "d": dv}
            for c in COSTS:
                polys = at_sizes(cost_branches(name, c, st), dims, name)
                values = [int(evaluate(polys, x)) for x in contexts]
                growth = float(evaluate(polys, 2 * contexts[-1]) / evaluate(polys, contexts[-1]))
                row[c] = {
                    "per_token": dict(zip(map(str, contexts), values, strict=True)),
                    "growth_when_context_doubles": growth,
                }
            rows.append(row)
    timed = _decode_times(settings, rows, contexts, heads, batch, latents) if model is not None else None
    wins = _state_wins(rows, st, heads, batch, latents)
    if as_json:
        emit({**st.as_json(), "contexts": contexts, "results": rows, "state_wins": wins,
              **({"device": timed} if timed else {})})  # fmt: skip
        return
    if model is not None and timed is not None:
        _decode_time_table(settings, rows, contexts, timed)
        if caption := settings.kernel_caption(names, o.sizes(ds[0], heads, batch, latents, 4, 1)):
            render.prose(caption)
    for c in COSTS:
        unit = {
            "flops": f"FLOPs ({convention})",
            "memory": f"peak bytes ({dtype}: cache or state)",
            "traffic": f"bytes moved ({dtype})",
        }[c]
        columns = [Col("variant"), right("d"), *(right(f"N={x:,}") for x in contexts), right("×(2N)/(N)")]
        cells = [
            [
                row["variant"],
                str(row["d"]),
                *(f"{v:,}" for v in row[c]["per_token"].values()),
                f"{row[c]['growth_when_context_doubles']:.3f}",
            ]
            for row in rows
        ]
        render.table(f"Per generated token: {unit}", columns, cells, keys=2, caption=st.counting.caption())
    render.prose("A ratio of 1.000 is constant cost per token; 2.000 grows linearly with the context.")
    if wins:
        columns = [Col("KV cache"), Col("state"), right("d"), *(right(f"N {c}") for c in COSTS)]
        cells = [[w["cache"], w["state"], str(w["d"]), *(_context(w[c]) for c in COSTS)] for w in wins]
        render.table("From which context a recurrent state is no more expensive than a KV cache", columns, cells,
                     keys=3, caption=f"N: tokens in context; flops ({convention}), memory and traffic ({dtype}) "
                     "per generated token; never: the state costs more at every context.")  # fmt: skip


def _context(n: int | None) -> str:
    return "never" if n is None else f"{n:,}"


def _state_wins(rows: list[dict[str, Any]], st: Setting, heads: int, batch: int, latents: int | None) -> list[dict]:
    """For every pair of a variant whose decoding cost grows with the context (a KV cache) and one whose cost does
    not (a recurrent state), at each head dim: the context from which the state's cost per token is no more than
    the cache's, per cost (`crossover` at the decode scope; None: never)."""
    grows = {(r["variant"], r["d"]): r["memory"]["growth_when_context_doubles"] > 1 for r in rows}
    out = []
    for (cache, dv), growing in grows.items():
        for (state, dv2), other in grows.items():
            if dv2 != dv or not growing or other:
                continue
            dims = o.sizes(dv, heads, batch, latents, 4, 1)
            found = {c: crossing(cache, state, c, dims, st, exact=False) for c in COSTS}
            out.append({"cache": cache, "state": state, "d": dv,
                        **{c: x.n if x.verdict != "never" else None for c, x in found.items()}})  # fmt: skip
    return out


def _decode_times(
    settings: Settings, rows: list[dict[str, Any]], contexts: list[int], heads: int, batch: int, latents: int | None
) -> dict[str, Any]:
    """Each row's predicted time per generated token on the device (at every context and at twice the last, for the
    growth), with its 95 % interval, the kernels it launches where the model prices kernels, and whether its cache
    or state fits in the device's memory; added to the rows under "time". Returns the device's own entry."""
    model, st = settings.model, settings.setting
    assert model is not None
    ns = np.array([*contexts, 2 * contexts[-1]], dtype=float)
    by: dict[str, str] = {}
    memory = model.memory_bytes
    with progress() as notify:  # an op calibration's bootstrap interval takes seconds a variant
        for row in rows:
            name, dims = row["variant"], o.sizes(row["d"], heads, batch, latents, 4, 1)
            notify(f"predicting {name} (d = {row['d']}) on {model.name}")
            answering = model.answering(name, st)
            by[answering.kind] = answering.answered_by
            times = answering.seconds(name, dims, ns, st)
            peaks = answering.peak_bytes(name, dims, ns[:-1], st)
            kernels = answering.kernel_times(name, dims, ns[:1], st)
            keys = list(map(str, contexts))
            row["time"] = {
                "per_token_s": dict(zip(keys, map(float, times.seconds[:-1]), strict=True)),
                "low_s": dict(zip(keys, map(float, times.low[:-1]), strict=True)),
                "high_s": dict(zip(keys, map(float, times.high[:-1]), strict=True)),
                "growth_when_context_doubles": float(times.seconds[-1] / times.seconds[-2]),
                "kernel_launches": None if kernels is None else int(sum(k.repeat[0] * k.launches for k in kernels)),
                "fits_in_memory": None if memory is None else dict(zip(keys, (bool(p <= memory) for p in peaks),
                                                                       strict=True)),
                "predicted_by": answering.kind,
                **({"kernels": picked} if (picked := settings.kernels(name, dims)) else {}),
            }  # fmt: skip
    return {"name": model.name, "kind": model.kind, "memory_bytes": memory, "predicted_by": " and ".join(by),
            "answered_by": by, **settings.launch_json()}  # fmt: skip


def _decode_time_table(
    settings: Settings, rows: list[dict[str, Any]], contexts: list[int], timed: dict[str, Any]
) -> None:
    """The time per generated token on the device: a variant a row, a context a column, each time over its 95 %
    interval (`_decode_times`)."""
    by: dict[str, str] = timed["answered_by"]
    mixed = len(by) > 1
    cells = []
    for row in rows:
        t = row["time"]
        cells.append([
            row["variant"], str(row["d"]),
            *(render.duration(t["per_token_s"][k]) + ("†" if t["fits_in_memory"] and not t["fits_in_memory"][k]
              else "") + "\n" + render.duration_span(t["low_s"][k], t["high_s"][k], compact=True) for k in
              map(str, contexts)),
            f"{t['growth_when_context_doubles']:.3f}", *([Settings.label(t["predicted_by"])] if mixed else []),
        ])  # fmt: skip
    answered = (" ".join(f"{Settings.label(kind)}: times {sentence}." for kind, sentence in by.items()) if mixed
                else f"Times {next(iter(by.values()))}.")  # fmt: skip
    over = any(t is False for row in rows for t in (row["time"]["fits_in_memory"] or {}).values())
    memory = settings.model.memory_bytes if settings.model is not None else None
    beyond = f" †: the cache does not fit in the device's {render.size(memory)}." if over and memory else ""
    title = settings.title
    render.table(
        f"Per generated token on {title}: time, and its 95 % interval ({settings.dtype})",
        [Col("variant"), right("d"), *(right(f"N={x:,}") for x in contexts), right("×(2N)/(N)"),
         *([Col("by")] if mixed else [])],
        cells,
        keys=2,
        caption=answered + beyond,
    )  # fmt: skip


# -- formula -------------------------------------------------------------------------------------


@app.command()
@o.with_counting()
def formula(
    variant: str = typer.Argument(..., metavar="NAME", help="Variant name (see `attn-cost variants`)."),
    convention: str = o.CONVENTION,
    dtype: str = o.DTYPE,
    scope: Optional[str] = o.SCOPE,
    mode: str = o.MODE,
    embed: bool = typer.Option(False, "--multihead", help="Also write the totals with d = d_embed / h (batch 1)."),
    latex: bool = typer.Option(False, "--latex", help="Print the formulas as LaTeX."),
    as_json: bool = o.JSON,
) -> None:
    """The derived FLOPs, peak memory, traffic and parameters of a variant, and the ops they come from."""
    v = get_variant(variant)
    st = o.setting(convention, dtype, scope, mode, [v.name])
    conv = get_convention(st.convention)
    if not isinstance(conv, Convention):  # one of PUBLISHED_CONVENTIONS
        fail(f"{conv.name} is a published total, not a per-op convention: `formula` shows it beside the derived count")
    data = formula_data(v.name, conv.name, dtype, st.scope, mode, st.counting)
    if as_json:
        emit(data)
        return
    derived = derive_counted(v.name, st.scope, mode, st.counting)
    fmt = display.latex if latex else display.text
    render.prose(f"[bold]{v.name}[/] ({st.scope}, {mode}) — {escape(v.summary)}\n  source: {escape(v.source)}")
    cells = []
    for step, live in derived.peak().forward():
        op = step.op
        lost = conv.left_out(op)
        cells.append(
            [
                str(op.index + 1),
                escape(op.label),
                op.kind + (" (in place)" if op.inplace else ""),
                "×".join(_dim(s) for s in op.output.shape),
                "" if op.repeat == 1 else fmt(op.repeat),
                fmt(conv.op_flops(op)),
                "" if lost == 0 else fmt(lost),
                fmt(live),
            ]
        )
    render.table(
        f"Ops (FLOPs under {conv.name}, per run; live = elements alive while the op runs)",
        [right("#"), Col("op"), Col("kind"), Col("shape"), Col("runs"), Col("FLOPs"), Col("left out"), Col("live")],
        cells,
        keys=2,
    )
    render.line("[bold]FLOPs[/]" + (" (forward + backward)" if mode == "training" else ""))
    for name, c in CONVENTIONS.items():
        own = own_counting(c, st.counting)
        if derived.flops(c, own) == derived.flops(c, st.counting):
            render.line(f"  {name:<17} {fmt(derived.flops(c, st.counting))}")
            continue
        render.line(f"  {name:<17} {fmt(derived.flops(c, st.counting))}  (under the counting below)")
        render.line(f"  {'':<17} {fmt(derived.flops(c, own))}  (its own: {own.caption()[10:-1]})")
    if data["flops_named"] != data["flops"][conv.name]:
        named = sp.sympify(data["flops_named"], locals={**BY_NAME, **COUNTING_SYMBOLS})
        render.line(f"  {conv.name} with its named factors: {_named(named, fmt)}")
        render.line(f"  {', '.join(f'{k} = {v}' for k, v in data['factors'].items())}")
    render.line(f"  {st.counting.caption()}")
    lost = derived.left_out(conv, st.counting)
    if lost != 0:
        kinds = sorted({op.kind for op in derived.ops if conv.left_out(op) != 0})
        render.line(f"  {conv.name} leaves out {fmt(lost)} (counted by full: {', '.join(kinds)})")
    peak = derived.peak()
    render.line("[bold]Peak memory[/] (elements" + (", forward and backward walks)" if mode == "training" else ")"))
    render.line(f"  {fmt(peak.expr)}")
    dominant_step = peak.dominant_step()
    if peak.dominant is not None and dominant_step is not None:
        step = dominant_step
        where = "the backward of step" if step.backward else "step"
        render.line(f"  for large N: {fmt(peak.dominant)}, at {where} {step.op.index + 1} ({escape(step.op.label)})")
    pb = derived.peak(dtype)
    shown = pb.dominant if pb.dominant is not None else pb.expr
    render.line(f"  bytes ({dtype}){' for large N' if pb.dominant is not None else ''}: {fmt(shown)}")
    render.line(f"[bold]Traffic[/] (bytes, {dtype}, unfused): {fmt(derived.traffic(dtype, st.counting))}")
    render.line(f"[bold]Parameters[/]: {fmt(derived.params)}")
    for item in data["padded_to"]:
        render.prose(f"[bold]Padded[/]: {escape(item['meaning'])}")
    if embed:
        one = {b: 1}
        render.line(
            f"[bold]Multi-head[/] (d = d_embed/h, b = 1): FLOPs "
            f"{fmt(multihead(derived.flops(conv, st.counting).xreplace(one)))}"
        )
        if peak.dominant is not None:
            render.line(f"  peak (large N): {fmt(multihead(peak.dominant.xreplace(one)))}")
    for pub in data["published"]:
        mark = (
            "✓ equal"
            if pub["matches"]
            else f"≠ derived − paper = {display.text(sp.sympify(pub['difference'], locals=dict(BY_NAME)))}"
        )
        render.line(f"[bold]Paper[/] {escape(pub['where'])}: {pub['formula']} — {mark} ({pub['compare_to']})")
        if pub["why"]:
            render.prose(f"  {escape(pub['why'])}")


def _named(expr: sp.Expr, fmt) -> str:
    """A total grouped by its named counting factors: F_causal·(…) + F_bwd·F_causal·(…) + F_chunk·(…) + …"""
    groups: dict[sp.Expr, sp.Expr] = {}
    for term in sp.Add.make_args(sp.expand(expr)):
        factors, rest = term.as_independent(F_causal, F_bwd, F_chunk, as_Add=False)[::-1]
        groups[factors] = groups.get(factors, sp.Integer(0)) + rest
    parts = []
    for factors, rest in groups.items():
        names = "·".join(str(f) for f in sp.Mul.make_args(factors) if f != 1)
        parts.append(f"{names}·({fmt(rest)})" if names else fmt(rest))
    return " + ".join(parts)


def _dim(size: sp.Expr) -> str:
    s = display.text(size)
    return f"({s})" if len(sp.Add.make_args(size)) > 1 else s


# -- heads ---------------------------------------------------------------------------------------


@app.command()
@o.with_counting(scopes=("core",))
@o.with_sizes(scopes=("core",))
def heads(
    embed: int = typer.Option(..., "--d-embed", help="Embedding width; h runs over its divisors."),
    n: int = typer.Option(1024, "--n", help="Sequence length (memory depends on it)."),
    variant: Optional[list[str]] = typer.Option(None, "--variant", help="Repeatable. Default: both TaylorShift forms."),
    convention: str = o.CONVENTION,
    batch: int = o.BATCH,
    dtype: str = o.DTYPE,
    as_json: bool = o.JSON,
) -> None:
    """The head trade-off at fixed d_embed: cost of every divisor h, and the continuous optimum."""
    o.positive(embed, "--d-embed"), o.positive(n, "--n"), o.positive(batch, "--b")
    names = [get_variant(x).name for x in (variant or ["taylorshift-direct", "taylorshift-efficient"])]
    st = o.setting(convention, dtype, "core", "inference", names)
    results = [
        head_tradeoff(
            x,
            cost,
            embed,
            n=n,
            batch=batch,
            convention=st.convention,
            dtype=dtype,
            counting=st.counting,
            extra=o.extra_sizes(None),
        )
        for x in names
        for cost in ("flops", "memory")
    ]
    if as_json:
        emit({"d_embed": embed, "n": n, "batch": batch, **st.as_json(), "results": [_heads_json(r) for r in results]})
        return
    for cost in ("flops", "memory"):
        rs = [r for r in results if r.cost == cost]
        unit = f"FLOPs ({convention})" if cost == "flops" else f"peak bytes ({dtype})"
        render.table(
            f"{unit} vs heads, d_embed = {embed}, N = {n}, b = {batch}",
            [right("h"), right("d"), *(right(r.variant) for r in rs)],
            [[str(hv), str(dv), *(_best(r, i) for r in rs)] for i, (hv, dv, _) in enumerate(rs[0].table)],
            keys=2,
            caption=st.counting.caption(),
        )
        for r in rs:
            render.sentence(f"{r.variant}: {_heads_sentence(r)}")


def _best(r, i: int) -> str:
    hv, _, value = r.table[i]
    return f"[bold]{value:,}[/]" if hv == r.best_h else f"{value:,}"


def _heads_sentence(r) -> str:
    best = f"{glue(f'h = {r.best_h}')} ({glue(f'd = {r.d_embed // r.best_h}')})"
    s = f"{r.cost} {glue(r.trend)} over the divisors; best {best}."
    if r.condition is not None and r.d_star:
        opt = ", ".join(f"{glue(f'd ≈ {x:.3g}')} ({glue(f'h ≈ {r.d_embed / x:.4g}')})" for x in r.d_star)
        where = "outside 1..d_embed" if all(not 1 <= hv <= r.d_embed for hv in r.h_star) else "inside the range"
        condition = glue(f"{display.text(r.condition)} = 0")
        s += f" Continuous optimum of the large-N formula, where {condition}: {opt}, {where}."
    elif r.condition is None and r.monotone:
        s += " No interior optimum: the cost is monotone in h."
    elif r.condition is None:
        s += f" Its large-N formula has no stationary point in d alone: the best h is the table's, at N = {r.n:,}."
    return s


def _heads_json(r) -> dict:
    return {
        "variant": r.variant,
        "cost": r.cost,
        "table": [{"h": hv, "d": dv, "value": value} for hv, dv, value in r.table],
        "best_h": r.best_h,
        "trend": r.trend,
        "condition": display.plain(r.condition) if r.condition is not None else None,
        "d_star": r.d_star,
        "h_star": r.h_star,
    }


# -- catalogue -----------------------------------------------------------------------------------


@app.command()
def variants(as_json: bool = o.JSON) -> None:
    """List the variants the engine knows, one line each."""
    vs = all_variants()
    if as_json:
        emit(
            [
                {
                    "name": v.name,
                    "family": v.family,
                    "causal": v.causal,
                    "scopes": v.scopes,
                    "summary": v.summary,
                    "source": v.source,
                }
                for v in vs
            ]
        )
        return
    render.table(
        "Attention variants",
        [Col("name"), Col("causal"), Col("scopes", prose=True), Col("what", prose=True)],
        [[v.name, "yes" if v.causal else "", " ".join(v.scopes), escape(v.summary)] for v in vs],
    )


@app.command()
def conventions(as_json: bool = o.JSON) -> None:
    """List the FLOP conventions, the op kinds, the scopes and the modes."""
    data: dict[str, Any] = {
        "conventions": {
            c.name: {"summary": c.summary, "source": c.source, "counts": sorted(c.rules)} for c in CONVENTIONS.values()
        },
        "published": {
            c.name: {"summary": c.summary, "source": c.source, "variants": sorted(c.formulas)}
            for c in PUBLISHED_CONVENTIONS.values()
        },
        "op_kinds": KINDS,
        "scopes": SCOPES,
        "modes": MODES,
        "symbols": SYMBOLS,
        "counting": {"causal_count": CAUSAL_COUNTS, "backward": BACKWARDS, "align": ALIGNS, "symbols": COUNTING_NAMES},
    }
    if as_json:
        emit(data)
        return
    for title, items in (
        ("Conventions", {k: v["summary"] for k, v in data["conventions"].items()}),
        ("Published totals", {k: v["summary"] for k, v in data["published"].items()}),
        ("Op kinds (as `full` counts them)", KINDS),
        ("Scopes", SCOPES),
        ("Modes", MODES),
        ("Symbols", SYMBOLS),
        ("Counting rules: --causal-count", CAUSAL_COUNTS),
        ("--backward", BACKWARDS),
        ("--align (with --n-kv)", ALIGNS),
        ("Named counting factors", COUNTING_NAMES),
    ):
        render.table(
            title, [Col(""), Col("", prose=True)], [[k, escape(v)] for k, v in items.items()], show_header=False
        )
