"""Paths a user gives: why one cannot be read, in a few words, and where a link leads, without raising.

Below the profilers, so that the variant-file loader (`costmodel/plugins.py`) and the profilers' readers and
writers (`profilers/store/files.py`) say it in the same words. No torch, no sympy.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from attn_cost.costmodel.errors import UserError


def os_reason(e: OSError) -> str:
    """Why an OS call on a file failed, in a few words."""
    if e.errno == errno.ELOOP:
        return "a loop of symbolic links"
    if e.errno == errno.ENOENT:
        return "no such file"
    return e.strerror or str(e)


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, in words: a directory, a FIFO, a device, a socket."""
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")]  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def not_regular(path: Path, mode: int, what: str) -> UserError:
    """The one line for an input that is not a regular file."""
    return UserError(f"{path} is {kind_of(mode)}, not {what}: attn-cost reads regular files only")


def check_input(path: Path, what: str) -> Path:
    """`path` if it is a regular file (through links), else one line saying what it is; for files another
    library opens (Python source, SQLite), which cannot be opened here without blocking."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {os_reason(e)}") from None
    if not stat.S_ISREG(mode):
        raise not_regular(path, mode, what)
    return Path(path)


def real(path: Path | str) -> Path:
    """The file a path names, through symbolic links (a loop or a dangling link: as far as it resolves); never
    raises, unlike Path.resolve on a loop."""
    return Path(os.path.realpath(path))
