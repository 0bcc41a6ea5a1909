"""Grouped-query, sliding-window, Linformer, Performer, Nyströmformer, fused and chunked causal linear attention,
and the IO-aware traffic of tiled kernels: against the papers' counts, independent arithmetic and PyTorch."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import sympy as sp
import torch
from attn_cost.costmodel.conventions import get_convention
from attn_cost.costmodel.iotraffic import Tiles, fused_op_traffic, io_traffic
from attn_cost.costmodel.symbols import C, N, b, c, d, h, h_kv, k, m, w
from attn_cost.costmodel.variants import derive
from attn_cost.profilers.devicemodel.datasheet.data import get_datasheet
from attn_cost.profilers.measure.cases import build_case
from attn_cost.profilers.measure.flops import counted, derived
from attn_cost.profilers.measure.memory import LiveTensorTracer, traced_peak
from attn_cost.profilers.measure.references import performer as ref
from attn_cost.profilers.measure.sizes import Sizes
from torch.utils.flop_counter import FlopCounterMode

MATMUL = get_convention("matmul")
A100 = get_datasheet("a100-sxm4-80gb").gpu
NEW = [
    "gqa",
    "gqa-causal",
    "sliding-window",
    "sliding-window-fused",
    "linformer",
    "performer",
    "nystromformer",
    "linear-causal-fused",
]
SCOPES = {
    "gqa": ("core", "layer", "block", "decode"),
    "gqa-causal": ("core", "layer"),
    "linear-causal-fused": ("core", "layer", "decode"),
    "sliding-window": ("core", "layer", "block", "decode"),
    "sliding-window-fused": ("core", "layer", "decode"),
}
# sizes away from the defaults: h_kv < h, windows shorter and longer than N, k > N, N < c and N = c
SIZES = [
    Sizes(N=13, d=4, h=2, b=2, D=2, h_kv=1, w=5, k=6, m=7, c=3),
    Sizes(N=16, d=8, h=4, b=1, D=2, h_kv=2, w=20, k=30, m=3, c=16),
    Sizes(N=9, d=4, h=3, b=1, D=2, h_kv=3, w=1, k=2, m=16, c=12),
]


def product_flops(name: str, scope: str = "core", pick=lambda op: True) -> sp.Expr:
    g = derive(name, scope)
    return sp.expand(sum((g.op_flops(op, MATMUL) for op in g.ops if op.kind == "matmul" and pick(op)), sp.Integer(0)))


# -- counts from the papers and independent arithmetic ---------------------------------------------


@pytest.mark.parametrize("name", ["sliding-window", "sliding-window-fused"])
def test_sliding_window_products_cost_4_n_w_d(name: str) -> None:
    """QKᵀ over a band of w keys and the weighted sum of w values: 2·N·w·d each, per head."""
    assert sp.expand(derive(name).flops(MATMUL) - 4 * b * h * N * w * d) == 0


def test_sliding_window_memory_grows_with_n_w_only_when_materialised() -> None:
    def n_times_w(name: str) -> bool:
        branches = derive(name).peak().branches
        return any(t.has(N) and t.has(w) for e in branches for t in sp.Add.make_args(sp.expand(e)))

    assert n_times_w("sliding-window")  # the N×w band and its softmax
    assert not n_times_w("sliding-window-fused")  # one row of w scores at a time
    # no term N·w·d: the K and V windows are strided views, not copies
    for e in derive("sliding-window").peak().branches:
        assert not any(t.has(N) and t.has(w) and t.has(d) for t in sp.Add.make_args(sp.expand(e)))


def test_banded_sliding_window_needs_less_memory_than_causal_softmax_from_n_near_w() -> None:
    """By hand (fp32, one head, d = 64, w = 256): the band keeps S and P (2·N·w) and Q or the output (N·d);
    causal softmax keeps S and P (2·N²): they cross at N = w."""
    at = {b: 1, h: 1, d: 64, w: 256}
    band = derive("sliding-window").peak("fp32").expr.xreplace(at)
    full = derive("softmax-causal").peak("fp32").expr.xreplace(at)
    n = 1024
    assert band.xreplace({N: n}) == 4 * (2 * n * 256 + n * 64)
    assert band.xreplace({N: n}) < full.xreplace({N: n})
    assert band.xreplace({N: 200}) > full.xreplace({N: 200})


def test_banded_products_read_the_padded_k_and_v_once() -> None:
    """Sᵢ = qᵢ·K_pad[i:i+w]ᵀ reads Q and the (N+w−1)×d padded K, writes N×w; Y reads P and the padded V."""
    g = derive("sliding-window")
    products = [op for op in g.ops if op.kind == "matmul"]
    traffic = [sp.expand(g.op_traffic(op, "fp32") / 4) for op in products]
    per_head = [N * d + (N + w - 1) * d + N * w, N * w + (N + w - 1) * d + N * d]
    assert [sp.expand(t - b * h * e) for t, e in zip(traffic, per_head, strict=True)] == [0, 0]


def test_sliding_window_decode_holds_a_rolling_buffer_of_w() -> None:
    """Mistral's rolling buffer: 2·w·d cache elements per head whatever N, and 4·w·d FLOPs per token."""
    g = derive("sliding-window", "decode")
    assert N not in g.peak("fp32").expr.free_symbols and N not in g.flops(MATMUL).free_symbols
    assert sp.expand(g.flops(MATMUL) - 4 * b * h * w * d) == 0
    assert g.peak("fp32").at({b: 1, h: 1, d: 64, w: 4096})[0] >= 4 * 2 * 4096 * 64


def test_gqa_decode_holds_a_cache_of_2_n_h_kv_d_elements() -> None:
    """Per generated token the KV cache is 2·N·h_kv·d elements (bf16: 2 bytes each), h/h_kv times less than MHA."""
    peak = derive("gqa", "decode").peak("bf16").expr
    vals = {b: 3, h: 8, h_kv: 2, d: 64}
    for n in (1000, 4096):
        grow = peak.xreplace({**vals, N: n + 1}) - peak.xreplace({**vals, N: n})
        assert grow == 2 * 3 * 2 * 64 * 2  # one more row of K and of V per KV head, batch 3, 2 bytes
    mha = derive("softmax-fused", "decode").peak("bf16").expr.xreplace({b: 3, h: 8, d: 64})
    assert mha.xreplace({N: 1001}) - mha.xreplace({N: 1000}) == 4 * (2 * 3 * 2 * 64 * 2)


def test_gqa_computes_what_multi_head_attention_computes_with_fewer_kv_projections() -> None:
    assert sp.expand(derive("gqa").flops(MATMUL) - 4 * b * h * N**2 * d) == 0
    width = h * d
    expected = 2 * width**2 + 2 * width * h_kv * d  # W_Q, W_O; W_K, W_V; no biases (Llama-style)
    assert sp.expand(derive("gqa", "layer").params - expected) == 0


def test_performer_feature_maps_and_products_with_v() -> None:
    """4·N·m·d for the random-feature maps of Q and K, 4·N·m·d for φ(K)ᵀV and φ(Q)(φ(K)ᵀV), 2·N·m for φ(Q)z."""
    maps = product_flops("performer", pick=lambda op: op.output.name in ("φ(Q)", "φ(K)"))
    with_v = product_flops("performer", pick=lambda op: op.output.name in ("φ(K)ᵀV", "num"))
    assert sp.expand(maps - 4 * b * h * N * m * d) == 0
    assert sp.expand(with_v - 4 * b * h * N * m * d) == 0
    assert sp.expand(derive("performer").flops(MATMUL) - b * h * (8 * N * m * d + 2 * N * m)) == 0
    assert derive("performer").params == 0  # Ω is drawn, not learned


def test_linformer_counts_four_products_of_n_k_d_and_2_k_n_parameters() -> None:
    """E·K, Q·K̃ᵀ, F·V and P·Ṽ are each 2·N·k·d; E and F (k×N) are the parameters."""
    assert sp.expand(derive("linformer").flops(MATMUL) - 8 * b * h * N * k * d) == 0
    assert sp.expand(derive("linformer").params - 2 * k * N) == 0


def test_nystromformer_products() -> None:
    """QK̃ᵀ, Q̃Kᵀ, B̃V, (F̃Ã⁺)(B̃V): 2Ncd each; F̃Ã⁺: 2Nc²; Q̃K̃ᵀ: 2c²d; 6 iterations of 4 c×c products."""
    expected = 8 * N * c * d + 2 * N * c**2 + 2 * c**2 * d + 6 * 4 * 2 * c**3
    assert sp.expand(derive("nystromformer").flops(MATMUL) - b * h * expected) == 0


def test_linear_causal_fused_holds_a_state_not_an_n_d_d_tensor() -> None:
    """N = 1,000, d = 64, fp32: φ(Q), φ(K), V, Y (4Nd), den (N), the state (d²) and one row (d), against
    linear-causal's N·d² prefix sums; with the caller's Q, K, V (3Nd) it is the ~1.8 MB the authors' kernel holds."""
    at = {N: 1000, d: 64, b: 1, h: 1}
    fused = derive("linear-causal-fused").peak("fp32").at(at)[0]
    assert fused == 4 * (4 * 1000 * 64 + 1000 + 64**2 + 64)
    assert round(int(fused + 4 * 3 * 1000 * 64) / 1e6, 1) == 1.8
    assert round(int(derive("linear-causal").peak("fp32").at(at)[0]) / 1e6, 1) == 17.2
    # per token: the rank-1 state update s += φ(k)vᵀ (2d², a GEMM in the kernel), φ(q)ᵀs (2d²), φ(q)·Σφ(k) (2d)
    assert sp.expand(derive("linear-causal-fused").flops(MATMUL) - b * h * N * (4 * d**2 + 2 * d)) == 0


def test_linear_chunked_products_are_quadratic_in_a_chunk_and_d_squared_between_chunks() -> None:
    """GLA's chunkwise form (Yang et al. 2024, Sec. 3): per chunk of C tokens, φ(K)ᵀV (2Cd²), φ(Q)S (2Cd²),
    φ(Q)z (2Cd), φ(Q)φ(K)ᵀ (2C²d) and its product with V (2C²d): ⌈N/C⌉ chunks, the last padded."""
    per_chunk = 2 * C * d**2 + 2 * C * d**2 + 2 * C * d + 2 * C**2 * d + 2 * C**2 * d
    assert sp.expand(derive("linear-chunked").flops(MATMUL) - b * h * per_chunk * sp.ceiling(N / C)) == 0


def test_linear_chunked_holds_a_state_per_chunk_and_a_c_by_c_block_per_chunk() -> None:
    """N = 4,096, d = 64, C = 64, fp32: 64 chunk states of d² (two alive while the entering state is formed) and
    the C×C blocks of all chunks (N·C) are what chunking adds to the N·d tensors; the N·d² prefix sums of
    linear-causal are gone."""
    at = {N: 4096, d: 64, b: 1, h: 1, C: 64}
    chunked = int(derive("linear-chunked").peak("fp32").at(at)[0])
    causal = int(derive("linear-causal").peak("fp32").at(at)[0])
    assert 4 * 4096 * 64 < chunked < 4 * (6 * 4096 * 64 + 2 * 64 * 64**2 + 4096 * 64)
    assert causal > 4096 * 64**2 * 4 > 10 * chunked


@pytest.mark.parametrize("n", [7, 64, 100])
def test_linear_chunked_equals_linear_causal(n: int) -> None:
    """Whole chunks, a ragged last chunk (padded) and a sequence shorter than one chunk compute the same function."""
    sizes = Sizes(N=n, d=4, h=2, b=2, C=16)
    assert rel_err(run("linear-chunked", sizes)[0], run("linear-causal", sizes)[0]) < 1e-5


@pytest.mark.parametrize("n", [7, 33, 13, 16, 24, 1])
@pytest.mark.parametrize("chunk", [4, 8])
def test_linear_chunked_is_exact_at_every_length(n: int, chunk: int) -> None:
    """Padded to whole chunks or not: FLOPs are FlopCounterMode's and the peak the live-tensor tracer's at any N."""
    sizes = Sizes(N=n, d=4, h=2, b=3, C=chunk)
    case = build_case("linear-chunked", "core", sizes)
    assert counted(case) == derived("linear-chunked", "core", sizes)
    assert traced_peak(case)[0] == derive("linear-chunked").peak("fp32").at(sizes.symbols())[0]


def test_measured_lengths_need_no_whole_chunks() -> None:
    """The formulas hold at every N: a measured search probes any length (on CUDA, multiples of 8 only)."""
    from attn_cost.profilers.measure.profile import length_grain

    assert length_grain("cpu") == 1 and length_grain("cuda") == 8


def test_chunk_moves_the_crossover_and_must_be_positive(cli) -> None:
    r32, r128 = (
        cli("crossover", "--pair", "softmax-fused-causal:linear-chunked", "--d", "64", "--chunk", str(cc), "--json")
        for cc in (32, 128)
    )
    assert r32.code == 0 and r128.code == 0, r32.err + r128.err
    assert r32.json()["results"][0]["n0"] < r128.json()["results"][0]["n0"]  # larger chunks: more work per token
    r = cli("crossover", "--pair", "softmax:linear-chunked", "--chunk", "0")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err


# -- PyTorch agrees: live-tensor tracer and FlopCounterMode ---------------------------------------------


CASES = [(v, s) for v in NEW for s in SCOPES.get(v, ("core", "layer", "block"))]


@pytest.mark.parametrize(("variant", "scope"), CASES)
def test_tracer_equals_the_liveness_walk(variant: str, scope: str) -> None:
    for sizes in SIZES:
        peak, op = traced_peak(build_case(variant, scope, sizes))
        modelled, step = derive(variant, scope).peak("fp32").at(sizes.symbols())
        assert peak == modelled, f"{sizes}: traced {peak} at {op}, modelled {modelled} at {step.op.label}"


@pytest.mark.parametrize(("variant", "scope"), [(v, s) for v, s in CASES if s != "block"])
def test_flop_counter_mode_equals_the_matmul_convention(variant: str, scope: str) -> None:
    for sizes in SIZES:
        assert counted(build_case(variant, scope, sizes)) == derived(variant, scope, sizes), sizes


def test_kv_heads_must_divide_heads() -> None:
    from attn_cost.costmodel.errors import UserError

    with pytest.raises(UserError, match="does not divide"):
        build_case("gqa", "core", Sizes(N=4, d=4, h=3, h_kv=2))


# -- the references compute the papers' maths ----------------------------------------------------------


def run(variant: str, sizes: Sizes) -> tuple[torch.Tensor, list[torch.Tensor], object]:
    case = build_case(variant, "core", sizes)
    inputs = case.make_inputs()
    with torch.no_grad():
        y = case.run([t.clone() for t in inputs])
    return y.double(), [t.double() for t in inputs], case


def rel_err(x: torch.Tensor, y: torch.Tensor) -> float:
    return ((x - y).abs().max() / y.abs().max()).item()


def dense(q, k, v, allowed) -> torch.Tensor:
    s = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("name", ["sliding-window", "sliding-window-fused"])
@pytest.mark.parametrize("window", [1, 4, 30])
def test_sliding_window_attends_the_last_w_tokens(name: str, window: int) -> None:
    sizes = Sizes(N=17, d=4, h=2, b=2, w=window)
    y, (q, k, v), _ = run(name, sizes)
    i, j = torch.arange(17).view(-1, 1), torch.arange(17).view(1, -1)
    assert rel_err(y, dense(q, k, v, (j <= i) & (j > i - window))) < 1e-5


@pytest.mark.parametrize("n", [3, 9, 20])
def test_sliding_window_decode_attends_the_last_w_tokens_of_the_rolling_buffer(n: int) -> None:
    """Token n (0-based) with a buffer of w = 8 whose slot j holds the latest token t ≡ j (mod w)."""
    window, dd = 8, 4
    gen = torch.Generator().manual_seed(3)
    keys, vals = torch.randn(1, 2, n + 1, dd, generator=gen), torch.randn(1, 2, n + 1, dd, generator=gen)
    q = torch.randn(1, 2, 1, dd, generator=gen)
    kc, vc = torch.randn(1, 2, window, dd, generator=gen), torch.randn(1, 2, window, dd, generator=gen)
    for t in range(n):
        kc[:, :, t % window], vc[:, :, t % window] = keys[:, :, t], vals[:, :, t]
    case = build_case("sliding-window", "decode", Sizes(N=n, d=dd, h=2, b=1, w=window))
    with torch.no_grad():
        y = case.run([q, keys[:, :, n:], vals[:, :, n:], kc, vc])
    lo = max(0, n - window + 1)
    allowed = torch.ones(1, n + 1 - lo, dtype=torch.bool)
    assert rel_err(y.double(), dense(q, keys[:, :, lo:], vals[:, :, lo:], allowed).double()) < 1e-5


def test_gqa_shares_each_kv_head_among_its_group() -> None:
    sizes = Sizes(N=11, d=4, h=6, b=2, h_kv=2)
    y, (q, k, v), _ = run("gqa", sizes)
    rep = 6 // 2
    full = torch.ones(11, 11, dtype=torch.bool)
    assert rel_err(y, dense(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), full)) < 1e-5


def test_gqa_causal_is_causal_attention_over_shared_kv_heads() -> None:
    sizes = Sizes(N=11, d=4, h=6, b=2, h_kv=3)
    y, (q, k, v), _ = run("gqa-causal", sizes)
    causal = torch.ones(11, 11, dtype=torch.bool).tril()
    assert rel_err(y, dense(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), causal)) < 1e-5


def test_gqa_decode_attends_over_the_grouped_cache() -> None:
    case = build_case("gqa", "decode", Sizes(N=9, d=4, h=4, b=1, h_kv=2))
    q, kk, vv, kc, vc = case.make_inputs()
    with torch.no_grad():
        y = case.run([q, kk, vv, kc.clone(), vc.clone()])
    kc[:, :, -1], vc[:, :, -1] = kk.squeeze(-2), vv.squeeze(-2)
    full = torch.ones(1, 10, dtype=torch.bool)
    expected = dense(q, kc.repeat_interleave(2, 1), vc.repeat_interleave(2, 1), full)
    assert rel_err(y.double(), expected.double()) < 1e-5


def test_linformer_is_softmax_over_projected_keys() -> None:
    sizes = Sizes(N=12, d=4, h=2, b=1, k=5)
    y, (q, kk, v), case = run("linformer", sizes)
    e, f = (case.params.cache[n].double() for n in ("E", "F"))
    expected = torch.softmax(q @ (e @ kk).transpose(-1, -2) / 2, -1) @ (f @ v)
    assert rel_err(y, expected) < 1e-5


def test_performer_is_favor_plus() -> None:
    """Y = φ(Q)φ(K)ᵀV / φ(Q)φ(K)ᵀ1 with φ(x) = exp(ωᵀx/d^¼ − ‖x‖²/2√d), and it estimates softmax attention."""
    sizes = Sizes(N=10, d=4, h=1, b=1, m=8192)
    y, (q, kk, v), _ = run("performer", sizes)
    omega = ref.favor_features(8192, 4)

    def phi(x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x @ omega.T / 4**0.25 - (x * x).sum(-1, keepdim=True) / (2 * 4**0.5))

    a = phi(q) @ phi(kk).transpose(-1, -2)
    assert rel_err(y, (a @ v) / a.sum(-1, keepdim=True)) < 1e-4
    small = [q / 2, kk / 2, v]  # scores of order one: the estimate's variance grows as exp(‖q‖² + ‖k‖²)
    estimate = ref.performer(list(small), (omega.T / 4**0.25).contiguous())
    exact = dense(*small, torch.ones(10, 10, dtype=torch.bool))
    assert rel_err(estimate, exact) < 0.05  # Monte Carlo estimate with m = 8,192 features


def test_favor_features_are_orthogonal_within_a_block() -> None:
    omega = ref.favor_features(8, 4)
    block = omega[:4] / omega[:4].norm(dim=1, keepdim=True)
    assert torch.allclose(block @ block.T, torch.eye(4, dtype=torch.float64), atol=1e-12)


def test_nystromformer_follows_the_authors_algorithm() -> None:
    """Segment means as landmarks (c divides N here, so they are the authors' reshape-mean), three softmax
    kernels, six Newton iterations for the pseudo-inverse, (F̃Z)(B̃V)."""
    n, dd, lm = 12, 4, 4
    y, (q, kk, v), _ = run("nystromformer", Sizes(N=n, d=dd, h=2, b=1, c=lm))
    ql = q.reshape(1, 2, lm, n // lm, dd).mean(-2)
    kl = kk.reshape(1, 2, lm, n // lm, dd).mean(-2)

    def sm(x):
        return torch.softmax(x / math.sqrt(dd), -1)

    f, a, bk = sm(q @ kl.transpose(-1, -2)), sm(ql @ kl.transpose(-1, -2)), sm(ql @ kk.transpose(-1, -2))
    z = a.transpose(-1, -2) / a.sum(-2).amax(-1)[..., None, None]
    eye = torch.eye(lm, dtype=torch.float64)
    for _ in range(6):
        az = a @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    assert rel_err(y, (f @ z) @ (bk @ v)) < 1e-4


def test_nystromformer_with_one_landmark_per_token_is_softmax_attention() -> None:
    n = 6
    y, (q, kk, v), _ = run("nystromformer", Sizes(N=n, d=4, h=1, b=1, c=n))
    # Ã = F̃ = B̃ = softmax(QKᵀ/√d): (ÃÃ⁺)(ÃV) = ÃV, up to what six Newton iterations leave of Ã⁺ (~2% here)
    assert rel_err(y, dense(q, kk, v, torch.ones(n, n, dtype=torch.bool))) < 0.05


def test_linear_causal_fused_equals_linear_causal() -> None:
    sizes = Sizes(N=19, d=4, h=2, b=2)
    assert rel_err(run("linear-causal-fused", sizes)[0], run("linear-causal", sizes)[0]) < 1e-5


# -- IO-aware traffic of tiled kernels ----------------------------------------------------------------


def simulated(order: str, n: int, dd: int, bq: int, bkv: int, causal: bool, e: int) -> int:
    """Bytes moved by the loops of FlashAttention (Algorithm 1) or FlashAttention-2, block by block."""
    total = 0
    if order == "fa1":
        total += e * n * dd + 2 * 4 * n  # O, ℓ, m initialised
        for j in range(n // bkv):
            total += 2 * e * bkv * dd  # K_j, V_j
            for i in range(n // bq):
                if causal and (i + 1) * bq <= j * bkv:
                    continue  # the block lies above the diagonal
                total += e * bq * dd * 3 + 4 * 4 * bq  # Q_i, O_i read, O_i written; ℓ_i, m_i read and written
        return total
    for i in range(n // bq):
        total += e * bq * dd  # Q_i
        for j in range(n // bkv):
            if causal and j * bkv >= (i + 1) * bq:
                continue
            total += 2 * e * bkv * dd  # K_j, V_j
        total += e * bq * dd + 4 * bq  # O_i and its log-sum-exp
    return total


@pytest.mark.parametrize("order", ["fa1", "fa2"])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_traffic_is_what_the_kernel_loops_move(order: str, causal: bool) -> None:
    name = "softmax-fused-causal" if causal else "softmax-fused"
    (op,) = [o for o in derive(name).ops if o.kind == "fused_attention"]
    for n, dd, blk in ((1024, 64, 64), (512, 32, 128)):
        tiles = Tiles(block_q=blk, block_kv=blk, order=order, gpu=A100).resolve(dd, "bf16")
        got = fused_op_traffic(op, tiles).xreplace({N: n, d: dd, b: 1, h: 1})
        assert got == simulated(order, n, dd, blk, blk, causal, 2)


def test_tiled_traffic_is_theta_n2_d2_over_m() -> None:
    """Algorithm 1's blocks from M: the N² term is 12·N²·d²/M bytes-elements (Theorem 2), halved by doubling M."""
    g = derive("softmax-fused")
    quad = []
    for sram in (64 * 1024, 128 * 1024):
        t = Tiles(sram_bytes=sram, order="fa1").resolve(64, "fp32")
        quad.append(sp.Poly(io_traffic(g, t).xreplace({b: 1, h: 1, d: 64}), N).coeff_monomial(N**2))
    assert quad[0] == 2 * quad[1]
    elements = 64 * 1024 // 4
    assert quad[0] == 4 * 3 * 64 / sp.Integer(elements // (4 * 64)) + 4 * 4 / sp.Integer(elements // (4 * 64))


def test_io_command_finds_where_the_fused_kernel_moves_more_than_linear(cli) -> None:
    """FlashAttention-2 at d = 64 tiles 128 × 128 (flash_fwd_launch_template.h): per head, bf16, it moves
    2·(2·N·64 + 2·N²·64/128) + 4·N bytes; linear attention's unfused bytes grow as N."""
    r = cli("io", "--d", "64", "--variant", "softmax-fused", "--against", "linear", "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    assert (row["tiles"]["block_q"], row["tiles"]["block_kv"]) == (128, 128)
    assert row["tiles"]["gpu"] == "a100-sxm4-80gb" and row["tiles"]["sram_bytes"] == 163 * 1024
    (vs,) = row["against"]
    assert vs["verdict_unfused_model"] == "never" and vs["verdict"] == "crosses"

    def fused(n: int) -> int:
        return 2 * (2 * n * 64 + 2 * n * n * 64 // 128) + 4 * n

    linear = derive("linear").traffic("bf16").xreplace({b: 1, h: 1, d: 64})
    n0 = next(n for n in range(1, 10**5) if all(fused(x) >= linear.xreplace({N: x}) for x in range(n, n + 50)))
    assert vs["from_n"] == n0 == 653
    assert row["per_length"]["4096"]["tiled"] == fused(4096)


def test_fa2_traffic_does_not_depend_on_m_but_on_the_kernels_query_tile() -> None:
    """K and V are streamed once per query block: Θ(N²d/B_r), the same for any on-chip memory."""
    g = derive("softmax-fused")
    at = {b: 1, h: 1, d: 64}
    tiles = [Tiles(sram_bytes=kib * 1024, gpu=A100).resolve(64, "bf16") for kib in (48, 96, 163)]
    same = {io_traffic(g, t).xreplace(at) for t in tiles}
    assert len(same) == 1
    quad = [
        sp.Poly(io_traffic(g, Tiles(block_q=bq, block_kv=64, gpu=A100).resolve(64, "bf16")).xreplace(at), N)
        .coeff_monomial(N**2)
        for bq in (64, 128)
    ]
    assert quad == [2 * 2 * 64 / sp.Integer(64), 2 * 2 * 64 / sp.Integer(128)]


@pytest.mark.parametrize(
    ("gpu", "dd", "causal", "tile"),
    [
        ("a100-sxm4-80gb", 64, False, (128, 128)),
        ("h100-sxm5-80gb", 32, True, (128, 128)),
        ("a100-sxm4-80gb", 128, False, (128, 64)),
        ("h100-sxm5-80gb", 128, True, (128, 64)),
        ("a10", 128, False, (128, 32)),  # sm86
        ("a10", 128, True, (64, 64)),
        ("l4", 96, True, (64, 64)),  # sm89
        ("a100-sxm4-80gb", 256, False, (128, 64)),
        ("h100-sxm5-80gb", 256, False, (64, 64)),
        ("a100-sxm4-80gb", 80, False, (128, 64)),
    ],
)
def test_fa2_tiles_are_the_kernels(gpu: str, dd: int, causal: bool, tile: tuple[int, int]) -> None:
    """kBlockM × kBlockN as flash-attention's csrc/flash_attn/src/flash_fwd_launch_template.h launches them, on each
    GPU's datasheet figures (architecture, shared memory per block and per SM)."""
    t = Tiles(gpu=get_datasheet(gpu).gpu).resolve(dd, "bf16", causal)
    assert (t.block_q, t.block_kv) == tile


def test_tiled_traffic_never_falls_below_reading_q_k_v_once(cli) -> None:
    r = cli(
        "io",
        "--d",
        "64",
        "--variant",
        "softmax-fused",
        "--against",
        "linear",
        "--sram",
        "10000000",
        "--block-q",
        "65536",
        "--block-kv",
        "64",
        "--json",
    )
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    for n, v in row["per_length"].items():
        assert v["tiled"] >= 2 * 4 * int(n) * 64 + 4 * int(n)  # Q, K, V read and O written (bf16), lse (fp32)


@pytest.mark.parametrize(
    "args",
    [
        ("io", "--variant", "linear"),
        ("io", "--sram", "10"),
        ("io", "--order", "fa3"),
        ("io", "--block-q", "1024", "--block-kv", "1024"),
        ("io", "--gpu", "v100"),
        ("io", "--d", "512"),
        ("crossover", "--pair", "softmax:gqa", "--h", "3", "--kv-heads", "2"),
        ("crossover", "--pair", "softmax:sliding-window", "--window", "0"),
        ("crossover", "--pair", "softmax:sliding-window", "--n-kv", "100"),
        ("crossover", "--pair", "softmax:nystromformer", "--n-kv", "100"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args: tuple[str, ...]) -> None:
    r = cli(*args)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err


def test_crossover_records_the_new_sizes(cli) -> None:
    r = cli("crossover", "--pair", "softmax:sliding-window", "--d", "64", "--window", "128", "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    assert row["w"] == 128 and row["n0"] == 128  # 4N²d + … against 4Nwd + …: equal FLOPs from N = w


# -- projection biases: each variant's default is what the implementation it describes has -----------------


@pytest.mark.packages
@pytest.mark.parametrize(
    ("variant", "package", "make"),
    [
        (
            "linformer",
            "linformer",
            lambda pkg, n, hh, dd, kk: pkg.LinformerSelfAttention(dim=hh * dd, seq_len=n, k=kk, heads=hh, dim_head=dd),
        ),
        (
            "performer",
            "performer_pytorch",
            lambda pkg, n, hh, dd, kk: pkg.SelfAttention(dim=hh * dd, heads=hh, dim_head=dd, nb_features=kk),
        ),
        (
            "nystromformer",
            "nystrom_attention",
            lambda pkg, n, hh, dd, kk: pkg.NystromAttention(
                dim=hh * dd, dim_head=dd, heads=hh, num_landmarks=kk, residual=False
            ),
        ),
    ],
)
def test_layer_parameters_equal_the_public_packages(variant: str, package: str, make) -> None:
    """The packages put a bias on the output projection only (random features and landmarks are not weights)."""
    pkg = pytest.importorskip(package)
    for n, hh, dd, kk in ((256, 4, 32, 64), (512, 2, 64, 128)):
        module = make(pkg, n, hh, dd, kk)
        theirs = sum(p.numel() for p in module.parameters())
        ours = derive(variant, "layer").params.xreplace({N: n, h: hh, d: dd, k: kk, m: kk, c: kk})
        assert ours == theirs, (n, hh, dd, kk)


def test_bias_switch_adds_or_removes_the_projection_biases(cli) -> None:
    """Llama-style GQA has no biases; --bias all adds one per output feature of W_Q, W_K, W_V, W_O."""
    none = derive("gqa", "layer").params
    assert sp.expand(none - (2 * (h * d) ** 2 + 2 * h * d * h_kv * d)) == 0
    everything = derive("gqa", "layer", bias="all").params
    assert sp.expand(everything - none - (2 * h * d + 2 * h_kv * d)) == 0
    assert sp.expand(derive("softmax", "layer").params - 4 * ((h * d) ** 2 + h * d)) == 0  # Vaswani: all
    r = cli("formula", "softmax", "--scope", "layer", "--bias", "none", "--json")
    assert r.code == 0, r.err
    assert sp.sympify(r.json()["params"], locals={"h": h, "d": d}) == 4 * (h * d) ** 2
    r = cli("formula", "softmax", "--scope", "layer", "--bias", "some")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err


# -- a public sliding-window implementation: lucidrains' local-attention, described in the op DSL -----------

LOCAL = Path(__file__).resolve().parents[1] / "docs" / "examples" / "local_attention.py"


@pytest.mark.packages
@pytest.mark.parametrize(
    ("bb", "hh", "n", "dd", "window"), [(2, 2, 512, 64, 64), (1, 4, 1024, 32, 128), (3, 1, 256, 16, 32)]
)
def test_local_attention_package_peak_and_flops_equal_the_description(cli, bb, hh, n, dd, window) -> None:
    """The installed package under the live-tensor tracer and FlopCounterMode against what attn-cost derives
    from docs/examples/local_attention.py (b·h > 1: einsum copies the look-around windows)."""
    pkg = pytest.importorskip("local_attention")
    r = cli("formula", "sliding-window-local", "--variants", str(LOCAL), "--convention", "matmul", "--json")
    assert r.code == 0, r.err
    data = r.json()
    env = {"b": b, "h": h, "N": N, "d": d, "w": w}
    at = {b: bb, h: hh, N: n, d: dd, w: window}
    peak = sp.sympify(data["peak_bytes"], locals=env).xreplace(at)
    flops = sp.sympify(data["flops"]["matmul"], locals=env).xreplace(at)
    module = pkg.LocalAttention(window_size=window, causal=True, look_backward=1, exact_windowsize=True).eval()
    q, kk, v = (torch.randn(bb * hh, n, dd) for _ in range(3))

    with torch.no_grad():
        tracer = LiveTensorTracer()  # q, k, v exist before: the package's own copies of them are counted
        with tracer:
            module(q, kk, v)
        with FlopCounterMode(display=False) as fc:
            module(q, kk, v)
    traced = tracer.peak
    assert traced == peak
    assert fc.get_total_flops() == flops == 8 * bb * hh * n * window * dd  # 2w keys per query: twice the band
