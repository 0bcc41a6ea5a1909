"""Formulas and figures as the papers print them, for side-by-side display with the derived ones.

These are typed from the papers and never used as a variant's cost: `attn-cost formula` shows
each next to the value the engine derives, and says whether they agree (and why not, where the
paper counts differently).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp
from attn_cost.costmodel import display
from attn_cost.costmodel.conventions import HOSSEINI_EQ24, op_convention
from attn_cost.costmodel.derive import multihead
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import BY_NAME, b, h
from attn_cost.costmodel.variants import derive


@dataclass(frozen=True)
class Published:
    variant: str
    where: str
    quantity: str
    """'flops:<convention>', 'peak' (elements, the large-N branch) or 'params'."""
    formula: str
    """sympy syntax over the symbols in costmodel.symbols."""
    form: str = "single"
    """'single': h = b = 1; 'heads': d = d_embed / h, b = 1; 'layer': a layer (training for Eq. 24), b = 1."""
    why: str = ""

    @property
    def expr(self) -> sp.Expr:
        return sp.sympify(self.formula, locals=dict(BY_NAME))


TS = "TaylorShift arXiv v1"
TS_ICPR = "TaylorShift (ICPR)"
HOS = "Hosseini et al."
EQ24_WHY = (
    "Eq. 24 counts no d_m² projection term and prices the scores at 15hℓ² whatever d_k is; the derived "
    "count (full convention, forward + backward) includes every projection and each softmax operation."
)

PUBLISHED: tuple[Published, ...] = (
    Published("taylorshift-direct", f"{TS}, Eq. 4", "flops:taylorshift-v1", "4*N**2*d + 6*N**2"),
    Published("taylorshift-direct", f"{TS}, Sec. 4.2", "peak", "d*N + 2*N**2"),
    Published("taylorshift-direct", f"{TS}, Sec. 4.3", "flops:taylorshift-v1", "4*N**2*d_embed + 6*h*N**2", "heads"),
    Published("taylorshift-direct", f"{TS}, Sec. 4.3", "peak", "d_embed*N + 2*N**2*h", "heads"),
    Published("taylorshift-efficient", f"{TS}, Eq. 5", "flops:taylorshift-v1", "N*(4*d**3 + 10*d**2 + 8*d + 3)"),
    Published("taylorshift-efficient", TS_ICPR, "flops:taylorshift-icpr", "N*(4*d**3 + 10*d**2 + 9*d + 4)"),
    Published("taylorshift-efficient", f"{TS}, Sec. 4.2", "peak", "d**3 + (N + 1)*d**2 + 3*N*d + N"),
    Published(
        "taylorshift-efficient",
        f"{TS}, Sec. 4.3",
        "flops:taylorshift-v1",
        "N*(4*d_embed**3/h**2 + 10*d_embed**2/h + 8*d_embed + 3*h)",
        "heads",
    ),
    Published(
        "taylorshift-efficient",
        TS_ICPR,
        "flops:taylorshift-icpr",
        "N*(4*d_embed**3/h**2 + 10*d_embed**2/h + 9*d_embed + 4*h)",
        "heads",
    ),
    Published(
        "taylorshift-efficient",
        f"{TS}, Sec. 4.3",
        "peak",
        "d_embed**3/h**2 + (N + 1)*d_embed**2/h + 3*N*d_embed + N*h",
        "heads",
    ),
    *(
        Published(v, f"{HOS}, parameter tables", "params", f"{k}*((h*d)**2 + h*d)" + extra, "layer")
        for v, k, extra in (
            ("softmax", 4, ""),
            ("optimized-attention", 3, ""),
            ("efficient-attention", 2, ""),
            ("super-attention", 2, " + N**2 + N"),
        )
    ),
    *(
        Published(v, f"{HOS}, Eq. 24", "flops:hosseini-eq24", HOSSEINI_EQ24.formulas[v], "layer", EQ24_WHY)
        for v in HOSSEINI_EQ24.formulas
    ),
)


def derived_counterpart(pub: Published) -> sp.Expr:
    """The engine's value for what a published formula states."""

    scope = "layer" if pub.form == "layer" else "core"
    mode = "training" if pub.quantity == "flops:hosseini-eq24" else "inference"
    derived = derive(pub.variant, scope, mode)
    value: sp.Expr | None
    if pub.quantity == "peak":
        value = derived.peak().dominant
    elif pub.quantity == "params":
        value = derived.params
    elif pub.quantity == "flops:hosseini-eq24":
        value = derived.flops(op_convention("full"))
    else:
        value = derived.flops(op_convention(pub.quantity.split(":", 1)[1]))
    if value is None:
        raise UserError(f"{pub.variant}: no branch of the peak dominates for large N, so it has no single formula")
    value = sp.expand(value.xreplace({b: 1} if pub.form != "single" else {b: 1, h: 1}))
    return multihead(value) if pub.form == "heads" else value


def compare_published(variant: str) -> list[dict]:
    """Each published formula of a variant next to the derived one."""
    out = []
    for pub in PUBLISHED:
        if pub.variant != variant:
            continue
        diff = sp.expand(derived_counterpart(pub) - pub.expr)
        what = {"peak": "peak (large N)", "params": "parameters"}.get(pub.quantity, pub.quantity.replace(":", " "))
        if pub.quantity == "flops:hosseini-eq24":
            what = "flops full, forward + backward"
        context = {"single": ", h = b = 1", "heads": ", d = d_embed/h", "layer": ", layer, d_m = h·d"}[pub.form]
        out.append(
            {
                "where": pub.where,
                "formula": display.text(pub.expr),
                "compare_to": what + context,
                "matches": diff == 0,
                "difference": display.plain(diff),
                "why": pub.why,
            }
        )
    return out
