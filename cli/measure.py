"""Commands that run real kernels: profile, measure, check-flops. torch is imported inside them."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import Status, app, fail, measuring_started, note
from attn_cost.cli.render import Col, emit, right
from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.scopes import SCOPES
from attn_cost.costmodel.variants import derive, get_variant
from attn_cost.profilers.devicemodel.corrections import (
    VALIDATION_COLUMNS,
    known_profiles,
    load_profile,
    shipped_elsewhere,
    user_profiles_dir,
)
from attn_cost.profilers.devicemodel.datasheet import datasheets
from attn_cost.profilers.devicemodel.device import CALIBRATED, DATASHEET, MEASURED
from attn_cost.profilers.devicemodel.names import OPMODELS, known_opmodels
from attn_cost.profilers.devicemodel.opmodel import check_device, load_opmodel, opmodel_for
from attn_cost.profilers.measure.device import IDENTITY, prepare, select_device, slug
from attn_cost.profilers.measure.sdpa import get_backend, validate_choice
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.measure.standing import cell, tally
from attn_cost.profilers.store.store import ResultStore
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

console = Console(highlight=False)
err = Console(stderr=True, highlight=False)

GPU = typer.Option(False, "--gpu", help="Measure on CUDA (an error if there is none).")
CPU = typer.Option(False, "--cpu", help="Measure on the CPU even if CUDA is present.")
THREADS = typer.Option(None, "--threads", help="CPU threads (default: torch's default); recorded with every result.")
REPEATS = typer.Option(7, "--repeats", help="Timed runs per length (after warm-up).")
STORE = typer.Option(
    None,
    "--store",
    help="Results directory or SQLite file (default: $ATTN_COST_HOME/results or ~/.local/share/attn-cost/results).",
)
FRESH = typer.Option(
    False, "--fresh", help="Measure every length again instead of reusing stored (and shipped) results."
)
SDPA_BACKEND = typer.Option(
    None, "--sdpa-backend", help="Kernel of softmax-fused: flash, efficient, cudnn or math (default: PyTorch's choice)."
)


@contextmanager
def progress():
    """A spinner on stderr that shows what is being measured; yields a notify(message) function. Off when
    stderr is not a terminal: a log or a pipe would get the blank line a stopped spinner leaves."""
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as p:
        task = p.add_task("starting", total=None)
        yield lambda message: p.update(task, description=message)


MIN_MAX_N = 16
"""The smallest --max-n: below it the search has no lengths to compare."""
PROFILE_SCOPE = typer.Option(
    None,
    "--scope",
    help="core, layer, block or decode (default: core, or layer for variants that only exist as layers).",
)


def measuring_args(gpu: bool, cpu: bool, threads: int | None, repeats: int, max_n: int | None = None) -> None:
    """Check the options every measuring command shares before torch is imported: a typo is answered at once."""
    if gpu and cpu:
        fail("give --gpu or --cpu, not both")
    o.positive(threads, "--threads"), o.positive(repeats, "--repeats"), o.positive(max_n, "--max-n")
    if max_n is not None and max_n < MIN_MAX_N:
        fail(f"--max-n {max_n} leaves nothing to search: give at least {MIN_MAX_N}")


def measurable(names: list[str], st=None) -> None:
    """Refuse, before anything is measured, variants without a runnable implementation and counting switches
    the measurements cannot follow (--n-kv: the implementations take keys and values of length N)."""
    if st is not None and st.counting.n_kv is not None:
        fail("--n-kv is not measured (the reference implementations run keys and values of length N): "
             "use crossover or formula for N_kv")  # fmt: skip
    from attn_cost.profilers.measure.cases import require_references

    require_references(names)


def open_measurer(
    gpu: bool,
    cpu: bool,
    threads: int | None,
    store: Path | None,
    scope: str,
    dtype: str,
    repeats: int,
    fresh: bool = False,
    sdpa_backend: str | None = None,
    head_dims: list[int] | None = None,
):
    """Pick the device, fix the threads, open the device's result store; refuse an SDPA backend that
    cannot run here at these head dims (one line, before anything is measured)."""
    measuring_args(gpu, cpu, threads, repeats)
    if sdpa_backend is not None:
        get_backend(sdpa_backend)
    import torch
    from attn_cost.profilers.measure.profile import Measurer

    device = select_device(gpu, cpu)

    validate_choice(sdpa_backend, device, [dtype], head_dims or [])
    if threads is not None:
        torch.set_num_threads(threads)
    fingerprint = prepare(device)
    shipped_note = shipped_elsewhere(fingerprint)
    if shipped_note is not None:
        note(shipped_note)
    results = ResultStore(fingerprint, store, reuse=not fresh)
    for warning in results.warnings:
        render.warn(warning)
    measuring_started(results)
    return Measurer(device, results, scope=scope, dtype=dtype, repeats=repeats, sdpa_backend=sdpa_backend)


@app.command()
@o.with_counting
@o.with_sizes
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
    gpu: bool = GPU,
    cpu: bool = CPU,
    threads: Optional[int] = THREADS,
    repeats: int = REPEATS,
    max_lengths: int = typer.Option(15, "--max-lengths", help="At most this many lengths timed per pair and d."),
    max_n: Optional[int] = typer.Option(
        None, "--max-n", help="Longest sequence tried (default 16384 on CPU, 65536 on CUDA)."
    ),
    store: Optional[Path] = STORE,
    fresh: bool = FRESH,
    sdpa_backend: Optional[str] = SDPA_BACKEND,
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
    measuring_args(gpu, cpu, threads, repeats, max_n)
    measurable(sorted({n for p in pairs for n in p}), st)
    from attn_cost.profilers.measure.profile import profile_pair

    measurer = open_measurer(gpu, cpu, threads, store, st.scope, dtype, repeats, fresh, sdpa_backend, ds)
    n_max = max_n or (65536 if measurer.device == "cuda" else 16384)
    results = []
    with progress() as notify:
        measurer.notify = notify
        for a, b in pairs:
            for dv in ds:
                sizes = Sizes(N=1, d=dv, h=heads, b=batch, L=latents, **o.given_sizes(heads))
                results.append(
                    profile_pair(a, b, sizes, measurer, st, costs=costs, max_lengths=max_lengths, n_max=n_max)
                )
    rows = [r.as_json() for r in results]
    if as_json:
        emit({"device": measurer.store.device, **provenance(measurer), **st.as_json(), "results": rows})
        return
    _profile_table(rows, measurer, n_max)
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
        "spread of repeated searches). lengths: sequence lengths whose timings were kept (disturbed runs are "
        "thrown away). seconds: wall time spent on the pair."
    )


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
    """One line per crossover not reported (and why), then what was measured now and what was reused."""
    for r in rows:
        if r.get("n0_note"):
            render.sentence(f"{r['a']} vs {r['b']} at d = {r['d']}: N0 not measured: {r['n0_note']}", indent=0)
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
    if which == "n0" and row.get("n0_standing"):  # judged from records (`validate --records`): its standing beside it
        return cell(value, unc, verdict, row["n0_standing"], row.get("n0_launch_bound"))
    if value is None:
        a_wins = "A up to max-n" if n_max is None else f"A to N={n_max:,}"
        return {"b-cheaper-throughout": "B always", "a-cheaper-throughout": a_wins}.get(verdict or "", verdict or "—")
    return render.with_spread(value, unc)


@app.command()
@o.with_counting
@o.with_sizes
def measure(
    variant: list[str] = typer.Option(..., "--variant", help="Repeatable."),
    n: list[int] = typer.Option(..., "--n", help="Sequence lengths; repeatable."),
    d_values: Optional[list[int]] = o.head_dim_option("measure"),
    heads: int = o.HEADS,
    batch: int = o.BATCH,
    latents: Optional[int] = o.LATENTS,
    scope: Optional[str] = o.SCOPE,
    dtype: str = o.DTYPE,
    gpu: bool = GPU,
    cpu: bool = CPU,
    threads: Optional[int] = THREADS,
    repeats: int = REPEATS,
    store: Optional[Path] = STORE,
    fresh: bool = FRESH,
    sdpa_backend: Optional[str] = SDPA_BACKEND,
    as_json: bool = o.JSON,
) -> None:
    """Time and peak memory of variants at given lengths (a sweep for plots and fits), with the model's prediction."""

    names = o.variant_names(variant, False)
    ds = o.head_dims(d_values, None, heads, default=o.D_DEFAULT["measure"])
    lengths = [o.positive(x, "--n") for x in n]
    st = o.setting("full", dtype, scope, "inference", names, {"--L": latents})
    o.positive(batch, "--b"), o.positive(latents, "--L")
    measuring_args(gpu, cpu, threads, repeats)
    measurable(names, st)

    measurer = open_measurer(gpu, cpu, threads, store, st.scope, dtype, repeats, fresh, sdpa_backend, ds)
    rows = []
    with progress() as notify:
        measurer.notify = notify
        for dv in ds:
            for length in lengths:
                sizes = Sizes(N=length, d=dv, h=heads, b=batch, L=latents, **o.given_sizes(heads))
                times = measurer.time(names, sizes)
                for name, t in zip(names, times, strict=True):
                    derived = derive(name, st.scope)
                    syms = sizes.symbols()
                    rows.append(
                        {
                            "variant": name,
                            **sizes.as_dict(),
                            "seconds": t.median if t else None,
                            "seconds_iqr": t.iqr if t else None,
                            "peak_bytes": measurer.memory(name, sizes),
                            "predicted_peak_bytes": int(derived.peak(dtype).at(syms)[0]),
                            "flops_matmul": int(derived.flops(MATMUL).xreplace(syms)),
                        }
                    )
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
    measurable(names or [])
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
@o.with_counting
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
    gpu: bool = GPU,
    cpu: bool = CPU,
    threads: Optional[int] = THREADS,
    repeats: int = REPEATS,
    max_n: Optional[int] = typer.Option(
        None, "--max-n", help="Longest sequence measured (default 16384 on CPU, 65536 on CUDA)."
    ),
    store: Optional[Path] = STORE,
    fresh: bool = FRESH,
    sdpa_backend: Optional[str] = SDPA_BACKEND,
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

    if records is not None or from_store:
        given = [flag for flag, on in (("--gpu", gpu), ("--cpu", cpu), ("--fresh", fresh), ("--profile", use),
                                       ("--sdpa-backend", sdpa_backend), ("--threads", threads),
                                       ("--calibration", calibration)) if on]  # fmt: skip
        if records is not None and from_store:
            fail("--records and --from-store both name the records to read: give one")
        if given:
            fail(f"{given[0]} asks for a measurement, and --records/--from-store time nothing: leave it out")
    elif device is not None or summary:
        fail("--device and --summary choose records to read: give them with --records FILE or --from-store")
    if summary:
        pair, d_values, fit_d, heads, batch = _campaign_plan(ctx, summary[0], pair, d_values, fit_d, heads, batch)
    existing = load_profile(use) if use else None
    if catalogue and pair:
        fail("--catalogue and --pair both choose the pairs: give one")
    if catalogue:
        from attn_cost.profilers.devicemodel.validate import catalogue_pairs

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
    measuring_args(gpu, cpu, threads, repeats, max_n)
    measurable(sorted({n for p in pairs for n in p}), st)
    if records is not None or from_store:
        template = Sizes(N=1, d=1, h=heads, b=batch, L=latents)
        _from_records(records, device, store, summary or [], pairs, check, fit, template, st, max_n, save, as_json)
        return
    from attn_cost.profilers.devicemodel.validate import time_errors
    from attn_cost.profilers.devicemodel.validate import validate as run_validation

    measurer = open_measurer(gpu, cpu, threads, store, st.scope, dtype, repeats, fresh, sdpa_backend, check + fit)
    n_max = max_n or (65536 if measurer.device == "cuda" else 16384)
    opmodel = _calibration(calibration, measurer.store.device)
    with progress() as notify:
        measurer.notify = notify
        if opmodel is not None and exact:
            opmodel = _complete_lines(opmodel, measurer, sorted({n for p in pairs for n in p}), check + fit)
        template = Sizes(N=1, d=1, h=heads, b=batch, L=latents)
        profile, rows = run_validation(
            pairs, check, fit, template, measurer, st, n_max=n_max, existing=existing, opmodel=opmodel
        )
        variants = sorted({v for p in pairs for v in p})
        errors = time_errors(opmodel, measurer, variants, sorted(set(check + fit)), template) if opmodel else {}
    path = profile.save(user_profiles_dir()) if save and existing is None else None
    if as_json:
        saved = {"saved_to": str(path) if path else None, **provenance(measurer)}
        ops = {"op_model": opmodel.slug if opmodel else None, "op_model_time_errors": errors}
        emit({**profile.as_json(), **saved, **ops, "results": rows})
        return
    _validation_tables(profile, rows, fit, path)
    _op_model_summary(opmodel, errors)
    said(rows, measurer)


def _campaign_plan(ctx: typer.Context, path: Path, pair, d_values, fit_d, heads, batch) -> tuple:
    """--pair, --d, --fit-d, --h and --b, each from the campaign summary's plan where the command line left it out
    (a campaign's fit afterwards is `validate --records DIR/measurements.jsonl --summary DIR/summary.json`)."""
    from attn_cost.profilers.devicemodel.validate import read_summary

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


def _from_records(records, device, store, summaries, pairs, check, fit, template, st, max_n, save, as_json) -> None:
    """`validate --records/--from-store`: the fit, the validation and each unit's standing from records alone."""
    from attn_cost.profilers.devicemodel.validate import refit

    source = f"--records {records}" if records is not None else f"--from-store --device {device}"
    made = f"attn-cost validate {source}: fitted and validated from stored records alone, nothing timed"
    profile, rows, notes = refit(records, device, pairs, check, fit, template, st, store=store, summaries=summaries,
                                 n_max=max_n, made=made)  # fmt: skip
    path = profile.save(user_profiles_dir()) if save else None
    if as_json:
        emit({**profile.as_json(), "saved_to": str(path) if path else None, "results": rows, "left_out": notes})
        return
    _validation_tables(profile, rows, fit, path)
    for line in notes:
        render.sentence(escape(line), indent=0)
    render.prose(escape(f"Nothing timed: every point read from the records of {profile.slug}. {tally(rows)}."))


def _complete_lines(opmodel, measurer, variants: list[str], ds: list[int]):
    """The op model with the exact-shape lines it lacks for these variants at these head dims, timed now on this
    device (into its result store: a rerun reuses them), with a progress line; unchanged where it lacks none."""
    from attn_cost.profilers.devicemodel.calibrate import (
        Calibrator,
        cache_sizes,
        glue_points,
        missing_lines,
        time_lines,
    )

    calibrator = Calibrator(measurer.store, measurer.device, opmodel.dtype, measurer.repeats)
    todo = missing_lines(opmodel, variants, sorted(set(ds)), cache_sizes(measurer.device), calibrator.rates)
    if not todo:
        return opmodel
    d_text = ", ".join(map(str, sorted(set(ds))))
    err.print(f"Timing {len(todo):,} exact shapes of ops the op calibration {opmodel.slug} lacks (d = {d_text}).")

    def step(message: str, done: int, total: int) -> None:
        measurer.notify(f"exact shapes {done:,}/{total:,}: {message}")

    points = time_lines(calibrator, todo, step)
    points += glue_points(calibrator, variants, [{"d": d} for d in sorted(set(ds))], step)
    return opmodel.with_lines(points)


def _calibration(name: str | None, device: dict):
    """The op model `validate` checks: the named one (which must be of this device), else this device's own."""

    if name is not None:
        named = load_opmodel(name)
        check_device(named, device)
        return named
    model = opmodel_for(slug(device))
    if model is None:
        return None
    try:
        check_device(model, device)
    except UserError as e:
        render.warn(f"{e}; op-model columns left empty")
        return None
    return model


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
    span = f" [{_n(low)}–{_n(high)}]" if low is not None or high is not None else ""
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
