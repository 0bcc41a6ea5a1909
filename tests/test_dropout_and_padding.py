"""--dropout and --padding-mask against PyTorch: the engine's peak memory equals the live bytes PyTorch holds (the
live-tensor tracer, forward and backward) and its `matmul` count equals FlopCounterMode's, on attention code that
does what the options describe, written here as flash-attention's benchmark writes its reference attention
(`attention_ref`: scores, `masked_fill_(~attn_mask, -inf)`, softmax, dropout, P·V) and as PyTorch code calls SDPA
with a bool attn_mask. Dropout runs as `torch.native_dropout`, which is what F.dropout runs on a GPU (on a CPU,
F.dropout takes an unfused path with a float noise tensor instead of the bool mask).

The FLOP rules of the ops the options add are pinned by hand counts in tests/test_flop_rules.py; the commands'
refusals and notes are at the end."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import sympy as sp
import torch
import torch.nn.functional as F  # noqa: N812
from attn_cost.costmodel.conventions import FULL, MATMUL
from attn_cost.costmodel.counting import Counting
from attn_cost.costmodel.derive import Derived
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.scopes import build_graph
from attn_cost.costmodel.symbols import N, b, d, h, k
from attn_cost.costmodel.variants import derive, get_variant
from attn_cost.profilers.devicemodel.datasheet import fit as gpufit
from attn_cost.profilers.measure.cases import Case
from attn_cost.profilers.measure.flops import counted
from attn_cost.profilers.measure.memory import traced_peak, traced_training_peak
from attn_cost.profilers.measure.references import take
from attn_cost.profilers.measure.sizes import Sizes
from torch import Tensor

P = 0.1
SIZES = [Sizes(N=40, d=8, h=2, b=3, k=8), Sizes(N=24, d=16, h=3, b=2, k=5)]


def key_mask(batch: int, n: int) -> Tensor:
    """A b×N key padding mask, True for a real token, as the benchmark draws it (each sequence a few tokens short
    of N): the last 1 to 3 keys of each sequence are padding."""
    mask = torch.ones(batch, n, dtype=torch.bool)
    for i in range(batch):
        mask[i, n - 1 - i % 3 :] = False
    return mask


def case(variant: str, s: Sizes, run: Callable, padded: bool, token_major: bool = False, kv_heads: int = 0) -> Case:
    """A runnable case over q, k, v (b×h×N×d, k and v with `kv_heads` heads where given; token_major: views of
    [b, N, h, d] storage, the layout SDPA's CPU backward writes its gradients in, as the catalogue's reference
    draws them) and, padded, the key mask."""

    def make() -> list[Tensor]:
        gen = torch.Generator().manual_seed(1)
        heads = (s.h, kv_heads or s.h, kv_heads or s.h)
        if token_major:
            qkv = [torch.randn(s.b, s.N, hh, s.d, generator=gen).transpose(1, 2) for hh in heads]
        else:
            qkv = [torch.randn(s.b, hh, s.N, s.d, generator=gen) for hh in heads]
        return qkv + ([key_mask(s.b, s.N)] if padded else [])

    return Case(variant, "core", s, "fp32", "cpu", run, make)


def attention_ref(p: float, padded: bool, causal: Tensor | None = None) -> Callable:
    """flash-attention's reference attention: the padded keys' scores filled with −∞ through the inverted mask, the
    causal mask (a constant made before the call), softmax, dropout, P·V; each tensor dropped after its last use."""

    def run(inputs: list[Tensor]) -> Tensor:
        q, kk, v, *rest = take(inputs)
        s = q @ kk.transpose(-1, -2)
        del q, kk
        s.mul_(1 / math.sqrt(v.shape[-1]))
        if padded:
            (mask,) = rest
            del rest
            inverted = ~mask[:, None, None, :]
            del mask
            s.masked_fill_(inverted, float("-inf"))
            del inverted
        if causal is not None:
            s.masked_fill_(causal, float("-inf"))
        a = torch.softmax(s, dim=-1)
        del s
        if p:
            a = torch.native_dropout(a, p, True)[0]
        return a @ v

    return run


def sdpa_ref(padded: bool, groups: int = 1) -> Callable:
    """SDPA with the key mask as its bool attn_mask (broadcast over heads and queries); groups > 1: grouped-query
    attention, the query heads of a key/value head stacked along the sequence (a view)."""

    def run(inputs: list[Tensor]) -> Tensor:
        q, kk, v, *rest = take(inputs)
        mask = rest[0][:, None, None, :] if padded else None
        del rest
        if groups > 1:
            bb, hh, n, dd = q.shape
            q = q.view(bb, hh // groups, groups * n, dd)
        return F.scaled_dot_product_attention(q, kk, v, attn_mask=mask)

    return run


def linformer_ref(p: float, padded: bool, e: Tensor, f: Tensor) -> Callable:
    """Linformer with the padded tokens' keys and values zeroed before E and F mix them (the Nyströmformer authors'
    Linformer multiplies K and V by the mask) and dropout on the N×k probabilities (the linformer package)."""

    def run(inputs: list[Tensor]) -> Tensor:
        q, kk, v, *rest = take(inputs)
        mask = rest[0][:, None, :, None] if padded else None
        del rest
        if mask is not None:
            kk = kk * mask
        kp = e @ kk
        del kk
        s = q @ kp.transpose(-1, -2)
        del q, kp
        s.mul_(1 / math.sqrt(v.shape[-1]))
        a = torch.softmax(s, dim=-1)
        del s
        if p:
            a = torch.native_dropout(a, p, True)[0]
        if mask is not None:
            v = v * mask
            del mask
        vp = f @ v
        del v
        return a @ vp

    return run


def engine(variant: str, mode: str, s: Sizes, p: float, padded: bool) -> tuple[int, int]:
    """The engine's peak bytes (fp32) and `matmul` FLOPs with the options, at the sizes."""
    derived = derive(variant, "core", mode, dropout=sp.Rational(str(p)) if p else None, padding=padded)
    peak, _ = derived.peak("fp32").at(s.symbols())
    return int(peak), int(derived.flops(MATMUL).xreplace(s.symbols()))


OPTIONS = [(0, True), (P, False), (P, True)]
"""(dropout p, padding mask): each option alone and both."""


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("s", SIZES)
def test_materialised_attention_with_a_padding_mask_in_inference(s: Sizes, causal: bool) -> None:
    triangle = torch.triu(torch.ones(s.N, s.N, dtype=torch.bool), 1) if causal else None
    variant = "softmax-causal" if causal else "softmax"
    c = case(variant, s, attention_ref(0, True, triangle), True)
    peak, flops = engine(variant, "inference", s, 0, True)
    assert traced_peak(c)[0] == peak
    assert counted(c) == flops


@pytest.mark.parametrize(("p", "padded"), OPTIONS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("s", SIZES)
def test_materialised_attention_in_training(s: Sizes, causal: bool, p: float, padded: bool) -> None:
    """Forward and backward: native_dropout keeps its bool mask and P·V its dropped P besides the softmax's P;
    masked_fill_ keeps the inverted b×N mask."""
    triangle = torch.triu(torch.ones(s.N, s.N, dtype=torch.bool), 1) if causal else None
    variant = "softmax-causal" if causal else "softmax"
    c = case(variant, s, attention_ref(p, padded, triangle), padded)
    peak, flops = engine(variant, "training", s, p, padded)
    traced, op = traced_training_peak(c)
    assert traced == peak, op
    assert counted(c, training=True) == flops


def test_dropout_adds_its_mask_to_the_training_peak() -> None:
    """At N = 64 (b = h = 1, d = 4) softmax's training peak without dropout is in the softmax's backward: P, dP and
    dS, three N×N fp32 matrices. With dropout the backward of P·V holds P, the keep mask (N×N bool), the dropped P
    and its gradient: three fp32 matrices and the mask, so the peak grows by N² bytes (the N×d tensors held beside
    are the same in both). Counted by hand, traced, and derived."""
    s = Sizes(N=64, d=4)
    without, at = traced_training_peak(case("softmax", s, attention_ref(0, False), False))
    with_dropout, at_dropout = traced_training_peak(case("softmax", s, attention_ref(P, False), False))
    assert (at, at_dropout) == ("aten._softmax_backward_data.default", "aten.bmm.default")
    assert with_dropout - without == s.N**2
    assert engine("softmax", "training", s, P, False)[0] - engine("softmax", "training", s, 0, False)[0] == s.N**2


@pytest.mark.parametrize("s", SIZES)
def test_fused_attention_with_a_padding_mask(s: Sizes) -> None:
    """SDPA converts the bool mask to an additive one of the activation dtype (b×N) before the kernel, holds the
    bool mask through the call and, in training, keeps the additive one for backward. FlashAttention's backward
    scratch (D and the fp32 dQ accumulator) is inside the CPU kernel, where the tracer does not look: added from the
    sizes, as tests/test_tracer_and_flops.py does."""
    c = case("softmax-fused", s, sdpa_ref(True), True, token_major=True)
    peak, flops = engine("softmax-fused", "inference", s, 0, True)
    assert traced_peak(c)[0] == peak
    assert counted(c) == flops
    peak, flops = engine("softmax-fused", "training", s, 0, True)
    traced, _ = traced_training_peak(c)
    assert traced + s.b * s.h * s.N * 4 + s.b * s.h * s.N * s.d * 4 == peak
    assert counted(c, training=True) == flops


def test_grouped_query_attention_with_a_padding_mask() -> None:
    """gqa's grouped view takes the same b×N mask (broadcast over the stacked query heads)."""
    s = Sizes(N=24, d=8, h=4, b=2, h_kv=2)
    c = case("gqa", s, sdpa_ref(True, groups=2), True, kv_heads=2)
    peak, flops = engine("gqa", "inference", s, 0, True)
    assert traced_peak(c)[0] == peak
    assert counted(c) == flops


@pytest.mark.parametrize(("p", "padded"), OPTIONS)
@pytest.mark.parametrize("s", SIZES)
def test_linformer(s: Sizes, p: float, padded: bool) -> None:
    """Inference, and training with E and F frozen, as the tracer runs a training step. The engine describes E and F
    trained (their gradients not counted: weights are not activations), so E·K and F·V keep the masked K and V for
    them; frozen, autograd keeps neither: the engine's op list with those two saves taken out must equal the trace
    exactly (with no mask, E·K and F·V read the inputs K and V, held anyway)."""
    gen = torch.Generator().manual_seed(2)
    e, f = (torch.randn(s.proj, s.N, generator=gen) for _ in range(2))
    c = case("linformer", s, linformer_ref(p, padded, e, f), padded)
    if not p:
        peak, flops = engine("linformer", "inference", s, 0, padded)
        assert traced_peak(c)[0] == peak
        assert counted(c) == flops
    graph = build_graph(get_variant("linformer"), "core", "training", dropout=sp.Rational(str(p)) if p else None,
                        padding=padded)  # fmt: skip
    for op in graph.ops:
        if op.kind == "matmul" and op.inputs[0].storage.id == -1:  # E·K, F·V: the weight's gradient is not taken
            op.attrs["saved"] = [t for t in op.attrs["saved"] if t is op.inputs[0]]
    frozen, _ = Derived(graph).peak("fp32").at(s.symbols())
    traced, op = traced_training_peak(c)
    assert traced == frozen, op
    if padded:  # trained, E and F keep their masked operands: more than frozen
        assert engine("linformer", "training", s, p, padded)[0] > frozen


# -- the counts the options add, as formulas --------------------------------------------------------------------


def test_dropout_on_materialised_probabilities_costs_three_flops_a_score_forward_and_two_backward() -> None:
    """Under `full`, per probability: the draw compared with 1 − p, the product by the keep bit, the 1/(1 − p)
    forward; dP ⊙ M/(1 − p) backward (no draw). The padding mask adds one inversion per key and sequence (b·N),
    forward only: masked_fill selects, it adds nothing."""
    for variant in ("softmax", "softmax-causal"):
        base = derive(variant, "core", "training").flops(FULL)
        dropped = derive(variant, "core", "training", dropout=sp.Rational(1, 10)).flops(FULL)
        padded = derive(variant, "core", "training", padding=True).flops(FULL)
        assert sp.expand(dropped - base - 5 * b * h * N**2) == 0
        assert sp.expand(padded - base - b * N) == 0
    base = derive("linformer", "core", "training").flops(FULL)
    dropped = derive("linformer", "core", "training", dropout=sp.Rational(1, 10)).flops(FULL)
    padded = derive("linformer", "core", "training", padding=True).flops(FULL)
    assert sp.expand(dropped - base - 5 * b * h * N * k) == 0  # on the N×k probabilities
    # K ⊙ mask and V ⊙ mask: one product per element forward, one backward (only K and V have gradients)
    assert sp.expand(padded - base - 2 * 2 * b * h * N * d) == 0


def test_a_fused_kernel_keeps_no_dropout_mask() -> None:
    """FlashAttention draws the keep bits from a counter-based generator and draws them again in backward: the
    peak memory is that of the kernel without dropout; the draw's three operations per score are counted."""
    plain = derive("softmax-fused", "core", "training")
    dropped = derive("softmax-fused", "core", "training", dropout=sp.Rational(1, 10))
    assert plain.peak("fp16").expr == dropped.peak("fp16").expr
    assert plain.traffic("fp16") == dropped.traffic("fp16")
    assert dropped.flops(MATMUL) == plain.flops(MATMUL)
    forward = 3 * b * h * N**2  # 3 per score; backward (3·d + 2·d)/(d + d) = 5/2 of it, as the kernel's products
    assert sp.expand(dropped.flops(FULL) - plain.flops(FULL) - forward * (1 + sp.Rational(5, 2))) == 0


def test_the_counts_do_not_depend_on_p() -> None:
    """Every probability is drawn for, whatever p: 0.1 and 0.5 count alike; p = 0 is no dropout (PyTorch returns
    its input), and so is an option left out."""
    a = derive("softmax", "core", "training", dropout=sp.Rational(1, 10))
    c = derive("softmax", "core", "training", dropout=sp.Rational(1, 2))
    assert a.flops(FULL) == c.flops(FULL) and a.peak("fp32").expr == c.peak("fp32").expr
    assert Counting(dropout=0) == Counting()
    assert Counting(dropout=0.1).dropout == sp.Rational(1, 10)


@pytest.mark.parametrize("p", [1, 1.5, -0.1, float("nan"), float("inf"), "x"])
def test_a_dropout_probability_outside_0_to_1_is_refused(p: object) -> None:
    with pytest.raises(UserError, match="0 <= p < 1"):
        Counting(dropout=p)


def test_dropout_in_inference_is_refused_by_the_engine() -> None:
    with pytest.raises(UserError, match="--mode training"):
        derive("softmax", "core", "inference", dropout=sp.Rational(1, 10))


def test_which_variants_take_the_options() -> None:
    """Variants with attention probabilities take dropout, those whose scores or mixed keys a padding mask acts on
    take the mask; linear attention takes neither, a causal fused kernel no mask (SDPA takes none with is_causal),
    a decoding step neither (inference, one query)."""
    both = {"dropout", "padding"}  # of the options a graph takes (`Graph.applied`: a linear attention's φ too)
    took = {
        name: derive(name, "core", "training", dropout=sp.Rational(1, 10), padding=True).graph.applied & both
        for name in ("softmax", "softmax-causal", "softmax-fused", "softmax-fused-causal", "gqa", "gqa-causal",
                     "linformer", "linear", "linear-causal", "performer")
    }  # fmt: skip
    assert took == {"softmax": both, "softmax-causal": both, "softmax-fused": both, "softmax-fused-causal": {"dropout"},
                    "gqa": both, "gqa-causal": {"dropout"}, "linformer": both, "linear": set(), "linear-causal": set(),
                    "performer": set()}  # fmt: skip
    for name in ("optimized-attention", "efficient-attention", "super-attention"):
        assert derive(name, "layer", "training", dropout=sp.Rational(1, 10), padding=True).graph.applied == both
    assert derive("softmax", "decode", "inference", padding=True).graph.applied == set()


# -- the commands ------------------------------------------------------------------------------------------------


def test_formula_says_the_options(cli) -> None:
    r = cli("formula", "softmax", "--mode", "training", "--dropout", "0.1", "--padding-mask")
    assert r.code == 0, r.err
    assert "attention dropout p=0.1" in r.out and "key padding mask (b×N bool)" in r.out
    assert "M ← uniform draw < 1 − p" in r.out and "−∞ at padded keys" in r.out
    data = cli("formula", "softmax", "--mode", "training", "--dropout", "0.1", "--padding-mask", "--json").json()
    assert data["counting"]["dropout"] == 0.1 and data["counting"]["padding_mask"] is True


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["formula", "softmax", "--dropout", "0.1"], "give it with --mode training"),
        (["formula", "linear", "--mode", "training", "--dropout", "0.1"], "none of linear has attention probabilities"),
        (["formula", "linear", "--padding-mask"], "none of linear is modelled with a key padding mask"),
        (["formula", "softmax-fused-causal", "--padding-mask"], "none of softmax-fused-causal"),
        (["formula", "softmax", "--mode", "training", "--dropout", "1"], "0 <= p < 1"),
        (["formula", "softmax", "--mode", "training", "--dropout", "nan"], "0 <= p < 1"),
        (["crossover", "--pair", "softmax:linear", "--padding-mask", "--device", "h100-sxm5-80gb"], "--device"),
    ],
)
def test_options_that_cannot_apply_are_refused_in_one_line(cli, args: list[str], words: str) -> None:
    r = cli(*args)
    assert r.code == 2, r.out
    assert words in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_a_variant_that_does_not_take_an_option_is_named(cli) -> None:
    """softmax against linear with a padding mask: softmax takes it, linear is counted without, and the note says
    so (the crossover still answers)."""
    r = cli("crossover", "--pair", "softmax:linear", "--d", "64", "--padding-mask", "--json")
    assert r.code == 0, r.err
    assert "applies to softmax, not to linear" in r.err


# -- FlashAttention's Table 21, measured with dropout and a padding mask ------------------------------------------


def _table_21() -> tuple[dict, list]:
    """The datasheet fit's namespace (profilers/devicemodel/datasheet/fit.py) and its Table 21 rows of the methods run
    with the harness's options."""
    bench = vars(gpufit)
    return bench, [r for r in gpufit.fa1_rows() if r.quantity == "memory" and r.harness_options]


def test_table_21_pytorch_attention_gains_a_byte_a_score_and_two_a_key() -> None:
    """b = 16, h = 8, fp16: without the options the training peak is in the softmax's backward (P, dP, dS: 6 bytes a
    score); with them in the backward of P·V (P, the keep mask, the dropped P, its gradient: 7 bytes a score), the
    b×N mask and its inversion (a byte a key and sequence each) held besides; the N×d tensors held are the same."""
    bench, rows = _table_21()
    torch_rows = [r for r in rows if r.method == "PyTorch Attention"]
    assert {r.method for r in rows} == {"PyTorch Attention", "Linformer"} and len(torch_rows) == 6
    for r in torch_rows:
        assert bench["one_step_bytes"](r) - bench["one_step_bytes"](r, options=False) == 16 * 8 * r.n**2 + 2 * 16 * r.n


def test_table_21_rows_with_the_options_stay_below_the_published_memory() -> None:
    """What the harness holds (one training step and the inputs' gradients of the step before) is a lower bound of
    what it measured: with the options no PyTorch-attention or Linformer row of Table 21 may exceed the published
    MiB (an op the options added twice, or a mask counted at the wrong size, would)."""
    from attn_cost.profilers.devicemodel.calibrated.model import row_dims
    from attn_cost.profilers.devicemodel.datasheet.model import input_bytes

    bench, rows = _table_21()
    for r in rows:
        held = bench["one_step_bytes"](r) + input_bytes(r.variant, row_dims(r.sizes), r.n, dtype=r.dtype)
        assert held <= r.value, (r.method, r.n)
