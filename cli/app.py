"""The `attn-cost` command line: typer app, shared options and the single error path.

Bad input of any kind (a click usage error, a `UserError` from the engine) ends as one line on
stderr and exit code 2. Heavy modules (torch, plotly) are imported inside the commands that need
them, so the analytic commands start fast.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from attn_cost.costmodel.errors import UserError

app = typer.Typer(
    name="attn-cost",
    help="FLOPs, peak memory and traffic of attention variants, their crossovers, and checks on real kernels.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


INTERRUPTED = 130


def fail(message: str) -> NoReturn:
    """Stop with bad input: `main` prints the message as one line and exits 2."""
    raise UserError(message)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code."""
    from attn_cost.cli import commands  # noqa: F401  (registers the commands)

    try:
        result = app(args=argv, prog_name="attn-cost", standalone_mode=False)
    except typer.TyperException as e:  # typer's (vendored click) usage and parameter errors
        if type(e).__name__ == "NoArgsIsHelpError":  # `attn-cost` alone: help, exit 0
            print(e.ctx.get_help())
            return 0
        return _error(_with_help_hint(e), code=2)
    except UserError as e:
        return _error(str(e))
    except (typer.Abort, KeyboardInterrupt):
        result = INTERRUPTED
    if result == INTERRUPTED:  # typer turns Ctrl-C into exit code 130 itself
        return _error("interrupted; measurements made so far are saved: run the same command again to resume", code=130)
    return result if isinstance(result, int) else 0


def _with_help_hint(e: typer.TyperException) -> str:
    ctx = getattr(e, "ctx", None)
    cmd = ctx.command_path if ctx is not None else "attn-cost"
    return f"{e.format_message()} (see '{cmd} --help')"


def _error(message: str, code: int = 2) -> int:
    sys.stderr.write(f"attn-cost: error: {message}\n")
    return code


def run() -> None:
    """setuptools entry point."""
    sys.exit(main())
