"""The one way every command prints a table or a line: names, numbers and formulas are never split.

The title and the caption are lines of their own (wrapped between words at the width). A table
is printed whole when it fits the width (COLUMNS, the terminal, or 80 when piped). When it
does not, its value columns are stacked into several narrower tables that repeat the key columns
(A, B, d ...); when even one value column beside the keys does not fit, every row becomes a block
of `header: value` pairs. Cells that are names or numbers never wrap; only columns marked `prose`
(sentences) wrap, and only between words. A line wider than the width is folded at a space outside
brackets where it can be (between the terms of a formula, never inside a name or a term), its
continuation indented. Trailing spaces are removed from every line. Whatever it prints passes `safe` first: text
from a variant file or a path the user typed (a summary, a label, a name) can never send the terminal a control
sequence.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from attn_cost.costmodel.errors import UserError, printable
from rich import box
from rich.console import Console, JustifyMethod
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

MIN_WIDTH = 40
"""The narrowest output attn-cost lays out for (COLUMNS=0 or 5 would print nothing readable)."""
MIN_PROSE = 12
"""A sentence column is never squeezed below this many characters (or its longest word)."""


@dataclass(frozen=True)
class Col:
    """One column: its header, alignment, and whether it holds prose that may wrap between words."""

    header: str
    justify: JustifyMethod = "left"
    prose: bool = False


def right(header: str) -> Col:
    """A right-aligned (numeric) column."""
    return Col(header, "right")


err = Console(stderr=True, highlight=False)
"""The console for stderr: what a command says while it works (a measuring step, a suspect timing)."""


def console() -> Console:
    """A console for stdout at the current width (read at each call, so COLUMNS changes are seen)."""
    return Console(highlight=False, width=_width(), soft_wrap=False)


def _width() -> int:
    """COLUMNS when it is a usable width, else the terminal's, else 80 (a pipe); never below MIN_WIDTH."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return max(int(columns), MIN_WIDTH)
    if sys.stdout is not None and sys.stdout.isatty():
        return max(shutil.get_terminal_size((80, 24)).columns, MIN_WIDTH)
    return 80


def _emit(con: Console, *items, soft_wrap: bool = False) -> None:
    with con.capture() as cap:
        for item in items:
            con.print(item, soft_wrap=soft_wrap)
    text = "\n".join(line.rstrip() for line in cap.get().split("\n"))
    sys.stdout.write(text)


def safe(text: str, keep: str = "\n") -> str:
    """Text for the terminal: control and format characters escaped (`errors.printable`), newlines kept."""
    return printable(text, keep)


def _text(text: str, markup: bool = True) -> Text:
    """A rich Text of `text` made `safe`, its markup read unless markup is False."""
    return Text.from_markup(safe(text)) if markup else Text(safe(text))


def line(text: str = "", *, markup: bool = True) -> None:
    """Print one line, folded at the width between words (at the shallowest bracket depth: a formula breaks
    between its terms, never inside a name or a term)."""
    con = console()
    rich = _text(text, markup)
    _emit(con, *fold(rich, con.width), soft_wrap=True)


def fold(text: Text, width: int) -> list[Text]:
    """`text` as lines of at most `width` cells where spaces allow, styles kept: each break at the rightmost
    space of the lowest bracket depth that fits; continuation lines indented 4 more than the first."""
    plain = text.plain
    indent = len(plain) - len(plain.lstrip(" "))
    lines: list[Text] = []
    start, pad = 0, 0
    while Text(plain[start:]).cell_len + pad > width:
        depth, best = 0, None  # (depth, position) of the chosen break
        for i in range(start, len(plain)):
            ch = plain[i]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(depth - 1, 0)
            elif ch == " " and i > start + indent and (best is None or depth <= best[0]):
                if Text(plain[start:i]).cell_len + pad > width and best is not None:
                    break
                best = (depth, i)
        if best is None:
            break
        piece = text[start : best[1]]
        piece.rstrip()
        lines.append(Text(" " * pad).append_text(piece) if pad else piece)
        start = best[1] + 1
        pad = indent + 4
    rest = text[start:]
    lines.append(Text(" " * pad).append_text(rest) if pad else rest)
    return lines


def with_spread(value: float, spread: float | None) -> str:
    """A measured number as tables show it: `4,039 ± 124`, or `4,039` without a spread."""
    return f"{value:,.0f} ± {spread:,.0f}" if spread else f"{value:,.0f}"


def duration(seconds: float) -> str:
    """A time as tables show it, three significant digits in s, ms or µs: `1.23 ms`."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-6:.2g} µs"


def duration_span(low: float, high: float, compact: bool = False) -> str:
    """An interval of times: `1.02 ms–1.49 ms`; `compact`, the unit once where both ends share it: `1.02–1.49 ms`."""
    a, b = duration(low), duration(high)
    unit = b.rsplit(" ", 1)[-1]
    if compact and a.endswith(" " + unit):
        return f"{a.removesuffix(' ' + unit)}–{b}"
    return f"{a}–{b}"


def size(n: int) -> str:
    """Bytes in binary units, three significant digits: `1.5 GiB`."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def one_line(text: str) -> str:
    """Text as one printable line: whitespace runs become one space, control characters (a terminal escape in a
    path or a name the user typed) are shown escaped, never sent to the terminal."""
    return printable(" ".join(text.split()), keep="")


def warn(text: str) -> None:
    """Print `warning: text` on stderr as one line (never wrapped, so a path in it stays whole; a pipe or
    grep sees one warning per line)."""
    with contextlib.suppress(OSError, ValueError):  # stderr closed: a warning is not worth failing for
        sys.stderr.write(f"warning: {one_line(text)}\n")


def formula(label: str, value: str, indent: int = 2) -> None:
    """Print `label = value`; when that is wider than the width, the value goes whole on the next line."""
    con = console()
    pad = " " * indent
    label, value = safe(label), safe(value)
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
        safe(text, keep="\n" + GLUE),
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
    _emit(con, _text(text, markup))


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
    title, caption = (safe(x) if x is not None else None for x in (title, caption))
    columns = [Col(safe(c.header), c.justify, c.prose) for c in columns]
    rows = [[safe(cell) for cell in row] for row in rows]
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
        widths = _prose_widths(columns, rows, needs, idx, width)
        t = Table(box=box.SIMPLE_HEAD, show_header=show_header)
        for i in idx:
            t.add_column(columns[i].header, justify=columns[i].justify, no_wrap=True, min_width=widths[i])
        for r in rows:
            t.add_row(*(_wrapped(r[i], widths[i]) if columns[i].prose else r[i] for i in idx))
        _emit(con, t)
    if caption:
        _emit(con, Text.from_markup(caption))


def _prose_widths(columns: list[Col], rows: list[list[str]], needs: list[int], idx: list[int], width: int) -> dict:
    """Column widths for one table: names and numbers at their full width, the room left shared among the
    prose columns (each at least its longest word, at most what its longest cell needs)."""
    widths = {i: needs[i] for i in idx}
    prose = [i for i in idx if columns[i].prose]
    room = width - _table_width([needs[i] for i in idx])
    natural = {i: max([_cell_width(columns[i].header), *(_cell_width(r[i]) for r in rows)]) for i in prose}
    wanted = {i: natural[i] - needs[i] for i in prose}
    total = sum(wanted.values())
    for i in prose:
        if room > 0 and total > 0:
            widths[i] += min(wanted[i], room * wanted[i] // total)
    return widths


def _wrapped(cell: str, width: int) -> Text:
    """A prose cell wrapped between words at `width` (never inside a word or at a hyphen): nothing is cut."""
    plain = Text.from_markup(cell).plain
    lines = [
        one
        for part in plain.split("\n")
        for one in textwrap.wrap(part, width, break_long_words=False, break_on_hyphens=False) or [""]
    ]
    return Text("\n".join(lines))


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


def emit(data) -> None:
    """Print data as indented JSON on stdout (`--json`): strict JSON, never NaN or Infinity (the numbers are
    bounded before they get here; one that is not is one line, not a file no JSON reader takes)."""
    try:
        text = json.dumps(data, indent=2, allow_nan=False)
    except ValueError:
        raise UserError("a number of the output is not finite (NaN or infinity): no JSON was printed") from None
    print(text)


@contextlib.contextmanager
def progress() -> Iterator[Callable[[str], None]]:
    """A spinner on stderr that shows what is being measured; yields a notify(message) function. Off when
    stderr is not a terminal: a log or a pipe would get the blank line a stopped spinner leaves."""
    err = Console(stderr=True, highlight=False)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as p:
        task = p.add_task("starting", total=None)
        yield lambda message: p.update(task, description=message)
