"""Formulas as the papers print them, for side-by-side display with the derived ones.

These are typed from the papers and never used as a variant's cost: `attn-cost formula` shows
each next to the count the engine derives, and says whether they agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from costmodel import display
from costmodel.conventions import get_convention
from costmodel.derive import multihead
from costmodel.symbols import BY_NAME, b, h


@dataclass(frozen=True)
class Published:
    variant: str
    where: str
    quantity: str
    """'flops:<convention>' or 'peak' (elements, the large-N branch)."""
    formula: str
    """sympy syntax over the symbols in costmodel.symbols."""
    heads: bool = False
    """Multi-head form: d = d_embed / h, batch 1; otherwise single head and batch 1."""

    @property
    def expr(self) -> sp.Expr:
        return sp.sympify(self.formula, locals=dict(BY_NAME))


TS = "TaylorShift arXiv v1"
TS_ICPR = "TaylorShift (ICPR)"

PUBLISHED: tuple[Published, ...] = (
    Published("taylorshift-direct", f"{TS}, Eq. 4", "flops:taylorshift-v1", "4*N**2*d + 6*N**2"),
    Published("taylorshift-direct", f"{TS}, Sec. 4.2", "peak", "d*N + 2*N**2"),
    Published("taylorshift-direct", f"{TS}, Sec. 4.3", "flops:taylorshift-v1", "4*N**2*d_embed + 6*h*N**2", heads=True),
    Published("taylorshift-direct", f"{TS}, Sec. 4.3", "peak", "d_embed*N + 2*N**2*h", heads=True),
    Published("taylorshift-efficient", f"{TS}, Eq. 5", "flops:taylorshift-v1", "N*(4*d**3 + 10*d**2 + 8*d + 3)"),
    Published("taylorshift-efficient", TS_ICPR, "flops:taylorshift-icpr", "N*(4*d**3 + 10*d**2 + 9*d + 4)"),
    Published("taylorshift-efficient", f"{TS}, Sec. 4.2", "peak", "d**3 + (N + 1)*d**2 + 3*N*d + N"),
    Published(
        "taylorshift-efficient",
        f"{TS}, Sec. 4.3",
        "flops:taylorshift-v1",
        "N*(4*d_embed**3/h**2 + 10*d_embed**2/h + 8*d_embed + 3*h)",
        heads=True,
    ),
    Published(
        "taylorshift-efficient",
        TS_ICPR,
        "flops:taylorshift-icpr",
        "N*(4*d_embed**3/h**2 + 10*d_embed**2/h + 9*d_embed + 4*h)",
        heads=True,
    ),
    Published(
        "taylorshift-efficient",
        f"{TS}, Sec. 4.3",
        "peak",
        "d_embed**3/h**2 + (N + 1)*d_embed**2/h + 3*N*d_embed + N*h",
        heads=True,
    ),
)


def derived_counterpart(pub: Published) -> sp.Expr:
    """The engine's value for what a published formula states."""
    from costmodel.variants import derive

    derived = derive(pub.variant)
    if pub.quantity == "peak":
        value = derived.peak().dominant
    else:
        value = derived.flops(get_convention(pub.quantity.split(":", 1)[1]))
    fixed = {b: 1} if pub.heads else {b: 1, h: 1}
    value = sp.expand(value.xreplace(fixed))
    return multihead(value) if pub.heads else value


def compare_published(variant: str) -> list[dict]:
    """Each published formula of a variant next to the derived one."""
    out = []
    for pub in PUBLISHED:
        if pub.variant != variant:
            continue
        diff = sp.simplify(derived_counterpart(pub) - pub.expr)
        what = "peak (large N)" if pub.quantity == "peak" else pub.quantity.replace(":", " ")
        out.append(
            {
                "where": pub.where,
                "formula": display.text(pub.expr),
                "compare_to": what + (", d = d_embed/h" if pub.heads else ", h = b = 1"),
                "matches": diff == 0,
                "difference": display.plain(diff),
            }
        )
    return out
