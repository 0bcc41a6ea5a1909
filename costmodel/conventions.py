"""FLOP counting conventions: one small rule per op kind, collected in tables.

Papers count differently, so a convention is explicit about what it counts. Each rule maps an
`Op` to a sympy count. An op kind missing from a convention's table is *left out* by it, and
`left_out()` says what that costs under `full`, the convention that counts every arithmetic
operation. Scalar gains folded into an op (α, τ, 1/N, √(d/N) of TaylorShift's normalisation, a
GEMM's alpha) cost one multiply per element they touch under `full` and nothing elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import sympy as sp
from attn_cost.costmodel.counting import F_bwd, F_chunk, score_op
from attn_cost.costmodel.errors import UserError, unknown
from attn_cost.costmodel.graph import Op
from attn_cost.costmodel.opkinds import KINDS
from attn_cost.costmodel.symbols import BY_NAME, b

Rule = Callable[[Op], sp.Expr]


def per_out(k: int) -> Rule:
    """k operations per output element."""
    return lambda op: k * op.out_numel


def per_in(k: int) -> Rule:
    """k operations per element of the first input."""
    return lambda op: k * op.in_numel(0)


def _matmul(op: Op) -> sp.Expr:
    a = op.attrs
    return 2 * a["batch"] * a["m"] * a["k"] * a["n"]


def _matmul_acc(op: Op) -> sp.Expr:
    """A GEMM plus the addition when it accumulates into an existing tensor."""
    extra = op.out_numel if op.attrs["accumulate"] else 0
    return _matmul(op) + extra


def _linear(op: Op) -> sp.Expr:
    a = op.attrs
    return 2 * a["m"] * a["k"] * a["n"] + (a["m"] * a["n"] if a["bias"] else 0)


def _linear_matmul_only(op: Op) -> sp.Expr:
    a = op.attrs
    return 2 * a["m"] * a["k"] * a["n"]


def _l2normalize(op: Op) -> sp.Expr:
    """Square and accumulate each element, sqrt and reciprocal per row, multiply each element."""
    return 3 * op.out_numel + 2 * op.output.rows


def _fused_matmuls(op: Op) -> sp.Expr:
    a = op.attrs
    return 2 * a["batch"] * a["nq"] * a["nk"] * (a["dqk"] + a["dv"])


def _fused_full(op: Op) -> sp.Expr:
    """The two GEMMs, the 1/√d scale and a 5-op softmax on every score (with is_causal, the share the
    kernel computes is the factor F_causal of `counting`, applied like for a materialised mask); with an attn_mask
    the addition of the mask to every score; with dropout, per score what the materialised form's ops count
    (`Graph.attention_dropout`): the draw compared with 1 − p, the product by the keep bit and the 1/(1 − p)."""
    a = op.attrs
    per_score = 2 * (a["dqk"] + a["dv"]) + 6 + (1 if a.get("masked") else 0) + (3 if a.get("dropout") else 0)
    return a["batch"] * a["nq"] * a["nk"] * per_score


CHUNK_PRODUCTS: dict[tuple[bool, bool, bool], tuple[int, tuple[int, int], int, tuple[int, int]]] = {
    # (makes its states, delta rule, scores given): products against the state, and over the C×C scores as
    # (how many of width d_k, how many of width d_v), forward then backward
    (True, False, False): (2, (1, 1), 5, (3, 2)),
    (True, False, True): (2, (0, 1), 5, (0, 2)),
    (True, True, False): (3, (1, 1), 8, (3, 2)),
    (False, False, True): (1, (0, 1), 2, (0, 2)),
}
"""The products of each chunk kernel `linear_chunk` models (`graph.CHUNK_KERNELS`), per chunk: against the state
2·C·d_k·d_v each, over the chunk's C×C scores 2·C²·d_k or 2·C²·d_v each (times F_chunk).

- chunk_fwd_h, chunk_fwd_o (fla's chunk_simple_gla): S ← S + K_cᵀV_c and Q_cS_c; A_c = Q_cK_cᵀ and A_cV_c.
  Backward, four kernels, the states recomputed, not saved: chunk_fwd_h again (K_cᵀV_c), chunk_bwd_dh
  (dS ← dS + Q_cᵀdO_c), chunk_bwd_dqkwg (dO_cV_cᵀ, dO_cS_cᵀ, V_cdS_cᵀ, then dA_cK_c and dA_cᵀQ_c), chunk_bwd_dv
  (K_cQ_cᵀ again, K_cdS_c, A_cᵀdO_c): five against the state and five over the scores (three of width d_k, two of d_v).
- with the scores given (fla's chunk_gla, whose A another op makes and keeps): forward the two state products and
  A_cV_c; backward the same five against the state, A_cᵀdO_c and dA_c = dO_cV_cᵀ (the products of dA_c with K_c
  and Q_c are the backward of the op that made A).
- the delta rule (chunk_gated_delta_rule_fwd_h, chunk_fwd_o): v_new = U_c − W_cS_c, S ← S + K_cᵀv_new, Q_cS_c;
  Q_cK_cᵀ and A_c·v_new. Backward (chunk_delta_rule_bwd): W_cS_c and K_cᵀv_new again, chunk_bwd_dv_local
  (K_cQ_cᵀ again, A_cᵀdO_c), chunk_gated_delta_rule_bwd_dhu (Q_cᵀdO_c, W_cᵀdv_c, K_cdS_c), chunk_bwd_dqkwg
  (dO_cS_cᵀ, v_new·dS_cᵀ, dv_cS_cᵀ, dA_c = dO_c·v_newᵀ, dA_cK_c, dA_cᵀQ_c): eight against the state, five over
  the scores.
- reading states and scores (mamba_ssm's chunk_scan): C_c·S_c and (CB_c ⊙ decay)·x_c; backward
  (_chunk_scan_bwd_dstates, _chunk_scan_bwd_dC, _chunk_scan_chunk_state_bwd_dx, _chunk_scan_bwd_dcb): two of each."""


CHUNK_BACKWARD = sp.Rational(5, 2)
"""Backward per forward of a chunk op's element-wise work and bytes: the plain kernels' ratio (four backward kernels
for two forward, ten products for four with d_k = d_v). Its products are counted exactly (`chunk_products`)."""


def chunk_products(op: Op, backward: bool = False) -> tuple[sp.Expr, sp.Expr]:
    """The products of a chunk op (`linear_chunk`), per call: those against the state and those over each chunk's
    C×C scores (with their share F_chunk), each a sum of 2mkn per chunk of C tokens (`CHUNK_PRODUCTS`)."""
    a = op.attrs
    c, dk, dv = a["chunk"], a["dk"], a["dv"]
    fwd_state, fwd_scores, bwd_state, bwd_scores = CHUNK_PRODUCTS[(a["makes_states"], a["delta"], a["scores_in"])]
    n_state, (n_k, n_v) = (bwd_state, bwd_scores) if backward else (fwd_state, fwd_scores)
    state = n_state * 2 * c * dk * dv
    scores = 2 * c**2 * (n_k * dk + n_v * dv) * F_chunk
    per = a["batch"] * a["chunks"]
    return per * state, per * scores


def _chunk_matmuls(op: Op) -> sp.Expr:
    return sp.Add(*chunk_products(op))


def _chunk_matmuls_backward(op: Op) -> sp.Expr:
    return sp.Add(*chunk_products(op, backward=True))


def _chunk_elementwise(op: Op) -> sp.Expr:
    """What a chunk op computes besides its products, per chunk (one operation per +, −, ×, exp):

    - the state kernel: the state's accumulation S ← S + K_cᵀV_c (d_k·d_v); the delta rule's v_new = U_c − W_cS_c
      (C·d_v); a scalar decay (head, token): S·exp(g_C) (d_k·d_v and one exp) and V_c's rows by exp(g_C − g_j)
      (C differences and exps, C·d_v products); a vector decay: S's rows by exp(g_C) (d_k exps, d_k·d_v products)
      and K_c by exp(g_C − g_j) (3·C·d_k);
    - the output kernel: each output row's two parts added (C·d_v); a scalar decay: Q_cS_c's rows by exp(g_i) (C
      exps, C·d_v products) and each score by exp(g_i − g_j) (3 a score, times F_chunk; 4 with Mamba's Δ_j on
      given scores); a vector decay: Q_c by exp(g_i) (2·C·d_k); Mamba-2's D·x (2·C·d_v).
    The mask selects, it adds nothing."""
    a = op.attrs
    c, dk, dv, gate = a["chunk"], a["dk"], a["dv"], a["gate"]
    per_chunk = c * dv
    if a["makes_states"]:
        per_chunk += dk * dv + (c * dv if a["delta"] else 0)
        if gate in ("head", "token"):
            per_chunk += dk * dv + 1 + 2 * c + c * dv
        elif gate == "vector":
            per_chunk += dk + dk * dv + 3 * c * dk
    if gate in ("head", "token"):
        per_chunk += c + c * dv + (4 if a["scores_in"] else 3) * c**2 * F_chunk
    elif gate == "vector":
        per_chunk += 2 * c * dk
    if a["skip"]:
        per_chunk += 2 * c * dv
    return a["batch"] * a["chunks"] * per_chunk


def _chunk_full(op: Op) -> sp.Expr:
    """The products and what the kernels compute besides (`_chunk_elementwise`)."""
    return _chunk_matmuls(op) + _chunk_elementwise(op)


def _chunk_full_backward(op: Op) -> sp.Expr:
    """The backward kernels' products and their element-wise work, `CHUNK_BACKWARD` times the forward's."""
    return _chunk_matmuls_backward(op) + CHUNK_BACKWARD * _chunk_elementwise(op)


def _chunk_scores(op: Op) -> sp.Expr:
    """The two products over each chunk's scores (the FlashAttention benchmark counts those of the score matrix)."""
    return chunk_products(op)[1]


def _chunk_scores_backward(op: Op) -> sp.Expr:
    return chunk_products(op, backward=True)[1]


def _tri_solve_backward(op: Op) -> sp.Expr:
    """solve_tril's backward, −Tᵀ·dT·Tᵀ: two C×C×C products a chunk (`Graph.tri_solve`), no substitution."""
    return op.attrs["backward_products"]


def _block_product(op: Op) -> sp.Expr:
    """A `chunk_matmul`: 2·m·k·n a chunk (a C×C block of scores or a product with one: times F_chunk, the share of
    the block counted; a chunk's own state: whole)."""
    a = op.attrs
    share = sp.Integer(1) if a["form"] == "states" else F_chunk
    return 2 * a["batch"] * a["chunks"] * a["m"] * a["k"] * a["n"] * share


def _block_full(op: Op) -> sp.Expr:
    """The product, a row factor (β: one product per element of the operand it scales), and the decay: on a C×C
    block exp(g_i − g_j) per entry (3, times F_chunk) for a scalar gate, exp(±g) on both operands' elements (4 per
    element of one) for a vector gate; on a product with a block (the gated W) or a chunk's state, exp per row and
    a product per element of the scaled operand."""
    a = op.attrs
    c, chunks, batch = a["chunk"], a["chunks"], a["batch"]
    width = a["k"] if a["form"] == "scores" else a["n"]  # the operand the factors scale, C rows of it a chunk
    per_chunk = c * width if a["rowscale"] else sp.Integer(0)
    if a["gate"] == "token":
        per_chunk += 3 * c**2 * F_chunk if a["form"] == "scores" else 2 * c + c * width
    elif a["gate"] == "vector":
        per_chunk += 4 * c * width
    return _block_product(op) + batch * chunks * per_chunk


def _attention_block(op: Op) -> sp.Expr:
    """A chunk product over attention scores (GLA's A = QKᵀ, Mamba-2's CB): what the FlashAttention benchmark
    counts; the delta rule's KKᵀ, W, U and the chunk states are not."""
    return _block_product(op) if op.attrs.get("attention") else sp.Integer(0)


def _tri_solve_full(op: Op) -> sp.Expr:
    """Forward substitution for T = (I + A)⁻¹, A strictly lower triangular: T_ij = −Σ_{j≤m<i} A_im·T_mj, with
    T_jj = 1, i − j − 1 multiply-adds an entry below the diagonal: C(C−1)(C−2)/6 a chunk, 2 operations each."""
    a = op.attrs
    c = a["chunk"]
    return a["batch"] * a["chunks"] * c * (c - 1) * (c - 2) / 3


def _score_matmul(op: Op) -> sp.Expr:
    """A product over the score matrix (QKᵀ, PV); every other product is left out."""
    return _matmul(op) if score_op(op) else sp.Integer(0)


def backward_factor(op: Op) -> sp.Expr:
    """Backward FLOPs as a multiple of forward FLOPs: products need a gradient for each operand
    (2x; the products over the score matrix get the named factor F_bwd, 2 or FlashAttention's 2.5
    with recomputation, see `counting`); element-wise ops and reductions need one pass (1x); fused
    attention recomputes the scores and needs five products for two (what FlopCounterMode counts); the fused
    chunk kernels of linear attention run ten products for four (`chunk_products`: 5/2 with d_k = d_v, whatever
    share of the chunks' scores is counted); an op whose attrs carry "backward" states its kernel's own factor."""
    if "backward" in op.attrs:  # a kernel with its own backward (linear-causal-fused's causal_product)
        return op.attrs["backward"]
    if op.kind == "linear_chunk":  # its bytes and element-wise work; its products by `BACKWARD_RULES`
        return CHUNK_BACKWARD
    if op.kind == "chunk_matmul":
        return sp.Integer(2)  # a gradient for each operand (3 where the library makes it again: attrs "backward")
    if op.kind == "tri_solve":  # no substitution again: its backward is two products (`BACKWARD_RULES`)
        return sp.Integer(0)
    if op.kind == "fused_attention":
        a = op.attrs
        return sp.Rational(1) * (3 * a["dqk"] + 2 * a["dv"]) / (a["dqk"] + a["dv"])
    if op.kind == "matmul" and score_op(op):
        return F_bwd
    if op.kind in ("matmul", "linear", "outer", "mul", "div"):
        return sp.Integer(2)
    return sp.Integer(1)


def _gain_size(op: Op) -> sp.Expr:
    """How many multiplies a folded scalar gain costs."""
    if op.kind in ("normalize_rows", "l2normalize"):
        return op.output.rows
    if op.kind == "augment":
        return op.in_numel(0)
    return op.out_numel


def _zero(op: Op) -> sp.Expr:
    return sp.Integer(0)


FULL_RULES: dict[str, Rule] = {
    "matmul": _matmul_acc,
    "linear": _linear,
    "outer": per_out(1),
    "poly2": per_out(4),
    "softmax": per_out(5),
    "normalize_rows": per_out(2),
    "l2normalize": _l2normalize,
    "augment": _zero,
    "scale": per_out(1),
    "add": per_out(1),
    "mul": per_out(1),
    "div": per_out(1),
    "sum": per_in(1),
    "exp": per_out(1),
    "elu1": per_out(2),
    "cumsum": per_out(1),
    "sub": per_out(1),
    "max": per_in(1),
    "maximum": per_out(1),
    "layernorm": lambda op: 7 * op.out_numel + 2 * op.output.rows,
    "gelu": per_out(5),
    "pointwise": per_out(1),
    "norm": lambda op: 2 * op.in_numel(0) + op.out_numel,
    "mask": _zero,
    "compare": per_out(1),
    "copy": _zero,
    "fill": _zero,
    "fused_attention": _fused_full,
    "linear_chunk": _chunk_full,
    "chunk_matmul": _block_full,
    "tri_solve": _tri_solve_full,
}
if set(FULL_RULES) != set(KINDS):
    raise RuntimeError("every op kind needs a `full` rule and a description")

FULL_BACKWARD: dict[str, Rule] = {"linear_chunk": _chunk_full_backward, "tri_solve": _tri_solve_backward}
"""Op kinds whose backward is no multiple of their forward count, counted by a rule of its own (`Convention.
backward`): the chunk kernels' backward products (`chunk_products`) and solve_tril's."""


@dataclass(frozen=True)
class Convention:
    """A named table of per-kind FLOP rules."""

    name: str
    summary: str
    source: str
    rules: Mapping[str, Rule]
    count_gains: bool = False
    counting: Mapping[str, str] = field(default_factory=dict)
    """Counting switches this convention implies unless the user sets them (`--causal-count`, `--backward`)."""
    backward_rules: Mapping[str, Rule] = field(default_factory=dict)
    """Rules for the backward of op kinds whose backward is no multiple of their forward (`FULL_BACKWARD`)."""

    def backward(self, op: Op) -> sp.Expr:
        """Backward FLOPs of one op (one run, before loops and the causal share): its kind's backward rule where
        it has one, else its backward factor times its forward count (`backward_factor`)."""
        rule = self.backward_rules.get(op.kind)
        if rule is not None:
            return sp.sympify(rule(op))
        return backward_factor(op) * self.op_flops(op)

    def op_flops(self, op: Op) -> sp.Expr:
        """FLOPs of one op under this convention (0 for kinds it leaves out)."""
        rule = self.rules.get(op.kind)
        total = rule(op) if rule else sp.Integer(0)
        if self.count_gains and op.attrs.get("gain"):
            total += _gain_size(op)
        return sp.sympify(total)

    def left_out(self, op: Op) -> sp.Expr:
        """What `full` counts for this op that this convention does not."""
        return sp.expand(FULL.op_flops(op) - self.op_flops(op))


FULL = Convention(
    "full",
    "every arithmetic operation: each +, −, ×, ÷, exp, sqrt or compare is one FLOP, folded gains included",
    "attn-cost",
    FULL_RULES,
    count_gains=True,
    backward_rules=FULL_BACKWARD,
)

_TS_OMITTED = ("sum", "l2normalize", "augment")

TAYLORSHIFT_V1 = Convention(
    "taylorshift-v1",
    "TaylorShift arXiv v1 (Sec. 4.1): Eq. 1/3 step by step; the column sum ΣV and the "
    "normalisation of Sec. 3.3 (l2normalize, augment, scalar gains) are not counted",
    "Nauen et al., TaylorShift, arXiv 2403.02920v1, Eqs. 4-6",
    {k: v for k, v in FULL_RULES.items() if k not in _TS_OMITTED},
    backward_rules=FULL_BACKWARD,
)

TAYLORSHIFT_ICPR = Convention(
    "taylorshift-icpr",
    "TaylorShift ICPR version: as taylorshift-v1, plus N(d+1) for the column sum ΣV",
    "Nauen et al., TaylorShift (ICPR), summary in the authors' publication feed",
    {**TAYLORSHIFT_V1.rules, "sum": per_in(1)},
    backward_rules=FULL_BACKWARD,
)

MATMUL = Convention(
    "matmul",
    "matrix products only (2mkn each): what torch.utils.flop_counter.FlopCounterMode reports",
    "PyTorch FlopCounterMode",
    {
        "matmul": _matmul,
        "linear": _linear_matmul_only,
        "fused_attention": _fused_matmuls,
        "linear_chunk": _chunk_matmuls,
        "chunk_matmul": _block_product,
    },
    backward_rules={"linear_chunk": _chunk_matmuls_backward, "tri_solve": _tri_solve_backward},
)

FLASH_BENCH = Convention(
    "flash-bench",
    "the FlashAttention benchmark's accounting: only the two products over the score matrix, 4·b·h·N²·d "
    "forward, halved when causal, backward 2.5x forward (implies --causal-count half --backward recompute)",
    "Dao et al., FlashAttention benchmarks (benchmarks/benchmark_flash_attention.py, flops())",
    {"matmul": _score_matmul, "fused_attention": _fused_matmuls, "linear_chunk": _chunk_scores,
     "chunk_matmul": _attention_block},
    counting={"causal": "half", "backward": "recompute"},
    backward_rules={"linear_chunk": _chunk_scores_backward, "tri_solve": _zero},
)

CONVENTIONS: dict[str, Convention] = {c.name: c for c in (TAYLORSHIFT_V1, TAYLORSHIFT_ICPR, MATMUL, FULL, FLASH_BENCH)}
DEFAULT = TAYLORSHIFT_V1.name


@dataclass(frozen=True)
class PublishedConvention:
    """A paper's closed-form FLOP totals, one per variant: not derivable from ops, kept for comparison."""

    name: str
    summary: str
    source: str
    scope: str
    mode: str
    formulas: Mapping[str, str]
    """Variant -> total per sample in sympy syntax over N, d, h (multiplied by the batch b)."""

    def total(self, variant: str) -> sp.Expr:

        if variant not in self.formulas:
            raise UserError(
                f"convention {self.name} has no formula for {variant} (it covers: {', '.join(self.formulas)})"
            )
        return sp.expand(b * sp.sympify(self.formulas[variant], locals=dict(BY_NAME)))


HOSSEINI_EQ24 = PublishedConvention(
    "hosseini-eq24",
    "Hosseini et al. Eq. 24, one forward and backward pass of a layer: C·ℓ·d_m + 15·h·ℓ², "
    "C = 15 (standard), 12 (Optimized, Super), 9 (Efficient); ℓ = N, d_m = h·d",
    "Hosseini et al., Cost-Effective Attention Mechanisms, Eq. 24",
    scope="layer",
    mode="training",
    formulas={
        "softmax": "15*N*h*d + 15*h*N**2",
        "optimized-attention": "12*N*h*d + 15*h*N**2",
        "efficient-attention": "9*N*h*d + 15*h*N**2",
        "super-attention": "12*N*h*d + 15*h*N**2",
    },
)
PUBLISHED_CONVENTIONS: dict[str, PublishedConvention] = {HOSSEINI_EQ24.name: HOSSEINI_EQ24}


def op_convention(name: str) -> Convention:
    """A convention that counts the ops of an op list, by name (a published one gives totals only)."""
    conv = get_convention(name)
    if not isinstance(conv, Convention):
        raise UserError(f"{name} gives a paper's published totals, not a count of each op")
    return conv


def get_convention(name: str) -> Convention | PublishedConvention:
    """Look a convention up by name, with a suggestion when it is misspelt."""
    try:
        return CONVENTIONS[name]
    except KeyError:
        if name in PUBLISHED_CONVENTIONS:
            return PUBLISHED_CONVENTIONS[name]
        raise UserError(unknown("convention", name, [*CONVENTIONS, *PUBLISHED_CONVENTIONS])) from None
