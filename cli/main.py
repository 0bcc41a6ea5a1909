"""Running the command line: `main` parses and runs a command, and turns every kind of bad input into one line.

Bad input of any kind (a click usage error, a `UserError` from the engine, an OS error such as an unwritable path or
a full disk) ends as one line on stderr and exit code 2; Ctrl-C as one line and 130, a closed pipe quietly. The
commands register on `cli.app.app` as their modules are imported (`cli.commands`); this module imports them all.
"""

from __future__ import annotations

import functools
import importlib
import sys
import warnings
from typing import Any

import click
import typer
from attn_cost.cli.app import Status, app, kept, note, notes, polish_help, started, words
from attn_cost.cli.commands import COMMANDS
from attn_cost.cli.exits import describe_os_error, error, interrupted, silence_stdout
from attn_cost.cli.options import add_user_options, bound_sizes, once_each, read_words
from attn_cost.cli.render import one_line
from attn_cost.costmodel.errors import InputWarning, PricingWarning, UserError


@functools.cache
def command_line() -> Any:
    """The CLI as one click group, built once a process (every `main` call made in one process: the tests, a
    notebook): it lists every command (`cli.commands.COMMANDS`) and builds one when it runs (`command`)."""
    group: Any = typer.main.get_command(app)
    polish_help(group, below=False)
    group.load = command
    return group


def command(name: str) -> Any:
    """Command `name` as click runs it: its module imported (which registers it on the typer app), typer's click
    command of it, and what every command gets (--variants and --trace, help metavars, size limits, each repeated
    value once)."""
    importlib.import_module(f"attn_cost.cli.{COMMANDS[name].module}")
    group: Any = typer.main.get_command(app)  # a LazyGroup: `registered` holds the commands typer built
    built = group.registered[name]
    add_user_options(built)  # --variants PATH and --trace PATH:NAME
    polish_help(built)
    bound_sizes(built)
    once_each(built)
    return built


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code."""
    started()
    shown = warnings.showwarning
    warnings.showwarning = _pricing_note(shown)
    click_errors = _click_exceptions()
    stdout = sys.stdout
    try:
        command = command_line()
        read_words(command, sys.argv[1:] if argv is None else argv)
        result = command.main(args=argv, prog_name="attn-cost", standalone_mode=False)
    except click_errors.ClickException as e:  # click's usage and parameter errors (typer's own copy or click)
        return error(_with_help_hint(e), code=Status.BAD_INPUT)
    except UserError as e:
        return error(f"{e}{kept()}")
    except (typer.Abort, KeyboardInterrupt):
        result = Status.INTERRUPTED
    except RecursionError:
        return error("the input is too large to handle (recursion limit reached); try smaller sizes")
    except MemoryError:
        return error("out of memory; try smaller sizes")
    except OSError as e:
        return error(describe_os_error(e))
    except SystemExit:
        if sys.stdout is not stdout:  # click answers a broken pipe by wrapping stdout and sys.exit(1)
            silence_stdout()
            return Status.PIPE_CLOSED
        raise
    finally:
        warnings.showwarning = shown
    if result == Status.INTERRUPTED:  # typer turns Ctrl-C into exit code 130 itself
        return interrupted()
    code = result if isinstance(result, int) else 0
    if code == 0:
        for text in notes():
            sys.stderr.write(f"{one_line(text)}\n")
    return code


def _pricing_note(shown):
    """warnings.showwarning that turns a PricingWarning or an InputWarning into one `warning:` line after the
    output (`note`) and leaves every other warning to `shown`."""

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, (PricingWarning, InputWarning)):
            text = str(message)
            note(text if text.startswith("note: ") else f"warning: {text}")
        else:
            shown(message, category, filename, lineno, file, line)

    return show




def _click_exceptions():
    """The exceptions module of the click that typer runs on: typer's own copy (typer >= 0.27) or click.
    `typer.BadParameter` is public in every typer and lives there."""
    return sys.modules[typer.BadParameter.__module__]


def _with_help_hint(e: click.ClickException) -> str:
    """click's message, the text the user gave the option where the message does not quote it (some typers say
    only "Input should be a valid integer"), and where to read the command's options."""
    ctx = getattr(e, "ctx", None)
    cmd = ctx.command_path if ctx is not None else "attn-cost"
    text = e.format_message()
    param = getattr(e, "param", None)
    flag = max(param.opts, key=len) if param is not None and getattr(param, "opts", None) else None
    given = [w for w in words(flag) if w not in text] if flag else []
    if given and not any(w in text for w in words(flag or "")):
        text += f" (got {', '.join(repr(w) for w in given)})"
    return f"{text} (see '{cmd} --help')"



