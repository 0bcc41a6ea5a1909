"""`attn-cost report`: everything the engine derives and the profiler measured, in one offline HTML file
(built by `profilers.report.gather.gather`, drawn by `profilers.report.page.render`); the full data set is embedded
in the page as JSON, so the report can be checked against the CLI and re-plotted without the tool."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Optional

import typer
from attn_cost.cli import options as o
from attn_cost.cli.app import app, fail
from attn_cost.cli.render import emit, line, progress
from attn_cost.cli.settings import Settings
from attn_cost.costmodel.crossover import DEFAULT_PAIRS
from attn_cost.costmodel.paths import real
from attn_cost.profilers.report.gather import gather
from attn_cost.profilers.store.files import claim, is_html_report, write_atomic


@app.command()
@o.with_counting()
def report(
    html: Path = typer.Option(..., "--html", help="Where to write the report (one self-contained HTML file)."),
    variant: Optional[list[str]] = typer.Option(
        None, "--variant", help="Repeatable. Default: the variants of the pairs."
    ),
    pair: Optional[list[str]] = typer.Option(
        None, "--pair", help="A:B, repeatable. Default: the TaylorShift pair and softmax:taylorshift-efficient."
    ),
    d_values: Optional[list[int]] = typer.Option(None, "--d", help="Head dims; repeatable (default 16, 32, 64)."),
    embed: int = typer.Option(256, "--d-embed", help="Embedding width for the heads trade-off."),
    n: int = typer.Option(1024, "--n", help="Sequence length for the heads trade-off (memory depends on it)."),
    device: Optional[str] = typer.Option(
        None,
        "--device",
        help="Any device (`attn-cost devices`): a measured one (its corrected and measured points), a calibrated "
        "one or a datasheet GPU (each variant's predicted time with its 95 % band, the predicted crossings).",
    ),
    convention: str = o.CONVENTION,
    dtype: Optional[str] = o.DEVICE_DTYPE,
    scope: Optional[str] = o.SCOPE,
    kernel: Optional[str] = o.KERNEL,
    pytorch: Optional[str] = o.PYTORCH,
    as_json: bool = typer.Option(False, "--json", help="Also print the report's data as JSON."),
) -> None:
    """Write an offline HTML report: cost curves, crossovers vs d, heads, formulas, predicted vs measured."""
    try:
        from attn_cost.profilers.report.page import render
    except ImportError as e:  # plotly is the `report` extra: pip install 'attn-cost[report]'
        fail(f"the HTML report needs plotly, which is not installed ({e}); pip install plotly")

    pairs = o.pairs(pair, list(DEFAULT_PAIRS))
    names = o.variant_names(variant, False) if variant else sorted({v for p in pairs for v in p}, key=_order(pairs))
    ds = o.head_dims(d_values, None, 1, default=[16, 32, 64])
    o.positive(embed, "--d-embed"), o.positive(n, "--n")
    every = sorted(set(names) | {v for p in pairs for v in p})
    settings = Settings.resolve(device, dtype, lambda dt: o.setting(convention, dt, scope, "inference", every),
                                kernel=kernel, pytorch=pytorch)
    settings.check_kernel(every, o.sizes(ds[0], 1, 1, None))
    st, model = settings.setting, settings.model
    writable_report(html)

    with progress() as notify:  # the op model's bootstrap intervals take seconds a row
        notify(f"computing the report{f' with {device}' if device else ''}")
        data = gather(names, pairs, ds, embed, n, model, st)
    claim(html, is_html_report, "an HTML report")  # again: the file may have appeared while the report was made
    write_atomic(html, render(data))
    if as_json:
        emit(data)
        return
    size = html.stat().st_size
    line(f"Wrote {html} ({size / 1e6:.1f} MB, self-contained: open it in any browser, offline).", markup=False)


def writable_report(html: Path) -> None:
    """Check --html before any work: an .html file name, in an existing folder we may write in.

    A probe file is created and removed in the folder, so /proc, /sys, read-only mounts and full
    disks are answered in one line before the report is computed."""

    if html.suffix.lower() not in (".html", ".htm"):
        fail(f"--html wants a file name ending in .html, got {html}")
    if html.is_dir():
        fail(f"--html {html} is a folder: give a file name such as {html / 'report.html'}")
    folder = real(html).parent  # where a link at --html points: the file written is there
    if not folder.is_dir():
        fail(f"the folder {folder} does not exist" if not folder.exists() else f"{folder} is not a folder")
    if html.exists() and not os.access(html, os.W_OK):
        fail(f"cannot write the report to {html}: permission denied")
    claim(html, is_html_report, "an HTML report")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".attn-cost-", suffix=".probe") as probe:
            probe.write(b"x")
            probe.flush()
    except OSError as e:
        fail(f"cannot write the report in {folder}: {e.strerror or e.__class__.__name__}")


def _order(pairs: list[tuple[str, str]]):
    seen = [v for p in pairs for v in p]
    return lambda v: seen.index(v) if v in seen else math.inf
