"""Turn sympy expressions into one-line unicode, LaTeX or plain strings, close to how papers print them."""

from __future__ import annotations

import sympy as sp
from attn_cost.costmodel.memo import persisted
from attn_cost.costmodel.symbols import N, Pads

_SUP = str.maketrans("0123456789-/", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻ᐟ")
_ORDER = {"b": 0, "h": 1, "D": 2, "N": 3, "L": 5, "d": 6, "d_embed": 7, "r": 8}
_NAMES = {"d_embed": "dₑ"}


def _sym_key(s: sp.Basic) -> tuple[int, str]:
    return (_ORDER.get(str(s), 4), str(s))


@persisted
def text(expr: sp.Expr) -> str:
    """Compact unicode: 4N²d + 6N², N(4d³ + 10d² + 8d + 3), bh(dN + 2N²); a padded length C·⌈N/C⌉ as ⌈N⌉_C."""
    expr = _readable(sp.sympify(expr))
    if isinstance(expr, sp.Max):
        return "max(" + ", ".join(text(a) for a in expr.args) + ")"
    num, den = sp.fraction(sp.together(expr))
    if den.free_symbols and len(sp.Add.make_args(sp.expand(den))) > 1:  # a monomial denominator stays term-wise
        return f"({text(num)})/({text(den)})"
    expr = sp.expand(expr)
    factor, rest = _split_common(expr)
    if factor == 1:
        return _add(rest)
    return f"{_mul(factor)}({_add(rest)})"


def padded_lengths(*exprs: sp.Expr) -> list[sp.Expr]:
    """The multiples D that N is padded to in these expressions (⌈N/D⌉, ⌊N/D⌋, N mod D, [D∤N]), sorted."""

    found: set[sp.Expr] = set()
    for e in exprs:
        for f in sp.sympify(e).atoms(sp.ceiling, sp.floor, sp.Mod, Pads):
            found.add(f.args[1] if isinstance(f, (sp.Mod, Pads)) else sp.cancel(N / f.args[0]))
    return sorted(found, key=str)


def step_legend(multiples: list[sp.Expr], copied: list[sp.Expr] | None = None) -> list[str]:
    """What the padded-length notation means, one line per multiple (where the costs step); the bracket [D∤N] is
    explained for the multiples in `copied` (default: all), those the code makes a padded copy for (a kernel that
    masks its last block computes whole blocks without one)."""
    copied = multiples if copied is None else copied
    out = []
    for m in multiples:
        line = f"⌈N⌉_{text(m)} = N rounded up to a multiple of {text(m)} (the costs step at multiples of {text(m)})"
        if m in copied:
            line += f"; [{text(m)}∤N] = 1 where N is not a multiple of {text(m)} (the code makes a padded copy), else 0"
        out.append(line)
    return out


def copied_lengths(*exprs: sp.Expr) -> list[sp.Expr]:
    """The multiples D whose bracket [D∤N] (a padded copy) appears in these expressions."""
    return sorted({f.args[1] for e in exprs for f in sp.sympify(e).atoms(Pads)}, key=str)


def _readable(expr: sp.Expr) -> sp.Expr:
    """D·⌈N/D⌉ as one symbol ⌈N⌉_D (N rounded up to a multiple of D); the bracket [D∤N] or its complement
    [D|N] = 1 − [D∤N], whichever needs fewer negative terms."""

    if not expr.has(sp.ceiling, Pads):
        return expr
    for f in sorted(expr.atoms(sp.ceiling), key=str):
        m = sp.cancel(N / f.args[0])
        if N not in m.free_symbols:
            expr = expr.xreplace({f: sp.Symbol(f"⌈N⌉_{text(m)}", positive=True) / m})
    expr = sp.expand(expr) if not isinstance(expr, sp.Max) else expr.func(*(sp.expand(a) for a in expr.args))
    for f in sorted(expr.atoms(Pads), key=str):
        other = expr.xreplace({f: 1 - sp.Symbol(f"[{text(f.args[1])}|{text(f.args[0])}]", nonnegative=True)})
        other = sp.expand(other) if not isinstance(other, sp.Max) else other.func(*(sp.expand(a) for a in other.args))
        if _negatives(other) < _negatives(expr):
            expr = other
    return expr


def _negatives(expr: sp.Expr) -> int:
    args = expr.args if isinstance(expr, sp.Max) else (expr,)
    return sum(bool(t.as_coeff_Mul()[0] < 0) for a in args for t in sp.Add.make_args(a))


def _split_common(expr: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """Pull out batch/head factors always, and any common monomial when 3+ terms remain."""
    terms = sp.Add.make_args(expr)
    if len(terms) < 2:
        return sp.Integer(1), expr
    common: dict | None = None
    for t in terms:
        powers = t.as_coeff_Mul()[1].as_powers_dict()
        common = dict(powers) if common is None else {s: min(e, powers.get(s, 0)) for s, e in common.items()}
    common = {s: e for s, e in (common or {}).items() if e > 0 and s.is_Symbol}
    if len(terms) < 3:
        common = {s: e for s, e in common.items() if str(s) in ("b", "h")}
    mono = sp.Mul(*(s**e for s, e in common.items()))
    return mono, sp.expand(expr / mono)


def _add(expr: sp.Expr) -> str:
    terms = sorted(sp.Add.make_args(expr), key=_term_key)
    out = ""
    for i, t in enumerate(terms):
        neg = t.as_coeff_Mul()[0] < 0
        s = _mul(-t if neg else t)
        out += (" − " if neg else " + ") + s if i else ("−" if neg else "") + s
    return out


def _term_key(t: sp.Expr) -> tuple:
    syms = t.as_coeff_Mul()[1].as_powers_dict()
    deg = sum(int(e) for s, e in syms.items() if s.is_Symbol and e.is_Integer)
    has_root = any(isinstance(f, sp.Pow) and not f.exp.is_Integer for f in sp.Mul.make_args(t))
    return (
        has_root,
        -deg,
        [
            (_sym_key(s), -int(e))
            for s, e in sorted(syms.items(), key=lambda kv: _sym_key(kv[0]))
            if s.is_Symbol and e.is_Integer
        ],
    )


def _mul(expr: sp.Expr) -> str:
    coeff, body = expr.as_coeff_Mul()
    num, den = sp.fraction(sp.Rational(coeff))
    top, bottom = [], []
    for f in sorted(sp.Mul.make_args(body), key=lambda f: _sym_key(f.as_base_exp()[0])):
        base, exp = f.as_base_exp()
        if f == 1:
            continue
        if exp.is_Integer and exp < 0:
            bottom.append(_power(base, -exp))
        else:
            top.append(_power(base, exp))
    body_s = "".join(("·" + p) if i and (p.startswith("√") or "⌉_" in top[i - 1]) else p for i, p in enumerate(top))
    s = (str(num) if num != 1 or not body_s else "") + body_s
    den_s = "".join(bottom) if den == 1 else str(den) + "".join(bottom)
    return s if den_s == "" else f"{s}/{den_s}"


def _step(e: sp.Expr) -> str | None:
    """⌈N/C⌉, ⌊N/C⌋, N mod C and the bracket [C∤N] (1 where N is not a multiple of C) of code that pads N."""

    if isinstance(e, (sp.ceiling, sp.floor)):
        left, right = ("⌈", "⌉") if isinstance(e, sp.ceiling) else ("⌊", "⌋")
        return f"{left}{text(e.args[0])}{right}"
    if isinstance(e, sp.Mod):
        return f"({text(e.args[0])} mod {text(e.args[1])})"
    if isinstance(e, Pads):
        return f"[{text(e.args[1])}∤{text(e.args[0])}]"
    return None


def _power(base: sp.Expr, exp: sp.Expr) -> str:
    step = _step(base)
    if step is not None:
        return step + ("" if exp == 1 else str(exp).translate(_SUP))
    if exp == sp.Rational(1, 2):
        return f"√{_name(base)}" if base.is_Symbol else f"√({text(base)})"
    sup = "" if exp == 1 else str(exp).translate(_SUP)
    return (_name(base) if base.is_Symbol else f"({text(base)})") + sup


def _name(s: sp.Basic) -> str:
    return _NAMES.get(str(s), str(s))


def latex(expr: sp.Expr) -> str:
    return sp.latex(expr, order="grlex")


def plain(expr: sp.Expr) -> str:
    """Python/sympy syntax, parseable back with sympy.sympify."""
    return sp.sstr(expr, order="grlex")
