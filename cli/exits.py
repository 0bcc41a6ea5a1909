"""How a run of the CLI ends: one line on stderr and an exit code for an error, Ctrl-C or a full disk, a quiet exit
for a closed pipe. Light on purpose (no command is imported): `cli.entry` calls it when Ctrl-C arrives while the
commands are still being imported."""

from __future__ import annotations

import os
import sys

from attn_cost.cli.app import Status, kept
from attn_cost.cli.render import one_line


def interrupted() -> int:
    """The Ctrl-C line; only commands that measure keep something worth resuming."""
    return error(f"interrupted{kept()}", code=Status.INTERRUPTED)


def describe_os_error(e: OSError) -> str:
    """One line for an OS error: what failed, on which path, in the system's words."""
    reason = e.strerror or e.__class__.__name__
    where = f"{e.filename}: " if e.filename else ""
    if e.filename is None and e.errno in (28, 32, 5):  # ENOSPC, EPIPE, EIO with no file: the output stream
        return f"cannot write the output ({reason})"
    return f"{where}{reason}"


def error(message: str, code: int = Status.BAD_INPUT) -> int:
    """`attn-cost: error: MESSAGE` as one line on stderr; returns the exit code."""
    try:
        sys.stderr.write(f"attn-cost: error: {one_line(message)}\n")
        sys.stderr.flush()
    except OSError:
        pass
    return code


def finish(code: int) -> int:
    """Flush stdout; a full disk there becomes one line on stderr and exit 2, a closed pipe a quiet exit."""
    try:
        sys.stdout.flush()
    except OSError as e:
        silence_stdout()
        return Status.PIPE_CLOSED if isinstance(e, BrokenPipeError) else error(describe_os_error(e))
    return code


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's own flush at exit stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
