"""The one writer of what the benchmark scripts write: a generated block in a doc (the text between a begin and an
end marker, `--into`) and a script's own output file (`--json`).

The scripts keep the CLI's promises (profilers/store/files.py): every `--into` file is read and checked (a regular
file, UTF-8 or not, with both markers in order) before any is written; the new texts are written in full beside
their targets and only then renamed over them, so a full disk or a file-size limit leaves every file whole; the
text outside the block stays byte for byte, its line endings (CRLF) included, and the block takes them too. An
output file is written only where it is absent, empty or one the script wrote. A bad target is one line on stderr
and exit code 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from attn_cost.costmodel.errors import UserError, printable
from attn_cost.profilers.store.files import claim, read_input, write_all_atomic

ENCODING = ("utf-8", "surrogateescape")
"""How a doc is read and written back: bytes that are not UTF-8 come back as they were."""


def fail(message: str) -> NoReturn:
    """One line on stderr, exit code 2: the scripts' answer to a bad target or input."""
    print(f"{Path(sys.argv[0]).name}: error: {printable(message, keep='')}", file=sys.stderr)
    sys.exit(2)


def _parts(path: Path, begin: str, end: str) -> tuple[str, str, str]:
    """(text before the block with its begin marker, the block, the end marker and what follows); one line and
    exit 2 where the file cannot be read or has no begin ... end block."""
    try:
        text = read_input(path, "a doc with a generated block").decode(*ENCODING)
    except UserError as e:
        fail(str(e))
    head, found, rest = text.partition(begin)
    block, found_end, tail = rest.partition(end)
    if not found or not found_end:
        fail(f"{path} has no {begin} ... {end} block to fill")
    return head + begin, block, end + tail


def _line_ending(*texts: str) -> str:
    """The first line ending found in the texts, in order: CRLF or LF (LF where none has one)."""
    for text in texts:
        i = text.find("\n")
        if i >= 0:
            return "\r\n" if text[i - 1 : i] == "\r" else "\n"
    return "\n"


def check(paths: list[Path], begin: str, end: str) -> None:
    """Check every `--into` target before a script's long work (`fill` checks them all again before writing)."""
    for path in paths:
        _parts(path, begin, end)


def fill(blocks: dict[Path, str], begin: str, end: str) -> dict[Path, bool]:
    """Replace the text between `begin` and `end` in each file with its block (written with the file's own line
    endings); returns whether each file changed. Every file is checked before any is written, and all are
    written or none (`write_all_atomic`)."""
    changed: dict[Path, bool] = {}
    new: dict[Path, bytes] = {}
    for path, block in blocks.items():
        head, old, tail = _parts(path, begin, end)
        eol = _line_ending(old + tail, head)
        text = head + eol + block.replace("\r\n", "\n").replace("\n", eol) + tail
        changed[path] = text != head + old + tail
        if changed[path]:
            new[path] = text.encode(*ENCODING)
    try:
        write_all_atomic(new)
    except UserError as e:
        fail(str(e))
    return changed


def write_output(path: Path, text: str, recognise: Callable[[Path], bool], what: str) -> None:
    """Write a script's own output file (`--json FILE`) atomically, never over a file the script did not write."""
    try:
        claim(path, recognise, what)
        write_all_atomic({path: text})
    except UserError as e:
        fail(str(e))


def check_output(path: Path | None, recognise: Callable[[Path], bool], what: str) -> None:
    """Refuse an output file the script would not write over, before its long work (None: no such output)."""
    if path is not None:
        try:
            claim(path, recognise, what)
        except UserError as e:
            fail(str(e))
