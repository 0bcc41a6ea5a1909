"""`attn-cost kernels`: time the kernels `--kernel` names that run on this machine, into a published-format table.

Everything is checked before torch is imported: names, sizes, the dtype, --out (a file attn-cost wrote before, or
none); then `--gpu` without CUDA and a kernel that does not run here end in one line, exit 2. The table is
rewritten whole after every point, so an interrupted run keeps every point it timed.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import app, fail, typed
from attn_cost.cli.render import Col, emit, progress, right
from attn_cost.costmodel.dtypes import ACTIVATION
from attn_cost.costmodel.errors import unknown
from attn_cost.profilers.devicemodel.datasheet.data import for_device
from attn_cost.profilers.devicemodel.datasheet.kernels import CHOICES
from attn_cost.profilers.devicemodel.datasheet.published import is_kernel_table
from attn_cost.profilers.measure.machine import cpu_info
from attn_cost.profilers.store.files import STDOUT, claim, write_atomic
from attn_cost.profilers.workflow.measuring import choose_device, measuring

from attn_cost import __version__


@app.command()
def kernels(
    out: Path = typer.Option(
        ...,
        "--out",
        help="The table to write (long-format CSV; one this command wrote before "
        "is replaced, any other file is refused).",
    ),
    gpu: bool = o.GPU,
    cpu: bool = o.CPU,
    kernel: Optional[list[str]] = typer.Option(
        None,
        "--kernel",
        help="A kernel to time; repeatable (default: every one that runs here, as `attn-cost doctor` lists them).",
    ),
    dtype: Optional[str] = typer.Option(
        None, "--dtype", help="fp16, bf16 or fp32 (default bf16 on CUDA, fp32 on a CPU)."
    ),
    d_values: Optional[list[int]] = typer.Option(None, "--d", help="Head dims; repeatable (default 64, 128)."),
    lengths: Optional[list[int]] = typer.Option(
        None, "--n", help="Lengths; repeatable (default 1,024 to 16,384); b = 16,384 / N, h = 2,048 / d."
    ),
    batch: Optional[int] = typer.Option(None, "--b", help="Batch (default 16,384 / N)."),
    heads: Optional[int] = typer.Option(None, "--h", help="Heads (default 2,048 / d)."),
    minutes: float = typer.Option(5.0, "--minutes", help="Stop starting points after this many minutes."),
    as_json: bool = o.JSON,
) -> None:
    """Time the kernels `--kernel` names that run on this machine (SDPA's backends, flash-attn, FlashAttention-3,
    fla's chunk kernels) at FlashAttention-2's benchmark shapes, forward and forward + backward, into a table in
    the published tables' format: `python benchmarks/gpu_kernels.py --measured FILE` judges the datasheet model on
    it."""
    names = list(dict.fromkeys(kernel or []))
    for name in names:
        if name not in CHOICES:
            fail(unknown("--kernel", name, CHOICES))
    if dtype is not None and dtype not in ACTIVATION:
        fail(unknown("--dtype", dtype, list(ACTIVATION)))
    for values, flag in ((d_values, "--d"), (lengths, "--n"), ([batch], "--b"), ([heads], "--h")):
        for value in values or []:
            o.positive(value, flag)
    if not 0 < minutes < math.inf:
        fail(f"--minutes must be a positive number of minutes, got {typed('--minutes', minutes)}")
    if str(out) == STDOUT:
        fail(f"--out takes a file path, not {STDOUT!r}: the table is rewritten after every point")
    claim(out, is_kernel_table, "a kernel table of `attn-cost kernels`")
    from attn_cost.profilers.measure import kernel_times as kt

    device = choose_device(measuring(gpu, cpu))
    here = _here(device)
    for name in names:
        if not here[name]["here"]:
            fail(f"--kernel {name} does not run here: {here[name]['why']}")
    chosen = names or [name for name, k in here.items() if k["here"]]
    dtype = dtype or ("bf16" if device == "cuda" else "fp32")
    layers = tuple(dict.fromkeys([kt.FUSED_CHUNK_VARIANT, *kt.chunk_variants(device)]))  # retention: fla's own call
    points = kt.shapes(chosen, tuple(d_values or kt.HEAD_DIMS), tuple(lengths or kt.LENGTHS), batch, heads, layers)
    gpu_name, header = _identity(device, dtype, kt.HARNESS)
    rows: list[dict] = []
    missed: list[dict] = []
    deadline = time.monotonic() + 60 * minutes
    with progress() as notify:
        for i, shape in enumerate(points):
            if time.monotonic() > deadline:
                missed += [{"kernel": s.kernel, "n": s.n, "d": s.d, "why": "not started: past --minutes"}
                           for s in points[i:]]  # fmt: skip
                break
            notify(f"{shape.kernel} {shape.direction} N={shape.n:,} d={shape.d} ({i + 1} of {len(points)})")
            row, why = kt.time_point(shape, dtype, device, gpu_name)
            if row is None:
                missed.append({"kernel": shape.kernel, "n": shape.n, "d": shape.d, "why": why})
                continue
            rows.append(row)
            write_atomic(out, kt.table_text(rows, header))
    if not rows:
        write_atomic(out, kt.table_text(rows, header))
    if as_json:
        emit({"out": str(out), "device": gpu_name, "dtype": dtype, "kernels": chosen, "rows": rows, "missed": missed})
        return
    cells = [[r["kernel"], r["direction"], "yes" if r["causal"] == "true" else "no", r["d"], f"{int(r['n']):,}",
              r["value"]] for r in rows]  # fmt: skip
    columns = [Col("kernel"), Col("direction"), Col("causal"), right("d"), right("N"), right("ms")]
    render.table(f"Kernels on {gpu_name} ({dtype}), milliseconds a call", columns, [[str(c) for c in r] for r in cells],
                 keys=1)  # fmt: skip
    render.sentence(f"Written to {out} ({len(rows)} points). Judge the datasheet model on it: python "
                    f"benchmarks/gpu_kernels.py --measured {out}.", indent=0)  # fmt: skip
    for why, count in Counter(m["why"] for m in missed).items():
        which = sorted({m["kernel"] for m in missed if m["why"] == why})
        render.line(f"not timed: {count} point{'s' * (count > 1)} of {', '.join(which)}: {why}", markup=False)


def _here(device: str) -> dict:
    """Which kernels run here (`kernel_times.kernels_here` on the probes `doctor` makes of SDPA and fla)."""
    from attn_cost.profilers.measure import kernel_times as kt

    return kt.kernels_here(device, kt.sdpa_table(device, kt.HEAD_DIMS, ACTIVATION)["runs"], kt.fla_status(device))


def _identity(device: str, dtype: str, harness: str) -> tuple[str, dict]:
    """The table's GPU column (the datasheet row that names this GPU, else its own name; `cpu` on a CPU) and its
    header lines: where and how it was measured."""
    import torch

    if device == "cuda":
        title = torch.cuda.get_device_name(0)
        sheet = for_device(title)
        name = sheet.name if sheet is not None else title
    else:
        title, name = cpu_info().get("name") or "CPU", "cpu"
    header = {
        "source": f"measured by attn-cost {__version__} (`attn-cost kernels`) on {title}, "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}",
        "gpu": title,
        "software": f"torch {torch.__version__}, CUDA {torch.version.cuda}",
        "harness": harness,
        "dtype": dtype,
    }
    return name, header
