"""`attn-cost calibrate`: time every op kind on a grid of shapes and fit the op-level device model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import app
from attn_cost.cli.render import Col, emit, err, right
from attn_cost.costmodel.dtypes import dtype_bytes
from attn_cost.costmodel.variants import all_variants
from attn_cost.profilers.devicemodel.calibrated.data import FIT_VERSION, LINES, user_dir
from attn_cost.profilers.devicemodel.tunables import DEFAULT, QUICK
from attn_cost.profilers.store.files import same_file
from attn_cost.profilers.workflow.calibrating import Calibrated, calibration_folder, refit_calibration
from attn_cost.profilers.workflow.calibrating import calibrate as run_calibration
from attn_cost.profilers.workflow.measuring import Events, Measuring, open_measurer
from attn_cost.profilers.workflow.measuring import measuring as read_measuring
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

REPEATS = typer.Option(7, "--repeats", help="Timed samples per shape (3 for shapes slower than 20 ms).")


@app.command()
@o.with_measuring(read_measuring, REPEATS, sdpa=False)
def calibrate(
    ctx: typer.Context,
    measuring: Measuring = o.MEASURING,
    dtype: str = o.DTYPE,
    quick: bool = typer.Option(
        False,
        "--quick",
        help="A coarse grid, exact shapes at every third length and (without --d) d = 16 only: a smoke test, "
        "not for predictions.",
    ),
    context: bool = typer.Option(
        False,
        "--context/--no-context",
        help="Also charge each op the cache misses it has inside its variant and not alone (reuse distances).",
    ),
    d_values: Optional[list[int]] = typer.Option(
        None,
        "--d",
        help="Head dims whose variants' ops are also timed at their exact shapes; repeatable.",
        show_default="8,16,24,32,48,64",
    ),
    variant: Optional[list[str]] = typer.Option(
        None, "--variant", help="Variants whose ops are timed at their exact shapes; repeatable. Default: all."
    ),
    exact: bool = typer.Option(
        True, "--exact/--no-exact", help="Time the variants' ops at their exact shapes (--d, --variant) too."
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Directory for the op model (default: $ATTN_COST_HOME/opmodels or ~/.local/share/...)."
    ),
    refit: Optional[Path] = typer.Option(
        None, "--refit", help="Time nothing: refit this calibration file from its points with this attn-cost's fit "
        "and save it (to --out, default the op models' folder).",
    ),
    as_json: bool = o.JSON,
) -> None:
    """Time every op kind the engine emits (products, element-wise, reductions, outer products, SDPA, loop
    steps) from launch-bound sizes to beyond the last-level cache, and each variant's ops at their exact
    shapes along N; fit the per-op time model that `validate`, `crossover --device` and `report` use to
    predict any variant's time from its op list."""
    if refit is not None:
        o.not_with(ctx, "--refit", TIMING, "times nothing (it refits a calibration file from its points)")
        _refit(refit, out, as_json)
        return
    ds = o.head_dims(d_values, None, 1, default=[])
    names = o.variant_names(variant or [], causal=False)
    dtype_bytes(dtype)
    target = calibration_folder(out)
    measurer = open_measurer(measuring, "core", dtype, [], Events(**o.to_terminal()))
    tune = QUICK if quick else DEFAULT
    every = (names or [v.name for v in all_variants()]) if exact else []
    sizes = [{"d": d} for d in ds or tune.line_d]
    with _bar() as step:
        done = run_calibration(measurer.store, measurer.device, dtype, repeats=measuring.repeats or 7, tune=tune,
                               variants=every, sizes=sizes, context=context, out=target, step=step)  # fmt: skip
    for suspect in done.model.suspects:  # on stderr, in text and JSON modes alike
        render.warn(f"implausible timing: {suspect}: was the machine quiet? (`suspects` in {done.path})")
    if as_json:
        summary = done.model.as_json()
        summary.pop("points")
        emit({**summary, "grid_shapes": done.grid_shapes, "exact_shapes": done.exact_shapes,
              "held_out_shapes": done.held_out_shapes, "measured": done.measured,
              "saved_to": str(done.path)})  # fmt: skip
        return
    _tables(done)


@contextmanager
def _bar() -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar on stderr for a calibration; yields its step(message, done, total)."""
    columns = (TextColumn("{task.description}", style="dim"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("calibrating", total=None)

        def step(message: str, done: int, total: int) -> None:
            bar.update(task, description=message[:40], completed=done, total=total)

        yield step


def _tables(done: Calibrated) -> None:
    """The op model's kernels, its overheads, what was timed, its held-out errors and where it was saved."""
    model, caches, path = done.model, done.caches, done.path
    assert path is not None  # a calibration the command made is saved
    summary = model.as_json()
    dev = model.device
    rows = []
    for name, k in summary["kernels"].items():
        big = [x for x in k.get("large_bytes_per_s", []) if x]
        rows.append([
            name,
            k["form"],
            f"{k['launch_s'] * 1e6:.2f}",
            f"{min(big) / 1e9:.1f}" if big else "—",
            f"{k['peak_flops_per_s'] / 1e9:.1f}" if k["form"] == "gemm" else "—",
        ])  # fmt: skip
    render.table(
        f"Op model of {dev['name']} ({dev['kind']}, {dev.get('threads')} threads)",
        [Col("kernel"), Col("form"), right("launch µs"), right("large GB/s"), right("peak GFLOP/s")],
        rows,
    )
    over = model.overheads
    chain = (f"; inside a chain, {over.chain.launch * 1e6:.2f} µs per ATen kernel and {100 * over.chain.share:.0f} % "
             "of the ops' time" if over.chain else "")  # fmt: skip
    render.sentence(
        f"Beside its ops a variant pays {over.call_s * 1e6:.2f} µs a call and {over.loop_step_s * 1e6:.2f} µs a loop "
        f"iteration{chain}.",
        indent=0,
    )
    caches_txt = ", ".join(f"{k} {v / 1024:,.0f} KiB" for k, v in caches.items())
    render.sentence(
        f"Caches: {caches_txt}. {done.grid_shapes:,} grid shapes, {done.exact_shapes:,} exact shapes of the "
        f"variants' ops, {done.measured:,} newly timed.",
        indent=0,
    )
    for family, e in model.held_out.items():
        what = "lengths left out of a line" if family == LINES else "shapes off the grid"
        render.sentence(
            f"Held-out error ({family}, {e['shapes']} {what}): "
            f"median {100 * e['median_abs_error']:.1f} %, worst {100 * e['max_abs_error']:.1f} %",
            indent=0,
        )
    if same_file(path.parent, user_dir()):
        used = f"`attn-cost validate` and `crossover --device {model.slug}` use it."
    else:
        used = (f"it is not where attn-cost looks (`{user_dir()}`): use it with `attn-cost validate --calibration "
                f"{path}`, or copy it there for `crossover --device {model.slug}`.")  # fmt: skip
    render.sentence(f"Saved the op model to {path}; {used}", indent=0)


TIMING = ["--gpu", "--cpu", "--threads", "--repeats", "--dtype", "--quick", "--store", "--fresh", "--context",
             "--no-context", "--d", "--variant", "--exact", "--no-exact"]  # fmt: skip
"""The options of a calibration that times: `--refit` times nothing and refuses them."""


def _refit(path: Path, out: Path | None, as_json: bool) -> None:
    """Refit a calibration file from its points (no timing: its stored parameters are not reused) and save it
    where attn-cost looks, or to --out."""
    model, saved = refit_calibration(path, out)
    if as_json:
        emit({"refitted": str(path), "fit_version": FIT_VERSION, "saved_to": str(saved)})
        return
    render.sentence(f"Refitted {path} with fit version {FIT_VERSION} from its {len(model.points):,} points; saved "
                    f"to {saved}.", indent=0)  # fmt: skip
