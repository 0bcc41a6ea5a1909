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
h_kv = sp.Symbol("h_kv", positive=True, integer=True)
"""Key/value heads of grouped-query attention (a divisor of h; 1 is multi-query)."""
w = sp.Symbol("w", positive=True, integer=True)
"""Sliding-window width: keys each query attends."""
k = sp.Symbol("k", positive=True, integer=True)
"""Linformer's projected length (keys and values projected from N to k rows)."""
m = sp.Symbol("m", positive=True, integer=True)
"""Performer's random features (FAVOR+)."""
c = sp.Symbol("c", positive=True, integer=True)
"""Nyströmformer's landmarks (the paper's m)."""
C = sp.Symbol("C", positive=True, integer=True)
"""Chunk length of chunked linear attention (tokens per chunk; the last chunk is padded: ⌈N/C⌉ chunks)."""
d_v = sp.Symbol("d_v", positive=True, integer=True)
"""Value head dimension where a variant has keys and values of their own widths (retention, GLA, the delta rule);
d unless given (`FOLLOW_D`)."""
d_state = sp.Symbol("d_state", positive=True, integer=True)
"""Mamba-2's state expansion: the width of B and C (the paper's N), the key width of its SSD."""
G = sp.Symbol("G", positive=True, integer=True)
"""Mamba-2's groups: heads of B and C, each shared by h/G heads of X (a divisor of h; 1: one B and C for all)."""

BY_NAME: dict[str, sp.Symbol] = {
    s.name: s for s in (N, d, h, b, d_embed, L, D, r, h_kv, w, k, m, c, C, d_v, d_state, G)
}

DESCRIPTIONS: dict[str, str] = {
    "N": "sequence length",
    "d": "head dimension (d = d_embed / h)",
    "h": "heads",
    "b": "batch size",
    "d_embed": "embedding width",
    "L": "Latte latent states per head",
    "D": "encoder depth",
    "r": "MLP ratio",
    "h_kv": "key/value heads of grouped-query attention (divides h)",
    "w": "sliding-window width (keys per query)",
    "k": "Linformer projected length",
    "m": "Performer random features",
    "c": "Nyströmformer landmarks",
    "C": "chunk length of chunked linear attention",
    "d_v": "value head dimension (d unless given)",
    "d_state": "Mamba-2 state expansion (width of B and C)",
    "G": "Mamba-2 groups of B and C (divides h)",
}

DEFAULTS: dict[sp.Symbol, int] = {h_kv: 1, w: 256, k: 256, m: 256, c: 64, C: 64, d_state: 128, G: 1}
"""Values the commands use when a size is not given: multi-query, Mistral-like window 256 (its
paper: 4,096), Linformer's k = 256 and Performer's m = 256 (their papers' settings), Nyströmformer's
64 landmarks (its paper's default), chunks of 64 tokens (flash-linear-attention's chunk size), Mamba-2's
d_state = 128 and one group (mamba_ssm's Mamba2 defaults, d_state=128, ngroups=1)."""

FOLLOW_D: tuple[sp.Symbol, ...] = (L, d_v)
"""Sizes that equal the head dim d unless given: Latte's latents, the value head dim."""


def with_defaults(values: dict[sp.Symbol, int]) -> dict[sp.Symbol, int]:
    """Sizes with every one not given at its default: `DEFAULTS`, and d for the sizes that follow it (`FOLLOW_D`)
    where d is given."""
    follow = {s: values[d] for s in FOLLOW_D if d in values}
    return {**DEFAULTS, **follow, **values}

DEFAULT_DEPTH = 12
"""The encoder depth D the analytic commands and the report use when none is given (ViT-Base, BERT-base)."""
MEASURED_DEPTH = 2
"""The depth of a measured encoder (`profilers.measure.sizes.Sizes`): shallow, so a model-scope timing stays quick. It
is part of every stored measurement's sizes (and so of its key), so changing it orphans the measurements on disk."""


class Pads(sp.Function):
    """1 where the length n is not a multiple of m (code that pads n up to a multiple of m makes a padded copy),
    0 where it is: the Iverson bracket [m ∤ n], i.e. ⌈n/m⌉ − ⌊n/m⌋, as which `plain` output writes it."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, n: sp.Expr, m: sp.Expr) -> sp.Expr | None:
        if n.is_Integer and m.is_Integer:
            return sp.Integer(int(n) % int(m) != 0)
        if m == 1:
            return sp.Integer(0)
        return None

    def _eval_power(self, e: sp.Expr) -> sp.Expr | None:
        return self if e.is_positive and e.is_integer else None  # 0 or 1: every positive power is itself

    def _sympystr(self, printer) -> str:
        n, m = (printer._print(a) for a in self.args)
        return f"(ceiling({n}/{m}) - floor({n}/{m}))"

    def _latex(self, printer) -> str:
        n, m = (printer._print(a) for a in self.args)
        return rf"[{m} \nmid {n}]"


def padded(n: sp.Expr, m: sp.Expr) -> sp.Expr:
    """n rounded up to a multiple of m: m·⌈n/m⌉ (code that pads a length to whole chunks, windows, landmarks)."""
    return m * sp.ceiling(n / m)
