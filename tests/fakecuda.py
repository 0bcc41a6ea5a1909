"""A fake CUDA device for rehearsing the GPU path without a GPU: a simulated H100 whose kernels take modelled times.

`SimGPU` keeps two clocks, the host's and the device's: each kernel launch costs the host LAUNCH_S and queues
GPU work of max(KERNEL_MIN_S, flops / FLOPS + bytes / BANDWIDTH) seconds; CUDA events stamp the device clock
when the work queued before them is done, `synchronize` makes the host wait for the device. Its allocator
counts live bytes (exact requested sizes, and blocks rounded up to 2 MiB as a caching allocator's
history would) and raises `torch.cuda.OutOfMemoryError` above a cap; a buffer is freed when its last Python
reference goes, so tensors kept alive by a traceback stay counted, as on a real GPU.

The model of each variant (kernels, FLOPs, bytes, peak bytes) is written here, from the variants' definitions,
independently of the engine: the tests compare what the campaign measures with the crossovers of *this*
model, found by brute force over N (`sim_n0`, `sim_n1`).

`install(monkeypatch, sim)` points torch.cuda's queries, the campaign's clock and the case builder at the
simulation. Tensors are never made: a case's inputs are buffers of the simulated allocator.
"""

from __future__ import annotations

import time
import types
from dataclasses import dataclass

import torch

LAUNCH_S = 6e-6
KERNEL_MIN_S = 2.5e-6
BANDWIDTH = 2.8e12
FLOPS = {"fp32": 50e12, "bf16": 600e12}
BYTES = {"fp32": 4, "bf16": 2}
H100_L2 = 50 << 20
CHUNK = 64
"""linear-chunked's chunk length (the default `--chunk`)."""


@dataclass(frozen=True)
class Model:
    """One call of a variant on the simulated GPU."""

    kernels: int
    flops: float
    bytes: float
    peak: int
    """Requested bytes above the baseline at the call's peak, its inputs included."""


def model(variant: str, N: int, d: int, b: int, h: int, dtype: str) -> Model:
    """The simulated GPU's own cost of one core-scope call (b·h heads of N tokens, head dim d)."""
    e, bh = BYTES[dtype], b * h
    io = 4 * bh * N * d * e  # q, k, v in; y out
    if variant == "softmax":  # S = QKᵀ, P = softmax(S), Y = PV: S and P materialised
        return Model(4, bh * (4 * N * N * d + 5 * N * N), io + 4 * bh * N * N * e, io + 2 * bh * N * N * e)
    if variant == "taylorshift-direct":  # S, then 1 + S + S²/2 elementwise: S and its square alive
        return Model(17, bh * (4 * N * N * d + 8 * N * N), io + 8 * bh * N * N * e, io + 2 * bh * N * N * e)
    if variant in ("linear", "latte"):  # KᵀV (d × d) then Q(KᵀV): linear in N
        kernels = 9 if variant == "linear" else 4
        flops, traffic = bh * (4 * N * d * d + 6 * N * d), io + 4 * bh * N * d * e
        return Model(kernels, flops, traffic, io + 2 * bh * (d * d + N * d) * e)
    if variant == "taylorshift-efficient":  # the d² feature expansion: K⊗K and (K⊗K)ᵀV, linear in N
        return Model(21, bh * (4 * N * d * d * d + 10 * N * d * d), io + 6 * bh * N * d * d * e,
                     io + bh * (N * d * d + d * d * d + 2 * N * d) * e)  # fmt: skip
    if variant in ("softmax-fused", "softmax-fused-causal"):  # one kernel, no N×N matrix; causal skips half
        share = 2 if variant.endswith("causal") else 4
        return Model(1, bh * share * N * N * d, io, io)
    if variant == "softmax-causal":  # softmax's kernels and a mask fill over the N×N scores
        return Model(5, bh * (4 * N * N * d + 6 * N * N), io + 6 * bh * N * N * e, io + 2 * bh * N * N * e)
    if variant == "linear-chunked":  # chunks of CHUNK: per-chunk d×d states, C×C blocks inside each chunk
        states, blocks = bh * (N // CHUNK + 1) * d * d, bh * N * CHUNK
        return Model(16, bh * (4 * N * d * d + 4 * N * CHUNK * d + 8 * N * d), io + (4 * states + 3 * blocks) * e,
                     io + (2 * states + blocks + 3 * bh * N * d) * e)  # fmt: skip
    raise KeyError(variant)


def device_seconds(m: Model, dtype: str) -> float:
    return max(m.kernels * KERNEL_MIN_S, m.flops / FLOPS[dtype] + m.bytes / BANDWIDTH)


def call_seconds(variant: str, N: int, d: int, b: int, h: int, dtype: str) -> float:
    """What the campaign's timer should read for one call in steady state: the device's time, or the host's
    launch time where launches are the bottleneck (back-to-back calls)."""
    m = model(variant, N, d, b, h, dtype)
    return max(device_seconds(m, dtype), m.kernels * LAUNCH_S)


def sim_n0(a: str, b_: str, d: int, b: int, h: int, dtype: str, n_max: int) -> int | None:
    """The first N from which B takes no longer than A (and stays so for 5 % further) on the simulated GPU."""
    for n in range(2, n_max + 1):
        if call_seconds(b_, n, d, b, h, dtype) <= call_seconds(a, n, d, b, h, dtype):
            return n
    return None


def sim_n1(a: str, b_: str, d: int, b: int, h: int, dtype: str, n_max: int) -> int | None:
    """The first N from which B's peak memory is no larger than A's on the simulated GPU."""
    for n in range(2, n_max + 1):
        if model(b_, n, d, b, h, dtype).peak <= model(a, n, d, b, h, dtype).peak:
            return n
    return None


class SimGPU:
    """Two clocks, a capped allocator, and counters of what was done."""

    def __init__(self, cap_bytes: int = 80 << 30, start_s: float = 0.0, name: str = "NVIDIA H100 80GB HBM3") -> None:
        self.name = f"{name} (simulated)"
        self.cap = cap_bytes
        self.host = start_s
        self.gpu = start_s
        self.requested = 0
        self.blocks = 0
        self.peak_requested = 0
        self.peak_blocks = 0
        self.cached = 0
        self.calls = 0
        self.ooms = 0

    # -- clocks
    def launch(self, kernels: int, seconds: float) -> None:
        self.calls += 1
        start = max(self.gpu, self.host + LAUNCH_S)
        self.host += kernels * LAUNCH_S
        self.gpu = max(start + seconds, self.host)

    def synchronize(self) -> None:
        self.host = max(self.host, self.gpu)

    def spend_host(self, seconds: float) -> None:
        self.host += seconds

    # -- allocator
    def allocate(self, nbytes: int) -> Buffer:
        rounded = -(-nbytes // (2 << 20)) * (2 << 20)
        if self.blocks + rounded > self.cap:
            self.ooms += 1
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {nbytes / 2**20:.1f} MiB")
        self.requested += nbytes
        self.blocks += rounded
        self.peak_requested = max(self.peak_requested, self.requested)
        self.peak_blocks = max(self.peak_blocks, self.blocks)
        return Buffer(self, nbytes, rounded)

    def stats(self) -> dict:
        return {
            "requested_bytes.all.current": self.requested,
            "requested_bytes.all.peak": self.peak_requested,
            "allocated_bytes.all.current": self.blocks,
            "allocated_bytes.all.peak": self.peak_blocks,
        }

    def reset_peak(self) -> None:
        self.peak_requested, self.peak_blocks = self.requested, self.blocks


class Buffer:
    """Bytes of the simulated allocator, given back when the last reference goes."""

    def __init__(self, sim: SimGPU, nbytes: int, rounded: int) -> None:
        self.sim, self.nbytes, self.rounded = sim, nbytes, rounded

    def __del__(self) -> None:
        self.sim.requested -= self.nbytes
        self.sim.blocks -= self.rounded


def fake_case(sim: SimGPU):
    """A `build_case` whose cases run on the simulated GPU."""
    from attn_cost.profilers.measure.cases import Case

    def build(variant: str, scope: str, sizes, dtype: str = "fp32", device: str = "cpu", seed: int = 0) -> Case:
        m = model(variant, sizes.N, sizes.d, sizes.b, sizes.h, dtype)
        inputs_bytes = 3 * sizes.b * sizes.h * sizes.N * sizes.d * BYTES[dtype]
        out_bytes = inputs_bytes // 3

        def make() -> list:
            sim.spend_host(2e-5)  # drawn on the device: a launch per input
            return [sim.allocate(inputs_bytes // 3) for _ in range(3)]

        def run(inputs: list) -> Buffer:
            scratch = sim.allocate(max(0, m.peak - inputs_bytes - out_bytes))
            out = sim.allocate(out_bytes)
            sim.launch(m.kernels, device_seconds(m, dtype))
            del scratch
            return out

        return Case(variant, scope, sizes, dtype, device, run, make)

    return build


class Event:
    def __init__(self, sim: SimGPU) -> None:
        self.sim, self.at = sim, None

    def record(self) -> None:
        self.at = max(self.sim.gpu, self.sim.host)

    def elapsed_time(self, end: Event) -> float:
        return (end.at - self.at) * 1e3


def install(monkeypatch, sim: SimGPU) -> None:
    """Point torch.cuda, the campaign's clock and the case builder at `sim` (undone by monkeypatch)."""
    from attn_cost.profilers.campaign import run as campaign
    from attn_cost.profilers.measure import gpu_timing, profile, sdpa

    props = types.SimpleNamespace(
        name=sim.name, major=9, minor=0, total_memory=sim.cap,
        multi_processor_count=132, L2_cache_size=H100_L2,
    )  # fmt: skip
    cuda = torch.cuda
    for name, value in {
        "is_available": lambda: True,
        "get_device_properties": lambda index=0: props,
        "get_device_capability": lambda index=0: (9, 0),
        "synchronize": lambda *a: sim.synchronize(),
        "empty_cache": lambda: None,
        "memory_stats": lambda *a: sim.stats(),
        "memory_allocated": lambda *a: sim.blocks,
        "max_memory_allocated": lambda *a: sim.peak_blocks,
        "reset_peak_memory_stats": lambda *a: sim.reset_peak(),
        "Event": lambda enable_timing=True: Event(sim),
    }.items():
        monkeypatch.setattr(cuda, name, value)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(profile, "build_case", fake_case(sim))
    fused = lambda name, device, dtype, head_dim, causal=False: name or ("flash" if dtype != "fp32" else "efficient")  # noqa: E731
    monkeypatch.setattr(sdpa, "probe_backend", fused)  # what PyTorch picks on an H100
    monkeypatch.setattr(gpu_timing, "l2_flush", lambda: lambda: sim.launch(1, 2 * H100_L2 / BANDWIDTH))
    monkeypatch.setattr(campaign, "time", types.SimpleNamespace(monotonic=lambda: sim.host))
    clock = types.SimpleNamespace(perf_counter=lambda: sim.host, strftime=time.strftime, gmtime=time.gmtime)
    monkeypatch.setattr(gpu_timing, "time", clock)
