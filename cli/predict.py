"""`attn-cost predict`: a variant's time and peak memory on any device attn-cost knows: a GPU one does not own (its
datasheet), a measured device (its profile's fits, its op calibration for the other variants) or a calibrated one.

No torch: every device model prices the engine's op list with numpy (resolved by `settings.Settings.resolve`).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import app
from attn_cost.cli.render import Col, emit, progress, right
from attn_cost.cli.settings import Settings


@app.command()
@o.with_counting(only=("feature_map", "normalize"))
@o.with_sizes()
def predict(
    device: str = typer.Option(
        ...,
        "--device",
        help="Any device (`attn-cost devices`): a datasheet GPU (h100-sxm5-80gb, ...), a measured or calibrated one "
        "(cpu-amd-epyc-5155e7, ...).",
    ),
    variant: list[str] = typer.Option(..., "--variant", help="Repeatable."),
    n: list[int] = typer.Option(..., "--n", help="Sequence length; repeatable."),
    d: int = typer.Option(64, "--d", help="Head dimension."),
    heads: int = o.HEADS,
    batch: int = o.BATCH,
    latents: Optional[int] = o.LATENTS,
    dtype: Optional[str] = typer.Option(
        None,
        "--dtype",
        help="fp32, bf16 or fp16 (default: bf16 on a datasheet GPU, else what the device was measured in).",
    ),
    scope: Optional[str] = o.SCOPE,
    mode: str = o.MODE,
    causal: bool = o.CAUSAL,
    launch: Optional[str] = o.LAUNCH,
    launch_us: Optional[float] = o.LAUNCH_US,
    kernel: Optional[str] = o.KERNEL,
    pytorch: Optional[str] = o.PYTORCH,
    as_json: bool = o.JSON,
) -> None:
    """Predicted seconds (with a 95 % interval) and peak bytes of variants on a device, per variant and N, and which
    model answered."""

    names = o.variant_names(variant, causal)
    lengths = sorted(n)
    for value in lengths:
        o.positive(value, "--n")
    o.positive(d, "--d")
    settings = Settings.resolve(device, dtype, lambda dt: o.setting(o.DEFAULT, dt, scope, mode, names,
                                                                     {"--L": latents}), launch, launch_us,
                               kernel, pytorch)  # fmt: skip
    st, model, dtype, default_us = settings.setting, settings.model, settings.dtype, settings.default_launch_us
    assert model is not None  # --device is required
    sizes = o.sizes(d, heads, batch, latents)
    for name in names:  # one line on a variant or setting the device has no model of, before any work
        model.check(name, st)
    settings.check_kernel(names, sizes)
    results: list[dict[str, Any]] = []
    by: dict[str, str] = {}
    ns = np.array(lengths, dtype=float)
    with progress() as notify:  # an op calibration's bootstrap interval takes seconds a variant
        for name in names:
            notify(f"predicting {name} on {model.name}")
            answering = model.answering(name, st)
            by[answering.kind] = answering.answered_by
            times = answering.seconds(name, sizes, ns, st)
            peaks = answering.peak_bytes(name, sizes, ns, st)
            for i, length in enumerate(lengths):
                peak = int(peaks[i])
                fits = peak <= model.memory_bytes if model.memory_bytes is not None else None
                results.append({
                    "variant": name, "n": length, "seconds": float(times.seconds[i]),
                    "seconds_low": float(times.low[i]), "seconds_high": float(times.high[i]), "peak_bytes": peak,
                    "fits_in_memory": fits, "predicted_by": answering.kind,
                    **({"kernels": kernels} if (kernels := settings.kernels(name, sizes)) else {}),
                })  # fmt: skip
    if as_json:
        host = (
            {"launch_us": settings.launch_json()["launch"]["launch_us"], "launch_us_given": launch_us is not None,
             **settings.launch_json()}
            if settings.datasheet
            else {}
        )
        emit({"device": model.name, "kind": model.kind, "predicted_by": " and ".join(by), "answered_by": by,
              "setting": st.as_json(), "d": d, "heads": heads, "batch": batch, "memory_bytes": model.memory_bytes,
              **host, "results": results})  # fmt: skip
        return
    over = any(r["fits_in_memory"] is False for r in results)
    launched = (f" Launch cost: {launch_us:g} µs a kernel (--launch-us; the setting's own is {default_us:.3g} µs)."
                if launch_us is not None else "")  # fmt: skip
    title = settings.title
    beyond = (f" †: does not fit in the {model.sheet.memory_gb:g} GB of the {title}: its time is of a run that "  # type: ignore[attr-defined]
              "cannot happen." if over and settings.datasheet else "")  # fmt: skip
    mixed = len(by) > 1
    cells = [[r["variant"], f"{r['n']:,}", render.duration(r["seconds"]),
              render.duration_span(r["seconds_low"], r["seconds_high"]),
              render.size(r["peak_bytes"]) + (" †" if r["fits_in_memory"] is False else ""),
              *([Settings.label(r["predicted_by"])] if mixed else [])] for r in results]  # fmt: skip
    answered = (" ".join(f"{Settings.label(kind)}: times {sentence}." for kind, sentence in by.items()) if mixed
                else f"Times {next(iter(by.values()))}.")  # fmt: skip
    render.table(
        f"Predicted on {title} ({st.scope}, {mode}, {dtype}, d={d}, h={heads}, b={batch})",
        [Col("variant"), right("N"), right("time"), right("95 % interval"), right("peak memory"),
         *([Col("by")] if mixed else [])],
        cells,
        keys=1,
        caption=answered + launched + beyond,
    )  # fmt: skip
    if caption := settings.kernel_caption(names, sizes):
        render.prose(caption)
