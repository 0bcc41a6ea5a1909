"""Variants from the user's own files: `--variants PATH`, `ATTN_COST_VARIANTS`, the `attn_cost.variants` entry points.

A variant file is ordinary Python that writes variants with the catalogue's DSL (`@variant`,
`@layer_variant`, `@decode_step` from `attn_cost.costmodel.variants`, see docs/variants.md). Loading it
registers its variants beside the catalogue's. Each new variant is then built once at its own scopes, so
that a wrong shape, an unknown op kind or a name clash is reported at once, as one line with the file,
the line and the op that failed, not later in the middle of a crossover. Nothing here imports torch.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import sys
import traceback
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

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
    spec = importlib.util.find_spec(ep.module)
    files = [Path(spec.origin)] if spec is not None and spec.origin else []
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
    becomes one line naming the user's file and line."""
    from attn_cost.costmodel.variants import REGISTRY

    before = dict(REGISTRY)
    try:
        run()
    except Exception as e:
        raise UserError(located(e, files, what)) from None
    changed = [v for name, v in REGISTRY.items() if before.get(name) is not v]
    for v in changed:
        try:
            check(v)
        except Exception as e:
            raise UserError(located(e, files, what, v.name)) from None
    return [v.name for v in changed]


def check(v) -> None:
    """Build a variant's graphs once (its core or its layer, and its decoding step) so that shape and
    kind errors surface now."""
    from attn_cost.costmodel.scopes import build_graph

    build_graph(v, "core" if v.core is not None else "layer", "inference")
    if v.decode is not None:
        build_graph(v, "decode", "inference")


def located(e: BaseException, files: list[Path], what: str | None = None, variant: str | None = None) -> str:
    """One line: file:line, the source line that failed, and the error."""
    where = [str(f.resolve()) for f in files]
    message = str(e) or type(e).__name__
    if type(e).__name__ not in ("UserError", "ModelError"):
        message = f"{type(e).__name__}: {message}"
    if variant is not None and not message.startswith(variant):
        message = f"variant {variant!r}: {message}"
    if isinstance(e, SyntaxError) and e.filename and str(Path(e.filename).resolve()) in where:
        return f"{e.filename}:{e.lineno}: syntax error: {e.msg}"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if str(Path(f.filename).resolve()) in where]
    if not frames:
        return f"{what or (files[0] if files else 'variant file')}: {message}"
    last = frames[-1]
    code = (last.line or linecache.getline(last.filename, last.lineno)).strip()
    return f"{last.filename}:{last.lineno}: {message} (in `{code}`)"


def loaded() -> dict[str, list[str]]:
    """The files and entry points loaded so far, and the variants each registered."""
    return dict(_loaded)
