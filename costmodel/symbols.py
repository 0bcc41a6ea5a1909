"""The symbolic dimensions every variant is written over.

All are positive integers, which lets sympy simplify sqrt(d**2) to d and decide signs.
"""

from __future__ import annotations

import sympy as sp

N = sp.Symbol("N", positive=True, integer=True)
"""Sequence length (tokens)."""
d = sp.Symbol("d", positive=True, integer=True)
"""Head dimension of queries and keys (and values unless a variant says otherwise)."""
h = sp.Symbol("h", positive=True, integer=True)
"""Number of heads."""
b = sp.Symbol("b", positive=True, integer=True)
"""Batch size."""
d_embed = sp.Symbol("d_embed", positive=True, integer=True)
"""Model (embedding) width; multi-head forms use d = d_embed / h."""
L = sp.Symbol("L", positive=True, integer=True)
"""Latent states of Latte, per head."""
D = sp.Symbol("D", positive=True, integer=True)
"""Encoder depth (layers)."""
r = sp.Symbol("r", positive=True, integer=True)
"""MLP expansion ratio."""

BY_NAME: dict[str, sp.Symbol] = {s.name: s for s in (N, d, h, b, d_embed, L, D, r)}

DESCRIPTIONS: dict[str, str] = {
    "N": "sequence length",
    "d": "head dimension (d = d_embed / h)",
    "h": "heads",
    "b": "batch size",
    "d_embed": "embedding width",
    "L": "Latte latent states per head",
    "D": "encoder depth",
    "r": "MLP ratio",
}
