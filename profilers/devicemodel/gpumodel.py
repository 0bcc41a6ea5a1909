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

import numpy as np
import sympy as sp
from attn_cost.costmodel.conventions import backward_factor
from attn_cost.costmodel.counting import BACKWARD_FACTOR, DEFAULT_COUNTING, Counting, F_bwd, N_kv
from attn_cost.costmodel.crossover import DeviceColumns
from attn_cost.costmodel.derive import STORAGE_BYTES, dtype_bytes
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.iotraffic import KERNEL_HEAD_DIMS, Gpu, fa2_tiles
from attn_cost.costmodel.symbols import N
from attn_cost.costmodel.variants import derive
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.datasheet import Datasheet, get_datasheet
from attn_cost.profilers.devicemodel.device import Prediction, ceil_n, last_crossing, row_dims
from attn_cost.profilers.devicemodel.opcalls import kernel_calls
from attn_cost.profilers.store.schema import SchemaError, check, rule

FIT_FILE = DATA / "gpumodel.json"
FIT_KIND = "attn-cost datasheet model fit"
KERNELS = ("fa2", "fa1")
"""Fused attention kernels the model knows: FlashAttention-2 (PyTorch's SDPA on sm80+) and FlashAttention (1),
which published tables of 2022 ran."""
Z95 = 1.96
_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
FAMILIES = ("launch", "product", "attention", "streaming")
"""What bounds a kernel in the model (`GpuModel.parts`): its launch, or its family's roofline."""


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
class GpuModel:
    """One GPU's datasheet priced with one set of efficiencies."""

    sheet: Datasheet
    eff: Efficiency
    sigma: float = 0.0
    tf32: bool = False
    attention_kernel: str = "fa2"

    @classmethod
    def named(cls, name: str, **options) -> GpuModel:
        eff, sigma, _ = fitted()
        return cls(get_datasheet(name), eff, sigma, **options)

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
        gpu = Gpu(sheet.name, sheet.arch, int(sheet.smem_per_block_kb * 1024), int(sheet.smem_per_sm_kb * 1024))
        br = float((fa2_tiles(gpu, int(dk), causal) or (64, 64))[0])
        blocks = batch * _ceil(nq / br)
        share = np.where(causal, 0.5 * (1 + br / np.maximum(nk, br)), 1.0)  # a causal block sees the keys up to it
        products, passes = (5, 2) if backward else (2, 1)  # backward: five products and the scores recomputed
        flops = 2 * products * br * nk * dk * share
        exps = passes * br * nk * share
        rate = eff.flash_v1 if self.attention_kernel == "fa1" else eff.attention
        per_block = flops / (sheet.peak(dtype, self.tf32) * rate / sheet.sms) + exps / (sheet.exp_rate / sheet.sms)
        # a block's own tiles in and out (Q and O; backward also dO, dQ, dK, dV) at its SM's share of the bandwidth
        io = (2 if not backward else 5) * br * dk * _BYTES[dtype] / (sheet.bandwidth * eff.stream / sheet.sms)
        compute = _ceil(blocks / sheet.sms) * (per_block + io)
        return np.maximum(compute, (3 if backward else 1) * self.streaming(f))

    def streaming(self, f: dict) -> np.ndarray:
        return np.asarray(f["bytes"], dtype=float) / (self.sheet.bandwidth * self.eff.stream)

    def kernel_seconds(self, kernel: str, f: dict, dtype: str, backward: bool = False) -> np.ndarray:
        """Device seconds of one call of a kernel (of its backward, with `backward`), not counting its launch."""
        family = _family(kernel)
        if family == "product":
            return self.product(f, dtype)
        if family == "attention":
            return self.attention(f, dtype, kernel == "sdpa-causal", backward)
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
        """`time` split by what bounds each kernel: `launch` (the call, and every kernel shorter than its launch),
        `product`, `attention` (fused SDPA) and `streaming` (every other op at the bandwidth)."""
        ns = np.atleast_1d(np.asarray(ns, dtype=float))
        parts = {k: np.zeros_like(ns) for k in FAMILIES}
        parts["launch"] += self.eff.call_s * (2 if mode == "training" else 1)

        def add(kernel: str, seconds: np.ndarray, launches: int, reps: np.ndarray) -> None:
            bound = launches * self.eff.launch_s
            parts["launch"] += reps * np.where(seconds <= bound, bound, 0.0)
            parts[_family(kernel)] += reps * np.where(seconds > bound, seconds, 0.0)

        for kernel, f, repeat, backward in _ops(variant, scope, dtype, _key(dims), counting):
            feats = {k: np.broadcast_to(np.asarray(fn(ns), dtype=float), ns.shape) for k, fn in f.items()}
            reps = np.broadcast_to(np.asarray(repeat(ns), dtype=float), ns.shape)
            device = self.kernel_seconds(kernel, feats, dtype)
            add(kernel, device, 1, reps)
            if mode == "training" and backward:
                factor, launches = backward
                if kernel.startswith("sdpa"):
                    grad = self.kernel_seconds(kernel, feats, dtype, backward=True)
                else:
                    grad = factor * device
                add(kernel, grad, launches, reps)
        return parts

    def interval(self, seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The 95 % interval of a predicted time: the model's spread on the published tables it was judged on."""
        spread = math.exp(Z95 * self.sigma)
        return seconds / spread, seconds * spread

    def with_efficiency(self, eff: Efficiency) -> GpuModel:
        return replace(self, eff=eff)


def peak_bytes(
    variant: str,
    dims: dict,
    n: int,
    scope: str = "core",
    dtype: str = "fp32",
    mode: str = "inference",
    counting: Counting = DEFAULT_COUNTING,
) -> int:
    """Peak bytes of one call: the engine's peak of the op list at the dtype (in training, the larger of the
    forward walk and the backward walk, `Derived.backward_steps`), built as `counting` has it (N_kv, biases)."""

    kv = counting.n_kv is not None
    sizes = {**dims, N: n, **({N_kv: counting.n_kv} if kv else {})}
    return int(derive(variant, scope, mode, kv, counting.bias).peak(dtype).at(sizes)[0])


def fits(sheet: Datasheet, variants: list[str], dims: dict, n: int | None, scope: str, dtype: str, mode: str,
         counting: Counting = DEFAULT_COUNTING) -> bool | None:  # fmt: skip
    """Whether every variant's peak memory at N = n fits in the GPU's memory (None where n is None)."""
    if n is None:
        return None
    return all(peak_bytes(v, dims, n, scope, dtype, mode, counting) <= sheet.memory_bytes for v in variants)


def input_bytes(variant: str, dims: dict, n: int, scope: str = "core", dtype: str = "fp32") -> int:
    """Bytes of the variant's inputs, and so of their gradients: what a harness that keeps the previous
    backward's `.grad` (a benchmark loop that clears them only at its next call) holds besides one step."""

    graph = derive(variant, scope, "training").graph
    sizes = {**dims, N: n}
    return sum(int(t.storage.numel.xreplace(sizes)) * (STORAGE_BYTES[t.storage.dtype] if t.storage.dtype
               else dtype_bytes(dtype)) for t in graph.inputs)  # fmt: skip


def predict_n0(model: GpuModel, a: str, b: str, dims: dict, scope: str = "core", dtype: str = "fp32",
               mode: str = "inference", n_max: int = 1 << 20, counting: Counting = DEFAULT_COUNTING):  # fmt: skip
    """Where B's predicted time falls to A's (the last crossing up to n_max), with the interval of the model's
    spread: the crossings of B's time over A's at e^(±1.96σ)."""

    def at(ratio: float):
        def gap(n):
            ta, tb = (model.time(v, dims, n, scope, dtype, mode, counting) for v in (a, b))
            return ta * ratio - tb

        return gap

    spread = math.exp(Z95 * model.sigma)
    n0, low, high = (last_crossing(at(r), 2.0, float(n_max)) for r in (1.0, spread, 1 / spread))
    return Prediction(ceil_n(n0), ceil_n(low), ceil_n(high), 0)


def add_datasheet_columns(rows: list, name: str) -> None:
    """Give crossover rows a datasheet GPU's predicted N0 and its interval (`crossover --device a100-sxm4-80gb`),
    priced as each row counts (keys of their own length, biases, the backward of the score products), and whether
    both variants fit in the GPU's memory there."""

    model = GpuModel.named(name)
    for row in rows:
        s, dims = row.setting, row_dims(row.sizes)
        prediction = predict_n0(model, row.a, row.b, dims, s.scope, s.dtype, s.mode, counting=s.counting)
        fit = fits(model.sheet, [row.a, row.b], dims, prediction.n0, s.scope, s.dtype, s.mode, s.counting)
        row.device = DeviceColumns(name, None, prediction.n0, prediction.low, prediction.high, predicted_by="datasheet",
                                   memory_bytes=model.sheet.memory_bytes, fits_in_memory=fit)  # fmt: skip


def record_line() -> str:
    """What the fit was made on and how accurate it was, for a caption."""
    _, sigma, data = fitted()
    return (
        "N0 datasheet: predicted from the GPU's datasheet figures and each variant's op list, not measured "
        f"(efficiencies fitted on published A100 measurements; median |time error| "
        f"{data['median_abs_error']:.0%} on the published sets it was judged on, 95 % interval ×/÷ "
        f"{math.exp(Z95 * sigma):.2f}; docs/gpumodel.md)."
    )


def _family(kernel: str) -> str:
    """The kernel family that prices a kernel: products, fused attention, or streaming at the bandwidth."""
    if kernel.startswith("matmul"):
        return "product"
    return "attention" if kernel.startswith("sdpa") else "streaming"


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
        grads = 2 if kernel.startswith("matmul") else 1
        backward = (float(factor), grads) if not factor.free_symbols - {N} and op.kind not in ("fill",) else None
        out.append((kernel, f, feats["repeat"], backward))
    return out


def as_json(eff: Efficiency) -> dict:
    return asdict(eff)
