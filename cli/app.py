"""The `attn-cost` typer app the commands register on, its help, its exit statuses, and what a command says
beside its output (`note`, `fail`, what a measuring command keeps when stopped). `cli.main` runs it.

Heavy modules (torch, plotly) are imported inside the commands that need them, so the analytic commands start
fast.
"""

from __future__ import annotations

import inspect
import re
import textwrap
import types
import typing
from enum import IntEnum
from pathlib import Path
from typing import NoReturn, Optional

import typer
from attn_cost.cli.commands import LazyGroup
from attn_cost.costmodel.dtypes import ACTIVATION
from attn_cost.costmodel.errors import UserError

HELP = """FLOPs, peak memory and traffic of attention variants, their crossovers, and checks on real kernels.

\b
Terms used by every command:
  N        sequence length (tokens); d head dimension, h heads, b batch.
  N0       the length from which variant B needs no more FLOPs than A.
  N1       the length from which B needs no more peak memory than A.
  traffic  bytes read + written when every op runs as its own kernel
           (unfused); N traffic is the crossover on it.

Every command takes --help; tables are for people, --json is for machines."""

app = typer.Typer(
    name="attn-cost",
    help=HELP,
    add_completion=False,
    invoke_without_command=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


class Status(IntEnum):
    """attn-cost's exit statuses, all in one place."""

    OK = 0
    FAILED = 1
    """The command ran and found a failure it reports (`check-flops` mismatches, failed cluster jobs)."""
    BAD_INPUT = 2
    """Bad input of any kind: one line on stderr."""
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT), as a shell reports it."""
    PIPE_CLOSED = 141
    """The reader stopped reading (`attn-cost ... | head`): no error line, the status of a process ended by
    SIGPIPE (128 + 13), as the shell tools in the same pipe end."""


_state: dict = {"stores": [], "notes": [], "words": {}}


def started() -> None:
    """A command starts (`main`): no store opened yet, no note to print, no word of its command line read."""
    _state["stores"], _state["notes"], _state["words"] = [], [], {}


def heard(flag: str, words: list[str]) -> None:
    """The words the command line gave option `flag`, as typed (`options.read_words`), for `typed`."""
    _state["words"][flag] = list(words)


def words(flag: str) -> list[str]:
    """The words the command line gave option `flag`, as typed."""
    return list(_state["words"].get(flag, []))


def typed(flag: str, value: object) -> str:
    """The text the user typed for `value` of option `flag` (`--dropout 0.99999999999999999`, not the float 1.0 it
    reads as; `--n 1_000`, `--store ''`): what a refusal names. A value the command line did not give (a default, a
    value worked out from others) is written as Python writes it."""
    for word in _state["words"].get(flag, []):
        try:
            read = type(value)(word)  # type: ignore[call-arg]
        except (TypeError, ValueError):
            read = word
        same = word == value or read == value or (read != read and value != value)  # NaN as typed: nan, NaN
        if same:
            return word
    return str(value)


def notes() -> list[str]:
    """The remarks `note` collected, in order."""
    return list(_state["notes"])


def measuring_started(store) -> None:
    """Called once a command opens the store it measures into: Ctrl-C or an error then says what is kept."""
    _state["stores"].append(store)


def kept() -> str:
    """What an interrupted or failed measuring command leaves ('' for a command that measures nothing)."""
    if not _state["stores"]:
        return ""
    made = sum(len(getattr(s, "session", {})) for s in _state["stores"])
    if not made:
        return "; nothing had been measured yet"
    where = ", ".join(dict.fromkeys(str(s.path) for s in _state["stores"]))
    return f"; the {made} measurements made so far are saved in {where}: run the same command again to resume"


def note(text: str) -> None:
    """A remark for stderr, printed once after the command succeeds (an error stays one line)."""
    if text not in _state["notes"]:
        _state["notes"].append(text)


def _version(value: bool) -> None:
    if value:
        from attn_cost import __version__

        print(f"attn-cost {__version__}")
        raise typer.Exit()


def help_without_command(ctx: typer.Context) -> None:
    """A group called without a command prints its help and exits 0 (`attn-cost`, `attn-cost results`): the
    group's callback, with `invoke_without_command`, on click's public Context in every click and typer."""
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())
        raise typer.Exit()


@app.callback()
def _top(
    ctx: typer.Context,
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    help_without_command(ctx)


METAVARS = {
    "--pair": "A:B",
    "--variant": "NAME",
    "--baseline": "NAME",
    "--device": "NAME",
    "--profile": "NAME",
    "--convention": "NAME",
    "--dtype": "|".join(ACTIVATION),
    "--mode": "inference|training",
    "--cost": "COST",
    "--scope": "SCOPE",
    "--html": "FILE.html",
    "--store": "DIR",
    "--trace": "PATH:NAME",
    "--variants": "PATH",
}
"""Metavars that say what a value looks like; other options show their type (INT, TEXT, PATH)."""


def polish_help(command, below: bool = True) -> None:
    """Metavars for every option of every command: `--d INT [--d ...]` shows how to repeat an
    option, `--pair A:B` what a value looks like (typer would print `<list[int]>`); help text wrapped without
    splitting a hyphenated name (`attn-cost`, `taylorshift-efficient`). Only click's public attributes
    (`opts`, `multiple`, `metavar`, `context_class`) and the command's own type hints are used, so that
    every typer from the oldest declared in pyproject.toml on gives the same help. `below`: also every command
    below `command` (the lazy top-level group polishes its commands as it builds them: `cli.main.command`).

    typer cannot: its metavar of a list option differs between versions (`<list[int]>`, `INTEGER...`), it does not
    say how to repeat an option, and it wraps help with click's formatter, which breaks lines at hyphens."""
    for sub in _commands(command) if below else [command]:
        sub.context_class = _unhyphenated(sub.context_class)
        func = getattr(sub.callback, "__wrapped__", sub.callback) if getattr(sub, "callback", None) else None
        hints = _type_hints(func)
        for param in sub.params:
            if param.param_type_name == "argument" and not getattr(param, "help", None):
                # typer < 0.27 on click >= 8.2: click's Parameter.__init__ overwrites the help typer had set
                param.help = getattr(_default_of(func, param.name), "help", None)
            if param.param_type_name != "option" or getattr(param, "is_flag", False) or not param.opts:
                continue
            flag = max(param.opts, key=len)
            one = METAVARS.get(flag) or _type_word(hints.get(param.name), param)
            param.metavar = f"{one} [{flag} ...]" if getattr(param, "multiple", False) else one


def _type_hints(func) -> dict:
    """The annotations of the function behind a command (typer wraps it with functools.update_wrapper)."""
    if func is None:
        return {}
    try:
        return typing.get_type_hints(func)
    except Exception:  # an annotation that cannot be resolved: the option shows TEXT
        return {}


def _default_of(func, name: str):
    """The default of parameter `name` of `func`: for a command, the typer.Argument/Option that declared it."""
    try:
        return inspect.signature(func).parameters[name].default
    except (TypeError, ValueError, KeyError):
        return None


def _type_word(hint, param) -> str:
    """INT, FLOAT, PATH or TEXT for an option's annotation (Optional and list unwrapped)."""
    while typing.get_origin(hint) in (typing.Union, list, types.UnionType):
        hint = next((a for a in typing.get_args(hint) if a is not type(None)), str)
    if hint is None:  # no annotation found: click's own type name, where this click has one
        hint = {"integer": int, "float": float, "path": Path}.get(getattr(getattr(param, "type", None), "name", ""))
    return {int: "INT", float: "FLOAT", Path: "PATH"}.get(hint, "TEXT")


def _commands(command) -> list:
    """A command and every command below it (the `results` group's subcommands too; every command of the lazy
    top-level group, each built as it is reached)."""
    return [command, *(c for sub in getattr(command, "commands", {}).values() for c in _commands(sub))]


def _plain_metavars(text: str) -> str:
    """`{FILE...}...` and `FILE... <list[Path]>` (some typers' argument spellings) as `FILE...`."""
    text = re.sub(r" <[^<>]*>$", "", text)
    return re.sub(r"\{([^{}]*?)(?:\.\.\.)?\}(\.\.\.)?", lambda m: m[1] + ("..." if "..." in m[0] else ""), text)


def _unhyphenated(context_class):
    """The command's context class, with a help formatter whose option table never breaks a line at a hyphen
    and whose arguments read as their metavars (Context.formatter_class is click's hook for this; typer offers
    none: with rich_markup_mode None it writes help with click's HelpFormatter, which wraps at hyphens)."""
    if getattr(context_class, "unhyphenated", False):
        return context_class

    class Formatter(context_class.formatter_class):
        def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
            super().write_usage(prog, _plain_metavars(args), prefix)

        def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
            # typer < 0.17 escapes the brackets of `[default: 7]` for rich even where rich prints nothing
            rows = [(_plain_metavars(first), second.replace("\\[", "[")) for first, second in rows]
            first_col = min(max((len(first) for first, _ in rows), default=0), col_max) + col_spacing
            for first, second in rows:
                self.write(f"{'':>{self.current_indent}}{first}")
                if not second:
                    self.write("\n")
                    continue
                if len(first) <= first_col - col_spacing:
                    self.write(" " * (first_col - len(first)))
                else:
                    self.write("\n" + " " * (first_col + self.current_indent))
                width = max(self.width - first_col - 2, 10)
                lines = textwrap.wrap(second, width, break_on_hyphens=False, break_long_words=False) or [""]
                self.write(lines[0] + "\n")
                for line in lines[1:]:
                    self.write(f"{'':>{first_col + self.current_indent}}{line}\n")

    return type("Context", (context_class,), {"formatter_class": Formatter, "unhyphenated": True})


def fail(message: str) -> NoReturn:
    """Stop with bad input: `main` prints the message as one line and exits 2."""
    raise UserError(message)
