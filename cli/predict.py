"""`attn-cost predict`: a variant's time and peak memory on a GPU one does not own, from its datasheet.

No torch: the datasheet model prices the engine's op list with numpy (`profilers.devicemodel.gpumodel`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import numpy as np
import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import app, fail
from attn_cost.cli.render import Col, emit, right
from attn_cost.profilers.devicemodel.devices import datasheet_of
from attn_cost.profilers.devicemodel.gpumodel import GpuModel, fitted, peak_bytes, record_line


@app.command()
@o.with_sizes
def predict(
    device: str = typer.Option(..., "--device", help="A datasheet GPU (`attn-cost devices`): h100-sxm5-80gb, ..."),
    variant: list[str] = typer.Option(..., "--variant", help="Repeatable."),
    n: list[int] = typer.Option(..., "--n", help="Sequence length; repeatable."),
    d: int = typer.Option(64, "--d", help="Head dimension."),
    heads: int = o.HEADS,
    batch: int = o.BATCH,
    latents: Optional[int] = o.LATENTS,
    dtype: str = typer.Option("bf16", "--dtype", help="fp32, bf16 or fp16."),
    scope: Optional[str] = o.SCOPE,
    mode: str = o.MODE,
    causal: bool = o.CAUSAL,
    launch_us: Optional[float] = typer.Option(
        None, "--launch-us", help="Your host's cost of one kernel launch from eager PyTorch, µs (default: fitted)."
    ),
    as_json: bool = o.JSON,
) -> None:
    """Predicted seconds (with a 95 % interval) and peak bytes of variants on a datasheet GPU, per variant and N."""

    names = o.variant_names(variant, causal)
    lengths = sorted(n)
    for value in lengths:
        o.positive(value, "--n")
    o.positive(d, "--d")
    st = o.setting(o.DEFAULT, dtype, scope, mode, names, {"--L": latents})
    sizes = o.sizes(d, heads, batch, latents)
    sheet = datasheet_of(device)
    eff, sigma, _ = fitted()
    fitted_us = eff.launch_s * 1e6
    if launch_us is not None:
        if not 0 < launch_us <= 1e6:  # NaN fails too
            fail(f"--launch-us must be a positive number of microseconds (at most 10^6), got {launch_us}")

        eff = replace(eff, launch_s=launch_us * 1e-6)
    model = GpuModel(sheet, eff, sigma)
    results: list[dict[str, Any]] = []
    for name in names:
        seconds = model.time(name, sizes, np.array(lengths, dtype=float), st.scope, dtype, mode)
        low, high = model.interval(seconds)
        for i, length in enumerate(lengths):
            peak = peak_bytes(name, sizes, length, st.scope, dtype, mode)
            results.append({
                "variant": name, "n": length, "seconds": float(seconds[i]), "seconds_low": float(low[i]),
                "seconds_high": float(high[i]), "peak_bytes": peak, "fits_in_memory": peak <= sheet.memory_bytes,
            })  # fmt: skip
    if as_json:
        emit({"device": sheet.name, "predicted_by": "datasheet", "setting": st.as_json(),
              "d": d, "heads": heads, "batch": batch, "memory_bytes": sheet.memory_bytes,
              "launch_us": eff.launch_s * 1e6, "launch_us_given": launch_us is not None,
              "results": results})  # fmt: skip
        return
    over = any(not r["fits_in_memory"] for r in results)
    launch = (f" Launch cost: {launch_us:g} µs a kernel (--launch-us; the fitted one is {fitted_us:.3g} µs)."
              if launch_us is not None else "")  # fmt: skip
    beyond = (f" †: does not fit in the {sheet.memory_gb:g} GB of the {sheet.title}: its time is of a run that "
              "cannot happen." if over else "")  # fmt: skip
    cells = [[r["variant"], f"{r['n']:,}", _time(r["seconds"]), _span(r["seconds_low"], r["seconds_high"]),
              _bytes(r["peak_bytes"]) + ("" if r["fits_in_memory"] else " †")] for r in results]  # fmt: skip
    render.table(
        f"Predicted on {sheet.title} ({st.scope}, {mode}, {dtype}, d={d}, h={heads}, b={batch})",
        [Col("variant"), right("N"), right("time"), right("95 % interval"), right("peak memory")],
        cells,
        keys=1,
        caption=record_line().replace("N0 datasheet: predicted", "Times predicted") + launch + beyond,
    )


def _span(low: float, high: float) -> str:
    return f"{_time(low)}–{_time(high)}"


def _time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-6:.2g} µs"


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"
