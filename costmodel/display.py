"""Turn sympy expressions into one-line unicode, LaTeX or plain strings, close to how papers print them."""

from __future__ import annotations

import sympy as sp

_SUP = str.maketrans("0123456789-/", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻ᐟ")
_ORDER = {"b": 0, "h": 1, "D": 2, "N": 3, "L": 5, "d": 6, "d_embed": 7, "r": 8}
_NAMES = {"d_embed": "dₑ"}


def _sym_key(s: sp.Basic) -> tuple[int, str]:
    return (_ORDER.get(str(s), 4), str(s))


def text(expr: sp.Expr) -> str:
    """Compact unicode: 4N²d + 6N², N(4d³ + 10d² + 8d + 3), bh(dN + 2N²)."""
    expr = sp.sympify(expr)
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
    body_s = "".join(("·" + p) if i and p.startswith("√") else p for i, p in enumerate(top))
    s = (str(num) if num != 1 or not body_s else "") + body_s
    den_s = "".join(bottom) if den == 1 else str(den) + "".join(bottom)
    return s if den_s == "" else f"{s}/{den_s}"


def _power(base: sp.Expr, exp: sp.Expr) -> str:
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
