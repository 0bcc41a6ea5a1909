"""Tracing and registration: `trace` runs both recordings of the user's code, `register` adds the traced variant
to the catalogue (`traced` finds it again), `exported_peak` the exported graph's peak."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sympy as sp
import torch
from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.derive import Derived
from attn_cost.costmodel.errors import UserError, printable
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.plugins import check
from attn_cost.costmodel.symbols import N, b, d, h
from attn_cost.costmodel.variants import REGISTRY, Variant, add_variant, all_variants, derive
from attn_cost.profilers.trace.adapters import Core, by_arguments, embed_width, heads_of
from attn_cost.profilers.trace.export import Exported, export
from attn_cost.profilers.trace.load import (
    CORE_DIMS,
    D_TRIES,
    EXAMPLE,
    LAYER_DIMS,
    N_TRIES,
    SYMBOLS,
    build,
    first_line,
    load_config,
    load_object,
    parse_example,
    parse_init,
    sizes_for,
    split_spec,
    user_code,
    user_line,
)
from attn_cost.profilers.trace.record import RunError, pads_at, record, run_sizes
from attn_cost.profilers.trace.replay import replay_eager, replay_export
from attn_cost.profilers.trace.symbolic import Subs, engine_expr

if TYPE_CHECKING:
    from attn_cost.profilers.trace.record import Recording


@dataclass
class Traced:
    """The user's code, built and run with symbolic sizes."""

    name: str
    path: Path
    kind: str
    """'core' (q, k, v) or 'layer' (x)."""
    module: torch.nn.Module
    recording: Recording
    exported: Exported
    example: dict[str, int]
    param_shapes: dict[str, tuple[int, ...]]
    width: int | None = None
    """A layer's embedding width (fixed by its weights)."""
    heads: int | None = None
    """A layer's heads, read from the module (None if it does not say)."""

    @property
    def symbolic(self) -> tuple[str, ...]:
        dims = CORE_DIMS if self.kind == "core" else LAYER_DIMS
        return tuple(k for k in dims if k not in self.recording.fixed)

    @property
    def conditions(self) -> list[str]:
        """What the formulas assume of the sizes: the code's branches, torch.export's asserts."""
        out = list(self.recording.guards)
        out += [a for a in self.exported.asserts if a not in out and not self._padding_guard(a)]
        bounds = {c: int(m.group(3)) - (m.group(2) == "<") for c in out if (m := re.fullmatch(r"(\w) (<=?) (\d+)", c))}
        tightest: dict[str, int] = {}
        for c, top in bounds.items():
            tightest[c[0]] = min(top, tightest.get(c[0], top))
        return [c for c in out if c not in bounds] + [f"{k} <= {v}" for k, v in tightest.items()]

    def _padding_guard(self, condition: str) -> bool:
        """An assert of the exported graph that the padding branch makes (N % m > 0), or that it always meets,
        where the formulas hold at every N."""
        if not self.recording.pads or self.recording.whole is None:
            return False
        try:
            expr = sp.sympify(condition.replace("%", " % "), locals={"N": N, "b": b, "h": h, "d": d})
        except (sp.SympifyError, TypeError, SyntaxError):
            return False
        return pads_at(expr, self.recording.pads, self.example) is not None or bool(
            re.fullmatch(r"N % \d+ == 0", condition))


_TRACED: dict[str, Traced] = {}


"""Variant name -> its trace (for `trace`'s report and for measuring a traced variant)."""


def trace(spec: str, init: list[str] | None = None, config: Path | None = None, example: str | None = None) -> Traced:
    """Build PATH:NAME and run it with symbolic sizes (as written), then export it (the ideal)."""
    path, name = split_spec(spec)
    _, obj = load_object(path, name)
    kwargs, cfg, chosen = parse_init(init), load_config(config), parse_example(example)
    module = by_arguments(build(obj, path, name, kwargs, cfg))
    kind = "core" if isinstance(module, Core) else "layer"
    width = None if kind == "core" else embed_width(module, path, name)
    sizes_for(kind, chosen, EXAMPLE, width, "--example")
    where_ = f"{path}:{name}"
    recording, sizes = _record_at_some_size(module, kind, chosen, width, where_)
    if "N" in recording.fixed:
        raise UserError(
            f"{where_}: the sequence length N cannot stay symbolic: the code fixes it to the example's "
            f"{sizes['N']}{recording.pinned_at.rstrip()} (a Python loop or branch over N, or int(N)): write it with "
            "tensor ops (cumsum, matmul), or describe it with the op DSL (g.loop, docs/variants.md)"
        )
    if recording.pads and recording.whole is not None:
        recording = _padded_or_whole(recording, module, kind, width, path, name, sizes)
    bounds = [int(m.group(2)) - (m.group(1) == "<") for c in recording.guards
              if (m := re.fullmatch(r"N (<=?) (\d+)", c))]  # fmt: skip
    exported = export(module, kind, sizes, width, recording.divisors, min(bounds) if bounds else None)
    params = {k: tuple(p.shape) for k, p in module.named_parameters()}
    heads = None if kind == "core" else heads_of(module)
    return Traced(name, path, kind, module, recording, exported, sizes, params, width, heads)


def _padded_or_whole(rec: Recording, module: torch.nn.Module, kind: str, width: int | None, path: Path, name: str,
                     sizes: dict[str, int]) -> Recording:  # fmt: skip
    """The run that pads N, where its formulas (its padding copies made only where N is not a multiple of m)
    equal the run at multiples of m there, FLOPs and peak at several sizes; else the run at multiples, whose
    formulas hold for multiples of m only (as they say)."""

    def derived(r: Recording) -> Derived:
        t = Traced(name, path, kind, module, r, Exported(), sizes, {}, width)
        g = Graph(name)
        if kind == "core":
            g.output(replay_eager(t, g, [g.input(x, b, h, N, d) for x in ("Q", "K", "V")]))
        else:
            g.output(replay_eager(t, g, [g.input("X", b, N, width)]))
        return Derived(g)

    whole = rec.whole
    assert whole is not None, "a padding run comes with its run at a multiple"
    try:
        padded_run, whole_run = derived(rec), derived(whole)
        flops = (padded_run.flops(MATMUL), whole_run.flops(MATMUL))
        peaks = (padded_run.peak("fp32"), whole_run.peak("fp32"))
        for k, bb, hh in ((1, 2, 3), (2, 3, 2), (3, 2, 5), (7, 5, 3)):
            at = {N: rec.pads * k, b: bb, h: hh, d: sizes["d"]}
            at = {s: sp.Integer(v) for s, v in at.items()}
            if flops[0].xreplace(at) != flops[1].xreplace(at) or peaks[0].at(at)[0] != peaks[1].at(at)[0]:
                return whole
    except Exception:  # a graph the replay cannot build: the run at multiples, as before
        return whole
    rec.guards += [c for c in whole.guards if c not in rec.guards and not re.fullmatch(r"N % \d+ == 0", c)]
    return rec


def _record_at_some_size(
    module: torch.nn.Module, kind: str, chosen: dict[str, int], width: int | None, where_: str
) -> tuple[Recording, dict[str, int]]:
    """Record at the example sizes; when the code rejects them, try other N (and d for a core) unless
    the user chose them with --example."""
    tries = []
    for n in ([chosen["N"]] if "N" in chosen else N_TRIES):
        for dd in ([chosen.get("d", EXAMPLE["d"])] if "d" in chosen or kind != "core" else D_TRIES):
            tries.append({**EXAMPLE, **chosen, "N": n, "d": dd})
    first: BaseException | None = None
    fallback = None
    for sizes in tries:
        try:
            rec = record(module, kind, sizes, width, where_)
        except RunError as e:
            first = first or e.error
            continue
        if "N" in rec.fixed:  # a loop over the tokens: another N loops as well
            return rec, sizes
        if rec.pads and not _polynomial(rec) and sizes["N"] < rec.pads and "N" not in chosen:
            longer = {**sizes, "N": 2 * rec.pads + 1}  # below one window the code takes its size-1 path
            with suppress(RunError):
                rec, sizes = record(module, kind, longer, width, where_), longer
        if rec.pads and _polynomial(rec):  # the code pads N: its run at a multiple of m checks the formulas
            m = rec.pads
            try:
                rec.whole = record(module, kind, {**sizes, "N": m * max(2, -(-sizes["N"] // m))}, width, where_)
            except RunError:
                rec.whole = None
            if rec.whole is not None and _polynomial(rec.whole) and not rec.whole.pads:
                return rec, sizes
        if not rec.pads and _polynomial(rec):
            return rec, sizes
        fallback = fallback or (rec, sizes)  # sizes like ceil(N/4): a multiple of 4 may not need them
    if fallback is not None:
        if fallback[0].pads:  # its padded run could not be written in ⌈N/m⌉ or checked: the run as it is
            fallback[0].unpadded()
        return fallback
    shown = ", ".join(f"{k}={v}" for k, v in tries[0].items() if kind == "core" or k in LAYER_DIMS)
    located = user_line(first)
    raise UserError(
        f"{where_} raised an error when run at the example sizes {shown}"
        f"{' (and at the other N tried)' if len(tries) > 1 else ''}: {located}{type(first).__name__}: "
        f"{first_line(first)}; if the sizes are the cause, choose ones it accepts with --example N=...,d=..."
    )


def _polynomial(rec: Recording) -> bool:
    """Every size of the run is a polynomial in the dims (N = 16 pads nothing where N = 13 needs ceil(N/8))."""
    subs = Subs(rec.pads)
    for s, k in rec.symbols.items():
        m = rec.divisors.get(k, 1)
        whole = sp.Symbol(f"{k}_per_{m}", integer=True, positive=True)
        subs[s] = sp.Integer(rec.fixed[k]) if k in rec.fixed else m * whole if m > 1 else SYMBOLS[k]
        if m > 1:
            subs.post = {**subs.post, whole: SYMBOLS[k] / m}
    sizes = run_sizes(rec.nodes)
    steps = {v: k for k, v in subs.post.items() if rec.pads}
    for x in sizes:
        e = engine_expr(x, subs).xreplace(steps)
        if not e.is_polynomial(*SYMBOLS.values(), *steps.values()):
            return False
        if e.has(sp.floor, sp.ceiling, sp.Mod, sp.Max, sp.Min):
            return False
    return True


def register(spec: str, init: list[str] | None = None, config: Path | None = None, example: str | None = None) -> str:
    """Trace PATH:NAME and register it as a variant named NAME; returns the name."""

    all_variants()
    path, name = split_spec(spec)
    if name in REGISTRY:
        if getattr(REGISTRY[name], "source", "").startswith(f"traced from {path}:{name}") and name in _TRACED:
            return name
        raise UserError(f"traced variant {name!r} clashes with a registered variant: rename {name} in {path}")
    try:
        t = trace(spec, init, config, example)
    except UserError:
        raise
    except Exception as e:  # never a traceback: what attn-cost did not foresee is still one line
        raise UserError(f"{spec}: could not trace it ({type(e).__name__}: {first_line(e)})") from None
    source = f"traced from {path}:{name} (run with symbolic {', '.join(t.symbolic)}; torch.export for the ideal)"
    fixed = {k: v for k, v in t.recording.fixed.items()}
    if fixed:  # the formulas hold at these sizes only: say so once, on stderr (stdout may be JSON)
        sizes = ", ".join(f"{k} = {v}" for k, v in fixed.items())
        sys.stderr.write(printable(f"attn-cost: note: {path}:{name} fixes {sizes}; its formulas hold at these sizes "
                                   "only", keep="") + "\n")
        source += f"; fixed: {sizes}"
    if t.kind == "core":
        core = lambda g, q, k, v: replay_eager(t, g, [q, k, v])  # noqa: E731
        v = Variant(name, f"{name} as written in {path.name} (traced)", source, "traced", core=core)
    else:
        v = Variant(name, f"{name} as written in {path.name} (traced; d_embed = {t.width})", source, "traced",
                    layer=lambda g, x: _replay_layer(t, g, x, replay_eager))  # fmt: skip
    add_variant(v)
    try:
        check(v)
        derive(name, t.kind).peak("fp32").expr.free_symbols  # noqa: B018 (polynomial in the sizes?)
        derive(name, t.kind).flops(MATMUL)
    except UserError:
        del REGISTRY[name]
        raise
    except Exception as e:  # sizes the engine cannot hold as polynomials (floor(N/128) of a chunked loop)
        del REGISTRY[name]
        raise UserError(f"{path}:{name}: its costs are not polynomials in the sizes ({type(e).__name__}: "
                        f"{first_line(e)}); describe it with the op DSL (docs/variants.md)") from None
    _TRACED[name] = t
    return name


def _replay_layer(t: Traced, g: Graph, x: Tensor, how: Callable) -> Tensor:
    """A module's widths are its own: its input is (b, N, d_embed) with the module's d_embed."""
    if x.storage.producer != -1 or x not in g.inputs:
        raise UserError(f"{t.name} is a traced module with a fixed width: it has the layer scope only")
    g.inputs.remove(x)
    own = g.input("X", b, N, t.width)
    return how(t, g, [own])


def traced(name: str) -> Traced | None:
    """The trace behind a registered variant (None if it is not traced)."""
    return _TRACED.get(name)


def exported_peak(t: Traced, dtype: str = "fp32") -> tuple[sp.Expr | None, str]:
    """The exported graph's peak in bytes (every tensor freed after its last use), or None and why not. Where
    the graph keeps an op no rule maps (an einsum of three operands), its ATen decomposition is mapped."""
    if t.exported.program is None:
        return None, f"torch.export could not export it ({t.exported.failure})"
    peak, why = _exported_peak(t, t.exported.program, dtype)
    if peak is None and "cannot map" in why:
        try:
            with user_code("torch.export"), torch.no_grad():
                decomposed = t.exported.program.run_decompositions()
        except Exception:
            return None, why
        peak, _ = _exported_peak(t, decomposed, dtype)
    return peak, why if peak is None else ""


def _exported_peak(t: Traced, program: Any, dtype: str) -> tuple[sp.Expr | None, str]:

    g = Graph(f"{t.name} (exported)")
    try:
        if t.kind == "core":
            q, k, v = (g.input(x, b, h, N, d) for x in ("Q", "K", "V"))
            g.output(replay_export(t, g, [q, k, v], program))
        else:
            g.output(replay_export(t, g, [g.input("X", b, N, t.width)], program))
        return Derived(g).peak(dtype).expr, ""
    except UserError as e:
        return None, str(e)
    except Exception as e:  # sizes that are not polynomials, a node the replay does not expect
        return None, f"its exported graph could not be mapped ({type(e).__name__}: {first_line(e)})"
