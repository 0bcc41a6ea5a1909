"""Errors with messages meant for the person at the terminal."""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Mapping


class UserError(ValueError):
    """Bad input from the user (an unknown name, a size out of range). The CLI prints it and exits 2."""


class ModelError(RuntimeError):
    """A variant description that does not type-check (shapes that do not fit)."""


class PricingWarning(UserWarning):
    """A prediction priced part of a variant by a stand-in (an op kernel its calibration never timed). The CLI
    prints it as one `warning:` line after the command's output."""


LISTED = 12
"""The most names one error line lists (`listed`): the rest are counted, not printed."""


def unknown(what: str, name: str, known: Mapping[str, object] | list[str], where: str = "") -> str:
    """One line naming the unknown thing, the closest known names, and the known names (at most LISTED of them,
    the rest counted; `where`: how to list them all). Names that hold the text typed come first (`h100`: the H100
    rows, before `h200` and `h800`, which only look alike), then those that look alike."""

    names = list(known)
    holding = sorted((k for k in names if name and name in k), key=lambda k: (not k.startswith(name), len(k)))
    close = list(dict.fromkeys([*holding, *difflib.get_close_matches(name, names, n=3, cutoff=0.5)]))[:3]
    said = [repr(c) for c in close]
    options = " or ".join([", ".join(said[:-1]), said[-1]] if len(said) > 1 else said)
    hint = f"; did you mean {options}?" if close else ""
    return f"unknown {what} {name!r}{hint} (known: {listed(names, where)})"


def listed(names: list[str], where: str = "") -> str:
    """Names for one line: all of them, or the first LISTED and how many more (and `where` to see them all)."""
    if len(names) <= LISTED:
        return ", ".join(names)
    more = f"and {len(names) - LISTED:,} more" + (f": {where}" if where else "")
    return ", ".join(names[:LISTED]) + f", {more}"


class InputWarning(UserWarning):
    """A part of a file attn-cost read that it leaves out and uses the rest (a bad row of a user's GPU table, a
    key it does not read). The CLI prints it as one `warning:` line after the command's output."""


UNSAFE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories a terminal acts on instead of showing: control characters (ESC starts a sequence that recolours,
clears or retitles the terminal; CR and BS overwrite what was printed), format characters (bidi overrides that
reorder a line, zero-width spaces), lone surrogates and the line and paragraph separators."""


def printable(text: str, keep: str = "\n") -> str:
    """`text` as a terminal may receive it: every character of an UNSAFE category but those in `keep` written as its
    Python escape (`\\x1b`, `\\u202e`), so that a variant file's summary, a label or a path shows what it holds
    and never acts on the terminal."""
    return "".join(c if c in keep or unicodedata.category(c) not in UNSAFE else repr(c)[1:-1] for c in text)
