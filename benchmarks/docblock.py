"""The one writer of a generated block in a doc: the text between a begin and an end marker (the benchmark
scripts' `--into`)."""

from __future__ import annotations

import sys
from pathlib import Path


def fill(path: Path, begin: str, end: str, block: str) -> bool:
    """Replace the text between `begin` and `end` in `path` with `block`; returns whether the file changed. A file
    without both markers is one line on stderr and exit code 2 (nothing written)."""
    text = path.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        print(f"{path} has no {begin} ... {end} block to fill", file=sys.stderr)
        sys.exit(2)
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    new = f"{head}{begin}\n{block}{end}{tail}"
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text
