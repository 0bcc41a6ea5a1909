"""Counting rules the field argues about, as named switches substituted at the end.

A FLOP total is first derived with named factors left in it (xlstm_scaling_laws style):

- `F_causal`: the share of the N×N_kv score matrix a causal kernel really computes. It multiplies
  every op over a causal score matrix (the two products, the scale, the softmax) and the fused
  kernel with `is_causal`.
- `F_bwd`: backward FLOPs per forward FLOP of the materialised score products (QKᵀ and PV).
- `F_chunk`: the share of each C×C diagonal block a fused chunk kernel of causal linear attention (`linear_chunk`,
  `chunk_matmul`) computes: its products φ(Q_c)φ(K_c)ᵀ and A_cV_c inside a chunk (the delta rule's βK_cK_cᵀ and
  T_c·βK_c too). Its scores against earlier chunks go through the running state, whole: the rule touches only the
  block inside each chunk.

Only then does a `Counting` substitute its values, so `attn-cost formula --symbolic` shows which
factor a number rests on, and every output records the rules it used.

Score counts for query length N and key length M (N <= M: decode, chunked prefill, self-attention):

| rule | bottom-right (query i sees keys <= i + M − N) | top-left (query i sees keys <= i) |
|---|---|---|
| dense | N·M | N·M |
| triangle | N·M − N(N−1)/2 | N(N+1)/2 |
| tiles (T) | N·M − N(N−T)/2 | N(N+T)/2 |
| half | N·M/2 | N·M/2 |

Inside a chunk (`F_chunk`, C×C per chunk): dense 1, triangle (C+1)/(2C), half 1/2, and tiles 1: a chunk kernel's
tile is its chunk (flash-linear-attention's BT is the chunk size), computed whole and then masked.

`tiles` counts the T×T blocks a blocked kernel (FlashAttention) computes, diagonal blocks in full; it
is exact when T divides N and M (a key length T does not divide is refused). Below one tile (N < T) the
formula would exceed the N·M scores there are: the numbers (`crossover.curve`) are capped by the dense
count, so `tiles` never counts more than `dense`. `half` is the FlashAttention benchmark's own accounting.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import sympy as sp
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import C, N, w

F_causal = sp.Symbol("F_causal", positive=True)
"""Share of the score matrix a causal kernel computes (1 for a dense count)."""
F_bwd = sp.Symbol("F_bwd", positive=True)
"""Backward FLOPs per forward FLOP of the materialised score products."""
F_chunk = sp.Symbol("F_chunk", positive=True)
"""Share of each chunk's C×C block of scores a fused chunk kernel computes (1 for a dense count)."""
N_kv = sp.Symbol("N_kv", positive=True, integer=True)
"""Key/value length when it differs from the query length N (`--n-kv`)."""

CAUSAL_COUNTS: dict[str, str] = {
    "dense": "every score of the N×N_kv matrix, masked ones too: what a dense kernel and FlopCounterMode do",
    "triangle": "exactly the scores the causal mask keeps: N(N+1)/2 for N = N_kv",
    "tiles": "the T×T tiles a blocked kernel computes, diagonal tiles in full: N(N+T)/2 for N = N_kv (T divides N)",
    "half": "half of the dense count: the FlashAttention benchmark's accounting",
}
BACKWARDS: dict[str, str] = {
    "autograd": "the score products' backward is 2× forward (a gradient for each operand), as autograd runs it",
    "recompute": "the score products' backward is 2.5× forward: QKᵀ is recomputed (FlashAttention's accounting)",
}
ALIGNS: dict[str, str] = {
    "bottom-right": "query i sees keys up to i + N_kv − N: the queries are the last N of N_kv tokens (decode, "
    "chunked prefill; FlashAttention 2.1+, PyTorch's causal_lower_right)",
    "top-left": "query i sees keys up to i: the mask starts at the first key (PyTorch is_causal, causal_upper_left)",
}
SYMBOLS: dict[str, str] = {
    "F_causal": "share of the score matrix a causal kernel computes (--causal-count)",
    "F_bwd": "backward FLOPs per forward FLOP of the materialised score products (--backward)",
    "F_chunk": "share of each chunk's C×C block of scores a fused chunk kernel computes (--causal-count)",
    "N_kv": "key/value length when it differs from the query length N (--n-kv)",
}
PADDING_MASK = (
    "a key padding mask, b×N_kv booleans (True: a real token), broadcast over heads and queries: masked_fill of the "
    "scores on a materialised score matrix, SDPA's attn_mask for a fused kernel (flash-attention's benchmark and "
    "PyTorch's MultiheadAttention pass a b×N bool key mask)"
)
"""What --padding-mask adds (`Graph.key_padding`)."""
BACKWARD_FACTOR = {"autograd": sp.Integer(2), "recompute": sp.Rational(5, 2)}
FEATURE_MAPS: dict[str, str] = {
    "elu1": "φ(x) = elu(x) + 1 (Katharopoulos et al.; fla's feature_map='elu'): two element-wise kernels, elu then +1",
    "relu": "φ(x) = relu(x) (fla's feature_map='relu'): one element-wise kernel",
    "identity": "no feature map, φ(x) = x (fla's feature_map='identity'; what fla's chunk_linear_attn op itself runs)",
}
"""The feature maps φ a linear attention applies to its queries and keys (`--feature-map`, `Graph.feature`)."""
NORMALIZE = (
    "divide each output row by φ(qᵢ)·Σ_{j≤i} φ(kⱼ) (Katharopoulos et al.; fla's chunk_linear_attn(normalize=True), "
    "its default); --no-normalize: the numerator alone (fla's LinearAttention layer: do_feature_map_norm=False)"
)
"""What --normalize keeps (`Graph.normalising`)."""


@dataclass(frozen=True)
class Counting:
    """One choice of every counting switch."""

    causal: str = "dense"
    tile: int = 128
    backward: str = "autograd"
    n_kv: int | None = None
    align: str = "top-left"
    """PyTorch's is_causal (what the catalogue's causal variants and their references run)."""
    bias: str | None = None
    """Which projections carry a bias (`scopes.BIASES`); None: each variant's own."""
    dropout: sp.Rational | None = None
    """Attention dropout probability p (0 <= p < 1) on the attention probabilities in training (`--dropout`); None
    or 0: none. The counts do not depend on p: every probability is drawn for, kept or dropped, and scaled."""
    padding_mask: bool = False
    """A key padding mask (`--padding-mask`, `PADDING_MASK`)."""
    feature_map: str = "elu1"
    """The feature map φ of the linear-attention variants (`--feature-map`, `FEATURE_MAPS`)."""
    normalize: bool = True
    """Whether the linear-attention variants divide by their normaliser φ(q)·Σφ(k) (`--normalize`, `NORMALIZE`)."""

    COUNTED_ONLY: ClassVar[tuple[str, ...]] = ("causal", "tile", "backward")
    """The switches that change how FLOPs are counted and nothing a kernel runs. Every other one (the keys' own
    length and its alignment, biases, dropout, a padding mask, and any switch added later) changes what runs."""

    def __post_init__(self) -> None:
        for value, known, flag in (
            (self.causal, CAUSAL_COUNTS, "--causal-count"),
            (self.backward, BACKWARDS, "--backward"),
            (self.align, ALIGNS, "--align"),
            (self.feature_map, FEATURE_MAPS, "--feature-map"),
        ):
            if value not in known:
                raise UserError(f"unknown {flag} {value!r} (known: {', '.join(known)})")
        for size, flag in ((self.tile, "--tile"), (self.n_kv, "--n-kv")):
            if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
                raise UserError(f"{flag} must be a positive integer, got {size}")
        if not isinstance(self.normalize, bool):
            raise UserError(f"--normalize is on or off (True or False), got {self.normalize!r}")
        if self.bias is not None and self.bias not in ("all", "out", "none"):
            raise UserError(f"unknown --bias {self.bias!r} (known: all, out, none)")
        if self.dropout is not None:
            object.__setattr__(self, "dropout", dropout_probability(self.dropout))
        if self.causal == "tiles" and self.n_kv is not None and self.n_kv % self.tile:
            raise UserError(
                f"--causal-count tiles needs the tile T = {self.tile} to divide --n-kv {self.n_kv} (otherwise it "
                "counts more than dense): choose --tile or --causal-count triangle"
            )

    def timed(self) -> Counting:
        """These rules as a timing sees them: the switches that only count (`COUNTED_ONLY`) at their defaults, so
        that two countings of one run compare equal and a measurement applies only where its own `timed` is the
        one asked (`Setting.timed`)."""
        default = Counting()
        defaults: dict[str, Any] = {name: getattr(default, name) for name in self.COUNTED_ONLY}
        return replace(self, **defaults, dropout=self.dropout or None)

    @property
    def key_length(self) -> sp.Expr:
        """The key length the graphs are built with: N_kv when it differs from N."""
        return N_kv if self.n_kv is not None else N

    def scores(self, nq: sp.Expr = N, nk: sp.Expr | None = None) -> sp.Expr:
        """Scores a causal kernel computes for nq queries over nk keys (valid for nq <= nk)."""
        nq, nk = sp.sympify(nq), sp.sympify(self.key_length if nk is None else nk)
        if self.causal == "dense":
            return nq * nk
        if self.causal == "half":
            return nq * nk / 2
        step = 1 if self.causal == "triangle" else self.tile
        if self.align == "top-left":
            return sp.expand(nq * (nq + step) / 2)
        return sp.expand(nq * nk - nq * (nq - step) / 2)

    def chunk_share(self) -> sp.Expr:
        """F_chunk: the share of a chunk's C×C block (queries and keys of one chunk) a chunk kernel computes; with
        `tiles` the chunk is the kernel's tile, computed whole."""
        return {"dense": sp.Integer(1), "tiles": sp.Integer(1), "half": sp.Rational(1, 2)}.get(
            self.causal, (C + 1) / (2 * C)
        )

    def values(self) -> dict[sp.Symbol, sp.Expr]:
        """What each named factor stands for under these rules."""
        nk = self.key_length
        return {
            F_causal: sp.cancel(self.scores(N, nk) / (N * nk)),
            F_bwd: BACKWARD_FACTOR[self.backward],
            F_chunk: self.chunk_share(),
        }

    def apply(self, expr: sp.Expr) -> sp.Expr:
        """Substitute the named factors (N_kv stays a dimension: it is set with the other sizes)."""
        return sp.expand(sp.sympify(expr).xreplace(self.values()))

    def assumptions(self) -> list[str]:
        """Where the substituted count is exact."""
        out = []
        if self.causal == "tiles":
            out.append(f"T = {self.tile} divides N" + (" and N_kv" if self.n_kv is not None else ""))
            out.append("N >= T (below, capped at dense: one tile is the whole matrix)")
        if self.n_kv is not None and self.causal in ("triangle", "tiles"):
            out.append("N <= N_kv")
        return out

    def as_json(self) -> dict:
        return {
            "causal_count": self.causal,
            "tile": self.tile if self.causal == "tiles" else None,
            "backward": self.backward,
            "backward_factor": str(BACKWARD_FACTOR[self.backward]),
            "n_kv": self.n_kv,
            "align": self.align,
            "bias": self.bias or "each variant's own",
            "dropout": float(self.dropout) if self.dropout else None,
            "padding_mask": self.padding_mask,
            "feature_map": self.feature_map,
            "normalize": self.normalize,
            "causal_scores": str(self.scores()),
            "chunk_share": str(self.chunk_share()),
            "assumes": self.assumptions(),
        }

    def caption(self) -> str:
        """One short line for a table's caption."""
        return describe(self.as_json())


def describe(data: dict) -> str:
    """The caption line of counting rules recorded as `Counting.as_json()`."""
    causal = data["causal_count"]
    if causal == "tiles":
        causal = f"tiles T={data['tile']}"
    kv = f", N_kv={data['n_kv']:,} {data['align']}" if data["n_kv"] is not None else ""
    bwd = "2x" if data["backward"] == "autograd" else "2.5x"
    assumes = f" (assumes {', '.join(data['assumes'])})" if data["assumes"] else ""
    bias = data.get("bias", "each variant's own")
    biases = f", biases {bias}" if bias != "each variant's own" else ""
    dropout = f", attention dropout p={data['dropout']:g}" if data.get("dropout") else ""
    padding = ", key padding mask (b×N bool)" if data.get("padding_mask") else ""
    linear = _linear_options(data)
    return f"Counting: causal {causal}{kv}{assumes}, backward {bwd}{biases}{dropout}{padding}{linear}."


def _linear_options(data: dict) -> str:
    """The caption's words for a feature map or normaliser other than the linear-attention variants' own."""
    phi = data.get("feature_map", "elu1")
    words = [] if phi == "elu1" else [f"linear attention's φ {phi}"]
    if not data.get("normalize", True):
        words.append("not normalised")
    return "".join(f", {w}" for w in words)


def dropout_probability(value: object) -> sp.Rational | None:
    """--dropout's p as an exact fraction (0.1 is 1/10, not the nearest binary float), checked: 0 <= p < 1; None
    for 0 (PyTorch's dropout returns its input when p = 0)."""
    p = None
    if isinstance(value, sp.Rational):
        p = value
    elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            p = sp.Rational(str(value))
        except (TypeError, ValueError, sp.SympifyError):
            p = None
    if not isinstance(p, sp.Rational) or not 0 <= p < 1:
        raise UserError(f"--dropout takes a probability p with 0 <= p < 1 (the share of attention probabilities "
                        f"dropped in training), got {value}")  # fmt: skip
    if p and not 0 < float(p) < 1:  # what PyTorch's dropout would be given: p = 1 drops everything, p = 0 nothing
        raise UserError(f"--dropout {value} is {float(p)} as the float PyTorch's dropout takes: give a probability "
                        "that stays between 0 and 1 there")  # fmt: skip
    return p if p else None


DEFAULT_COUNTING = Counting()


def _is_len(size: sp.Expr, keys: frozenset = frozenset({N, N_kv})) -> bool:
    return bool(sp.sympify(size).free_symbols & keys)


KEY_AXES = frozenset({N, N_kv, w})
"""Sizes of a key axis: the sequence, the key length of --n-kv, a sliding window."""


def score_tensor(t) -> bool:
    """An activation of scores: keys along the last axis, queries (or one query) along the one before."""
    if len(t.shape) < 2 or (t.storage.producer == -1 and t.storage.id == -1):  # a learned weight
        return False
    return _is_len(t.shape[-1], KEY_AXES) and (_is_len(t.shape[-2]) or t.shape[-2] == 1)


def score_op(op) -> bool:
    """An op over a score matrix: QKᵀ, the scale, mask and softmax, P·V; or a fused attention kernel."""
    if op.kind == "fused_attention":
        return True
    return any(score_tensor(t) for t in (op.output, *op.inputs))


def causal_graph(ops) -> bool:
    """The graph masks its scores causally (a `mask` op on a score matrix that is neither a window's nor a key
    padding mask's)."""
    return any(op.kind == "mask" and not op.attrs.get("window") and not op.attrs.get("padding") and score_op(op)
               for op in ops)  # fmt: skip


def causal_factor(op, causal: bool) -> sp.Expr:
    """F_causal for an op over a square causal score matrix (not a single decoding query), else 1."""
    if op.kind == "fused_attention":
        return F_causal if op.attrs.get("causal") and op.attrs["nq"] != 1 else sp.Integer(1)
    if not causal:
        return sp.Integer(1)
    square = any(score_tensor(t) and _is_len(t.shape[-2]) for t in (op.output, *op.inputs))
    return F_causal if square else sp.Integer(1)
