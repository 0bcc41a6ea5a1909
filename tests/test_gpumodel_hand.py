"""The datasheet model against hand-derived expectations on a GPU of round numbers: 100 SMs, 100 TFLOP/s bf16
(1 TFLOP/s an SM), 1,000 GB/s (10 GB/s an SM's share), 16 exponentials an SM a clock at 1 GHz (16·10⁹ a second an
SM), every efficiency 1. Each expected value is written from the kernel's tiles and waves by hand, never by the
function under test; a change to the backward's five products, the causal share, a tile or the queue fails here."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from attn_cost.profilers.devicemodel.datasheet.data import Datasheet, Peaks
from attn_cost.profilers.devicemodel.datasheet.model import Efficiency, GpuModel, Host, host, timeline
from attn_cost.profilers.devicemodel.device import KernelTime, row_dims

ROUND = Datasheet(
    "round-gpu", "Round GPU", "nvidia", "sm80", Peaks(fp32=10, tf32=90, bf16=100, fp16=100), bandwidth_gbs=1000,
    memory_gb=80, l2_mb=40, sms=100, smem_per_sm_kb=164, smem_per_block_kb=163, clock_mhz=1000, source="round",
)  # fmt: skip
ONE = Efficiency(matmul=1, stream=1, attention=1, flash_v1=1, efficient=1, strided=1, broadcast=1)
HOST = Host("test", launch_s=10e-6, call_s=0.0, triton_s=50e-6)
US = 1e-6


@pytest.fixture
def gpu() -> GpuModel:
    return GpuModel(ROUND, ONE, host=HOST)


def us(x) -> float:
    return float(np.asarray(x).ravel()[0]) / US


# -- products: tiles and waves -----------------------------------------------------------------------------------


def test_a_product_is_its_tiles_in_waves(gpu) -> None:
    """256 × 128 × 256: four 128 × 128 tiles, one wave; each tile 2·128·128·128 = 4,194,304 FLOPs at an SM's
    10¹² FLOP/s = 4.194304 µs. 101 of them: 404 tiles on 100 SMs, five waves."""
    f = {"batch": 1, "m": 256, "k": 128, "n": 256, "bytes": 0}
    assert us(gpu.product(f, "bf16")) == pytest.approx(4.194304)
    assert us(gpu.product({**f, "batch": 101}, "bf16")) == pytest.approx(5 * 4.194304)


def test_small_tiles_share_an_sm(gpu) -> None:
    """32 × 32 × 32 products: 32-wide tiles, four to an SM (400 slots, a quarter of an SM's rate each: 2.5·10¹¹);
    1,000 of them make ⌈1000/400⌉ = 3 waves of 2·32·32·32 = 65,536 FLOPs, 0.262144 µs each."""
    f = {"batch": 1000, "m": 32, "k": 32, "n": 32, "bytes": 0}
    assert us(gpu.product(f, "bf16")) == pytest.approx(3 * 0.262144)


# -- fused attention: FlashAttention-2's blocks ------------------------------------------------------------------

F = {"batch": 100, "m": 1024, "k": 64, "n": 1024, "bytes": 0}
"""b·h = 100 heads of N = 1,024, d = 64: FlashAttention-2's 128-row query blocks on sm80 at d = 64, 8 a head: 800
blocks, 8 waves."""


def test_fa2_forward_is_two_products_and_the_exponentials_per_block(gpu) -> None:
    """A block: 2 products of 2·128·1024·64 FLOPs (33,554,432 at 10¹² FLOP/s: 33.554432 µs), 128·1024 exponentials
    (at 1.6·10¹⁰ a second: 8.192 µs), Q's and O's tiles (2·128·64·2 bytes at 10¹⁰ B/s: 3.2768 µs)."""
    assert us(gpu.attention(F, "bf16", causal=False)) == pytest.approx(8 * (33.554432 + 8.192 + 3.2768))


def test_fa2_backward_is_five_products_and_the_scores_twice(gpu) -> None:
    """Five products (83.88608 µs a block), the exponentials recomputed and their gradient (16.384 µs), five tiles
    in and out (Q, O, dO, dQ, dK/dV: 8.192 µs)."""
    assert us(gpu.attention(F, "bf16", causal=False, backward=True)) == pytest.approx(8 * (83.88608 + 16.384 + 8.192))


def test_split_kv_fills_the_sms_with_the_fewest_pieces_near_the_fullest_waves() -> None:
    """FlashAttention-2's split heuristic by hand. 8 query blocks, 512 key blocks, 100 SMs: the fullest waves are
    whole (25 splits: 200 blocks, 2 waves); the fewest splits within 85 % of that are 11 (88 of 100 SMs: 0.88; 10
    make 0.80). 6 blocks, 1,000 key blocks: whole waves at 50 splits, and 15 the fewest within 85 % (0.90; 14 make
    0.84). 80 blocks on 100 SMs fill 80 %: no split.
    3 key blocks cap it at 3 pieces (3 blocks: 9 % of the SMs, the fullest 3 splits)."""
    from attn_cost.profilers.devicemodel.datasheet.model import split_kv

    assert split_kv(np.array([8.0]), np.array([512.0]), 100)[0] == 11
    assert split_kv(np.array([6.0]), np.array([1000.0]), 100)[0] == 15
    assert split_kv(np.array([80.0]), np.array([512.0]), 100)[0] == 1
    assert split_kv(np.array([3.0]), np.array([3.0]), 100)[0] == 3


def test_split_kv_skips_a_split_that_leaves_its_pieces_as_long_as_one_split_fewer() -> None:
    """flash-attention's num_splits_heuristic by hand at 25 query blocks, 5 key blocks, 100 SMs. Splits 1 to
    min(128, 100, 5) = 5 give pieces of ⌈5/s⌉ = 5, 3, 2, 2, 1 key blocks: 4 splits leave pieces of 2 as 3 do, so 4 is
    no choice. The others' waves: 25·s/100 = 0.25, 0.5, 0.75 (one wave each, that full) and 1.25 (two waves, 0.625
    full). The fullest is 0.75; 85 % of it is 0.6375, first reached at 3 splits. Were 4 a choice, its one whole
    wave (1.0) would be the fullest and the answer 4 (85 %: 0.85, reached first at 4)."""
    from attn_cost.profilers.devicemodel.datasheet.model import split_kv

    assert split_kv(np.array([25.0]), np.array([5.0]), 100)[0] == 3


def test_a_decoding_step_runs_split_kv_blocks_of_64_rows(gpu) -> None:
    """One query row a head, 8 heads, 65,536 keys, d = 64: 8 blocks of 64 rows, keys in 256-row blocks (256 of
    them), 11 pieces of 65,536/11 keys each (88 blocks, one wave on 100 SMs). A piece: 2 products of
    2·64·(65,536/11)·64 FLOPs (97.6128931 µs at 10¹² FLOP/s), 64·65,536/11 exponentials (23.8312727 µs at 1.6·10¹⁰
    a second), Q's and O's 64-row tiles (2·64·64·2 bytes at 10¹⁰ B/s: 1.6384 µs). One block a head over every key
    (no split) would take 2·2·128·65,536·64 FLOPs alone: 2,147 µs."""
    f = {"batch": 8, "m": 1, "k": 64, "n": 65536, "bytes": 0}
    assert us(gpu.attention(f, "bf16", causal=False)) == pytest.approx(97.6128931 + 23.8312727 + 1.6384)


def test_a_causal_block_sees_the_keys_up_to_it(gpu) -> None:
    """Causal, the same blocks: a block sees on average half the keys plus half its own tile: (1 + 128/1024)/2 =
    0.5625 of the products and exponentials; its tiles move whole."""
    fwd = 8 * (0.5625 * (33.554432 + 8.192) + 3.2768)
    assert us(gpu.attention(F, "bf16", causal=True)) == pytest.approx(fwd)
    bwd = 8 * (0.5625 * (83.88608 + 16.384) + 8.192)
    assert us(gpu.attention(F, "bf16", causal=True, backward=True)) == pytest.approx(bwd)


# -- each backend at its own ceiling -----------------------------------------------------------------------------


def test_fp32_attention_runs_on_tf32_tensor_cores_three_per_product(gpu) -> None:
    """fp32: the memory-efficient kernel, its products at a third of the TF32 peak (90/3 = 30 TFLOP/s: 3·10¹¹ an
    SM), its own 64-row blocks (1,600 of them: 16 waves): 2 products of 2·64·1024·64 = 8,388,608 FLOPs (55.924053
    µs), 64·1024 exponentials (4.096 µs), Q's and O's tiles in fp32 (2·64·64·4 bytes: 3.2768 µs)."""
    assert gpu.sdpa_ceiling("fp32", "efficient") == pytest.approx(30e12)
    assert us(gpu.attention(F, "fp32", causal=False)) == pytest.approx(16 * (16_777_216 / 3e11 / US + 4.096 + 3.2768))


def test_an_ampere_kernel_on_hopper_is_held_to_amperes_rate() -> None:
    """A Hopper GPU of 100 SMs at 1 GHz with a 400 TFLOP/s bf16 peak: cuDNN (SDPA) reaches it, at the warpgroup
    kernels' own efficiency (here a half); FlashAttention-2's mma.sync 2,048 FLOPs an SM a clock: 204.8 TFLOP/s."""
    hopper = replace(ROUND, arch="sm90", peak_tflops=Peaks(fp32=40, tf32=200, bf16=400, fp16=400))
    half = replace(ONE, warpgroup=0.5)
    sdpa, fa2 = GpuModel(hopper, half, host=HOST), GpuModel(hopper, half, host=HOST, attention_kernel="fa2")
    assert sdpa.sdpa_ceiling("bf16", "cudnn") == pytest.approx(400e12)
    assert fa2.sdpa_ceiling("bf16", "flash") == pytest.approx(204.8e12)
    from attn_cost.costmodel.iotraffic import fa2_tiles

    assert fa2_tiles(hopper.gpu, 64, False)[0] == 128
    exps, io = 8.192, 3.2768  # an SM: 4·10¹² FLOP/s under SDPA at half of it
    assert us(sdpa.attention(F, "bf16", causal=False)) == pytest.approx(8 * (33_554_432 / 2e12 / US + exps + io))
    assert us(fa2.attention(F, "bf16", causal=False)) == pytest.approx(8 * (33_554_432 / 2.048e12 / US + exps + io))


def test_flashattention_1_is_held_to_amperes_rate_at_its_own_efficiency_and_never_splits_the_keys() -> None:
    """FlashAttention (1) on the Hopper GPU of 100 SMs at 1 GHz (400 TFLOP/s bf16 peak) is written with mma.sync:
    2,048 FLOPs an SM a clock, 204.8 TFLOP/s, at its own efficiency (here a half: 1.024·10¹² FLOP/s an SM). F's 800
    blocks: 8 waves of 2 products of 33,554,432 FLOPs (32.768 µs), the exponentials (8.192 µs) and Q's and O's
    tiles (3.2768 µs). A decoding step (one query row a head, 8 heads, 65,536 keys, d = 64) is 8 blocks of 128 rows
    over every key, in one wave: FlashAttention (1) has no split-KV. 2·2·128·65,536·64 FLOPs (2,097.152 µs),
    128·65,536 exponentials (524.288 µs), the tiles (3.2768 µs)."""
    hopper = replace(ROUND, arch="sm90", peak_tflops=Peaks(fp32=40, tf32=200, bf16=400, fp16=400))
    fa1 = GpuModel(hopper, replace(ONE, flash_v1=0.5), host=HOST, attention_kernel="fa1")
    assert fa1.sdpa_ceiling("bf16", "fa1") == pytest.approx(204.8e12)
    assert us(fa1.attention(F, "bf16", causal=False)) == pytest.approx(8 * (32.768 + 8.192 + 3.2768))
    decode = {"batch": 8, "m": 1, "k": 64, "n": 65536, "bytes": 0}
    assert us(fa1.attention(decode, "bf16", causal=False)) == pytest.approx(2097.152 + 524.288 + 3.2768)


def test_streams_run_at_the_share_their_layout_reaches() -> None:
    """10⁶ bytes at 10¹² B/s: 1 µs contiguous; along a strided axis at half that rate, with a broadcast operand (or
    a row-wise outer product) at a quarter."""
    model = GpuModel(ROUND, replace(ONE, strided=0.5, broadcast=0.25), host=HOST)
    moved = {"bytes": 1e6}
    assert us(model.kernel_seconds("exp!", moved, "bf16")) == pytest.approx(1.0)
    assert us(model.kernel_seconds("softmax-axis2", moved, "bf16")) == pytest.approx(2.0)
    assert us(model.kernel_seconds("div", {**moved, "bcast": 1}, "bf16")) == pytest.approx(4.0)
    assert us(model.kernel_seconds("outer", moved, "bf16")) == pytest.approx(4.0)


def test_an_elementwise_chain_moves_its_tensor_once_a_kernel_and_launches_each() -> None:
    """poly2 as PyTorch runs it, (x·x)·0.5 + x + 1: four kernels reading and writing the whole tensor, 9 passes
    where the engine's op reads once and writes once: 4.5 µs for the op's 10⁶ bytes, and four launches."""
    from attn_cost.costmodel.crossover import Setting

    model = GpuModel(ROUND, ONE, host=HOST)
    assert us(model.kernel_seconds("poly2", {"bytes": 1e6}, "bf16")) == pytest.approx(4.5)
    calls = model.kernel_times("taylorshift-direct", row_dims({"d": 16}), np.array([64.0]), Setting(dtype="bf16"))
    assert [c.launches for c in calls if c.kernel == "poly2"] == [4]


# -- flash-linear-attention's chunk kernels ----------------------------------------------------------------------

CHUNK = {"batch": 100, "m": 1024, "k": 64, "n": 64}
"""b·h = 100, N = 1,024, d = 64, C = 64: 16 chunks, 64-wide K and V tiles (one of each)."""


def test_the_chunk_kernels_forward(gpu) -> None:
    """chunk_fwd_h: 100 programs (one wave) walking 16 chunks; a step moves K's and V's 64 × 64 tiles and writes
    the 64 × 64 state (24,576 bf16 bytes): 1,600 steps' 39,321,600 bytes at 10¹² B/s = 39.3216 µs, above its
    products (16 steps of 2·64·64·64 FLOPs: 8.388608 µs). chunk_fwd_o: 1,600 blocks, each Q, K, V, O tiles and the
    state slice (40,960 bytes): 65.536 µs, above its three products (16 waves of 1,572,864 FLOPs: 25.165824 µs)."""
    fwd_h, fwd_o = gpu.chunk(CHUNK, "bf16")
    assert us(fwd_h) == pytest.approx(39.3216)
    assert us(fwd_o) == pytest.approx(65.536)


def test_the_chunk_kernels_backward_recompute_the_states_in_fp32(gpu) -> None:
    """Backward: chunk_fwd_h again and chunk_bwd_dh (the state in fp32: 32,768 bytes a step: 52.4288 µs each),
    chunk_bwd_dqkwg (dO, V, Q, K tiles in, dQ, dK out, the state and its gradient in fp32: 81,920 bytes a block:
    131.072 µs), chunk_bwd_dv (K, Q, dO in, dV out, the gradient's slice in fp32: 49,152 bytes: 78.6432 µs)."""
    assert [us(t) for t in gpu.chunk(CHUNK, "bf16", backward=True)] == pytest.approx([52.4288, 52.4288, 131.072,
                                                                                       78.6432])  # fmt: skip


def test_the_state_kernel_walks_its_chunks_in_sequence_and_its_programs_in_waves() -> None:
    """With bytes free (a bandwidth of 10⁶ GB/s), chunk_fwd_h is its products: 16 steps of 0.524288 µs; twice the
    chunks, twice the time; 101 programs on 100 SMs, two waves. chunk_fwd_o's blocks are parallel: twice the chunks
    is twice the blocks (32 waves of 1.572864 µs)."""
    model = GpuModel(replace(ROUND, bandwidth_gbs=1e6), ONE, host=HOST)
    assert us(model.chunk(CHUNK, "bf16")[0]) == pytest.approx(16 * 0.524288, rel=1e-3)
    assert us(model.chunk({**CHUNK, "m": 2048}, "bf16")[0]) == pytest.approx(32 * 0.524288, rel=1e-3)
    assert us(model.chunk({**CHUNK, "batch": 101}, "bf16")[0]) == pytest.approx(2 * 16 * 0.524288, rel=1e-3)
    assert us(model.chunk({**CHUNK, "m": 2048}, "bf16")[1]) == pytest.approx(32 * 1.572864, rel=1e-3)


def test_the_delta_rules_state_kernel_holds_all_of_k_and_makes_v_new() -> None:
    """chunk_gated_delta_rule_fwd_h (forward) with the bytes free: 100 programs (K untiled, one 64-wide V tile each,
    one wave) walking 16 chunks, a step's v_new = U − W·S and S += Kᵀ·v_new, 4·64·64·64 = 1,048,576 FLOPs at an SM's
    10¹² FLOP/s: 16 × 1.048576 µs; with the bytes: a step moves W's and K's 64 × 64 rows, U's and v_new's tiles and
    writes the 64 × 64 state (20,480 bf16 elements, 40,960 bytes): 100 · 16 · 40,960 B at 10¹² B/s = 65.536 µs."""
    fast = GpuModel(replace(ROUND, bandwidth_gbs=1e6), ONE, host=HOST)
    assert us(fast.chunk({**CHUNK, "delta": 1}, "bf16")[0]) == pytest.approx(16 * 1.048576, rel=1e-3)
    assert us(GpuModel(ROUND, ONE, host=HOST).chunk({**CHUNK, "delta": 1}, "bf16")[0]) == pytest.approx(65.536)


def test_an_output_kernel_that_reads_its_scores_and_a_layer_without_a_state_kernel(gpu) -> None:
    """GLA's and Mamba-2's chunk_fwd_o read the intra-chunk scores another kernel made (fp32, C × C) instead of
    computing Q·Kᵀ: 1,600 blocks each move Q's rows, V's and O's tiles, the 64 × 64 fp32 scores (20,480 bf16
    elements' bytes) and the state's slice (4,096): 49,152 bytes, 1,600 · 49,152 B = 78.6432 µs, above its two
    products (16 waves of 1,048,576 FLOPs: 16.777216 µs). Mamba-2's states are other ops: no state kernel at all."""
    (out,) = gpu.chunk({**CHUNK, "scores": 1, "states": 0}, "bf16")
    assert us(out) == pytest.approx(78.6432)


def test_a_per_chunk_product_is_a_batched_product_of_its_chunks(gpu) -> None:
    """DeltaNet's βKKᵀ at b·h = 100, N = 1,024, d = 64, C = 64 is one 64 × 64 × 64 product per chunk and head:
    1,600 of them, priced as the batched product of those features (fla's grid (chunks, b·h))."""
    from attn_cost.costmodel.symbols import BY_NAME
    from attn_cost.costmodel.variants import derive
    from attn_cost.profilers.devicemodel.kernels import FAMILIES, kernel_of

    at = {BY_NAME["N"]: 1024, BY_NAME["d"]: 64, BY_NAME["h"]: 100, BY_NAME["b"]: 1, BY_NAME["C"]: 64}
    op = next(o for o in derive("deltanet", "core").ops if o.kind == "chunk_matmul")
    f = {k: int(v.xreplace(at)) for k, v in FAMILIES["chunk-product"].features(op).items()}
    assert f == {"batch": 1600, "m": 64, "k": 64, "n": 64}
    assert kernel_of(op) == "chunk_matmul"
    f["bytes"] = 0
    assert us(gpu.kernel_seconds("chunk_matmul", f, "bf16")) == pytest.approx(us(gpu.product(f, "bf16")))


# -- host and device on two timelines ----------------------------------------------------------------------------


def _kernels(*micros: float, family: str = "elementwise", repeat: float = 1.0) -> list[KernelTime]:
    one = np.ones(1)
    return [KernelTime("exp!", family, one * repeat, one * m * US) for m in micros]


def test_short_kernels_wait_for_the_host() -> None:
    """Three 1 µs kernels issued every 10 µs: the last is issued at 30 µs and ends at 31 µs."""
    assert us(timeline([_kernels(1, 1, 1)], HOST, (1,))) == pytest.approx(31.0)


def test_a_long_kernel_hides_the_launches_behind_it() -> None:
    """100 µs, then three 1 µs kernels: issued at 10, 20, 30, 40 µs; the device runs 10–110 and then the three back
    to back: 113 µs (a per-kernel max of launch and kernel would say 100 + 3·10 = 130)."""
    assert us(timeline([_kernels(100, 1, 1, 1)], HOST, (1,))) == pytest.approx(113.0)


def test_a_loop_advances_the_queue_like_its_steps_one_by_one() -> None:
    """Five 1 µs steps of 10 µs launches: 51 µs, as five kernels listed one by one; 20 µs steps: 10 + 5·20 = 110."""
    assert us(timeline([_kernels(1, repeat=5)], HOST, (1,))) == pytest.approx(51.0)
    assert us(timeline([_kernels(1, 1, 1, 1, 1)], HOST, (1,))) == pytest.approx(51.0)
    assert us(timeline([_kernels(20, repeat=5)], HOST, (1,))) == pytest.approx(110.0)


def test_a_call_a_triton_kernel_a_graph_and_a_harness_lead() -> None:
    """A call of 5 µs before each pass; a chunk kernel issued at a Triton launch's 50 µs; a CUDA graph: 15 µs a
    replay and 0.6 µs a node (three 1 µs kernels: issued at 15.6, 16.2, 16.8 µs, done at 18.6); a 100 µs flush
    queued ahead hides the host: three 1 µs kernels issued by 30 µs run after it, 3 µs timed."""
    called = replace(HOST, call_s=5e-6)
    assert us(timeline([_kernels(1), _kernels(1)], called, (1,))) == pytest.approx(5 + 10 + 5 + 10 + 1)
    assert us(timeline([_kernels(1, family="chunk")], HOST, (1,))) == pytest.approx(51.0)
    assert us(timeline([_kernels(1, 1, 1)], host("graphs"), (1,))) == pytest.approx(18.6)
    assert us(timeline([_kernels(1, 1, 1)], replace(HOST, lead_s=100e-6), (1,))) == pytest.approx(3.0)


def test_a_variant_is_its_kernels_on_the_two_timelines(gpu) -> None:
    """softmax-fused at b·h = 100, N = 1,024, d = 64 (bf16): one SDPA kernel issued at 10 µs, its forward above
    (360.185856 µs); in training the backward's kernel is issued at 20 µs and runs after the forward (867.69664)."""
    dims, ns = row_dims({"d": 64, "h": 1, "b": 100}), np.array([1024.0])
    fwd, bwd = 8 * (33.554432 + 8.192 + 3.2768), 8 * (83.88608 + 16.384 + 8.192)
    assert us(gpu.time("softmax-fused", dims, ns, dtype="bf16")) == pytest.approx(10 + fwd)
    assert us(gpu.time("softmax-fused", dims, ns, dtype="bf16", mode="training")) == pytest.approx(10 + fwd + bwd)
    parts = gpu.parts("softmax-fused", dims, ns, dtype="bf16")
    assert us(parts["attention"]) == pytest.approx(fwd) and us(parts["launch"]) == pytest.approx(10.0)
