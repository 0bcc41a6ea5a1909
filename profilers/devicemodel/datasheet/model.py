"""The datasheet model: a variant's time on a GPU one does not own, from the GPU's datasheet and the op list the
engine emits (the kernel calls the op model prices, `opcalls.kernel_calls`: one op list, two ways to price it).

Each op is one kernel:
- a product by its tiles and the waves they make over the SMs (a partly empty last wave costs a full one), each
  wave bounded by the roofline: tile FLOPs at the tensor peak (fp32: the CUDA-core peak unless TF32 is on, as in
  PyTorch), the op's bytes at the memory bandwidth;
- fused attention (SDPA) by FlashAttention-2's own tiles (`iotraffic.fa2_tiles`, those `attn-cost io` uses):
  query blocks in waves over the SMs, each block's products at the tensor peak and its scores' exponentials on
  the special-function units (what holds FlashAttention below the tensor peak at small head dims);
- every other op at the memory bandwidth;
- every launch a fixed cost seen from Python, paid per op and per loop step (`repeat`): an op whose kernel is
  shorter than its launch costs the launch (eager PyTorch launches ahead of the GPU).
In training each op adds its backward: the engine's backward factor (`conventions.backward_factor`) times its
forward kernel, one launch per gradient.

The efficiencies (a fraction of peak per kernel family: products, streaming, fused attention forward and
backward, FlashAttention-1's forward where a published table ran it; a launch cost) are fitted with scipy on
published A100 measurements by `benchmarks/gpu_published.py` and stored with where they came from in
profilers/data/gpumodel.json. They are the same on every GPU: a datasheet tells bandwidth, peaks, SMs and clocks,
not how well a kernel uses them on a new architecture, so the model's error on a GPU it was not fitted on is
part of its record. numpy and sympy only (no torch): `crossover --device h100-sxm5-80gb` uses it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from typing import ClassVar

import numpy as np
import sympy as sp
from attn_cost.costmodel.conventions import backward_factor
from attn_cost.costmodel.counting import BACKWARD_FACTOR, DEFAULT_COUNTING, Counting, F_bwd, N_kv
from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.dtypes import DTYPES, STORAGE_BYTES, dtype_bytes
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.iotraffic import KERNEL_HEAD_DIMS, fa2_tiles
from attn_cost.costmodel.symbols import N
from attn_cost.costmodel.variants import derive
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.datasheet.data import ARCHS, Datasheet, get_datasheet
from attn_cost.profilers.devicemodel.datasheet.kernels import (
    CHUNK,
    DEFAULTS,
    FUSED,
    MATH_UPCAST,
    Choice,
    PyTorch,
    choice,
    refusal,
)
from attn_cost.profilers.devicemodel.datasheet.kernels import resolve as resolve_kernel
from attn_cost.profilers.devicemodel.device import DATASHEET, Z95, Curve, DeviceModel, Draws, KernelTime, Times
from attn_cost.profilers.devicemodel.kernels import (
    ATTENTION,
    CHUNKED,
    FAMILIES,
    LINEAR_RNN,
    declared,
    family_of,
    priced_families,
    refuse_unpriced,
)
from attn_cost.profilers.devicemodel.opcalls import kernel_calls
from attn_cost.profilers.store.files import parse_json
from attn_cost.profilers.store.schema import SchemaError, check, rule

FIT_FILE = DATA / "gpumodel.json"
FIT_KIND = "attn-cost datasheet model fit"
MMA_SYNC_PER_CLOCK = ARCHS["sm80"].tensor_flops_per_clock
"""Dense FP16/BF16 FLOPs per SM per clock of the warp-level tensor instructions (mma.sync) that FlashAttention-2
and FlashAttention (1) are written with: Ampere's rate. On Hopper only the warpgroup instructions (wgmma: cuDNN's
and FlashAttention-3's kernels, which PyTorch's SDPA picks there) reach its datasheet peak (4096); a kernel written
for Ampere is held to Ampere's rate per SM and clock (FlashAttention-2 reaches about 35 % of an H100's peak where
FlashAttention-3 reaches 75 %: shared/notes/gpus.md)."""
MMA_SYNC_KERNELS = ("flash", "fa1", "efficient")
"""The fused attention backends written with mma.sync (`Choice.pricing`): held to `MMA_SYNC_PER_CLOCK`."""
LAUNCH = "launch"
"""What bounds a kernel shorter than its launch (`GpuModel.parts`); every other kernel is bound by its family's
roofline (`kernels.registry.Family.price`)."""


@dataclass(frozen=True)
class Efficiency:
    """How well kernels use a GPU's datasheet figures: one set for every GPU and every harness (what a launch costs
    is the host's, `Host`)."""

    matmul: float = field(metadata=rule(above=0, maximum=1))
    """Fraction of the peak a product's full waves reach."""
    stream: float = field(metadata=rule(above=0, maximum=1))
    """Fraction of the memory bandwidth streaming kernels reach on contiguous operands."""
    attention: float = field(metadata=rule(above=0, maximum=1))
    """Fraction of its backend's ceiling fused attention's products reach, forward and backward (the published sets
    give forward+backward times only: one efficiency for both)."""
    flash_v1: float = field(metadata=rule(above=0, maximum=1))
    """The same for FlashAttention (1), where a published table ran it."""
    warpgroup: float = field(default=1.0, metadata=rule(above=0, maximum=1))
    """The same for Hopper's warpgroup kernels (cuDNN's, FlashAttention-3's: what SDPA picks on sm90 in bf16/fp16),
    of the tensor peak: another kernel family on another architecture, its own efficiency."""
    efficient: float = field(default=1.0, metadata=rule(above=0, maximum=1))
    """The same for PyTorch's memory-efficient SDPA kernel in fp32 (three TF32 products a product and the splits
    into them), of its own ceiling (`GpuModel.sdpa_ceiling`)."""
    efficient_half: float = field(default=1.0, metadata=rule(above=0, maximum=1))
    """The same kernel in fp16/bf16 (one mma.sync a product): another instruction mix, its own efficiency."""
    strided: float = field(default=1.0, metadata=rule(above=0, maximum=1))
    """Fraction of `stream` that reductions and maps along a non-contiguous axis (softmax over the sequence axis,
    a strided view's operand) reach: their own efficiency per layout, as the CPU op model has."""
    broadcast: float = field(default=1.0, metadata=rule(above=0, maximum=1))
    """Fraction of `stream` that element-wise ops with a broadcast operand reach (row-wise outer products too)."""
    overlap_unhidden: float = field(default=0.0, metadata=rule(minimum=0, maximum=1))
    """The share of the shorter of a block's products and its softmax that a kernel overlapping the two does not
    hide under the longer (FlashAttention-3's ping-pong and intra-warpgroup pipelining, cuDNN's softmax warps on
    sm100; forward only): 0 hides it all. Fitted on the FlashAttention-3 paper's forward figure."""


@dataclass(frozen=True)
class Host:
    """How the code runs, seen from the host: the host time to issue one kernel (eager PyTorch, a Triton kernel
    through its Python launcher, a CUDA graph's node) and one call. A property of the host, the framework and the
    harness, never of the GPU."""

    name: str
    launch_s: float = field(metadata=rule(minimum=0))
    """Host time to issue one PyTorch kernel."""
    call_s: float = field(metadata=rule(minimum=0))
    """Host time of one call (one pass) beside its launches: its Python, the harness that times it, a graph's
    replay."""
    triton_s: float = field(metadata=rule(minimum=0))
    """Host time to issue one Triton kernel of a library that runs them (flash-linear-attention's chunk kernels)."""
    source: str = ""
    lead_s: float = field(default=0.0, metadata=rule(minimum=0))
    """Device time queued ahead of the timed call that the host issues beside (a harness's L2 flush: triton's
    do_bench zeroes 256 MB before each call): host time up to it is hidden."""


GRAPH_S, GRAPH_NODE_S = 15e-6, 0.6e-6
"""A CUDA graph's replay: about 15 µs a graph and under 1 µs a node (0.58 µs a node measured by a chain of no-op
kernels, ocannl issue 488; shared/notes/gpus.md): `--launch graphs`."""
TRITON_S = (263.2e-6 - 8.2e-6) / 3
"""Host time of one of flash-linear-attention's Triton kernels from eager Python: its simple_gla forward (three
Triton kernels: the gate's cumsum, chunk_fwd_h, chunk_fwd_o) took 263.2 µs eager and 8.2 µs replayed as a CUDA
graph (fla-org/flash-linear-attention pull request 1243, H100): (263.2 − 8.2) / 3 ≈ 85 µs a kernel."""
LAUNCHES = ("eager", "graphs")
"""How the code runs (`--launch`): eager PyTorch (the H200 host's measured cost, `fitted`), or CUDA graphs."""
DEVICE_ONLY = Host("device time only", 0.0, 0.0, 0.0, "no host cost: the kernels' device time alone")


@dataclass(frozen=True)
class FitFile:
    kind: str = field(metadata=rule(choices=(FIT_KIND,)))
    efficiency: Efficiency
    eager: Host
    """The default eager host: the launch and call costs the H200 run measured (`datasheet.fit.eager_host`)."""
    harnesses: dict
    """Each published table's harness, by name: its own host (`Host`), fitted with the kernels' efficiencies."""
    sigma: float = field(metadata=rule(minimum=0))
    """Spread (standard deviation of log(predicted / published)) of the model's times on the tables it was judged on."""
    fitted_on: list[str]
    judged_on: list[str]
    median_abs_error: float = field(metadata=rule(minimum=0))
    """Median |predicted / published - 1| of the times it was judged on."""
    created: str


@cache
def fitted() -> tuple[Efficiency, float, dict]:
    """The shipped fit: efficiencies, spread, and the file's record (what it was fitted and judged on, the hosts)."""
    try:
        data = parse_json(FIT_FILE.read_text(encoding="utf-8"))
        check(data, FitFile, root=str(FIT_FILE))
        for name, host in data["harnesses"].items():
            check(host, Host, root=f"{FIT_FILE}: harnesses.{name}")
    except (OSError, ValueError, SchemaError) as e:  # not JSON, a key given twice
        raise UserError(f"{FIT_FILE} is not a datasheet model fit ({e}): reinstall attn-cost") from None
    return Efficiency(**data["efficiency"]), float(data["sigma"]), data


INTERVALS_FILE = DATA / "gpumodel_intervals.json"
INTERVALS_KIND = "attn-cost datasheet intervals"
FAMILY_OF = {ATTENTION: FUSED, CHUNKED: CHUNK, LINEAR_RNN: CHUNK}
"""The kernel families whose published tables set an interval of their own (`spreads`); a variant with neither is
`OTHER`, and takes the fit's one σ."""
OTHER = "other"


@cache
def spreads() -> dict[str, float]:
    """The 95th percentile of |log(predicted / published)| on the held-out published tables, per kernel family
    (`fused attention`, `chunked linear attention`) and per pair of them measured in the same table at the same
    shapes (`A|B`, sorted: the error of a ratio of two times, which a crossover's interval needs), written by
    `python benchmarks/gpu_kernels.py --intervals` (empty where the file is absent)."""
    if not INTERVALS_FILE.exists():
        return {}
    try:
        data = parse_json(INTERVALS_FILE.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("kind") != INTERVALS_KIND:
            raise ValueError(f"not {INTERVALS_KIND!r}")
        return {str(k): float(v) for k, v in data["q95"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UserError(f"{INTERVALS_FILE} is not the datasheet model's intervals ({e}): reinstall attn-cost") from None


def host(launch: str = "eager") -> Host:
    """The host a launch setting means (`LAUNCHES`): eager, the H200 host's measured costs (a Triton kernel at
    fla's eager cost); graphs, a CUDA graph's replay of every kernel."""
    if launch == "graphs":
        return Host("graphs", GRAPH_NODE_S, GRAPH_S, GRAPH_NODE_S, "a CUDA graph: 15 µs a replay, 0.6 µs a node")
    if launch != "eager":
        raise UserError(f"--launch must be one of {', '.join(LAUNCHES)}, got {launch!r}")
    return Host(**fitted()[2]["eager"])


def harness(name: str) -> Host:
    """A published table's harness, as fitted with the efficiencies (`datasheet.fit.HARNESS`)."""
    return Host(**fitted()[2]["harnesses"][name])


def _ceil(x: np.ndarray) -> np.ndarray:
    return np.ceil(x - 1e-9)


def _tile(x: np.ndarray) -> np.ndarray:
    """A product's tile side along one output dimension: 128 for large ones, else the next power of two, >= 16."""
    small = np.maximum(16.0, 2.0 ** np.ceil(np.log2(np.maximum(x, 1.0))))
    return np.where(x >= 128, 128.0, np.minimum(small, 128.0))


@dataclass(frozen=True)
class GpuModel(DeviceModel):
    """One GPU's datasheet priced with one set of efficiencies: the device model of a GPU one does not own."""

    kind: ClassVar[str] = DATASHEET
    n_max: ClassVar[int] = 1 << 20

    sheet: Datasheet
    eff: Efficiency
    sigma: float = 0.0
    tf32: bool = False
    attention_kernel: str = "sdpa"
    """Which fused attention kernel prices it: a `--kernel` name of `kernels.CHOICES`, or the published checks'
    `fa2` (= flash-attn-2) and `fa1`, FlashAttention (1), which tables of 2022 ran."""
    chunk_kernel: str = DEFAULTS[CHUNK]
    """Which of fla's kernels prices chunked linear attention (`fla-chunk`, `fla-fused-chunk`)."""
    pytorch: PyTorch | None = None
    """The PyTorch release SDPA is priced as (None: a current one): which backend it picks, whether its math backend
    computes half-precision inputs in fp32 (`kernels.CUDNN_FIRST`, `kernels.MATH_UPCAST`)."""
    host: Host | None = None
    """How the code runs on the host (`Host`; None: eager, the default `host()`)."""

    def __post_init__(self) -> None:
        if self.host is None:
            object.__setattr__(self, "host", host("eager"))

    @classmethod
    def named(cls, name: str, **options) -> GpuModel:
        """The model of the datasheet GPU `name` names (one line for an unknown name)."""
        return cls.of(get_datasheet(name), **options)

    @classmethod
    def of(cls, sheet: Datasheet, **options) -> GpuModel:
        """The model of a datasheet row, with the shipped efficiencies (`fitted`)."""
        eff, sigma, _ = fitted()
        return cls(sheet, eff, sigma, **options)

    @property
    def name(self) -> str:
        return self.sheet.name

    @property
    def dtype(self) -> str:
        return "bf16"

    @property
    def memory_bytes(self) -> int:
        return self.sheet.memory_bytes

    @property
    def answered_by(self) -> str:
        _, _, data = fitted()
        return (
            "predicted from the GPU's datasheet figures and each variant's op list, not measured (efficiencies "
            f"fitted on published A100 measurements and the H200's device-bound points; median |time error| "
            f"{data['median_abs_error']:.0%} on the sets it was judged on; 95 % intervals from its errors on held-out "
            f"published tables per kernel family, else ×/÷ {math.exp(Z95 * self.sigma):.2f}; launches: "
            f"{self.launch.name}, {self.launch.launch_s * 1e6:.3g} µs a kernel; docs/gpumodel.md)"
        )

    @property
    def launch(self) -> Host:
        assert self.host is not None  # set by __post_init__
        return self.host

    # -- one kernel on the device -------------------------------------------------------------------------

    def product(self, f: dict, dtype: str) -> np.ndarray:
        """Seconds of a (batched) product on the device: its waves of tiles, or its bytes, whichever is longer."""
        sheet, eff = self.sheet, self.eff
        batch, m, k, n = (np.asarray(f[x], dtype=float) for x in ("batch", "m", "k", "n"))
        tm, tn = _tile(m), _tile(n)
        tiles = batch * _ceil(m / tm) * _ceil(n / tn)
        per_sm = np.where(np.minimum(tm, tn) >= 128, 1.0, np.where(np.minimum(tm, tn) >= 64, 2.0, 4.0))
        slot_rate = sheet.peak(dtype, self.tf32) * eff.matmul / (sheet.sms * per_sm)
        compute = _ceil(tiles / (sheet.sms * per_sm)) * 2 * tm * tn * k / slot_rate
        return np.maximum(compute, self.streaming(f))

    def attention_choice(self, dtype: str, d: int) -> tuple[Choice, str]:
        """The kernel that prices fused attention at head dim `d` and why (`kernels.resolve`: the one asked for, or
        the backend SDPA picks); FlashAttention (1) of the published checks priced as FlashAttention-2's tiles."""
        name = "flash-attn-2" if self.attention_kernel in ("fa2", "fa1") else self.attention_kernel
        return resolve_kernel(name, FUSED, self.sheet, dtype, d, self.pytorch)

    def sdpa_ceiling(self, dtype: str, pricing: str) -> float:
        """The FLOP/s a fused attention kernel's products can reach: the memory-efficient kernel in fp32 runs them on
        TF32 tensor cores three per product (fp32 accuracy from TF32 parts), a third of the TF32 peak; mma.sync
        kernels (FlashAttention-2 and (1), the memory-efficient kernel) are held to Ampere's rate per SM and clock
        (`MMA_SYNC_PER_CLOCK`); warpgroup kernels (FlashAttention-3, cuDNN) reach the tensor peak."""
        sheet = self.sheet
        if dtype == "fp32":
            return sheet.peak("tf32") / 3
        peak = sheet.peak(dtype, self.tf32)
        if pricing in MMA_SYNC_KERNELS:
            return min(peak, self.mma_sync_rate)
        return peak

    @property
    def mma_sync_rate(self) -> float:
        """FLOP/s of mma.sync on this GPU at Ampere's rate per SM and clock (`MMA_SYNC_PER_CLOCK`)."""
        return MMA_SYNC_PER_CLOCK * self.sheet.sms * self.sheet.clock_mhz * 1e6

    def tensor_seconds(self, flops: np.ndarray, ceiling: float, rate: float, pricing: str, dtype: str) -> np.ndarray:
        """Seconds one SM spends on a block's products: their tensor time at the kernel's ceiling, plus what the
        kernel loses around them (the efficiency's `1 / rate - 1`). A kernel written with mma.sync in half
        precision loses a number of cycles per instruction, counted at Ampere's rate (`MMA_SYNC_PER_CLOCK`), where
        its efficiency is fitted: on a GPU whose tensor cores take more cycles per instruction (GeForce and Ada
        cards at FP32 accumulate, 512 FLOPs per SM per clock) the same cycles are a smaller share of the block.
        Every other kernel (warpgroup, 3xTF32 in fp32) loses its share of its own tensor time."""
        sheet = self.sheet
        tensor = flops / (ceiling / sheet.sms)
        lost_at = self.mma_sync_rate if pricing in MMA_SYNC_KERNELS and dtype != "fp32" else ceiling
        return tensor + flops / (lost_at / sheet.sms) * (1 / rate - 1)

    def attention(self, f: dict, dtype: str, causal: bool, backward: bool = False) -> np.ndarray:
        """Seconds of fused attention's forward (or backward) on the device, priced as its kernel
        (`attention_choice`) lays it out: query blocks in waves over the SMs, each block's products at its kernel's
        ceiling (`sdpa_ceiling`) with its kernel family's efficiency (FlashAttention-2, FlashAttention (1), the
        warpgroup kernels of Hopper, the memory-efficient kernel), then its scores' exponentials at the
        special-function units — beside the products in FlashAttention-3, whose warpgroups take turns on the tensor
        cores and overlap one block's softmax with the next one's products; SDPA's math backend as its unfused
        ops (`unfused_attention`)."""

        sheet, eff = self.sheet, self.eff
        batch, nq, d, nk = (np.asarray(f[x], dtype=float) for x in ("batch", "m", "k", "n"))
        dk = float(next((h for h in KERNEL_HEAD_DIMS if float(np.max(d)) <= h), float(np.max(d))))
        kernel, _ = self.attention_choice(dtype, int(np.max(d)))
        pricing = "fa1" if self.attention_kernel == "fa1" else kernel.pricing
        if pricing == "math":
            return self.unfused_attention(f, dtype, causal, backward)
        ceiling = self.sdpa_ceiling(dtype, pricing)
        rows = fa3_rows(dk) if pricing == "fa3" else None
        tiles = fa2_tiles(sheet.gpu, int(dk), causal) if pricing in ("flash", "fa1", "cudnn") else None
        br = np.asarray(float(rows or (tiles or (EFFICIENT_BLOCK, EFFICIENT_BLOCK))[0]))
        blocks = batch * _ceil(nq / br)
        splits = np.ones_like(blocks)
        if pricing in ("flash", "cudnn", "fa3") and not backward:  # few query blocks: split-KV
            split_n = 256.0 if dk <= 64 else 128.0 if dk <= 128 else 64.0
            splits = split_kv(batch * _ceil(nq / SPLIT_KV_ROWS), _ceil(nk / split_n), sheet.sms)
            br = np.where(splits > 1, SPLIT_KV_ROWS, br)
            blocks = np.where(splits > 1, batch * _ceil(nq / SPLIT_KV_ROWS), blocks)
        share = np.where(causal, 0.5 * (1 + br / np.maximum(nk, br)), 1.0)  # a causal block sees the keys up to it
        products, passes = (5, 2) if backward else (2, 1)  # backward: five products and the scores recomputed
        flops = 2 * products * br * nk * dk * share / splits
        exps = passes * br * nk * share / splits
        blocks = blocks * splits
        # asynchronous tensor-core kernels: FlashAttention-3 (wgmma), cuDNN's on sm90 (wgmma) and sm100 (tcgen05)
        warpgroup = pricing == "fa3" or (pricing == "cudnn" and sheet.arch in ("sm90", "sm100"))
        rates = {"efficient": eff.efficient if dtype == "fp32" else eff.efficient_half, "fa1": eff.flash_v1}
        rate = eff.warpgroup if warpgroup else rates.get(pricing, eff.attention)
        product_s = self.tensor_seconds(flops, ceiling, rate, pricing, dtype)
        softmax = exps / (sheet.exp_rate / sheet.sms)
        # the exponentials after the products, not beside them, in every kernel but FlashAttention-3's and the
        # Blackwell ones': the H200's SDPA (cuDNN, a warpgroup kernel) times at d = 32, 64 and 128 fit one efficiency
        # so (overlapped: a median 45 % and 35 % off at d = 32 and 128); FlashAttention-3's ping-pong and
        # intra-warpgroup overlap hide the softmax under the products forward (its backward has no such schedule),
        # all but the share `overlap_unhidden` of the shorter of the two (fitted on the FlashAttention-3 paper's forward
        # figure); on sm100 cuDNN's forward runs its softmax in warps of their own beside one warp issuing tcgen05
        # products into tensor memory (the design of CUTLASS's examples/77_blackwell_fmha and of FlashAttention-4's
        # flash_fwd_sm100.py, built on it), with the same unhidden share
        if (pricing == "fa3" or (pricing == "cudnn" and sheet.arch == "sm100")) and not backward:
            per_block = np.maximum(product_s, softmax) + eff.overlap_unhidden * np.minimum(product_s, softmax)
        else:
            per_block = product_s + softmax
        # a block's own tiles in and out (Q and O; backward also dO, dQ, dK, dV) at its SM's share of the bandwidth
        io = (2 if not backward else 5) * br * dk * DTYPES[dtype].bytes / (sheet.bandwidth * eff.stream / sheet.sms)
        compute = _ceil(blocks / sheet.sms) * (per_block + io)
        return np.maximum(compute, (3 if backward else 1) * self.streaming(f))

    def unfused_attention(self, f: dict, dtype: str, causal: bool, backward: bool = False) -> np.ndarray:
        """Seconds of SDPA's math backend: the scores' product, the softmax over them (read and written; the causal
        mask a pass of its own), the product with V; backward twice that (four products, the softmax's gradient).
        From PyTorch 2.5 (`MATH_UPCAST`) half-precision inputs are cast to fp32 and all of it runs in fp32 (the
        products on the CUDA cores unless TF32 is on), the output cast back. Its kernels' launches are not counted
        apart (the op is one kernel call in the op list)."""
        batch, nq, d, nk = (np.asarray(f[x], dtype=float) for x in ("batch", "m", "k", "n"))
        upcast = dtype in ("fp16", "bf16") and (self.pytorch is None or self.pytorch >= MATH_UPCAST)
        runs = "fp32" if upcast else dtype
        e = DTYPES[runs].bytes
        scores = {"batch": batch, "m": nq, "k": d, "n": nk, "bytes": batch * (nq * d + nk * d + nq * nk) * e}
        output = {"batch": batch, "m": nq, "k": nk, "n": d, "bytes": batch * (nq * nk + nk * d + nq * d) * e}
        softmax = {"bytes": batch * nq * nk * e * (4 if causal else 2)}
        once = self.product(scores, runs) + self.streaming(softmax) + self.product(output, runs)
        if upcast:  # Q, K, V cast up, the output cast down: each read in one dtype, written in the other
            once = once + self.streaming({"bytes": batch * (2 * nq + 2 * nk) * d * (e + DTYPES[dtype].bytes)})
        return 2 * once if backward else once

    def chunk(self, f: dict, dtype: str, backward: bool = False) -> list[np.ndarray]:
        """Seconds of each of flash-linear-attention's chunk kernels (`chunk_kernels`: two forward, four backward; the
        gated and delta-rule layers' as the features' flags `delta`, `states` and `scores` say) on the device: its
        blocks' products in waves over the SMs, each SM at its share of the tensor peak (the state kernels' blocks walk
        the chunks in sequence: time ∝ chunks; the others run one block per chunk), or all its blocks' bytes at the
        bandwidth, whichever is longer (an SM that holds two blocks draws two shares: bytes, unlike products, do not
        wait for a wave). The states are in the activation dtype forward, in fp32 backward (fla's `states_in_fp32`).
        With `chunk_kernel` fla-fused-chunk: fla's fused_chunk kernel (`fused_chunk_kernels`)."""
        sheet, eff = self.sheet, self.eff
        batch, n, d, c = (np.asarray(f[x], dtype=float) for x in ("batch", "m", "k", "n"))
        flags = {x: bool(np.any(np.asarray(f.get(x, x == "states")))) for x in ("delta", "states", "scores")}
        resolve_kernel(self.chunk_kernel, CHUNK, sheet, dtype, int(np.max(d)))
        fused = self.chunk_kernel == "fla-fused-chunk"
        if fused and (flags["delta"] or not flags["states"]):
            raise UserError("--kernel fla-fused-chunk: flash-linear-attention has no fused_chunk kernel of the delta "
                            "rule or of Mamba-2; use fla-chunk")  # fmt: skip
        e = DTYPES[dtype].bytes
        state_bytes = 4 if backward else e
        peak_sm = sheet.peak(dtype, self.tf32) * eff.matmul / sheet.sms
        out = []
        for kernel in fused_chunk_kernels(backward) if fused else chunk_kernels(backward, **flags):
            blocks, steps, flops, tiles, states = kernel(batch, n, d, c)
            compute = _ceil(blocks / sheet.sms) * steps * flops / peak_sm
            moved = blocks * steps * (tiles * e + states * state_bytes)
            out.append(np.maximum(compute, moved / (sheet.bandwidth * eff.stream)))
        return out

    def streaming(self, f: dict, kernel: str = "") -> np.ndarray:
        """Seconds of a kernel's bytes at the bandwidth share its layout reaches: contiguous, along a
        non-contiguous axis (`-axis2` reductions and scans, strided views), or with a broadcast operand (a row-wise
        outer product: both)."""
        rate = self.sheet.bandwidth * self.eff.stream
        if kernel.split("!")[0].endswith("-axis2") or "xview" in f or "zview" in f:
            rate *= self.eff.strided
        elif "bcast" in f or kernel == "outer":  # outer: a column times a row, both operands broadcast
            rate *= self.eff.broadcast
        return np.asarray(f["bytes"], dtype=float) / rate

    def kernel_seconds(self, kernel: str, f: dict, dtype: str, backward: bool = False) -> np.ndarray:
        """Device seconds of one call of a kernel (of its backward, with `backward`), not counting its launch: the
        sum of `kernel_passes`."""
        times = self.kernel_passes(kernel, f, dtype, backward)
        return times[0] if len(times) == 1 else np.sum(times, axis=0)

    def kernel_passes(self, kernel: str, f: dict, dtype: str, backward: bool = False) -> list[np.ndarray]:
        """Device seconds of each kernel one call of a kernel runs (one, or several for a family priced as its
        kernels), priced by its family (`kernels.registry.Family.price`): a product by its tiles' waves, fused
        attention by its backend's query blocks, the chunk kernels by theirs, every other family by its bytes at
        the bandwidth share of its layout, times the passes its PyTorch code makes (`kernels.Kernel.passes`). A
        family without a price is refused in one line."""
        refuse_unpriced(kernel, kernel)
        price = family_of(kernel).price
        assert price is not None  # refused above
        return price(self, kernel, f, dtype, backward)

    # -- a variant -----------------------------------------------------------------------------------------

    def time(self, variant: str, dims: dict, ns: np.ndarray, scope: str = "core", dtype: str = "fp32",
             mode: str = "inference", counting: Counting = DEFAULT_COUNTING) -> np.ndarray:  # fmt: skip
        """Predicted seconds of one call of `variant` at every N of `ns` (sizes but N in `dims`, keyed by symbol);
        training: forward and backward. `counting`: the graph it is built as (keys of their own length, the
        projections' biases) and the backward of its score products (autograd or recompute)."""
        return np.sum(list(self.parts(variant, dims, ns, scope, dtype, mode, counting).values()), axis=0)

    def parts(self, variant: str, dims: dict, ns: np.ndarray, scope: str = "core", dtype: str = "fp32",
              mode: str = "inference", counting: Counting = DEFAULT_COUNTING) -> dict[str, np.ndarray]:  # fmt: skip
        """`time` split into the device's time per kernel family (`kernels.priced_families`: elementwise, rowwise,
        product, attention, chunk) and `launch`: the time the device waits for the host (`timeline`)."""
        ns = np.atleast_1d(np.asarray(ns, dtype=float))
        calls = self._kernel_times(variant, dims, ns, scope, dtype, mode, counting)
        passes = [[c for c in calls if not c.backward]]
        if mode == "training":
            passes.append([c for c in reversed(calls) if c.backward])
        total = timeline(passes, self.launch, ns.shape)
        families = priced_families()
        parts = {k: np.zeros_like(ns) for k in (LAUNCH, *families)}
        for c in calls:
            parts[c.family] += c.repeat * c.seconds
        parts[LAUNCH] = total - sum(parts[k] for k in families)
        return parts

    def _kernel_times(self, variant: str, dims: dict, ns: np.ndarray, scope: str, dtype: str, mode: str,
                      counting: Counting) -> list[KernelTime]:  # fmt: skip
        """Every kernel call of a variant on the device, forward then (training) its gradient, at every N; the chunk
        op as its own kernels (`chunk_kernels`)."""
        out = []
        for kernel, f, repeat, backward in _ops(variant, scope, dtype, _key(dims), counting):
            family = family_of(kernel)
            feats = {k: np.broadcast_to(np.asarray(fn(ns), dtype=float), ns.shape) for k, fn in f.items()}
            reps = np.broadcast_to(np.asarray(repeat(ns), dtype=float), ns.shape)
            if family.separate:  # its several kernels, each its own launch, and their backward kernels
                out += [KernelTime(kernel, family.name, reps, t) for t in self.kernel_passes(kernel, feats, dtype)]
                if mode == "training":
                    out += [KernelTime(kernel, family.name, reps, t, backward=True)
                            for t in self.kernel_passes(kernel, feats, dtype, True)]  # fmt: skip
                continue
            device = self.kernel_seconds(kernel, feats, dtype)
            code = declared(kernel)
            out.append(KernelTime(kernel, family.name, reps, device, launches=code.launches if code else 1))
            if mode == "training" and backward:
                factor, launches = backward
                if family.own_backward:
                    grad = self.kernel_seconds(kernel, feats, dtype, backward=True)
                else:
                    grad = factor * device
                out.append(KernelTime(kernel, family.name, reps, grad, backward=True, launches=launches))
        return out

    # -- the device interface ------------------------------------------------------------------------------

    def seconds(
        self, variant: str, dims: dict, ns: np.ndarray, setting: Setting, replicates: int | None = None
    ) -> Times:
        """Predicted seconds at `setting`, with the 95 % interval of its kernel family on the held-out published
        tables (`spread`)."""
        t = self.time(variant, dims, ns, setting.scope, setting.dtype, setting.mode, setting.counting)
        q = self.spread(self.family(variant, dims, setting))
        return Times(t, t / math.exp(q), t * math.exp(q))

    def family(self, variant: str, dims: dict, setting: Setting) -> str:
        """The kernel family whose published errors bound the variant's: fused attention where it runs it, else the
        chunk kernels where it runs them, else `OTHER`."""
        ops = _ops(variant, setting.scope, setting.dtype, _key(dims), setting.counting)
        found = {FAMILY_OF.get(family_of(kernel).name) for kernel, *_ in ops}
        return next((f for f in (FUSED, CHUNK) if f in found), OTHER)

    def spread(self, *families: str) -> float:
        """The 95 % half-width in log space of a family's time (one family) or of the ratio of two families' times
        (two): the held-out published q95 (`spreads`); the fit's 1.96σ where the tables hold none."""
        key = families[0] if len(families) == 1 else "|".join(sorted(families))
        return spreads().get(key, Z95 * self.sigma)

    def kernel_times(self, variant: str, dims: dict, ns: np.ndarray, setting: Setting) -> list[KernelTime]:
        ns = np.atleast_1d(np.asarray(ns, dtype=float))
        return self._kernel_times(variant, dims, ns, setting.scope, setting.dtype, setting.mode, setting.counting)

    def draws(self, a: str, b: str, dims: dict, setting: Setting, replicates: int | None = None) -> Draws:
        """A's and B's times, and A's at the edges of the spread of their ratio (`spread` of the two variants'
        families: the held-out published error of one time over another measured beside it), the crossings of B's
        time over those are the interval."""
        s = setting

        def curve(variant: str) -> Curve:
            return lambda n: self.time(variant, dims, n, s.scope, s.dtype, s.mode, s.counting)

        fa, fb = curve(a), curve(b)
        spread = math.exp(self.spread(self.family(a, dims, s), self.family(b, dims, s)))
        edges = [(lambda n, r=r: fa(n) * r, fb) for r in (spread, 1 / spread)]
        return Draws(fa, fb, edges)

    def with_kernel(self, name: str, dtype: str) -> GpuModel:
        """The model pricing its family with the kernel `--kernel` names: one line for an unknown name or one this
        GPU or dtype cannot run (a head dim it does not take is refused where a variant is priced)."""
        c = choice(name)
        why = refusal(c, self.sheet, dtype)
        if why is not None:
            raise UserError(f"--kernel {name}: {why}")
        if c.family == FUSED:
            return replace(self, attention_kernel=name)
        return replace(self, chunk_kernel=name)

    def with_pytorch(self, release: PyTorch) -> GpuModel:
        """The model pricing SDPA as that PyTorch release (`--pytorch`)."""
        return replace(self, pytorch=release)

    def kernels_of(self, variant: str, dims: dict, setting: Setting) -> dict[str, dict]:
        """Which kernel prices each of the variant's kernel families that a `--kernel` can choose (fused
        attention, chunked linear attention), and why: `{family: {"kernel", "title", "reason"}}`, with the
        `pytorch` release SDPA is priced as where `--pytorch` gave one (empty where it has neither family)."""
        d = int(next(v for k, v in dims.items() if str(k) == "d"))
        ops = _ops(variant, setting.scope, setting.dtype, _key(dims), setting.counting)
        found = {FAMILY_OF.get(family_of(kernel).name) for kernel, *_ in ops}
        chosen = {FUSED: lambda: self.attention_choice(setting.dtype, d),
                  CHUNK: lambda: resolve_kernel(self.chunk_kernel, CHUNK, self.sheet, setting.dtype, d)}  # fmt: skip
        out = {}
        for family in (f for f in (FUSED, CHUNK) if f in found):
            c, why = chosen[family]()
            release = {"pytorch": ".".join(map(str, self.pytorch))} if self.pytorch and family == FUSED else {}
            out[family] = {"kernel": c.name, "title": c.title, "reason": why, **release}
        return out

    def with_efficiency(self, eff: Efficiency) -> GpuModel:
        return replace(self, eff=eff)

    def with_host(self, launch: str = "eager", launch_s: float | None = None) -> GpuModel:
        """The model with the host a launch setting means (`host`), its launch cost set to one's own figure where
        given (`--launch-us`: a PyTorch kernel's; a Triton kernel's grows with it, in fla's proportion)."""
        h = host(launch)
        if launch_s is not None:
            h = replace(h, name=f"{h.name} (--launch-us)", launch_s=launch_s,
                        triton_s=h.triton_s * launch_s / h.launch_s if h.launch_s else launch_s)  # fmt: skip
        return replace(self, host=h)


def timeline(passes: list[list[KernelTime]], host: Host, shape: tuple) -> np.ndarray:
    """Seconds of one call with the host and the device on two timelines: the host issues each pass's kernels one
    after the other (the pass's own `call_s` first, then each kernel's launch cost: a Triton kernel's `triton_s`,
    any other's `launch_s`, per launch), and the device runs each kernel once it is issued and the one before it has
    run: a queue without back-pressure, device_end = max over kernels j of (issue_j + Σ_{i ≥ j} kernel_i). The call
    ends when both have. A loop's `repeat` identical kernels advance the queue in closed form. A harness's `lead_s`
    (device work queued before the call) starts the device that much behind and is not timed."""
    issued, done = np.zeros(shape), np.full(shape, host.lead_s)
    for calls in passes:
        issued = issued + host.call_s
        for c in calls:
            a = c.launches * (host.triton_s if FAMILIES[c.family].triton else host.launch_s)
            r, d = c.repeat, c.seconds
            after = np.maximum.reduce([done + r * d, issued + a + r * d, issued + r * a + d])
            done = np.where(r > 0, after, done)
            issued = issued + r * a
    return np.maximum(issued, done) - host.lead_s


EFFICIENT_BLOCK = 64
"""Query (and key) block of PyTorch's memory-efficient SDPA kernel on sm80+ (xformers' CUTLASS kernel: 64 × 64
tiles), which prices fp32 SDPA."""


def _chunk_tiles(d: np.ndarray) -> np.ndarray:
    """The K and V tile side of flash-linear-attention's chunk kernels: the head dim's next power of two, at least
    16 and at most 64 (its BK, BV: `min(max(next_power_of_2(K), 16), 64)`, the largest of chunk_fwd_h's [32, 64]
    where shared memory allows)."""
    return np.minimum(64.0, np.maximum(16.0, 2.0 ** np.ceil(np.log2(np.maximum(d, 1.0)))))


def _state(batch, n, d, c):
    """chunk_fwd_h (chunk_bwd_dh): one program per (b·h, K tile, V tile), walking the ⌈N/C⌉ chunks in sequence; a
    step's product K_cᵀV_c (Q_cᵀdO_c), BK × C × BV, its two C-row tiles read and its BK × BV state written."""
    t = _chunk_tiles(d)
    return batch * _ceil(d / t) ** 2, _ceil(n / c), 2 * c * t * t, 2 * c * t, t * t


def _output(batch, n, d, c):
    """chunk_fwd_o: one block per (chunk, b·h, V tile): Q_cS_c (C × d × BV), Q_cK_cᵀ (C × d × C, once a V tile),
    A_cV_c (C × C × BV); Q_c, K_c, V_c's tile read, O_c's written, the chunk's state slice (d × BV) read."""
    t = _chunk_tiles(d)
    flops = 2 * c * d * t + 2 * c * c * d + 2 * c * c * t
    return batch * _ceil(n / c) * _ceil(d / t), 1, flops, 2 * c * d + 2 * c * t, d * t


def _fused_chunk(batch, n, d, c):
    """fused_chunk (fla's fused_chunk_linear_attn / fused_chunk_retention forward): one program per (b·h, K tile,
    V tile) walking the chunks in sequence with the state in registers; a step computes Q_cK_cᵀ over its K tile
    (C × BK × C), that times V_c (C × C × BV), Q_cS (C × BK × BV) and the state's update K_cᵀV_c (BK × C × BV); it
    reads Q_c, K_c (C × BK) and V_c (C × BV) and writes O_c's partial sum (C × BV); no state leaves the SM."""
    t = _chunk_tiles(d)
    flops = 2 * c * c * t + 2 * c * c * t + 4 * c * t * t
    return batch * _ceil(d / t) ** 2, _ceil(n / c), flops, 2 * c * t + 2 * c * t, 0 * t


def fused_chunk_kernels(backward: bool = False) -> list:
    """fla's fused_chunk kernel of one pass: forward one kernel (`_fused_chunk`); backward two walks of the same
    layout, one forward over the chunks for dQ and one backward for dK and dV (a step of the second does the
    products of two forward steps: `_fused_chunk` twice)."""
    if not backward:
        return [_fused_chunk]

    def twice(batch, n, d, c):
        blocks, steps, flops, tiles, states = _fused_chunk(batch, n, d, c)
        return blocks, steps, 2 * flops, 2 * tiles, states

    return [_fused_chunk, twice]


def _dqk(batch, n, d, c):
    """chunk_bwd_dqkwg: one block per (chunk, b·h, K tile): dO_cV_cᵀ (C × d × C), dO_cS_cᵀ and V_cdS_cᵀ (C × d × BK
    each), dA_cK_c and dA_cᵀQ_c (C × C × BK each); dO_c, V_c, Q_c's and K_c's tiles read, dQ_c's and dK_c's
    written, the state's and its gradient's slices (d × BK each) read."""
    t = _chunk_tiles(d)
    flops = 2 * c * c * d + 4 * c * d * t + 4 * c * c * t
    return batch * _ceil(n / c) * _ceil(d / t), 1, flops, 2 * c * d + 4 * c * t, 2 * d * t


def _dv(batch, n, d, c):
    """chunk_bwd_dv: one block per (chunk, b·h, V tile): K_cQ_cᵀ again (C × d × C), K_cdS_c (C × d × BV), A_cᵀdO_c
    (C × C × BV); K_c, Q_c, dO_c's tile read, dV_c's written, the state gradient's slice (d × BV) read."""
    t = _chunk_tiles(d)
    flops = 2 * c * c * d + 2 * c * d * t + 2 * c * c * t
    return batch * _ceil(n / c) * _ceil(d / t), 1, flops, 2 * c * d + 2 * c * t, d * t


def fa3_rows(d: float) -> int:
    """Query rows of a FlashAttention-3 forward block on sm90 in fp16/bf16 (`tile_size_fwd_sm90`, docs/kernels.md §2):
    192 up to d = 96, else 128."""
    return 192 if d <= 96 else 128


SPLIT_KV_MAX = 128
"""The most pieces FlashAttention-2's forward splits the keys into (its `num_splits_heuristic`)."""
SPLIT_KV_ROWS = 64.0
"""Query rows of a block of FlashAttention-2's split-KV kernel (its keys per block: 256 at d ≤ 64, 128 at d ≤ 128,
else 64)."""


def split_kv(blocks: np.ndarray, key_blocks: np.ndarray, sms: int) -> np.ndarray:
    """How many pieces FlashAttention-2's forward splits the keys of each query block into, so that few query
    blocks (a decoding step's single query row per head) still fill the SMs: none where the blocks fill 80 % of
    them; else, of the splits up to 128, the SMs and the key blocks, the fewest whose waves are at least 85 % as
    full as the fullest (splits that leave each piece as many key blocks as fewer splits do are skipped). Each piece
    is a block of its own; their partial outputs are combined after by a small kernel, not priced (flash-attention's
    split-KV path, which PyTorch's flash backend runs; FlashAttention (1) has none)."""
    blocks, key_blocks = np.broadcast_arrays(np.asarray(blocks, dtype=float), np.asarray(key_blocks, dtype=float))
    out = np.ones_like(blocks)
    for i, (m, nb) in enumerate(zip(blocks.flat, key_blocks.flat, strict=True)):
        if m >= 0.8 * sms:
            continue
        top = int(min(SPLIT_KV_MAX, sms, nb))
        fills = {}
        for s in range(1, top + 1):
            if s > 1 and math.ceil(nb / s) == math.ceil(nb / (s - 1)):
                continue  # the same piece size as one split fewer: not a choice
            waves = m * s / sms
            fills[s] = waves / math.ceil(waves)
        best = max(fills.values())
        out.flat[i] = min(s for s, e in fills.items() if e >= 0.85 * best)
    return out


def _delta_state(batch, n, d, c):
    """The delta rule's chunk_gated_delta_rule_fwd_h (and its reverse, bwd_dhu): one program per (b·h, V tile),
    K untiled (the state held as d × BV), walking the chunks in sequence; a step's v_new = U_c − W_cS (C × d × BV)
    and S += K_cᵀv_new (d × C × BV); W_c's and K_c's rows read, U_c's tile read and v_new's written, the state's
    d × BV slice written (docs/linear-kernels.md 1.3)."""
    t = _chunk_tiles(d)
    return batch * _ceil(d / t), _ceil(n / c), 4 * c * d * t, 2 * c * d + 2 * c * t, d * t


def _scored_output(batch, n, d, c):
    """chunk_fwd_o where another kernel made the intra-chunk scores (GLA's gated Q·Kᵀ, Mamba-2's C·Bᵀ): Q_cS_c
    (C × d × BV) and A_cV_c (C × C × BV), the scores read (fp32: two elements' bytes) rather than computed."""
    t = _chunk_tiles(d)
    flops = 2 * c * d * t + 2 * c * c * t
    return batch * _ceil(n / c) * _ceil(d / t), 1, flops, c * d + 2 * c * t + 2 * c * c, d * t


def chunk_kernels(backward: bool = False, delta: bool = False, states: bool = True, scores: bool = False) -> list:
    """flash-linear-attention's chunk kernels of one pass (fla-core 0.6: ops/common/chunk_h.py, chunk_o.py, as
    ops/simple_gla/chunk.py calls them), each a function of (b·h, N, d, C) giving (blocks, sequential steps of a
    block, FLOPs of a step, activation elements and state elements a step moves): forward chunk_fwd_h, chunk_fwd_o;
    backward chunk_fwd_h again (the states recomputed, not saved), chunk_bwd_dh, chunk_bwd_dqkwg, chunk_bwd_dv.
    `delta`: the delta rule's state kernels (`_delta_state`); `states` False: no state kernel (Mamba-2's states are
    other ops); `scores`: the output kernel reads the scores (`_scored_output`). The value head dim is taken as the
    key's (d) in every kernel: a simplification where the two differ."""
    state = _delta_state if delta else _state
    walks = [state, state] if backward else [state]
    output = [_dqk, _dv] if backward else [_scored_output if scores else _output]
    return (walks if states else []) + output


def input_bytes(variant: str, dims: dict, n: int, scope: str = "core", dtype: str = "fp32") -> int:
    """Bytes of the variant's inputs, and so of their gradients: what a harness that keeps the previous
    backward's `.grad` (a benchmark loop that clears them only at its next call) holds besides one step."""

    graph = derive(variant, scope, "training").graph
    sizes = {**dims, N: n}
    return sum(int(t.storage.numel.xreplace(sizes)) * (STORAGE_BYTES[t.storage.dtype] if t.storage.dtype
               else dtype_bytes(dtype)) for t in graph.inputs)  # fmt: skip


def _key(dims: dict) -> tuple:

    return tuple(sorted(((s, int(v)) for s, v in dims.items() if s != N), key=lambda kv: kv[0].name))


@cache
def _ops(variant: str, scope: str, dtype: str, dims_key: tuple, counting: Counting = DEFAULT_COUNTING) -> list[tuple]:
    """Per op: kernel, features (functions of N), repeat (a function of N) and, where it has a backward, its
    factor (backward device time per forward, the score products' as `counting.backward` has it) and how many
    kernels it launches."""

    calls = kernel_calls(variant, scope, dtype, dict(dims_key), counting)
    values = {**dict(dims_key), **({N_kv: counting.n_kv} if counting.n_kv is not None else {})}
    kv = counting.n_kv is not None
    out = []
    derived = derive(
        variant, scope, "inference", kv, counting.bias, feature_map=counting.feature_map, normalize=counting.normalize
    )  # the op list `kernel_calls` priced
    for op, kernel, feats in zip(derived.ops, calls.kernels, calls.features, strict=True):
        f = {k: fn for k, fn in feats.items() if k != "repeat"}
        grad = BACKWARD_FACTOR[counting.backward]
        factor = sp.sympify(sp.sympify(backward_factor(op)).xreplace({F_bwd: grad, **values}))
        grads = family_of(kernel).grads
        backward = (float(factor), grads) if not factor.free_symbols - {N} and op.kind not in ("fill",) else None
        out.append((kernel, f, feats["repeat"], backward))
    return out


def as_json(eff: Efficiency) -> dict:
    return asdict(eff)
