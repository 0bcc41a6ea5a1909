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
from collections.abc import Callable, Iterator
from dataclasses import replace
from importlib.metadata import EntryPoint, distributions, entry_points
from pathlib import Path

import sympy as sp
from attn_cost.costmodel.counting import N_kv
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.paths import check_input, real
from attn_cost.costmodel.polyterms import _without_steps
from attn_cost.costmodel.scopes import build_graph
from attn_cost.costmodel.symbols import BY_NAME, N

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
    p = check_input(Path(path).expanduser(), "a variant file")
    key = str(real(p))
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
    what = describe(ep)
    try:
        module = ep.module
    except AttributeError:  # importlib.metadata's parse of a value that is no `module` or `module:attr`
        raise UserError(f"{what}: {ep.value!r} is not a module name (write `package.module`)") from None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as e:
        raise UserError(f"{what}: cannot import it ({e})") from None
    if spec is None:
        raise UserError(f"{what}: no module {module!r} is installed")
    files = [Path(spec.origin)] if spec.origin else []
    _loaded[ep.value] = _registering(ep.load, files, what)
    return _loaded[ep.value]


def describe(ep: EntryPoint) -> str:
    """An entry point as the user can find it: its name and value, its group, and the distribution that declares it
    (the one to fix or uninstall)."""
    dist = getattr(ep, "dist", None)
    by = f", declared by the distribution {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {ep.name} = {ep.value!r} (group {GROUP}{by})"


def load_configured() -> None:
    """Load the files named in ATTN_COST_VARIANTS and the installed entry points, once per process."""
    global _configured
    if _configured:
        return
    _configured = True
    for part in os.environ.get(ENV, "").split(os.pathsep):
        if part.strip():
            load_file(part.strip())
    for ep in declared():
        load_entry_point(ep)


def declared() -> list[EntryPoint]:
    """The installed `attn_cost.variants` entry points, as `importlib.metadata.entry_points` finds them (the first
    distribution of a name on the path wins); a distribution whose entry points cannot be read is named
    (`_declared_one_by_one`, which parses every distribution's metadata: time `crossover` need not
    spend when they all read)."""
    try:
        return list(entry_points(group=GROUP))
    except Exception:  # a malformed file somewhere: find which distribution has it
        return _declared_one_by_one()


def _declared_one_by_one() -> list[EntryPoint]:
    """`declared`, distribution by distribution, so that one whose entry points cannot be read is named."""
    seen: set[str] = set()
    found: list[EntryPoint] = []
    for dist in distributions():
        name = None
        try:
            name = dist.metadata["Name"]
            key = re.sub(r"[-_.]+", "-", name or "").lower()
            if key in seen:
                continue
            seen.add(key)
            eps = dist.entry_points
        except Exception as e:  # a malformed or undecodable entry_points.txt: no module can say what it declares
            raise UserError(
                f"the distribution {name or 'without a name'} has an entry_points.txt that cannot be read "
                f"({type(e).__name__}: {e}): attn-cost cannot tell whether it declares {GROUP}; reinstall or "
                "uninstall it"
            ) from None
        found += [ep for ep in eps if ep.group == GROUP]
    return found


def _registering(run, files: list[Path], what: str | None = None) -> list[str]:
    """Run code that registers variants, then build each new or changed variant once; every error
    becomes one line naming the user's file and line.

    The user's code runs with its prints sent to stderr (stdout carries tables and --json), and a
    `sys.exit()` in it is an error of the file, not the end of attn-cost."""
    from attn_cost.costmodel.variants import REGISTRY

    before = dict(REGISTRY)
    source = what or (str(files[0]) if files else "variant file")
    try:
        with foreign(files, what):
            run()
    except UserError:
        _forget(before)
        raise
    changed = [v for name, v in REGISTRY.items() if before.get(name) is not v]
    altered = [name for name, v in before.items() if _altered(v, REGISTRY.get(name))]
    if altered:
        _forget(before)
        raise UserError(f"{source}: changes the registered variant {altered[0]!r} (source: {before[altered[0]].source})"
                        ": a file adds variants, and decoding steps to variants without one")  # fmt: skip
    if not changed:
        raise UserError(f"{source}: defines no variant (write one with @variant, @layer_variant or @decode_step)")
    for v in changed:
        try:
            check_name(v.name)
        except UserError as e:
            _forget(before)
            raise UserError(f"{source}: {e}") from None
        REGISTRY[v.name] = v = _guarded(v, files, what)
        try:
            check(v)
        except UserError:
            _forget(before)
            raise
        except Exception as e:  # the engine's own check of what the functions wrote (a shape that does not fit)
            _forget(before)
            raise UserError(located(e, files, what, v.name)) from None
    return [v.name for v in changed]


def _altered(was, now) -> bool:
    """A registered variant removed or changed, other than given the decoding step it lacked."""

    return now is None or (now is not was and (was.decode is not None or replace(now, decode=None) != was))


@contextlib.contextmanager
def foreign(files: list[Path], what: str | None = None, variant: str | None = None) -> Iterator[None]:
    """Run code of the user's files: its prints go to stderr (stdout carries tables and --json), torch's switches
    and the working folder are kept (`state_kept`), and whatever it raises (an exception, `sys.exit()`, a
    BaseException of its own, GeneratorExit) is one line naming the file and line, not the end of attn-cost;
    Ctrl-C stays Ctrl-C."""
    try:
        with contextlib.redirect_stdout(sys.stderr), state_kept():
            yield
    except (KeyboardInterrupt, _LocatedError):
        raise
    except BaseException as e:
        raise _LocatedError(located(e, files, what, variant)) from None


class _LocatedError(UserError):
    """An error of the user's code, already located by `foreign` (code it runs may run more of it)."""


@contextlib.contextmanager
def state_kept() -> Iterator[None]:
    """Run the user's code without letting it change the process state that attn-cost's answers depend on:
    torch's global switches (`torch_switches`) and the working folder are set back when it ends. A module that
    sets `torch.set_default_dtype(torch.float64)` at import would otherwise turn every later fp32 tensor into an
    fp64 one (twice the bytes, reported as fp32). Where the code imported torch itself, its switches are set
    back to a fresh torch's."""
    folder = os.getcwd()
    torch = sys.modules.get("torch")
    before = {name: get() for name, (get, _, _) in torch_switches(torch).items()} if torch is not None else None
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if os.getcwd() != folder:
                os.chdir(folder)
        torch = sys.modules.get("torch")
        if torch is not None:
            _set_back(torch, before)


def torch_switches(torch) -> dict[str, tuple[Callable, Callable, object]]:
    """torch's process-wide switches that change what a kernel computes, with what costs or how fast: name ->
    (get, set, a fresh torch's value; None where it depends on the machine)."""
    bk = torch.backends

    def attr(obj, name: str, fresh: object) -> tuple[Callable, Callable, object]:
        return (lambda: getattr(obj, name)), (lambda v: setattr(obj, name, v)), fresh

    def device(v) -> None:
        torch.set_default_device(None if torch.device(v).type == "cpu" else v)  # cpu: no device context at all

    def deterministic(v) -> None:
        torch.use_deterministic_algorithms(v[0], warn_only=v[1])

    switches = {
        "default dtype": (torch.get_default_dtype, torch.set_default_dtype, torch.float32),
        "grad mode": (torch.is_grad_enabled, torch.set_grad_enabled, True),
        "default device": (torch.get_default_device, device, torch.device("cpu")),
        "deterministic algorithms": (
            lambda: (
                torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
            ),
            deterministic,
            (False, False),
        ),
        "anomaly detection": (
            lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
            lambda v: torch.set_anomaly_enabled(*v),
            (False, True),
        ),
        "threads": (torch.get_num_threads, torch.set_num_threads, None),
        "float32 matmul precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision, "highest"),
        "random state": (torch.get_rng_state, torch.set_rng_state, None),
        "cudnn": attr(bk.cudnn, "enabled", True),
        "cudnn benchmark": attr(bk.cudnn, "benchmark", False),
        "cudnn deterministic": attr(bk.cudnn, "deterministic", False),
        "cudnn tf32": attr(bk.cudnn, "allow_tf32", True),
        "cuBLAS tf32": attr(bk.cuda.matmul, "allow_tf32", False),
        "cuBLAS fp16 reduction": attr(bk.cuda.matmul, "allow_fp16_reduced_precision_reduction", True),
        "cuBLAS bf16 reduction": attr(bk.cuda.matmul, "allow_bf16_reduced_precision_reduction", True),
        "mkldnn": attr(bk.mkldnn, "enabled", True),
        "einsum path": attr(bk.opt_einsum, "enabled", bk.opt_einsum.is_available()),
    }
    for kernel in ("flash", "mem_efficient", "math", "cudnn"):
        get, put = getattr(bk.cuda, f"{kernel}_sdp_enabled", None), getattr(bk.cuda, f"enable_{kernel}_sdp", None)
        if get is not None and put is not None:
            switches[f"{kernel} SDPA"] = (get, put, True)
    return switches


def _set_back(torch, before: dict | None) -> None:
    """Each switch the user's code changed, back to its value before (or a fresh torch's)."""
    for name, (get, put, fresh) in torch_switches(torch).items():
        was = fresh if before is None else before[name]
        if was is None:
            continue
        now = get()
        same = torch.equal(now, was) if isinstance(now, torch.Tensor) else now == was
        if not same:
            put(was)


def _forget(before: dict) -> None:
    """Take back what a file registered before it failed, so no half-loaded variant is used."""
    from attn_cost.costmodel.variants import REGISTRY

    REGISTRY.clear()
    REGISTRY.update(before)


def _guarded(v, files: list[Path], what: str | None):
    """The variant with its functions run as `foreign` code: a print in them never lands in --json, and an error
    they raise only at another scope or mode (training) is one line naming the file and line."""

    def guard(fn):
        if fn is None:
            return None

        @functools.wraps(fn)
        def run(*args):
            with foreign(files, what, v.name):
                return fn(*args)

        return run

    return replace(v, core=guard(v.core), layer=guard(v.layer), decode=guard(v.decode))


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

    graphs = [build_graph(v, "core" if v.core is not None else "layer", "inference")]
    if v.decode is not None:
        graphs.append(build_graph(v, "decode", "inference"))
    for g in graphs:
        check_sizes(g)


def check_sizes(g) -> None:
    """Every shape, loop count and workspace of a graph: a polynomial (or a ratio of polynomials, such as N/w
    windows, never dividing by N) in the known size symbols that is not negative."""

    known = {*BY_NAME.values(), N_kv}
    names = ", ".join(sorted(BY_NAME)) + ", N_kv"
    sizes = [(f"loop {lp.label!r}", lp.count) for lp in g.loops]
    for op in g.ops:
        where = f"op {op.label or op.output.name!r}"
        sizes += [(f"{where}: {t.name}", dim) for t in (*op.inputs, op.output) for dim in t.shape]
        sizes.append((f"{where}: workspace", op.workspace))
    sizes += [(f"input {t.name}", dim) for t in g.inputs for dim in t.shape]
    sizes += [(f"parameter {t.name}", dim) for t, _ in g.params for dim in t.shape]
    seen: set = set()
    for where, size in sizes:
        size = sp.sympify(size)
        if size in seen:  # a graph of many ops repeats few sizes: each is checked once (linear in the ops)
            continue
        seen.add(size)
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

    symbols = sorted(size.free_symbols - {N}, key=str)
    for n in PADDED_LENGTHS:
        for values in itertools.islice(itertools.product(CORNERS, repeat=len(symbols)), 64):
            point = {N: n, **dict(zip(symbols, values, strict=True))}
            if size.xreplace({k: sp.Integer(v) for k, v in point.items()}) < 0:
                return {str(k): v for k, v in point.items()}
    return None


def located(e: BaseException, files: list[Path], what: str | None = None, variant: str | None = None) -> str:
    """One line: file:line, the source line that failed, and the error."""
    where = [real(f) for f in files]
    message = str(e) or type(e).__name__
    if isinstance(e, SystemExit):
        message = f"calls sys.exit({e.code!r}) while attn-cost loads it"
    elif type(e).__name__ not in ("UserError", "ModelError"):
        message = f"{type(e).__name__}: {message}"
    if variant is not None and not message.startswith(variant):
        message = f"variant {variant!r}: {message}"
    if isinstance(e, SyntaxError) and e.filename and real(e.filename) in where:
        return f"{e.filename}:{e.lineno}: syntax error: {e.msg}"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if real(f.filename) in where]
    if not frames:
        return f"{what or (files[0] if files else 'variant file')}: {message}"
    last = frames[-1]
    code = (last.line or linecache.getline(last.filename, last.lineno or 0)).strip()
    return f"{last.filename}:{last.lineno}: {message} (in `{code}`)"


def loaded() -> dict[str, list[str]]:
    """The files and entry points loaded so far, and the variants each registered."""
    return dict(_loaded)
