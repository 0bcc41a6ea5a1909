"""`--kernel NAME` on a datasheet GPU: each kernel priced by its own structure (hand arithmetic on the round GPU of
tests/test_gpumodel_hand.py), SDPA's backend chosen as PyTorch chooses it (docs/kernels.md §3), refusals in one line,
and the kernel named in tables and JSON."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from attn_cost.cli.options import KERNEL_NAMES
from attn_cost.profilers.devicemodel.datasheet.data import Peaks, get_datasheet
from attn_cost.profilers.devicemodel.datasheet.kernels import CHOICES, sdpa_pick
from attn_cost.profilers.devicemodel.datasheet.model import GpuModel
from test_gpumodel_hand import HOST, ONE, ROUND

US = 1e-6
HOPPER = replace(ROUND, arch="sm90", peak_tflops=Peaks(fp32=40, tf32=200, bf16=400, fp16=400))
"""100 SMs at 1 GHz, 400 TFLOP/s bf16 (4·10¹² an SM), 10 GB/s an SM's share of 1,000 GB/s, 16·10⁹ exponentials an SM."""
F = {"batch": 100, "m": 1024, "k": 64, "n": 1024, "bytes": 0}


def us(x) -> float:
    return float(np.asarray(x).ravel()[0]) / US


def test_the_help_names_every_declared_kernel() -> None:
    assert tuple(CHOICES) == KERNEL_NAMES


def test_flashattention_3_hides_the_softmax_under_the_products() -> None:
    """FlashAttention-3 at d = 64: 192-row query blocks, ⌈1024/192⌉ = 6 a head, 600 blocks, 6 waves. A block: two
    products of 2·192·1024·64 FLOPs (50,331,648) at half the 4·10¹² FLOP/s of an SM: 25.165824 µs; its 196,608
    exponentials (12.288 µs) run beside them, not after; Q's and O's tiles (2·192·64·2 bytes at 10 GB/s: 4.9152 µs).
    cuDNN's (SDPA's) 128-row blocks: 8 waves of 16.777216 + 8.192 (after) + 3.2768 µs."""
    half = replace(ONE, warpgroup=0.5)
    fa3 = GpuModel(HOPPER, half, host=HOST, attention_kernel="flash-attn-3")
    sdpa = GpuModel(HOPPER, half, host=HOST)
    assert us(fa3.attention(F, "bf16", causal=False)) == pytest.approx(6 * (25.165824 + 4.9152))
    assert us(sdpa.attention(F, "bf16", causal=False)) == pytest.approx(8 * (16.777216 + 8.192 + 3.2768))


def test_flashattention_3_leaves_its_unhidden_share_of_the_shorter_unhidden() -> None:
    """The same blocks with `overlap_unhidden` ½: a block's 25.165824 µs of products and half its 12.288 µs of
    exponentials (6.144 µs) before Q's and O's 4.9152 µs; at ¼ a quarter (3.072 µs)."""
    for share, unhidden in ((0.5, 6.144), (0.25, 3.072)):
        eff = replace(ONE, warpgroup=0.5, overlap_unhidden=share)
        fa3 = GpuModel(HOPPER, eff, host=HOST, attention_kernel="flash-attn-3")
        assert us(fa3.attention(F, "bf16", causal=False)) == pytest.approx(6 * (25.165824 + unhidden + 4.9152))


def test_cudnn_on_blackwell_runs_its_softmax_beside_its_products_forward() -> None:
    """cuDNN's blocks of the round Hopper on a round Blackwell (sm100: tcgen05 products, the softmax in warps of its
    own): forward, the 16.777216 µs of products and ½ of the 8.192 µs of exponentials (`overlap_unhidden` ½) before
    the 3.2768 µs of tiles, 8 waves; backward, as on Hopper, one after the other."""
    eff = replace(ONE, warpgroup=0.5, overlap_unhidden=0.5)
    hopper = GpuModel(HOPPER, eff, host=HOST, attention_kernel="sdpa-cudnn")
    blackwell = GpuModel(replace(HOPPER, arch="sm100"), eff, host=HOST, attention_kernel="sdpa-cudnn")
    assert us(hopper.attention(F, "bf16", causal=False)) == pytest.approx(8 * (16.777216 + 8.192 + 3.2768))
    assert us(blackwell.attention(F, "bf16", causal=False)) == pytest.approx(8 * (16.777216 + 4.096 + 3.2768))
    assert us(blackwell.attention(F, "bf16", causal=False, backward=True)) == pytest.approx(
        us(hopper.attention(F, "bf16", causal=False, backward=True)))


def test_the_math_backend_is_the_unfused_products_and_softmax() -> None:
    """SDPA's math backend of PyTorch 2.4 on the round GPU, F in bf16: QKᵀ (100·(1024·64·2 + 1024²)·2 = 235,929,600
    bytes: 235.9296 µs, more than its 64 waves of 2.097152 µs), the softmax read and written (100·1024²·2·2 bytes:
    419.4304 µs), PV (235,929,600 bytes again, more than its 4 waves of 33.554432 µs); causal: the mask a pass more
    (+419.4304 µs); backward twice the forward."""
    math = GpuModel(ROUND, ONE, host=HOST, attention_kernel="sdpa-math", pytorch=(2, 4))
    assert us(math.attention(F, "bf16", causal=False)) == pytest.approx(891.2896)
    assert us(math.attention(F, "bf16", causal=True)) == pytest.approx(891.2896 + 419.4304)
    assert us(math.attention(F, "bf16", causal=False, backward=True)) == pytest.approx(2 * 891.2896)


@pytest.mark.parametrize("pytorch", [None, (2, 5), (2, 13)])
def test_the_math_backend_computes_half_precision_in_fp32_from_pytorch_2_5(pytorch) -> None:
    """From PyTorch 2.5 the math backend casts bf16 inputs to fp32 and runs in fp32 (pytorch#128922): on the round
    GPU (fp32 10 TFLOP/s, 10¹¹ an SM) QKᵀ is 64 waves of 2·128·128·64 FLOPs (20.97152 µs): 1,342.17728 µs, more
    than its 100·(1024·64·2 + 1024²)·4 bytes (471.8592 µs); PV 4 waves of two 128 × 64 tiles an SM, each
    2·128·64·1024 FLOPs at 5·10¹⁰ (335.54432 µs): 1,342.17728 µs; the softmax in fp32 (100·1024²·4·2 bytes: 838.8608
    µs); Q, K, V cast up and O cast down (100·(2·1024 + 2·1024)·64·(2 + 4) bytes: 157.2864 µs). In fp32 nothing is
    cast."""
    math = GpuModel(ROUND, ONE, host=HOST, attention_kernel="sdpa-math", pytorch=pytorch)
    assert us(math.attention(F, "bf16", causal=False)) == pytest.approx(2 * 1342.17728 + 838.8608 + 157.2864)
    assert us(math.attention(F, "fp32", causal=False)) == pytest.approx(2 * 1342.17728 + 838.8608)


def test_the_fused_chunk_kernel_walks_the_chunks_with_its_state_in_registers() -> None:
    """fla's fused_chunk at b·h = 100, N = 1024, d = 64, C = 64: 64-wide K and V tiles, 100 programs (one wave), 16
    chunks in sequence; a step 2·64·64·64·2 + 4·64·64·64 = 2,097,152 FLOPs (2.097152 µs at an SM's 10¹²) and
    Q, K, V, O tiles of 64·64 bf16 (32,768 bytes; 100 programs' at 1,000 GB/s: 3.2768 µs, more than the products):
    16 · 3.2768 = 52.4288 µs; no state written."""
    fused = GpuModel(ROUND, ONE, host=HOST, chunk_kernel="fla-fused-chunk")
    f = {"batch": 100, "m": 1024, "k": 64, "n": 64}
    (forward,) = fused.chunk(f, "bf16")
    assert us(forward) == pytest.approx(52.4288)
    assert len(GpuModel(ROUND, ONE, host=HOST).chunk(f, "bf16")) == 2  # fla's chunk: chunk_fwd_h and chunk_fwd_o


@pytest.mark.parametrize(
    ("gpu", "dtype", "d", "picked"),
    [
        ("h100-sxm5-80gb", "bf16", 128, "sdpa-cudnn"),  # cuDNN first on sm90
        ("h100-sxm5-80gb", "bf16", 256, "sdpa-flash"),  # cuDNN takes d ≤ 128 here
        ("a100-sxm4-80gb", "bf16", 128, "sdpa-flash"),  # flash first before sm90
        ("a100-sxm4-80gb", "fp32", 64, "sdpa-efficient"),  # flash and cuDNN take half precision only
        ("v100-sxm2-32gb", "fp16", 64, "sdpa-efficient"),  # no flash before sm80
        ("v100-sxm2-32gb", "bf16", 64, "sdpa-math"),  # the memory-efficient kernel takes bf16 on sm80+ only
    ],
)
def test_sdpa_picks_the_backend_pytorch_picks(gpu: str, dtype: str, d: int, picked: str) -> None:
    choice, reason = sdpa_pick(get_datasheet(gpu), dtype, d)
    assert choice.name == picked and f"d = {d}" in reason


@pytest.mark.parametrize(("pytorch", "picked"), [((2, 4), "sdpa-flash"), ((2, 8), "sdpa-flash"),
                                                  ((2, 9), "sdpa-cudnn"), ((3, 0), "sdpa-cudnn")])  # fmt: skip
def test_sdpa_tries_cudnn_first_on_hopper_from_pytorch_2_9(pytorch, picked: str) -> None:
    choice, reason = sdpa_pick(get_datasheet("h100-sxm5-80gb"), "bf16", 128, pytorch)
    assert choice.name == picked and ("cuDNN first" in reason) == (picked == "sdpa-cudnn")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--device", "a100-sxm4-80gb", "--kernel", "flash-attn-3"], "does not run on"),
        (["--device", "v100-sxm2-32gb", "--kernel", "flash-attn-2"], "does not run on"),
        (["--device", "h100-sxm5-80gb", "--kernel", "flash-attn-2", "--dtype", "fp32"], "not fp32"),
        (["--device", "h100-sxm5-80gb", "--kernel", "flash-attn-2", "--d", "512"], "not d = 512"),
        (["--device", "h100-sxm5-80gb", "--kernel", "sdpa-cudnn", "--d", "200"], "not d = 200"),
        (["--device", "h100-sxm5-80gb", "--kernel", "fla-chunk"], "none of softmax-fused runs"),
        (["--device", "h100-sxm5-80gb", "--kernel", "flash"], "unknown --kernel"),
        (["--device", "cpu-amd-epyc-5155e7", "--kernel", "sdpa"], "its kernels are the ones that ran"),
        (["--kernel", "sdpa"], "--device"),
    ],
)
def test_a_kernel_that_cannot_run_is_one_line(cli, args: list[str], said: str) -> None:
    base = ["predict", "--variant", "softmax-fused", "--n", "1024"]
    r = cli("crossover", "--pair", "softmax:linear", *args) if "--device" not in args else cli(*base, *args)
    assert r.code == 2 and said in r.err and len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("release", "said"),
    [
        ("2", "as X.Y"),
        ("two.four", "as X.Y"),
        ("2.4.1.1", "as X.Y"),
        ("1.13", "came with PyTorch 2.0"),
    ],
)
def test_a_pytorch_release_that_is_not_one_is_one_line(cli, release: str, said: str) -> None:
    r = cli("predict", "--variant", "softmax-fused", "--n", "1024", "--device", "h100-sxm5-80gb", "--pytorch", release)
    assert r.code == 2 and said in r.err and len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [["crossover", "--pair", "softmax-fused:linear"], ["decode"]])
def test_pytorch_needs_a_datasheet_gpu(cli, command: list[str]) -> None:
    alone = cli(*command, "--pytorch", "2.4")
    measured = cli(*command, "--device", "cpu-amd-epyc-5155e7", "--pytorch", "2.4")
    assert alone.code == 2 and "give --device" in alone.err and len(alone.err.strip().splitlines()) == 1
    assert measured.code == 2 and "the ones that ran" in measured.err


def test_an_older_pytorch_runs_flash_on_hopper_and_its_math_backend_in_half_precision(cli) -> None:
    """PyTorch 2.4 on an H100 in bf16: SDPA picks flash, not cuDNN, and says the release; its math backend runs
    bf16 products on the tensor cores where a current one runs them in fp32 on the CUDA cores (67 against 989
    TFLOP/s dense): several times faster at N = 8192."""
    args = ["predict", "--device", "h100-sxm5-80gb", "--variant", "softmax-fused", "--n", "8192", "--d", "128",
            "--json"]  # fmt: skip
    old = cli(*args, "--pytorch", "2.4").json()["results"][0]["kernels"]["fused attention"]
    assert old["kernel"] == "sdpa-flash" and "PyTorch 2.4" in old["reason"] and "cuDNN" not in old["reason"]
    assert old["pytorch"] == "2.4"
    old_math, math = (cli(*args, "--kernel", "sdpa-math", *extra).json()["results"][0]["seconds"]
                      for extra in (["--pytorch", "2.4"], []))  # fmt: skip
    assert math > 4 * old_math


def test_the_delta_rule_has_no_fused_chunk_kernel(cli) -> None:
    r = cli("predict", "--device", "h100-sxm5-80gb", "--variant", "deltanet", "--n", "1024", "--kernel",
            "fla-fused-chunk")  # fmt: skip
    assert r.code == 2 and "no fused_chunk kernel of the delta rule" in r.err


def test_json_and_tables_name_the_kernel_and_why(cli) -> None:
    r = cli("predict", "--device", "h100-sxm5-80gb", "--variant", "softmax-fused", "--n", "4096", "--d", "128",
            "--json")  # fmt: skip
    (row,) = r.json()["results"]
    k = row["kernels"]["fused attention"]
    assert k["kernel"] == "sdpa-cudnn" and "cuDNN first on sm90" in k["reason"] and "d = 128" in k["reason"]
    asked = cli("crossover", "--device", "h100-sxm5-80gb", "--pair", "softmax-fused-causal:retention", "--d", "128",
                "--kernel", "flash-attn-3", "--json").json()["results"][0]["kernels"]  # fmt: skip
    assert asked["softmax-fused-causal"]["fused attention"]["kernel"] == "flash-attn-3"
    assert asked["retention"]["chunked linear attention"]["kernel"] == "fla-chunk"
    table = cli("predict", "--device", "h100-sxm5-80gb", "--variant", "softmax-fused", "--n", "4096", "--kernel",
                "flash-attn-2").out  # fmt: skip
    assert "FlashAttention-2 (flash-attn)" in " ".join(table.split())


def test_each_kernel_changes_the_time_it_prices(cli) -> None:
    """The kernels differ on one GPU and shape (FlashAttention-3 faster than FlashAttention-2 on Hopper at d = 128,
    the math backend slower than both): none is a relabelled default."""
    seconds = {}
    for kernel in ("flash-attn-2", "flash-attn-3", "sdpa-math", "sdpa-efficient"):
        r = cli("predict", "--device", "h100-sxm5-80gb", "--variant", "softmax-fused", "--n", "8192", "--d", "128",
                "--h", "16", "--b", "4", "--kernel", kernel, "--json")  # fmt: skip
        seconds[kernel] = r.json()["results"][0]["seconds"]
    assert seconds["flash-attn-3"] < seconds["flash-attn-2"] < seconds["sdpa-math"]
    assert len(set(seconds.values())) == 4


def test_an_interval_is_its_kernel_familys_and_a_crossings_its_pairs(monkeypatch) -> None:
    """A fused attention variant's time takes the fused family's published q95 (here 0.5: ×/÷ e^0.5), a variant of
    neither family the fit's 1.96σ (σ = 0.1: e^0.196); a crossing of fused against chunked attention the edges of
    their ratio's q95 (0.3): A's time × e^±0.3."""
    from attn_cost.costmodel.crossover import Setting
    from attn_cost.profilers.devicemodel.datasheet import model as datasheet
    from attn_cost.profilers.devicemodel.device import row_dims

    monkeypatch.setattr(datasheet, "spreads", lambda: {"fused attention": 0.5,
                                                      "chunked linear attention|fused attention": 0.3})  # fmt: skip
    gpu = GpuModel(ROUND, ONE, sigma=0.1, host=HOST)
    dims, ns, st = row_dims({"d": 64, "C": 64}), np.array([4096.0]), Setting(dtype="bf16")
    fused = gpu.seconds("softmax-fused", dims, ns, st)
    assert fused.high[0] / fused.seconds[0] == pytest.approx(np.exp(0.5))
    assert fused.seconds[0] / fused.low[0] == pytest.approx(np.exp(0.5))
    plain = gpu.seconds("softmax", dims, ns, st)
    assert plain.high[0] / plain.seconds[0] == pytest.approx(np.exp(0.196))
    draws = gpu.draws("softmax-fused", "linear-chunked-fused", dims, st)
    (upper, _), (lower, _) = draws.draws
    assert upper(ns)[0] / draws.a(ns)[0] == pytest.approx(np.exp(0.3))
    assert lower(ns)[0] / draws.a(ns)[0] == pytest.approx(np.exp(-0.3))


def test_an_mma_sync_kernel_loses_its_cycles_at_amperes_rate_where_the_tensor_cores_are_slower() -> None:
    """The round GPU's tensor cores take 1,000 FLOPs an SM a clock in bf16, under Ampere's 2,048 (as GeForce and Ada
    cards at FP32 accumulate take 512): an mma.sync kernel's loss is the cycles it spends at Ampere's rate. FA2 at
    efficiency ½, F at d = 64: a block's 33,554,432 FLOPs take 33.554432 µs at the SM's 10¹² FLOP/s, plus
    (1/½ − 1) · 33,554,432 / 2.048·10¹² = 16.384 µs lost (not 33.554432), then the exponentials (8.192 µs) and the
    tiles (3.2768 µs); 8 waves. The memory-efficient kernel's 64-row blocks (1,600: 16 waves): in bf16 at its half-
    precision efficiency ½, 16,777,216 FLOPs (16.777216 µs) + 8.192 µs lost + 65,536 exponentials (4.096 µs) + Q's
    and O's 64·64 tiles (1.6384 µs); in fp32 (three TF32 products, 30 TFLOP/s: 3·10¹¹ an SM) at efficiency ¼ its
    loss is of its own tensor time: 55.924053 µs · (1 + 3) + 4.096 + 3.2768 µs."""
    fa2 = GpuModel(ROUND, replace(ONE, attention=0.5), host=HOST, attention_kernel="flash-attn-2")
    assert us(fa2.attention(F, "bf16", causal=False)) == pytest.approx(8 * (33.554432 + 16.384 + 8.192 + 3.2768))
    eff = replace(ONE, efficient=0.25, efficient_half=0.5)
    efficient = GpuModel(ROUND, eff, host=HOST, attention_kernel="sdpa-efficient")
    assert us(efficient.attention(F, "bf16", causal=False)) == pytest.approx(16 * (16.777216 + 8.192 + 4.096 + 1.6384))
    fp32 = 16 * (16_777_216 / 3e11 / US * 4 + 4.096 + 3.2768)
    assert us(efficient.attention(F, "fp32", causal=False)) == pytest.approx(fp32)
