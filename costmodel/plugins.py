"""Variants from the user's own files: `--variants PATH`, `ATTN_COST_VARIANTS`, the `attn_cost.variants` entry points.

A variant file is ordinary Python that writes variants with the catalogue's DSL (`@variant`,
`@layer_variant`, `@decode_step` from `attn_cost.costmodel.variants`, see docs/variants.md). Loading it
registers its variants beside the catalogue's. Each new variant is then built once at its own scopes, so
that a wrong shape, an unknown op kind or a name clash is reported at once, as one line with the file,
the line and the op that failed, not later in the middle of a crossover. Nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import itertools
import linecache
import os
import re
import sys
import traceback
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import sympy as sp
from attn_cost.costmodel.errors import UserError

ENV = "ATTN_COST_VARIANTS"
"""Variant files to load in every command, separated by os.pathsep (':' on Linux and macOS)."""
GROUP = "attn_cost.variants"
"""Entry-point group of installable plugins: each entry point names a module that registers variants."""

_loaded: dict[str, list[str]] = {}
"""What each file or entry point (by resolved path or entry-point value) registered."""
_configured = False


def load_file(path: str | Path) -> list[str]:
    """Run one variant file and register its variants; returns their names (none if already loaded)."""
    from attn_cost.costmodel.variants import all_variants

    all_variants()  # the catalogue first: a clash with it is the user file's error
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"variant file {path}: no such file")
    key = str(p.resolve())
    if key in _loaded:
        return []
    _loaded[key] = []
    module_name = f"attn_cost_user_{len(_loaded)}_{p.stem}"
    spec = importlib.util.spec_from_file_location(module_name, p)
    if spec is None or spec.loader is None:
        raise UserError(f"variant file {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # so that dataclasses and pickling inside the file work
    _loaded[key] = _registering(lambda: spec.loader.exec_module(module), [p])
    return _loaded[key]


def load_entry_point(ep: EntryPoint) -> list[str]:
    """Import one `attn_cost.variants` entry point (a module that registers variants)."""
    if ep.value in _loaded:
        return []
    _loaded[ep.value] = []
    try:
        spec = importlib.util.find_spec(ep.module)
    except (ImportError, ValueError) as e:
        raise UserError(f"entry point {ep.name} ({ep.value}) of group {GROUP}: cannot import it ({e})") from None
    if spec is None:
        raise UserError(f"entry point {ep.name} ({ep.value}) of group {GROUP}: no module {ep.module!r} is installed")
    files = [Path(spec.origin)] if spec.origin else []
    _loaded[ep.value] = _registering(ep.load, files, f"entry point {ep.name} ({ep.value})")
    return _loaded[ep.value]


def load_configured() -> None:
    """Load the files named in ATTN_COST_VARIANTS and the installed entry points, once per process."""
    global _configured
    if _configured:
        return
    _configured = True
    for part in os.environ.get(ENV, "").split(os.pathsep):
        if part.strip():
            load_file(part.strip())
    for ep in entry_points(group=GROUP):
        load_entry_point(ep)


def _registering(run, files: list[Path], what: str | None = None) -> list[str]:
    """Run code that registers variants, then build each new or changed variant once; every error
    becomes one line naming the user's file and line.

    The user's code runs with its prints sent to stderr (stdout carries tables and --json), and a
    `sys.exit()` in it is an error of the file, not the end of attn-cost."""
    from attn_cost.costmodel.variants import REGISTRY

    before = dict(REGISTRY)
    source = what or (str(files[0]) if files else "variant file")
    try:
        with contextlib.redirect_stdout(sys.stderr):
            run()
    except SystemExit as e:
        _forget(before)
        raise UserError(located(e, files, what)) from None
    except Exception as e:
        _forget(before)
        raise UserError(located(e, files, what)) from None
    changed = [v for name, v in REGISTRY.items() if before.get(name) is not v]
    if not changed:
        raise UserError(f"{source}: defines no variant (write one with @variant, @layer_variant or @decode_step)")
    for v in changed:
        try:
            check_name(v.name)
        except UserError as e:
            _forget(before)
            raise UserError(f"{source}: {e}") from None
        REGISTRY[v.name] = v = _quiet(v)
        try:
            check(v)
        except (Exception, SystemExit) as e:
            _forget(before)
            raise UserError(located(e, files, what, v.name)) from None
    return [v.name for v in changed]


def _forget(before: dict) -> None:
    """Take back what a file registered before it failed, so no half-loaded variant is used."""
    from attn_cost.costmodel.variants import REGISTRY

    REGISTRY.clear()
    REGISTRY.update(before)


def _quiet(v):
    """The variant with its functions run with stdout sent to stderr (a print in them never lands in --json)."""
    from dataclasses import replace

    def quiet(fn):
        if fn is None:
            return None

        @functools.wraps(fn)
        def run(*args):
            with contextlib.redirect_stdout(sys.stderr):
                return fn(*args)

        return run

    return replace(v, core=quiet(v.core), layer=quiet(v.layer), decode=quiet(v.decode))


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
"""What a user's variant name may be: visible ASCII without spaces or ':' (the separator of --pair A:B)."""


def check_name(name: object) -> None:
    """Refuse a name that could not be typed back or would look like another: empty, not a string, with
    spaces, ':' or invisible characters (a zero-width space in 'soft​max')."""
    if not isinstance(name, str):
        raise UserError(f"a variant name must be a string, got {name!r}")
    if not NAME.fullmatch(name):
        raise UserError(
            f"variant name {name!r} is not allowed: use letters, digits and '-', '_', '.', '+' "
            "(no spaces, ':' or invisible characters), starting with a letter or digit"
        )


def check(v) -> None:
    """Build a variant's graphs once (its core or its layer, and its decoding step) so that shape and
    kind errors, unknown symbols and sizes that are not non-negative polynomials surface now."""
    from attn_cost.costmodel.scopes import build_graph

    graphs = [build_graph(v, "core" if v.core is not None else "layer", "inference")]
    if v.decode is not None:
        graphs.append(build_graph(v, "decode", "inference"))
    for g in graphs:
        check_sizes(g)


def check_sizes(g) -> None:
    """Every shape, loop count and workspace of a graph: a polynomial (or a ratio of polynomials, such as N/w
    windows, never dividing by N) in the known size symbols that is not negative."""
    from attn_cost.costmodel.counting import N_kv
    from attn_cost.costmodel.symbols import BY_NAME, N

    known = {*BY_NAME.values(), N_kv}
    names = ", ".join(sorted(BY_NAME)) + ", N_kv"
    sizes = [(f"loop {lp.label!r}", lp.count) for lp in g.loops]
    for op in g.ops:
        where = f"op {op.label or op.output.name!r}"
        sizes += [(f"{where}: {t.name}", dim) for t in (*op.inputs, op.output) for dim in t.shape]
        sizes.append((f"{where}: workspace", op.workspace))
    sizes += [(f"input {t.name}", dim) for t in g.inputs for dim in t.shape]
    sizes += [(f"parameter {t.name}", dim) for t, _ in g.params for dim in t.shape]
    for where, size in sizes:
        size = sp.sympify(size)
        unknown = size.free_symbols - known
        if unknown:
            raise UserError(
                f"{where}: size {size} uses {', '.join(sorted(map(str, unknown)))}, not a size attn-cost knows "
                f"({names})"
            )
        plain, steps = _stepless(where, size)
        num, den = sp.fraction(sp.together(plain))
        if den.free_symbols & {N, N_kv}:
            raise UserError(f"{where}: size {size} divides by the sequence length: sizes must not shrink as N grows")
        if not (num.is_polynomial(*num.free_symbols) and den.is_polynomial(*den.free_symbols)):
            raise UserError(f"{where}: size {size} is not a polynomial (or a ratio of polynomials) in the sizes")
        at = _negative_at(size) if not steps else _negative_at_lengths(size)
        if at is not None:
            shown = ", ".join(f"{k} = {v:,}" for k, v in at.items())
            raise UserError(f"{where}: size {size} is negative{f' at {shown}' if shown else ''}: sizes must not be")


def _stepless(where: str, size: sp.Expr) -> tuple[sp.Expr, bool]:
    """A size with N padded to a multiple (⌈N/D⌉, [D∤N]) with those written as symbols of their own, and whether
    it had any; one line for a step of anything but N/D."""
    from attn_cost.costmodel.polyterms import _without_steps

    try:
        plain, steps = _without_steps(sp.expand(size))
    except ValueError as e:
        raise UserError(f"{where}: size {size}: {e}") from None
    return plain, bool(steps)


CORNERS = (1, 4096)
"""Values each size symbol takes where a size polynomial is checked for a negative value."""


def _negative_at(size) -> dict[str, int] | None:
    """Sizes (symbol: value) at which a size polynomial is negative, among the corners of CORNERS; None if none.
    A polynomial with no negative coefficient is never negative and is not evaluated."""
    symbols = sorted(size.free_symbols, key=str)
    if not symbols:
        return {} if size < 0 else None
    num, den = sp.fraction(sp.together(size))
    if all(c >= 0 for part in (num, den) for c in sp.Poly(part, *symbols).coeffs()):
        return None
    for values in itertools.islice(itertools.product(CORNERS, repeat=len(symbols)), 256):
        if size.subs(dict(zip(symbols, values, strict=True))) < 0:
            return {str(s): v for s, v in zip(symbols, values, strict=True)}
    return None


PADDED_LENGTHS = (1, 2, 3, 7, 8, 33, 64, 4097)
"""Values of N where a size with N padded to a multiple is checked for a negative value (other sizes: CORNERS)."""


def _negative_at_lengths(size) -> dict[str, int] | None:
    """Sizes at which a size with ⌈N/D⌉ in it is negative, among PADDED_LENGTHS for N and CORNERS for the rest."""
    from attn_cost.costmodel.symbols import N

    symbols = sorted(size.free_symbols - {N}, key=str)
    for n in PADDED_LENGTHS:
        for values in itertools.islice(itertools.product(CORNERS, repeat=len(symbols)), 64):
            point = {N: n, **dict(zip(symbols, values, strict=True))}
            if size.xreplace({k: sp.Integer(v) for k, v in point.items()}) < 0:
                return {str(k): v for k, v in point.items()}
    return None


def located(e: BaseException, files: list[Path], what: str | None = None, variant: str | None = None) -> str:
    """One line: file:line, the source line that failed, and the error."""
    where = [str(f.resolve()) for f in files]
    message = str(e) or type(e).__name__
    if isinstance(e, SystemExit):
        message = f"calls sys.exit({e.code!r}) while attn-cost loads it"
    elif type(e).__name__ not in ("UserError", "ModelError"):
        message = f"{type(e).__name__}: {message}"
    if variant is not None and not message.startswith(variant):
        message = f"variant {variant!r}: {message}"
    if isinstance(e, SyntaxError) and e.filename and str(Path(e.filename).resolve()) in where:
        return f"{e.filename}:{e.lineno}: syntax error: {e.msg}"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if str(Path(f.filename).resolve()) in where]
    if not frames:
        return f"{what or (files[0] if files else 'variant file')}: {message}"
    last = frames[-1]
    code = (last.line or linecache.getline(last.filename, last.lineno or 0)).strip()
    return f"{last.filename}:{last.lineno}: {message} (in `{code}`)"


def loaded() -> dict[str, list[str]]:
    """The files and entry points loaded so far, and the variants each registered."""
    return dict(_loaded)
