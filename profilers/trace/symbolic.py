"""torch's symbolic sizes as the engine's sympy expressions (the integer and float functions of the ShapeEnv,
the padding branch read in ceil(N/m))."""

from __future__ import annotations

from typing import Any

import sympy as sp
import torch
from attn_cost.costmodel.symbols import N

INTEGER_FUNCTIONS = ("FloorDiv", "CeilDiv", "CleanDiv", "Mod", "PythonMod", "IntTrueDiv", "CeilToInt", "FloorToInt",
                     "TruncToInt")  # fmt: skip


"""torch's integer functions of sizes, rewritten in sympy's floor, ceiling and Mod."""


def plain_integer(f: Any) -> sp.Expr:
    """One of torch's integer size functions (FloorDiv, CleanDiv, Mod, ...) as plain sympy (floor, Mod)."""
    name, args = type(f).__name__, f.args
    if name in ("FloorDiv", "CleanDiv"):
        return sp.floor(args[0] / args[1])
    if name == "CeilDiv":
        return sp.ceiling(args[0] / args[1])
    if name == "IntTrueDiv":
        return args[0] / args[1]
    if name == "CeilToInt":
        return sp.ceiling(args[0])
    if name in ("FloorToInt", "TruncToInt"):
        return sp.floor(args[0])
    return sp.Mod(*args)


class Subs(dict):
    """ShapeEnv symbol -> engine expression; `post` undoes the substitution N = m·K made where the code requires
    N % m == 0, so that floor(N/m) of a reshape into windows is the polynomial N/m. On a branch that pads N to
    a multiple of m (`pads`), N mod m, ⌊N/m⌋ and ⌈N/m⌉ are written in one symbol Q = ⌈N/m⌉ (there N mod m =
    N − mQ + m), which `post` turns back into sympy's ceiling(N/m)."""

    def __init__(self, pads: int = 0) -> None:
        super().__init__()
        self.post: dict = {}
        self.pads = pads
        if pads:
            self.post = {ceil_symbol(pads): sp.ceiling(N / pads)}


def ceil_symbol(m: int) -> sp.Symbol:
    """Q = ⌈N/m⌉, the symbol a padding branch's sizes are written in (`on_padding_branch`)."""
    return sp.Symbol(f"N_ceil_{m}", integer=True, positive=True)


def on_padding_branch(expr: sp.Expr, m: int) -> sp.Expr:
    """A size on the branch where N is not a multiple of m, in Q = ⌈N/m⌉: there N = mQ − r with 0 < r < m, so
    ⌊(aN + c)/m⌋ = aQ + ⌊(c − ar)/m⌋, written in Q and N wherever that last term is affine in r (⌊N/m⌋ = Q − 1,
    ⌊(N + m − 1)/m⌋ = Q, ⌈N/m⌉ = Q), and x mod m = x − m⌊x/m⌋ (N mod m = N − mQ + m, (−N) mod m = mQ − N)."""
    q = ceil_symbol(m)

    def floor_of(x: sp.Expr) -> sp.Expr | None:
        poly = sp.Poly(sp.expand(m * x), N) if x.free_symbols == {N} else None
        if poly is None or poly.degree() != 1 or not all(c.is_Integer for c in poly.all_coeffs()):
            return None
        a, c = (int(v) for v in poly.all_coeffs())
        # ⌊(c − ar)/m⌋ over r = 1 … m − 1, with a = a1·m + a0: −a1·r + ⌊(c − a0·r)/m⌋, whose last term falls by 0 or
        # 1 at each step; it is affine in r only where every step is the same, read off its ends (no walk over r)
        a1, a0 = divmod(a, m)
        drop = (c - a0 * (m - 1)) // m - (c - a0) // m
        if m > 2 and drop not in (0, 2 - m):
            return None
        slope = -a1 + drop // (m - 2) if m > 2 else 0
        return a * q + slope * (m * q - N) + (c - a) // m - slope

    def rewrite(f: sp.Expr) -> sp.Expr:
        if isinstance(f, sp.floor) and (k := floor_of(f.args[0])) is not None:
            return k
        if isinstance(f, sp.ceiling) and (k := floor_of(-f.args[0])) is not None:
            return -k
        if isinstance(f, sp.Mod) and f.args[1] == m and (k := floor_of(f.args[0] / m)) is not None:
            return f.args[0] - m * k
        return f

    return expr.replace(lambda f: isinstance(f, (sp.Mod, sp.ceiling, sp.floor)), rewrite)


def engine_expr(value: Any, subs: dict[sp.Symbol, sp.Expr]) -> sp.Expr:
    """A size from the exported program or the recorded run in the engine's symbols."""
    if isinstance(value, torch.SymInt):
        expr = value.node.expr
    else:
        return sp.Integer(int(value))
    expr = sp.sympify(expr).xreplace(subs)
    if any(type(f).__name__ in INTEGER_FUNCTIONS for f in sp.preorder_traversal(expr)):
        expr = expr.replace(lambda f: type(f).__name__ in INTEGER_FUNCTIONS, plain_integer)
        pads = getattr(subs, "pads", 0)
        expr = sp.simplify(on_padding_branch(expr, pads) if pads else expr)
    post = getattr(subs, "post", None)
    return sp.expand(expr.xreplace(post)) if post else sp.expand(expr)


FLOAT_FUNCTIONS = ("ToFloat", "FloatPow", "FloatTrueDiv", "PowByNatural", "IntTrueDiv", "OpaqueUnaryFn_sqrt")


def plain_float(f: Any) -> sp.Expr:
    """One of torch's float size functions (`FLOAT_FUNCTIONS`) as the sympy expression it stands for."""
    name, args = type(f).__name__, f.args
    if name == "ToFloat":
        return args[0]
    if name in ("FloatPow", "PowByNatural"):
        return args[0] ** args[1]
    if name == "OpaqueUnaryFn_sqrt":
        return sp.sqrt(args[0])
    return args[0] / args[1]
