"""`attn-cost trace PATH:NAME`: a variant derived from PyTorch code (the `--trace` option every command takes is
`options.add_user_options`'s). torch is imported only when something is traced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import sympy as sp
import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import app
from attn_cost.cli.main import command_line
from attn_cost.cli.render import emit
from attn_cost.costmodel import display
from attn_cost.costmodel.formula import formula_data
from attn_cost.costmodel.variants import derive


@app.command()
def trace(
    spec: str = typer.Argument(..., metavar="PATH:NAME", help="A Python file and a function or nn.Module in it."),
    init: Optional[list[str]] = typer.Option(
        None, "--init", metavar="KEY=VALUE", help="A constructor argument of the module class; repeatable."
    ),
    config: Optional[Path] = typer.Option(
        None, "--config", metavar="FILE.json", help="A Hugging Face config.json (or a JSON of constructor arguments)."
    ),
    example: Optional[str] = typer.Option(
        None, "--example", metavar="N=..,d=..", help="Sizes of the example inputs (default b=2,h=3,N=13,d=8)."
    ),
    check: Optional[str] = typer.Option(
        None, "--check", metavar="N=..,b=..",
        help="Run the real code at these sizes too: FlopCounterMode and the live-tensor peak beside the formulas.",
    ),
    convention: str = o.CONVENTION,
    dtype: str = o.DTYPE,
    scope: Optional[str] = o.SCOPE,
    mode: str = o.MODE,
    latex: bool = typer.Option(False, "--latex", help="Print the formulas as LaTeX."),
    as_json: bool = o.JSON,
) -> None:
    """Derive a variant from PyTorch code run with symbolic N: its FLOPs, peak memory, traffic and ops.

    NAME is a function (q, k, v) -> y over per-head tensors (b, h, N, d), or an nn.Module class whose
    forward takes x of shape (b, N, d_embed) (constructor arguments from --init and --config; a Hugging Face
    attention class gets its rotary embeddings and causal mask as its model makes them). The peak is the one
    of the code as written (Python names keep tensors alive); the exported graph's peak is shown beside it.
    Importing PATH runs its module-level code. Other commands take `--trace PATH:NAME` and then know NAME.
    """
    from attn_cost.profilers.trace.check import checked
    from attn_cost.profilers.trace.register import exported_peak, register, traced

    name = register(spec, init, config, example)
    t = traced(name)
    checks = [checked(t, check)] if check is not None else []
    args = [name, "--convention", convention, "--dtype", dtype, "--mode", mode]
    args += ["--scope", scope] if scope else []
    args += ["--latex"] if latex else []
    ideal, why = exported_peak(t, dtype)
    if as_json:

        st = o.setting(convention, dtype, scope, mode, [name])
        data = formula_data(name, st.convention, dtype, st.scope, mode, st.counting)
        data["traced"] = {
            "kind": t.kind,
            "symbolic": list(t.symbolic),
            "fixed": t.recording.fixed,
            "example": {k: v for k, v in t.example.items() if t.kind == "core" or k in ("b", "N")},
            "d_embed": t.width,
            "heads": t.heads,
            "holds_for": t.conditions,
            "peak_bytes_as_written": data["peak_bytes"],
            "peak_bytes_exported": display.plain(ideal) if ideal is not None else None,
            "exported_note": why or None,
            "checks": checks,
        }
        emit(data)
        return
    formula = command_line().commands["formula"]
    formula.main(args=args, prog_name="attn-cost trace", standalone_mode=False)
    _report(t, ideal, why, dtype, checks)


def _report(t, ideal, why: str, dtype: str, checks: list[dict]) -> None:
    """What the formulas assume and where the code's peak and the exported graph's differ."""

    render.line("[bold]Traced[/]")
    shown = {k: v for k, v in t.example.items() if t.kind == "core" or k in ("b", "N")}
    render.line(f"  example sizes: {', '.join(f'{k} = {v}' for k, v in shown.items())} (choose with --example)")
    if t.width is not None:
        heads = f", {t.heads} heads" if t.heads else ""
        render.line(f"  the module's own widths: d_embed = {t.width}{heads} (crossovers compare it at its widths)")
    if t.conditions:
        render.line(f"  the formulas hold for: {'; '.join(t.conditions)} (the code's branches on sizes)")
    written = derive(t.name, t.kind).peak(dtype).expr
    if ideal is None:
        render.line(f"  exported-graph peak: not available: {why}")
    elif sp.expand(ideal - written) != 0:
        render.line(f"  peak as written (above) {display.text(written)} bytes; exported graph, every tensor freed "
                    f"after its last use: {display.text(ideal)} bytes")  # fmt: skip
    else:
        render.line("  peak: the code as written reaches the exported graph's ideal")
    for c in checks:
        render.line(
            f"  check at {c['sizes']}: FLOPs {c['flops_formula']} (FlopCounterMode {c['flops_flopcountermode']}), "
            f"peak {c['peak_bytes_formula']} B (live-tensor tracer {c['peak_bytes_live_tracer']} B)"
        )
