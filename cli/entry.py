"""The console script's entry point: nothing heavy is imported before the Ctrl-C handler is in place.

Ctrl-C during the first fraction of a second lands inside `import typer` or `import sympy`; catching
KeyboardInterrupt here (and not only inside the command) turns it into one line instead of a traceback.

Before anything else the standard streams are made safe to write: a closed descriptor (`>&-`,
`2>&-`) is taken by /dev/null, so no file attn-cost opens later can land on descriptor 1 or 2 and
receive its output; a closed stdout is then one line on stderr and exit 2, a closed stderr only loses
the messages. A stream whose encoding cannot show attn-cost's symbols (PYTHONIOENCODING=ascii, a C
locale) gets ASCII spellings of them (ᵀ as ^T, — as --) instead of an encoding error.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import sys
import unicodedata

ASCII = {
    "—": "--", "–": "-", "…": "...", "→": "->", "←": "<-", "⇒": "=>", "≈": "~", "≤": "<=", "≥": ">=", "≠": "!=",
    "×": "x", "·": "*", "−": "-", "±": "+-", "√": "sqrt", "‖": "||", "∞": "inf", "Σ": "sum", "∑": "sum",
    "⊠": "[x]", "⊙": "(.)", "⊗": "(x)", "✓": "yes", "✗": "x", "⌈": "ceil(", "⌉": ")", "⌊": "floor(", "⌋": ")", "⁄": "/",
    "’": "'", "‘": "'", "“": '"', "”": '"', "•": "*", "│": "|", "─": "-", "━": "-", "┃": "|", "ℓ": "l",
    "\u0303": "~", "\u0302": "^", "\u200b": "",
}  # fmt: skip
"""ASCII spellings of the symbols attn-cost prints, for terminals and pipes that cannot show them; other
characters are spelled from their Unicode data (ᵢ as _i, ² as ^2, α as alpha, é as e), else '?'."""


def _spell(ch: str) -> str:
    if ch.isascii():
        return ch
    if ch in ASCII:
        return ASCII[ch]
    if unicodedata.combining(ch):
        return ""
    decomposition = unicodedata.decomposition(ch)
    if decomposition.startswith(("<sub>", "<super>")):
        base = "".join(_spell(chr(int(code, 16))) for code in decomposition.split()[1:])
        return ("_" if decomposition.startswith("<sub>") else "^") + base
    plain = "".join(_spell(c) for c in unicodedata.normalize("NFKD", ch) if c != ch)
    if plain and plain.isascii():
        return plain
    name = unicodedata.name(ch, "")
    if name.startswith("GREEK") and " LETTER " in name:
        letter = name.split(" LETTER ")[-1].split()[0].lower()
        return letter.capitalize() if "CAPITAL" in name else letter
    return "?"


def _ascii_spelling(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):  # registered for encoding only
        raise error
    bad = error.object[error.start : error.end]
    return "".join(_spell(ch) for ch in bad), error.end


codecs.register_error("attn_cost_ascii", _ascii_spelling)


def _reopen_closed_descriptors() -> bool:
    """Give each closed standard descriptor /dev/null; returns whether stdout was closed."""
    closed_stdout = False
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.open(os.devnull, os.O_RDWR if fd else os.O_RDONLY)  # the lowest free descriptor: fd itself
            closed_stdout = closed_stdout or fd == 1
    return closed_stdout


def _safe_streams() -> None:
    """Streams that never raise for a symbol they cannot encode, and no None stream for a closed one."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            fd = 1 if name == "stdout" else 2
            setattr(sys, name, open(fd, "w", encoding="utf-8", closefd=False))  # noqa: SIM115 (lives as sys.x)
            continue
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            "—ᵀ…₀".encode(encoding)
        except (UnicodeEncodeError, LookupError):
            with contextlib.suppress(AttributeError, ValueError):
                stream.reconfigure(errors="attn_cost_ascii")


def interrupt_again(unraisable) -> None:
    """`sys.unraisablehook`: Ctrl-C that lands in a callback Python cannot raise from (importlib's module-lock
    callback, during an import) is printed as "Exception ignored ... Traceback" and the run goes on; deliver it
    again instead, so that it ends the run as one line like any other Ctrl-C. Anything else: Python's own hook."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        return
    sys.__unraisablehook__(unraisable)


def run() -> None:
    """`attn-cost`: run the CLI and exit with its code."""
    sys.unraisablehook = interrupt_again
    closed_stdout = _reopen_closed_descriptors()
    _safe_streams()
    if closed_stdout:
        with contextlib.suppress(OSError):
            sys.stderr.write("attn-cost: error: standard output is closed: nothing could be printed\n")
        sys.exit(2)  # before the CLI is imported: Status.BAD_INPUT
    code = 2
    try:
        from attn_cost.cli.exits import finish
        from attn_cost.cli.main import main

        code = finish(main())
    except KeyboardInterrupt:
        try:
            from attn_cost.cli.exits import interrupted

            code = interrupted()
        except KeyboardInterrupt:
            code = 130
        except (ImportError, AttributeError):  # Ctrl-C came mid-import (typer half made): nothing ran to keep
            with contextlib.suppress(OSError):
                sys.stderr.write("attn-cost: error: interrupted\n")
            code = 130
    except BrokenPipeError:
        from attn_cost.cli.app import Status
        from attn_cost.cli.exits import silence_stdout

        silence_stdout()
        code = Status.PIPE_CLOSED
    sys.exit(code)
