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

import json
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
from attn_cost.profilers.devicemodel.datasheet import Datasheet, get_datasheet
from attn_cost.profilers.devicemodel.device import DATASHEET, Z95, Curve, DeviceModel, Draws, KernelTime, Times
from attn_cost.profilers.devicemodel.kernels import ATTENTION, FAMILIES, KERNELS, PRODUCT, family_of
from attn_cost.profilers.devicemodel.opcalls import kernel_calls
from attn_cost.profilers.store.schema import SchemaError, check, rule

FIT_FILE = DATA / "gpumodel.json"
FIT_KIND = "attn-cost datasheet model fit"
ATTENTION_KERNELS = ("fa2", "fa1")
"""Fused attention kernels the model knows: FlashAttention-2 (PyTorch's SDPA on sm80+) and FlashAttention (1),
which published tables of 2022 ran."""
LAUNCH = "launch"
"""What bounds a kernel shorter than its launch (`GpuModel.parts`); every other kernel is bound by its family's
roofline (`kernels.FAMILIES`)."""


@dataclass(frozen=True)
class Efficiency:
    """How well kernels use a GPU's datasheet figures, and what a launch costs: the model's fitted parameters."""

    launch_s: float = field(metadata=rule(above=0))
    """Host time of one kernel launch from eager PyTorch (Python, dispatch, launch)."""
    call_s: float = field(metadata=rule(minimum=0))
    """Host time of one call of a variant beside its launches (its Python, the harness that times it)."""
    matmul: float = field(metadata=rule(above=0, maximum=1))
    """Fraction of the peak a product's full waves reach."""
    stream: float = field(metadata=rule(above=0, maximum=1))
    """Fraction of the memory bandwidth streaming kernels reach."""
    attention: float = field(metadata=rule(above=0, maximum=1))
    """Fraction of the peak FlashAttention-2's products reach, forward and backward (the published sets give
    forward+backward times only: one efficiency for both)."""
    flash_v1: float = field(metadata=rule(above=0, maximum=1))
    """The same for FlashAttention (1), where a published table ran it."""


@dataclass(frozen=True)
class FitFile:
    kind: str = field(metadata=rule(choices=(FIT_KIND,)))
    efficiency: Efficiency
    sigma: float = field(metadata=rule(minimum=0))
    """Spread (standard deviation of log(predicted / published)) of the model's times on the tables it was judged on."""
    fitted_on: list[str]
    judged_on: list[str]
    median_abs_error: float = field(metadata=rule(minimum=0))
    """Median |predicted / published - 1| of the times it was judged on."""
    created: str


@cache
def fitted() -> tuple[Efficiency, float, dict]:
    """The shipped fit: efficiencies, spread, and the file's record (what it was fitted and judged on)."""
    try:
        data = json.loads(FIT_FILE.read_text(encoding="utf-8"))
        check(data, FitFile, root=str(FIT_FILE))
    except (OSError, json.JSONDecodeError, SchemaError) as e:
        raise UserError(f"{FIT_FILE} is not a datasheet model fit ({e}): reinstall attn-cost") from None
    return Efficiency(**data["efficiency"]), float(data["sigma"]), data


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
    label: ClassVar[str] = "datasheet"
    n_max: ClassVar[int] = 1 << 20

    sheet: Datasheet
    eff: Efficiency
    sigma: float = 0.0
    tf32: bool = False
    attention_kernel: str = "fa2"
    """Which fused attention kernel prices SDPA (`ATTENTION_KERNELS`)."""

    @classmethod
    def named(cls, name: str, **options) -> GpuModel:
        eff, sigma, _ = fitted()
        return cls(get_datasheet(name), eff, sigma, **options)

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
            f"fitted on published A100 measurements; median |time error| {data['median_abs_error']:.0%} on the "
            f"published sets it was judged on, 95 % interval ×/÷ {math.exp(Z95 * self.sigma):.2f}; docs/gpumodel.md)"
        )

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

    def attention(self, f: dict, dtype: str, causal: bool, backward: bool = False) -> np.ndarray:
        """Seconds of fused attention's forward (or backward) on the device: query blocks in waves over the SMs,
        each block's products at the tensor peak and its scores' exponentials at the special-function units."""

        sheet, eff = self.sheet, self.eff
        batch, nq, d, nk = (np.asarray(f[x], dtype=float) for x in ("batch", "m", "k", "n"))
        dk = float(next((h for h in KERNEL_HEAD_DIMS if float(np.max(d)) <= h), float(np.max(d))))
        br = float((fa2_tiles(sheet.gpu, int(dk), causal) or (64, 64))[0])
        blocks = batch * _ceil(nq / br)
        share = np.where(causal, 0.5 * (1 + br / np.maximum(nk, br)), 1.0)  # a causal block sees the keys up to it
        products, passes = (5, 2) if backward else (2, 1)  # backward: five products and the scores recomputed
        flops = 2 * products * br * nk * dk * share
        exps = passes * br * nk * share
        rate = eff.flash_v1 if self.attention_kernel == "fa1" else eff.attention
        per_block = flops / (sheet.peak(dtype, self.tf32) * rate / sheet.sms) + exps / (sheet.exp_rate / sheet.sms)
        # a block's own tiles in and out (Q and O; backward also dO, dQ, dK, dV) at its SM's share of the bandwidth
        io = (2 if not backward else 5) * br * dk * DTYPES[dtype].bytes / (sheet.bandwidth * eff.stream / sheet.sms)
        compute = _ceil(blocks / sheet.sms) * (per_block + io)
        return np.maximum(compute, (3 if backward else 1) * self.streaming(f))

    def streaming(self, f: dict) -> np.ndarray:
        return np.asarray(f["bytes"], dtype=float) / (self.sheet.bandwidth * self.eff.stream)

    def kernel_seconds(self, kernel: str, f: dict, dtype: str, backward: bool = False) -> np.ndarray:
        """Device seconds of one call of a kernel (of its backward, with `backward`), not counting its launch, priced
        by its family (`kernels.FAMILIES`): a product by its tiles' waves, fused attention by FlashAttention-2's
        query blocks, every other family by its bytes at the bandwidth."""
        family = family_of(kernel)
        if family == PRODUCT:
            return self.product(f, dtype)
        if family == ATTENTION:
            return self.attention(f, dtype, KERNELS[kernel].causal, backward)
        return self.streaming(f)

    # -- a variant -----------------------------------------------------------------------------------------

    def time(self, variant: str, dims: dict, ns: np.ndarray, scope: str = "core", dtype: str = "fp32",
             mode: str = "inference", counting: Counting = DEFAULT_COUNTING) -> np.ndarray:  # fmt: skip
        """Predicted seconds of one call of `variant` at every N of `ns` (sizes but N in `dims`, keyed by symbol);
        training: forward and backward. `counting`: the graph it is built as (keys of their own length, the
        projections' biases) and the backward of its score products (autograd or recompute)."""
        return np.sum(list(self.parts(variant, dims, ns, scope, dtype, mode, counting).values()), axis=0)

    def parts(self, variant: str, dims: dict, ns: np.ndarray, scope: str = "core", dtype: str = "fp32",
              mode: str = "inference", counting: Counting = DEFAULT_COUNTING) -> dict[str, np.ndarray]:  # fmt: skip
        """`time` split by what bounds each kernel: `launch` (the call, and every kernel shorter than its launch), or
        the kernel's family (`kernels.FAMILIES`: elementwise, rowwise, product, attention, chunk)."""
        ns = np.atleast_1d(np.asarray(ns, dtype=float))
        parts = {k: np.zeros_like(ns) for k in (LAUNCH, *FAMILIES)}
        parts[LAUNCH] += self.eff.call_s * (2 if mode == "training" else 1)
        for call in self._kernel_times(variant, dims, ns, scope, dtype, mode, counting):
            bound = call.launches * self.eff.launch_s
            parts[LAUNCH] += call.repeat * np.where(call.seconds <= bound, bound, 0.0)
            parts[call.family] += call.repeat * np.where(call.seconds > bound, call.seconds, 0.0)
        return parts

    def _kernel_times(self, variant: str, dims: dict, ns: np.ndarray, scope: str, dtype: str, mode: str,
                      counting: Counting) -> list[KernelTime]:  # fmt: skip
        """Every kernel call of a variant on the device, forward then (training) its gradient, at every N."""
        out = []
        for kernel, f, repeat, backward in _ops(variant, scope, dtype, _key(dims), counting):
            family = family_of(kernel)
            feats = {k: np.broadcast_to(np.asarray(fn(ns), dtype=float), ns.shape) for k, fn in f.items()}
            reps = np.broadcast_to(np.asarray(repeat(ns), dtype=float), ns.shape)
            device = self.kernel_seconds(kernel, feats, dtype)
            out.append(KernelTime(kernel, family, reps, device))
            if mode == "training" and backward:
                factor, launches = backward
                if family == ATTENTION:
                    grad = self.kernel_seconds(kernel, feats, dtype, backward=True)
                else:
                    grad = factor * device
                out.append(KernelTime(kernel, family, reps, grad, backward=True, launches=launches))
        return out

    # -- the device interface ------------------------------------------------------------------------------

    def seconds(
        self, variant: str, dims: dict, ns: np.ndarray, setting: Setting, replicates: int | None = None
    ) -> Times:
        """Predicted seconds at `setting`, with the model's spread on the published tables it was judged on."""
        t = self.time(variant, dims, ns, setting.scope, setting.dtype, setting.mode, setting.counting)
        return Times(t, *self.interval(t))

    def kernel_times(self, variant: str, dims: dict, ns: np.ndarray, setting: Setting) -> list[KernelTime]:
        ns = np.atleast_1d(np.asarray(ns, dtype=float))
        return self._kernel_times(variant, dims, ns, setting.scope, setting.dtype, setting.mode, setting.counting)

    def draws(self, a: str, b: str, dims: dict, setting: Setting, replicates: int | None = None) -> Draws:
        """A's and B's times, and A's at the edges of the model's spread, e^(±1.96σ): the crossings of B's time
        over those are the interval."""
        s = setting

        def curve(variant: str) -> Curve:
            return lambda n: self.time(variant, dims, n, s.scope, s.dtype, s.mode, s.counting)

        fa, fb = curve(a), curve(b)
        spread = math.exp(Z95 * self.sigma)
        edges = [(lambda n, r=r: fa(n) * r, fb) for r in (spread, 1 / spread)]
        return Draws(fa, fb, edges)

    def interval(self, seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The 95 % interval of a predicted time: the model's spread on the published tables it was judged on."""
        spread = math.exp(Z95 * self.sigma)
        return seconds / spread, seconds * spread

    def with_efficiency(self, eff: Efficiency) -> GpuModel:
        return replace(self, eff=eff)

    def with_launch(self, launch_s: float) -> GpuModel:
        """The model with another host's launch cost (`predict --launch-us`)."""
        return replace(self, eff=replace(self.eff, launch_s=launch_s))


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
    for op, kernel, feats in zip(derive(variant, scope, "inference", kv, counting.bias).ops, calls.kernels,
                                 calls.features, strict=True):  # fmt: skip
        f = {k: fn for k, fn in feats.items() if k != "repeat"}
        grad = BACKWARD_FACTOR[counting.backward]
        factor = sp.sympify(sp.sympify(backward_factor(op)).xreplace({F_bwd: grad, **values}))
        grads = 2 if family_of(kernel) == PRODUCT else 1
        backward = (float(factor), grads) if not factor.free_symbols - {N} and op.kind not in ("fill",) else None
        out.append((kernel, f, feats["repeat"], backward))
    return out


def as_json(eff: Efficiency) -> dict:
    return asdict(eff)
