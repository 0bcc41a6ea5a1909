"""`attn-cost trace PATH:NAME`, and the `--variants` / `--trace` options every command takes.

The two options are added to every registered command after registration (`add_user_options`), as
eager options whose callbacks load the user's files into the registry before the command body runs;
the command bodies do not change. torch is imported only when something is traced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from attn_cost.cli import options as o
from attn_cost.cli.app import app


def load_variant_files(paths: Optional[list[Path]]) -> None:
    """--variants callback: register the variants of each file (no torch)."""
    from attn_cost.costmodel.plugins import load_file

    for p in paths or []:
        load_file(p)


def load_traces(specs: Optional[list[str]]) -> None:
    """--trace callback: export each PATH:NAME with torch.export and register it as NAME."""
    if not specs:
        return
    from attn_cost.profilers.trace import register

    for spec in specs:
        register(spec)


def _user_options(
    variants: Optional[list[Path]] = typer.Option(
        None,
        "--variants",
        help="A Python file of variants written with the op DSL (docs/variants.md); repeatable. "
        "Also: ATTN_COST_VARIANTS=path1:path2 and the `attn_cost.variants` entry points.",
        callback=load_variant_files,
        is_eager=True,
        expose_value=False,
        metavar="PATH",
    ),
    traces: Optional[list[str]] = typer.Option(
        None,
        "--trace",
        help="PATH:NAME: derive a variant named NAME from PyTorch code (see `attn-cost trace`); repeatable.",
        callback=load_traces,
        is_eager=True,
        expose_value=False,
        metavar="PATH:NAME",
    ),
) -> None:
    """Never called: carries the two options that `add_user_options` copies onto every command."""


def add_user_options(group) -> None:
    """Give every subcommand of the click group the --variants and --trace options."""
    carrier = typer.Typer(add_completion=False)
    carrier.command()(_user_options)
    params = typer.main.get_command(carrier).params
    for command in group.commands.values():
        names = {opt for p in command.params for opt in p.opts}
        command.params.extend(p for p in params if not set(p.opts) & names)


@app.command()
def trace(
    spec: str = typer.Argument(..., metavar="PATH:NAME", help="A Python file and a function or nn.Module in it."),
    convention: str = o.CONVENTION,
    dtype: str = o.DTYPE,
    scope: Optional[str] = o.SCOPE,
    mode: str = o.MODE,
    latex: bool = typer.Option(False, "--latex", help="Print the formulas as LaTeX."),
    as_json: bool = o.JSON,
) -> None:
    """Derive a variant from PyTorch code (torch.export, symbolic N): its FLOPs, peak memory, traffic and ops.

    NAME is a function (q, k, v) -> y over per-head tensors (b, h, N, d), or an nn.Module subclass that
    builds without arguments and whose forward(x) takes (b, N, d_embed). The output is the one of
    `attn-cost formula NAME`; other commands take `--trace PATH:NAME` and then know NAME.
    """
    name = _register(spec)
    args = [name, "--convention", convention, "--dtype", dtype, "--mode", mode]
    args += ["--scope", scope] if scope else []
    args += ["--latex"] if latex else []
    args += ["--json"] if as_json else []
    formula = typer.main.get_command(app).commands["formula"]
    formula.main(args=args, prog_name="attn-cost trace", standalone_mode=False)


def _register(spec: str) -> str:
    from attn_cost.profilers.trace import register

    return register(spec)
