"""Commands that run real kernels: profile, measure, check-flops, validate; and `devices`. They parse the command
line, call the workflows (`profilers.workflow`: opening a measurer, profiling, validating) and render what those
return; torch is imported below them, inside the workflows' functions."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Optional

import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import Status, app, fail
from attn_cost.cli.render import Col, emit, progress, right
from attn_cost.costmodel.scopes import SCOPES
from attn_cost.costmodel.variants import get_variant
from attn_cost.profilers.devicemodel.datasheet.data import datasheets
from attn_cost.profilers.devicemodel.device import CALIBRATED, DATASHEET, MEASURED
from attn_cost.profilers.devicemodel.measured.data import (
    VALIDATION_COLUMNS,
    known_profiles,
    load_profile,
    user_profiles_dir,
)
from attn_cost.profilers.devicemodel.names import OPMODELS, known_opmodels
from attn_cost.profilers.measure.machine import IDENTITY
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.measure.standing import cell, interval, tally
from attn_cost.profilers.workflow.measuring import (
    Events,
    Measuring,
    check_measurable,
    open_measurer,
    searched,
)
from attn_cost.profilers.workflow.measuring import (
    measuring as read_measuring,
)
from attn_cost.profilers.workflow.profiling import profile as profile_pairs
from attn_cost.profilers.workflow.profiling import sweep
from rich.console import Console
from rich.markup import escape

console = Console(highlight=False)

MIN_MAX_N = 16
"""The smallest --max-n: below it the search has no lengths to compare."""
MEASURED_SCOPES = ("core", "layer", "block", "decode")
"""The scopes `profile` and `validate` measure (a whole model is many blocks)."""
PROFILE_SCOPE = typer.Option(
    None,
    "--scope",
    help="core, layer, block or decode (default: core, or layer for variants that only exist as layers).",
)


def events() -> Events:
    """How a workflow talks to the terminal (`options.to_terminal`)."""
    return Events(**o.to_terminal())


def longest_asked(max_n: int | None) -> None:
    """Refuse a --max-n that leaves the search nothing to compare."""
    o.positive(max_n, "--max-n")
    if max_n is not None and max_n < MIN_MAX_N:
        fail(f"--max-n {max_n} leaves nothing to search: give at least {MIN_MAX_N}")


@app.command()
@o.with_counting(scopes=MEASURED_SCOPES, measured=True)
@o.with_sizes(scopes=MEASURED_SCOPES)
@o.with_measuring(read_measuring)
def profile(
    pair: Optional[list[str]] = typer.Option(
        None, "--pair", help="A:B, repeatable. Default: taylorshift-direct:taylorshift-efficient."
    ),
    d_values: Optional[list[int]] = o.head_dim_option("profile"),
    heads: int = o.HEADS,
    batch: int = o.BATCH,
    latents: Optional[int] = o.LATENTS,
    scope: Optional[str] = PROFILE_SCOPE,
    dtype: str = o.DTYPE,
    convention: str = o.CONVENTION,
    cost: str = typer.Option("both", "--cost", help="time, memory or both."),
    measuring: Measuring = o.MEASURING,
    max_lengths: int = typer.Option(15, "--max-lengths", help="At most this many lengths timed per pair and d."),
    max_n: Optional[int] = typer.Option(
        None, "--max-n", help="Longest sequence tried (default 16384 on CPU, 65536 on CUDA)."
    ),
    as_json: bool = o.JSON,
) -> None:
    """Measure where B overtakes A in time (N0) and peak memory (N1), starting from the analytic prediction."""
    pairs = o.pairs(pair, [("taylorshift-direct", "taylorshift-efficient")])
    ds = o.head_dims(d_values, None, heads, default=o.D_DEFAULT["profile"])
    st = o.setting(convention, dtype, scope, "inference", sorted({n for p in pairs for n in p}), {"--L": latents})
    if st.scope == "model":
        fail("profile measures core, layer, block or decode scopes (a whole model is many blocks: use --scope block)")
    costs = {"both": ("time", "memory"), "time": ("time",), "memory": ("memory",)}.get(cost)
    if costs is None:
        fail(f"--cost takes time, memory or both, got {cost!r}")
    o.positive(max_lengths, "--max-lengths"), o.positive(batch, "--b"), o.positive(latents, "--L")
    longest_asked(max_n)
    check_measurable(sorted({n for p in pairs for n in p}), st)
    template = Sizes(N=1, d=ds[0], h=heads, b=batch, L=latents, **o.given_sizes(heads))
    names = sorted({n for p in pairs for n in p})
    measurer = open_measurer(measuring, st.scope, dtype, ds, events(), searched(names, template, ds, max_n))
    with progress() as notify:
        measurer.notify = notify
        done = profile_pairs(measurer, pairs, ds, template, st, costs=costs, max_lengths=max_lengths, n_max=max_n)
    rows = done.rows()
    if as_json:
        emit({"device": measurer.store.device, **provenance(measurer), **st.as_json(), "results": rows})
        return
    _profile_table(rows, measurer, done.n_max)
    said(rows, measurer)
def _profile_table(rows: list[dict], measurer, n_max: int) -> None:
    """One narrow table per pair: N0 and N1 per head dim, the model's beside the measured, and what it took."""
    dev = measurer.store.device
    render.line(f"Measured transition points on {dev['name']} ({dev['kind']}, {dev['threads']} threads)")
    columns = [right("d"), Col(""), right("model"), right("measured"), right("lengths"), right("seconds")]
    for pair in dict.fromkeys((r["a"], r["b"]) for r in rows):
        cells = []
        for r in (r for r in rows if (r["a"], r["b"]) == pair):
            cells.append(
                [str(r["d"]), "N0 time", _n(r["analytic_n0"]), _measured(r, "n0", n_max), str(r["lengths_timed"]),
                 f"{r['seconds']:.0f}"]
            )  # fmt: skip
            cells.append(["", "N1 memory", _n(r["analytic_n1"]), _measured(r, "n1", n_max), "", ""])
        render.table(f"\n{pair[0]} → {pair[1]}", columns, cells, keys=2)
    render.sentence(
        "model: where B needs no more FLOPs (N0) or peak memory (N1). measured: found on this device (± the "
        "spread of repeated searches)"
        + ("; tie: the lengths where either is as fast, neither faster beyond the noise (said below)"
           if _ties(rows) else "")
        + ". lengths: sequence lengths whose timings were kept (disturbed runs are thrown away). seconds: wall "
        "time spent on the pair."
    )


def _ties(rows: list[dict]) -> bool:
    return any(r.get("n0_verdict") == "tie" for r in rows)


def provenance(measurer) -> dict:
    """What this process measured and what it reused from the store, for --json."""
    return {
        "store": str(measurer.store.path),
        "measured_now": measurer.measured,
        "reused": measurer.reused,
        "reused_from": dict(measurer.store.hits),
        "disturbance": measurer.seen.as_json(),
    }


def said(rows: list[dict], measurer) -> None:
    """One line per tie (where either is as fast, its regret and the N0 range it implies) and per crossover not
    reported (and why), then what was measured now and what was reused."""
    for r in rows:
        if r.get("n0_note"):
            what = "a tie" if r.get("n0_verdict") == "tie" else "N0 not measured"
            render.sentence(f"{r['a']} vs {r['b']} at d = {r['d']}: {what}: {r['n0_note']}", indent=0)
    done = f"{measurer.measured} measurements made now" if measurer.measured else "Nothing measured now"
    hits = measurer.store.hits
    sources = [f"{hits['stored']} from {measurer.store.path}"] if hits["stored"] else []
    sources += [f"{hits['shipped']} from the measurements shipped with attn-cost"] if hits["shipped"] else []
    reused = f", reused {' and '.join(sources)} (--fresh measures them again)" if sources else ""
    thrown = measurer.seen.disturbed
    extra = f"; {thrown} of {measurer.seen.calls} timed runs thrown away as disturbed" if thrown else ""
    render.prose(escape(f"{done}{reused}{extra}."))


def _n(value) -> str:
    return "—" if value is None else f"{value:,}"


def _measured(row: dict, which: str, n_max: int | None = None) -> str:
    value, unc, verdict = row[f"measured_{which}"], row[f"{which}_uncertainty"], row[f"{which}_verdict"]
    if which == "n0" and (row.get("n0_standing") or verdict == "tie"):  # judged (`validate`): its standing beside it
        return cell(value, unc, verdict, row.get("n0_standing"), row.get("n0_launch_bound"), tie=row.get("n0_tie"))
    if value is None:
        a_wins = "A up to max-n" if n_max is None else f"A to N={n_max:,}"
        return {"b-cheaper-throughout": "B always", "a-cheaper-throughout": a_wins}.get(verdict or "", verdict or "—")
    return render.with_spread(value, unc)


@app.command()
@o.with_sizes()
@o.with_measuring(read_measuring)
def measure(
    variant: list[str] = typer.Option(..., "--variant", help="Repeatable."),
    n: list[int] = typer.Option(..., "--n", help="Sequence lengths; repeatable."),
    d_values: Optional[list[int]] = o.head_dim_option("measure"),
    heads: int = o.HEADS,
    batch: int = o.BATCH,
    latents: Optional[int] = o.LATENTS,
    scope: Optional[str] = o.SCOPE,
    dtype: str = o.DTYPE,
    measuring: Measuring = o.MEASURING,
    as_json: bool = o.JSON,
) -> None:
    """Time and peak memory of variants at given lengths (a sweep for plots and fits), with the model's prediction."""

    names = o.variant_names(variant, False)
    ds = o.head_dims(d_values, None, heads, default=o.D_DEFAULT["measure"])
    lengths = [o.positive(x, "--n") for x in n]
    st = o.setting("full", dtype, scope, "inference", names, {"--L": latents})
    o.positive(batch, "--b"), o.positive(latents, "--L")
    check_measurable(names, st)
    template = Sizes(N=1, d=ds[0], h=heads, b=batch, L=latents, **o.given_sizes(heads))
    cases = [(name, replace(template, N=length, d=dv), "--n {:d}") for name in names for length in lengths for dv in ds]
    measurer = open_measurer(measuring, st.scope, dtype, ds, events(), lambda _: cases)
    with progress() as notify:
        measurer.notify = notify
        rows = sweep(measurer, names, lengths, ds, template)
    if as_json:
        emit({"device": measurer.store.device, **st.as_json(), "results": rows})
        return
    cells = [
        [
            r["variant"],
            f"{r['N']:,}",
            str(r["d"]),
            "oom" if r["seconds"] is None else f"{1e3 * r['seconds']:.3f}",
            "" if r["seconds_iqr"] is None else f"{1e3 * r['seconds_iqr']:.3f}",
            "oom" if r["peak_bytes"] is None else f"{r['peak_bytes']:,}",
            f"{r['predicted_peak_bytes']:,}",
        ]
        for r in rows
    ]
    columns = [Col("variant"), right("N"), right("d"), right("median ms"), right("IQR ms")]
    render.table(
        f"Measured on {measurer.store.device['name']}",
        [*columns, right("peak bytes"), right("modelled bytes")],
        cells,
        keys=3,
    )


@app.command("check-flops")
def check_flops(
    variant: Optional[list[str]] = typer.Option(None, "--variant", help="Repeatable. Default: every variant."),
    scope: Optional[list[str]] = typer.Option(None, "--scope", help="Repeatable. Default: core, layer and decode."),
    as_json: bool = o.JSON,
) -> None:
    """Count FLOPs of every reference implementation with PyTorch's FlopCounterMode over a grid of
    (N, d, h, b) and compare with the engine's `matmul` convention. Exit code 1 on any mismatch."""

    names = [get_variant(v).name for v in variant] if variant else None
    for s in scope or []:
        if s not in SCOPES:
            fail(f"unknown scope {s!r} (known: {', '.join(SCOPES)})")
    scopes = tuple(scope or ("core", "layer", "decode"))
    for name in names or []:
        if not set(scopes) & set(get_variant(name).scopes):
            fail(f"{name} has no {' or '.join(scopes)} scope (it has: {', '.join(get_variant(name).scopes)})")
    check_measurable(names or [])
    from attn_cost.profilers.measure.flops import GRID
    from attn_cost.profilers.measure.flops import check_flops as run_checks

    with progress() as notify:
        notify(f"counting FLOPs over {len(GRID)} sizes per variant and scope")
        checks = run_checks(names, scopes)
    if not checks:
        fail(f"nothing to check: no reference implementation has the scope {' or '.join(scopes)}")
    bad = [c for c in checks if not c.ok]
    if as_json:
        emit(
            {
                "checked": len(checks),
                "mismatches": len(bad),
                "results": [
                    {
                        "variant": c.variant,
                        "scope": c.scope,
                        **c.sizes.as_dict(),
                        "derived": c.derived,
                        "formulas_of": c.formulas,
                        "form": c.form or None,
                        "counted": c.counted,
                        "ok": c.ok,
                    }
                    for c in checks
                ],
            }
        )
    else:
        groups: dict[tuple[str, str], list] = {}
        for c in checks:  # a variant whose code cannot run here is checked as what runs in its place
            shown = c.variant if c.formulas in ("", c.variant) else f"{c.variant} (runs {c.formulas})"
            shown = f"{shown} ({c.form})" if c.form else shown
            groups.setdefault((shown, c.scope), []).append(c)
        cells = []
        for (name, sc), cs in groups.items():
            n_ok = sum(c.ok for c in cs)
            cells.append([name, sc, str(len(cs)), "yes" if n_ok == len(cs) else f"[red]{len(cs) - n_ok} differ[/]"])
        render.table(
            "FlopCounterMode against the engine's matmul convention",
            [Col("variant"), Col("scope"), right("sizes"), Col("agree")],
            cells,
            keys=2,
        )
        for c in bad:
            render.line(
                f"  mismatch: {c.variant} {c.scope} {c.sizes.as_dict()}: engine {c.derived:,} vs PyTorch {c.counted:,}",
                markup=False,
            )
        render.line(f"{len(checks) - len(bad)} of {len(checks)} agree exactly.")
    if bad:
        raise typer.Exit(Status.FAILED)


@app.command()
@o.with_counting(scopes=MEASURED_SCOPES, measured=True)
@o.with_measuring(read_measuring)
def validate(
    ctx: typer.Context,
    pair: Optional[list[str]] = typer.Option(
        None, "--pair", help="A:B, repeatable. Default: the TaylorShift pair and softmax:linear."
    ),
    catalogue: bool = typer.Option(
        False,
        "--catalogue",
        help="Every variant with a reference implementation against softmax (of its causality) and against "
        "its family's alternative, instead of --pair.",
    ),
    d_values: Optional[list[int]] = typer.Option(None, "--d", help="Head dims to check; repeatable (default 32)."),
    fit_d: Optional[list[int]] = typer.Option(
        None, "--fit-d", help="Head dims to fit on; repeatable (default 8, 16, 64)."
    ),
    heads: int = o.HEADS,
    batch: int = o.BATCH,
    latents: Optional[int] = o.LATENTS,
    scope: Optional[str] = PROFILE_SCOPE,
    dtype: str = o.DTYPE,
    convention: str = o.CONVENTION,
    measuring: Measuring = o.MEASURING,
    max_n: Optional[int] = typer.Option(
        None, "--max-n", help="Longest sequence measured (default 16384 on CPU, 65536 on CUDA)."
    ),
    save: bool = typer.Option(
        True, "--save/--no-save", help="Write the fitted device profile (see `attn-cost devices`)."
    ),
    use: Optional[str] = typer.Option(
        None, "--profile", help="Check an existing profile of this device instead of fitting one."
    ),
    calibration: Optional[str] = typer.Option(
        None, "--calibration", help="Op model to check (default: this device's own, from `attn-cost calibrate`)."
    ),
    exact: bool = typer.Option(
        True,
        "--exact/--no-exact",
        help="Time the ops' exact shapes at head dims the op calibration lacks "
        "(else its predictions there are marked extrapolated).",
    ),
    records: Optional[Path] = typer.Option(
        None,
        "--records",
        help="Fit and validate from this results file (JSON lines: `results export`, a campaign's "
        "measurements.jsonl), timing nothing, on any machine.",
    ),
    from_store: bool = typer.Option(
        False,
        "--from-store",
        help="Fit and validate from the store's (and the shipped) records of --device, timing nothing.",
    ),
    device: Optional[str] = typer.Option(
        None,
        "--device",
        help="With --records or --from-store: whose records (a device slug; with --records, by "
        "default the only device in the file).",
    ),
    summary: Optional[list[Path]] = typer.Option(
        None,
        "--summary",
        help="With --records or --from-store: a campaign's summary.json of those records, "
        "repeatable; the units it measured are the ones judged, and its verdicts are compared; the first one's "
        "pairs, head dims (fitted and checked), heads and batch are the defaults of --pair, --fit-d, --d, --h, --b.",
    ),
    as_json: bool = o.JSON,
) -> None:
    """Fit per-device corrections on some head dims; print analytic, fitted, op-model (zero-shot, from
    `attn-cost calibrate`) and measured N0/N1 side by side, and the op model's error on every timed point.
    A stored timing much slower than its neighbours' trend along N is timed again, and the faster one kept.
    With --records or --from-store nothing is timed: every point comes from the records (a missing timing is left
    out with a line), and each measured crossover is judged (does it stand: docs/measuring.md)."""
    _records_or_timing(records, from_store, device, summary, measuring, use, calibration)
    if summary:
        pair, d_values, fit_d, heads, batch = _campaign_plan(ctx, summary[0], pair, d_values, fit_d, heads, batch)
    existing = load_profile(use) if use else None
    if catalogue and pair:
        fail("--catalogue and --pair both choose the pairs: give one")
    if catalogue:
        from attn_cost.profilers.workflow.validating import catalogue_pairs

        pairs = catalogue_pairs()
    else:
        pairs = o.pairs(pair, [("taylorshift-direct", "taylorshift-efficient"), ("softmax", "linear")])
    check = o.head_dims(d_values, None, heads, default=[32])
    fit = o.head_dims(fit_d, None, heads, default=[8, 16, 64])
    if len(set(fit)) < 2:
        fail("--fit-d needs at least two head dims: the constants must hold across d to predict another one")
    st = o.setting(convention, dtype, scope, "inference", sorted({n for p in pairs for n in p}), {"--L": latents})
    if st.scope == "model":
        fail("validate measures core, layer, block or decode scopes (a whole model is many blocks: use --scope block)")
    o.positive(batch, "--b"), o.positive(latents, "--L")
    longest_asked(max_n)
    check_measurable(sorted({n for p in pairs for n in p}), st)
    from attn_cost.profilers.workflow import validating as wf

    template = Sizes(N=1, d=1, h=heads, b=batch, L=latents)
    if records is not None or from_store:
        done = wf.validate_from_records(records, device, pairs, check, fit, template, st, store=measuring.store,
                                        summaries=summary or [], n_max=max_n,
                                        save_to=user_profiles_dir() if save else None)  # fmt: skip
        _from_records(done, fit, as_json)
        return
    names = sorted({n for p in pairs for n in p})
    measurer = open_measurer(measuring, st.scope, dtype, check + fit, events(),
                             searched(names, template, dict.fromkeys(check + fit), max_n))  # fmt: skip
    opmodel = wf.calibration_of(calibration, measurer.store.device, events())
    with progress() as notify:
        measurer.notify = notify
        done = wf.validate_device(measurer, pairs, check, fit, template, st, n_max=max_n, existing=existing,
                                  opmodel=opmodel, exact=exact, save_to=user_profiles_dir() if save else None,
                                  events=events())  # fmt: skip
    if as_json:
        saved = {"saved_to": str(done.path) if done.path else None, **provenance(measurer)}
        ops = {"op_model": done.opmodel.slug if done.opmodel else None, "op_model_time_errors": done.errors}
        emit({**done.profile.as_json(), **saved, **ops, "results": done.rows})
        return
    _validation_tables(done.profile, done.rows, fit, done.path)
    _op_model_summary(done.opmodel, done.errors)
    said(done.rows, measurer)


def _records_or_timing(records, from_store: bool, device, summary, measuring: Measuring, use, calibration) -> None:
    """--records and --from-store time nothing: refuse both together, and every option that asks for a measurement
    with them; --device and --summary choose records, and go with them only."""
    if records is not None or from_store:
        asked = (("--gpu", measuring.device == "cuda"), ("--cpu", measuring.device == "cpu"),
                 ("--fresh", measuring.fresh), ("--profile", use), ("--sdpa-backend", measuring.sdpa_backend),
                 ("--threads", measuring.threads), ("--calibration", calibration))  # fmt: skip
        given = [flag for flag, on in asked if on]
        if records is not None and from_store:
            fail("--records and --from-store both name the records to read: give one")
        if given:
            fail(f"{given[0]} asks for a measurement, and --records/--from-store time nothing: leave it out")
    elif device is not None or summary:
        fail("--device and --summary choose records to read: give them with --records FILE or --from-store")


def _campaign_plan(ctx: typer.Context, path: Path, pair, d_values, fit_d, heads, batch) -> tuple:
    """--pair, --d, --fit-d, --h and --b, each from the campaign summary's plan where the command line left it out
    (a campaign's fit afterwards is `validate --records DIR/measurements.jsonl --summary DIR/summary.json`)."""
    from attn_cost.profilers.workflow.validating import read_summary

    plan = read_summary(path).get("plan")
    plan = plan if isinstance(plan, dict) else {}

    def given(name: str) -> bool:  # by the source's name: typer may bring a click of its own
        source = ctx.get_parameter_source(name)
        return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")

    def planned(key: str, ok) -> Any:  # checked by `ok`
        value = plan.get(key)
        if not ok(value):
            fail(f"{path}: its plan has no usable {key!r}: give its option on the command line")
        return value

    def sizes(value) -> bool:
        return isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in value)

    def names(value) -> bool:
        return isinstance(value, list) and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(v, str) for v in p) for p in value
        )

    def size(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0

    if not given("pair"):
        pair = [f"{a}:{b}" for a, b in planned("pairs", names)]
    if not given("fit_d"):
        fit_d = planned("fit_d", sizes)
    if not given("d_values"):
        d_values = planned("check_d", sizes) or None
    if not given("heads"):
        heads = planned("heads", size)
    if not given("batch"):
        batch = planned("batch", size)
    return pair, d_values, fit_d, heads, batch


def _from_records(done, fit: list[int], as_json: bool) -> None:
    """`validate --records/--from-store`'s output: the fit, the validation and each unit's standing."""
    if as_json:
        emit({**done.profile.as_json(), "saved_to": str(done.path) if done.path else None, "results": done.rows,
              "left_out": done.notes})  # fmt: skip
        return
    _validation_tables(done.profile, done.rows, fit, done.path)
    for line in done.notes:
        render.sentence(escape(line), indent=0)
    whose = done.profile.slug
    render.prose(escape(f"Nothing timed: every point read from the records of {whose}. {tally(done.rows)}."))


def _op_model_summary(opmodel, errors: dict) -> None:
    if opmodel is None:
        console.print("No op calibration of this device: `attn-cost calibrate` adds the op model's columns.")
        return
    cells = [
        [v, str(e["points"]), f"{100 * e['median_abs_error']:.1f}%", f"{100 * e['max_abs_error']:.1f}%"]
        for v, e in errors.items()
    ]
    render.table(
        f"Op model ({opmodel.slug}, zero-shot) against every timed point",
        [Col("variant"), right("points"), right("median |err|"), right("max |err|")],
        cells,
        keys=1,
    )
    console.print(
        "N0 op model: predicted from op timings (and each variant's glue at N ≤ 32 where calibrated), "
        "[2.5 %–97.5 %] bootstrap interval in tokens; *: some op priced without a timing of its shape. "
        "--json adds the tie interval (predicted_tie) and its regret."
    )


def _validation_tables(profile, rows: list[dict], fit: list[int], path) -> None:

    dev = profile.device
    cells = []
    for r in rows:
        d_cell = f"{r['d']} (held out)" if r["held_out"] else str(r["d"])
        values = []
        for k in ("0", "1"):
            values += [
                _with_err(r[f"analytic_n{k}"], r[f"analytic_n{k}_error"]),
                _with_err(r[f"corrected_n{k}"], r[f"corrected_n{k}_error"]),
                *([_predicted_cell(r)] if k == "0" else []),
                _measured(r, f"n{k}"),
            ]
        cells.append([r["a"], r["b"], d_cell, *values])
    render.table(
        f"Transition points on {dev['name']} ({dev['kind']}): fitted on d = {', '.join(map(str, fit))}",
        [Col(c) if c in "AB" else right(c) for c in VALIDATION_COLUMNS],
        cells,
        keys=3,
    )
    headers = ("t_launch µs", "P GFLOP/s", "W GB/s", "points", "median |err|", "max |err|", "memory scale", "offset B")
    fits = []
    for name, tf in profile.time.items():
        mf = profile.memory.get(name)
        fits.append(
            [
                name,
                f"{tf.launch_s * 1e6:.2f}",
                "—" if tf.flops_per_s is None else f"{tf.flops_per_s / 1e9:.1f}" + (" (peak)" if tf.bound else ""),
                "—" if tf.bytes_per_s is None else f"{tf.bytes_per_s / 1e9:.1f}",
                str(tf.points),
                f"{100 * tf.median_rel_err:.1f}%",
                f"{100 * tf.max_rel_err:.1f}%",
                "" if mf is None else mf.shown(),
                "" if mf is None else f"{mf.offset_bytes:,.0f}",
            ]
        )
    render.table("Fitted constants: t = t_launch·K + F/P + B/W", [Col("variant"), *map(right, headers)], fits)
    peaks = sorted({tf.peak_source for tf in profile.time.values() if tf.bound})
    render.prose(
        "Errors are relative to the measured point. — : not limited by that resource (its constant fitted to zero)."
        + (f" (peak): P fitted at the bound, the {'; '.join(peaks)}." if peaks else "")
        + " memory scale: the terms of the modelled peak the measurements scale (1: the model's count)."
    )
    if path:
        render.line(f"Saved the device profile to {escape(str(path))}.")
        render.line(f"Use it with `attn-cost crossover --device {profile.name}`.")


def _predicted_cell(row: dict) -> str:
    """The op model's N0, its error and its bootstrap interval: 1,162 (−3%) [681–1,448]; * where it priced an op
    without a timing of its shape."""
    if row.get("predicted_n0") is None:
        return "—"
    low, high = row.get("predicted_n0_low"), row.get("predicted_n0_high")
    span = f" {interval(low, high)}" if low is not None or high is not None else ""
    return (
        _with_err(row["predicted_n0"], row.get("predicted_n0_error"))
        + span
        + ("*" if row.get("predicted_extrapolated") else "")
    )


def _with_err(value, err) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if err is None else f"{value:,.0f} ({100 * err:+.0f}%)"


@app.command()
def devices(as_json: bool = o.JSON) -> None:
    """List the devices, each name once with its kind: measured (a device profile, shipped or fitted here by
    `attn-cost validate`), calibrated (an op calibration alone, `attn-cost calibrate`) and datasheet GPUs (predicted
    from their datasheets). Every --device takes every one (`predict`, `crossover`, `report`)."""

    found = [(name, path, load_profile(str(path))) for name, path in known_profiles().items()]
    calibrated = known_opmodels()
    alone = {name: path for name, path in calibrated.items() if name not in dict((n, p) for n, p, _ in found)}
    sheets = datasheets()
    if as_json:
        measured = [
            {"name": n, "kind": MEASURED, "path": str(p), "device": prof.device, "variants": sorted(prof.time),
             "created": prof.created, "op_calibration": prof.slug in calibrated}
            for n, p, prof in found
        ]  # fmt: skip
        ops = [{"name": n, "kind": CALIBRATED, "path": str(p)} for n, p in alone.items()]
        predicted = [
            {"name": s.name, "kind": DATASHEET, "title": s.title, "arch": s.arch,
             "peak_tflops": asdict(s.peak_tflops), "bandwidth_gbs": s.bandwidth_gbs, "memory_gb": s.memory_gb,
             "sms": s.sms, "source": s.source}
            for s in sheets.values()
        ]  # fmt: skip
        emit(measured + ops + predicted)
        return
    if not found:
        render.prose("No measured device profiles yet: `attn-cost validate` measures this device and writes one.")
    else:
        cells = [
            [
                n,
                escape(_device_label(prof.device, [other.device for _, _, other in found])),
                str(prof.device.get("threads", "")),
                prof.created[:10],
                "yes" if prof.slug in calibrated else "no",
            ]
            for n, _, prof in found
        ]
        columns = [Col("name"), Col("device", prose=True), right("threads"), Col("fitted"), Col("op model")]
        render.table("Measured device profiles", columns, cells)
        render.sentence(
            "Use one with `attn-cost predict --device NAME`, `crossover --device NAME` or `report --device NAME`; "
            "`devices --json` lists each profile's variants, torch version and file.",
            indent=0,
        )
    if alone:
        render.table(
            "Calibrated devices (an op calibration, no profile)",
            [Col("name"), Col("file", prose=True)],
            [[n, "shipped" if p.parent == OPMODELS else escape(str(p))] for n, p in alone.items()],
            caption="Their times are predicted from their kernels timed alone (`attn-cost calibrate`), zero-shot.",
        )
    _datasheet_table(sheets)


def _datasheet_table(sheets: dict) -> None:
    cells = [
        [s.name, f"{s.peak_tflops.bf16:g}", f"{s.peak_tflops.fp32:g}", f"{s.bandwidth_gbs:,.0f}", f"{s.memory_gb:g}"]
        for s in sheets.values()
    ]
    render.table(
        "Datasheet GPUs (predicted from their datasheets, not measured)",
        [Col("name"), right("bf16 TFLOP/s"), right("fp32"), right("GB/s"), right("GB")],
        cells,
        caption="Use one with `attn-cost predict --device NAME`, `crossover --device NAME` or `report --device NAME`; "
        "add yours with a file like profilers/data/gpus.json in $ATTN_COST_HOME/gpus/ (docs/gpumodel.md).",
    )


def _device_label(device: dict, every: list[dict]) -> str:
    """The device's name, with the fingerprint fields that tell it from other profiles of the same name."""

    namesakes = [o for o in every if o.get("name") == device.get("name") and o is not device]
    differ = [k for k in (*IDENTITY, "torch") if any(str(o.get(k)) != str(device.get(k)) for o in namesakes)]
    details = ", ".join(f"{k} {device.get(k, '—')}" for k in differ[:3])
    return f"{device.get('name')} ({details})" if details else str(device.get("name"))
