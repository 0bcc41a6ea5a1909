"""The exported graph: torch.export with dynamic shapes, and the runtime asserts it recorded."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import sympy as sp
import torch
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.trace.load import CORE_DIMS, LAYER_DIMS, SYMBOLS, first_line, user_code
from attn_cost.profilers.trace.record import condition_text, first_tensor, symbolic_run
from torch.export import Dim
from torch.export import export as torch_export


@dataclass
class Exported:
    """torch.export's program of the code and the runtime asserts it recorded (or why there is none)."""

    program: Any = None
    symbolic: tuple[str, ...] = ()
    asserts: list[str] = field(default_factory=list)
    failure: str = ""


def export(module: torch.nn.Module, kind: str, example: dict[str, int], width: int | None,
           divisor: dict[str, int] | None = None, upper: int | None = None) -> Exported:  # fmt: skip
    """Export with as many symbolic dims as the code allows (the exported graph is the ideal's source); N a
    multiple of `divisor['N']` and at most `upper` where the code's run required it."""
    divisor = divisor or {}

    symbolic = list(CORE_DIMS if kind == "core" else LAYER_DIMS)
    gen = torch.Generator().manual_seed(0)
    if kind == "core":
        args = tuple(torch.randn(*(example[k] for k in CORE_DIMS), generator=gen) for _ in range(3))
        axes = dict(enumerate(CORE_DIMS))
    else:
        assert width is not None, "a layer is traced at its embedding width"
        args = (torch.randn(example["b"], example["N"], width, generator=gen),)
        axes = {0: "b", 1: "N"}
    step, top = divisor.get("N", 1), upper
    while True:  # drop the dims the code fixes, one export at a time; N must stay
        dims = {k: Dim(k, min=2) for k in symbolic}
        if step > 1:  # the code needs N % step == 0 (a window): N = step·K, as torch.export's derived dims say
            dims["N"] = step * Dim("N_per_step", min=1, max=top // step if top else None)
        elif top:  # the code bounds N (a table of positions): the export covers 2 <= N <= top
            dims["N"] = Dim("N", min=2, max=top)
        dynamic = tuple({ax: dims[k] for ax, k in axes.items() if k in dims} for _ in args)
        try:
            with user_code("torch.export"), symbolic_run(), torch.no_grad():
                program = torch_export(module if kind == "core" else _First(module), args, dynamic_shapes=dynamic,
                                       prefer_deferred_runtime_asserts_over_guards=True)  # fmt: skip
        except UserError as e:
            return Exported(failure=str(e))
        except Exception as e:
            text = str(e)
            named = re.search(r"Constraints violated \(([^)]*)\)", text)
            fixed = {x.strip() for x in named.group(1).split(",")} if named else set()
            if ("Constraints violated" not in text and "specialized" not in text) or "N" in fixed or not fixed:
                return Exported(failure=first_line(e))
            symbolic = [k for k in symbolic if k not in fixed]
            continue
        return Exported(program, tuple(symbolic), _asserts(program))


class _First(torch.nn.Module):
    """A layer with its input only, returning its first tensor (as the as-written run reads it)."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.inner = module

    def forward(self, x):
        return first_tensor(self.inner(x))


def _asserts(program: Any) -> list[str]:
    """The runtime asserts of an exported program (a branch on N becomes one) and the ranges of its dims."""
    names: dict[Any, Any] = {}
    for node in program.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            dims = CORE_DIMS if val.dim() == 4 else ("b", "N")
            for size, k in zip(val.shape, dims, strict=False):
                if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sp.Symbol):
                    names.setdefault(size.node.expr, SYMBOLS[k])
    out = []
    for node in program.graph.nodes:
        if node.op == "call_function" and "_assert_scalar" in str(node.target) and len(node.args) > 1:
            found = re.search(r"expression (.*?) on line", str(node.args[1]))
            if found:
                try:
                    expr = sp.sympify(found.group(1), locals={"Mod": sp.Mod, "Eq": sp.Eq, "Ne": sp.Ne})
                except (sp.SympifyError, TypeError, SyntaxError):
                    continue
                text = condition_text(expr.xreplace({sp.Symbol(str(s)): v for s, v in names.items()}))
                if text and text not in out:
                    out.append(text)
    for s, rng in program.range_constraints.items():
        if s in names and isinstance(rng.upper, sp.Integer):
            out.append(f"{names[s]} <= {int(rng.upper)}")
    return out
