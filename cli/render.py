"""The one way every command prints a table or a line: names, numbers and formulas are never split.

The title and the caption are lines of their own (wrapped between words at the width). A table
is printed whole when it fits the width (COLUMNS, the terminal, or 80 when piped). When it
does not, its value columns are stacked into several narrower tables that repeat the key columns
(A, B, d ...); when even one value column beside the keys does not fit, every row becomes a block
of `header: value` pairs. Cells that are names or numbers never wrap; only columns marked `prose`
(sentences) wrap, and only between words. Lines that carry a formula are never wrapped by us (the
terminal may fold them, a pipe keeps them whole). Trailing spaces are removed from every line.
"""

from __future__ import annotations

import contextlib
import os
import sys
import textwrap
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

MIN_PROSE = 12
"""A sentence column is never squeezed below this many characters (or its longest word)."""


@dataclass(frozen=True)
class Col:
    """One column: its header, alignment, and whether it holds prose that may wrap between words."""

    header: str
    justify: str = "left"
    prose: bool = False


def right(header: str) -> Col:
    """A right-aligned (numeric) column."""
    return Col(header, "right")


def console() -> Console:
    """A console for stdout at the current width (read at each call, so COLUMNS changes are seen)."""
    return Console(highlight=False, width=_width(), soft_wrap=False)


def _width() -> int | None:
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None  # rich: the terminal's width, or 80 when piped


def _emit(con: Console, *items, soft_wrap: bool = False) -> None:
    with con.capture() as cap:
        for item in items:
            con.print(item, soft_wrap=soft_wrap)
    text = "\n".join(line.rstrip() for line in cap.get().split("\n"))
    sys.stdout.write(text)


def line(text: str = "", *, markup: bool = True) -> None:
    """Print one line as is: never wrapped here, so a formula in it stays whole."""
    con = console()
    _emit(con, Text.from_markup(text) if markup else Text(text), soft_wrap=True)


def warn(text: str) -> None:
    """Print `warning: text` on stderr as one line (never wrapped, so a path in it stays whole; a pipe or
    grep sees one warning per line)."""
    with contextlib.suppress(OSError, ValueError):  # stderr closed: a warning is not worth failing for
        sys.stderr.write(f"warning: {' '.join(text.split())}\n")


def formula(label: str, value: str, indent: int = 2) -> None:
    """Print `label = value`; when that is wider than the width, the value goes whole on the next line."""
    con = console()
    pad = " " * indent
    one = f"{pad}{label} = {value}"
    if Text(one).cell_len <= con.width:
        _emit(con, Text(one), soft_wrap=True)
    else:
        _emit(con, Text(f"{pad}{label} ="), Text(f"{pad}    {value}"), soft_wrap=True)


GLUE = "\x00"
"""Stands for a space that must not break a line (inside a formula or `≈ 0.47`); see `glue`."""


def glue(text: str) -> str:
    """Mark `text` (a formula, a number with its unit) as one unbreakable word for `sentence`."""
    return text.replace(" ", GLUE)


def sentence(text: str, indent: int = 2) -> None:
    """Print plain text wrapped between words at the width, never inside a `glue`d part."""
    con = console()
    pad = " " * indent
    lines = textwrap.wrap(
        text,
        width=max(con.width, 40),
        initial_indent=pad,
        subsequent_indent=pad + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    for one in lines or [""]:
        _emit(con, Text(one.replace(GLUE, " ")), soft_wrap=True)


def prose(text: str, *, markup: bool = True) -> None:
    """Print a sentence, wrapped between words at the width (for text without formulas)."""
    con = console()
    _emit(con, Text.from_markup(text) if markup else Text(text))


def _cell_width(cell: str) -> int:
    return max((Text.from_markup(part).cell_len for part in cell.split("\n")), default=0)


def _longest_word(cell: str) -> int:
    return max((Text.from_markup(w).cell_len for w in cell.split()), default=0)


def _needs(col: Col, cells: list[str]) -> int:
    """Characters a column needs: everything for names and numbers, a few words for prose."""
    natural = max([_cell_width(col.header), *(_cell_width(c) for c in cells)])
    if not col.prose:
        return natural
    return min(natural, max(MIN_PROSE, _longest_word(col.header), *(_longest_word(c) for c in cells)))


def _table_width(widths: list[int]) -> int:
    """Width of a SIMPLE_HEAD table: one space of padding each side of a cell, a separator between
    cells and an edge column each side."""
    return sum(widths) + 3 * len(widths) + 1


def table(
    title: str | None,
    columns: list[Col],
    rows: list[list[str]],
    *,
    keys: int = 1,
    caption: str | None = None,
    show_header: bool = True,
) -> None:
    """Print a table that fits the width (see the module docstring); cells are rich markup."""
    con = console()
    width = con.width
    needs = [_needs(c, [r[i] for r in rows]) for i, c in enumerate(columns)]
    key_idx = list(range(min(keys, len(columns))))
    value_idx = list(range(len(key_idx), len(columns)))
    fits = _table_width(needs) <= width or not value_idx
    groups = [value_idx] if fits else _stack(needs, key_idx, value_idx, width)
    if groups is None or _table_width([needs[i] for i in key_idx + groups[0]]) > width:
        _blocks(con, title, columns, rows, caption)
        return
    if title:
        _emit(con, Text.from_markup(title))
    for group in groups:
        idx = key_idx + group
        t = Table(box=box.SIMPLE_HEAD, show_header=show_header)
        for i in idx:
            col = columns[i]
            if col.prose:
                t.add_column(col.header, justify=col.justify, overflow="fold", min_width=needs[i])
            else:
                t.add_column(col.header, justify=col.justify, no_wrap=True, min_width=needs[i])
        for r in rows:
            t.add_row(*(r[i] for i in idx))
        _emit(con, t)
    if caption:
        _emit(con, Text.from_markup(caption))


def _stack(needs: list[int], key_idx: list[int], value_idx: list[int], width: int) -> list[list[int]] | None:
    """Split the value columns into consecutive groups that each fit beside the key columns."""
    groups: list[list[int]] = [[]]
    for i in value_idx:
        trial = groups[-1] + [i]
        if _table_width([needs[k] for k in key_idx + trial]) <= width:
            groups[-1] = trial
        elif not groups[-1]:
            return None
        else:
            groups.append([i])
            if _table_width([needs[k] for k in [*key_idx, i]]) > width:
                return None
    return groups


def _blocks(con: Console, title: str | None, columns: list[Col], rows: list[list[str]], caption: str | None) -> None:
    """One record per block: `header: value` pairs packed on lines, a pair never split."""
    width = con.width
    out: list[tuple[str, bool]] = []  # (markup, may wrap between words)
    if title:
        out.append((title, True))
    for r in rows:
        out.append(("", False))
        current = ""
        for col, cell in zip(columns, r, strict=True):
            value = " ".join(cell.split("\n"))
            pair = f"{col.header}: {value}" if col.header else value
            if col.prose:
                if current:
                    out.append((current, False))
                out.append(("  " + pair, True))
                current = ""
            elif current and Text.from_markup(current + "   " + pair).cell_len > width:
                out.append((current, False))
                current = "  " + pair
            else:
                current = f"{current}   {pair}" if current else "  " + pair
        if current:
            out.append((current, False))
    if caption:
        out += [("", False), (caption, True)]
    for text, wraps in out:
        _emit(con, Text.from_markup(text), soft_wrap=not wraps)
