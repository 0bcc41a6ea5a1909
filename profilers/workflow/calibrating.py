"""Calibrating the op model of a device: every op kind timed on a grid of shapes, the variants' ops at their exact
shapes, each variant's glue; the per-op time model fitted and saved. `attn-cost calibrate` and the campaign's
calibration step call `calibrate`; `calibrate --refit` calls `refit_calibration`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attn_cost.costmodel.paths import check_input
from attn_cost.profilers.devicemodel.calibrated.data import OPMODEL_KIND, OpModel, load_opmodel, user_dir
from attn_cost.profilers.devicemodel.tunables import Tunables
from attn_cost.profilers.store.files import claim, is_json_of, make_folder, not_stdout
from attn_cost.profilers.store.store import ResultStore

Step = Callable[[str, int, int], None]
"""A calibration's progress: (what is timed, shapes done, shapes in all)."""


@dataclass
class Calibrated:
    """A fitted op model, where it was saved, and what its calibration timed."""

    model: OpModel
    path: Path | None
    caches: dict[str, int]
    grid_shapes: int
    exact_shapes: int
    held_out_shapes: int
    measured: int
    """Shapes timed now (the others were in the store)."""


def calibrate(
    store: ResultStore,
    device: str,
    dtype: str,
    *,
    repeats: int,
    tune: Tunables,
    variants: list[str],
    sizes: list[dict[str, int]],
    glue: bool = True,
    context: bool = False,
    caches: dict[str, int] | None = None,
    out: Path | None = None,
    step: Step | None = None,
) -> Calibrated:
    """Time the grid of `tune` and the ops of `variants` at their exact shapes at each of `sizes` (with `glue`, each
    variant whole at short lengths too), through the store (a rerun reuses every timing); fit the op model. `out`:
    the folder it is saved in, its file claimed before anything is timed. `caches`: the device's (default: read
    here, `cache_sizes`); `context`: the model also charges each op its cache misses inside its variant."""
    from attn_cost.profilers.devicemodel.calibrated.fit import Calibrator, cache_sizes, line_grid
    from attn_cost.profilers.devicemodel.calibrated.fit import calibrate as fit

    if out is not None:
        claim(out / f"{store.slug}.json", is_json_of(OPMODEL_KIND), "an op calibration")
    caches = caches if caches is not None else cache_sizes(device)
    calibrator = Calibrator(store, device, dtype, repeats, tune=tune)
    lines = line_grid(variants, sizes, caches, dtype, tune, calibrator.rates) if variants else []
    every = (variants, sizes) if glue else ([], [])
    model, n_grid, n_lines, n_held = fit(calibrator, caches, lines=lines, glue=every, step=step or _no_step)
    model.context = context
    path = model.save(out) if out is not None else None
    return Calibrated(model, path, caches, n_grid, n_lines, n_held, calibrator.measured)


def _no_step(message: str, done: int, total: int) -> None:
    return None


def refit_calibration(path: Path, out: Path | None = None) -> tuple[OpModel, Path]:
    """Refit a calibration file from its points (no timing: its stored parameters are not reused) and save it in
    `out`, default the op models' folder (where attn-cost looks)."""
    model = load_opmodel(str(check_input(path, "an op calibration")), refit=True, from_points=True)
    target = calibration_folder(out)
    return model, model.save(target)


def calibration_folder(out: Path | None, flag: str = "--out") -> Path:
    """The folder a calibration is saved in, created if need be: `out` where given (named by `flag`), else the op
    models' folder, named as such."""
    path = out if out is not None else user_dir()
    what = f"{flag} {path}" if out is not None else f"the op calibrations' folder {path}"
    if out is not None:
        not_stdout(path, flag)
    return make_folder(path, what)
