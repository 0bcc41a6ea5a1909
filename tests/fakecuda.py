"""A fake CUDA device for rehearsing the GPU path without a GPU: a simulated H100 whose kernels take modelled times.

`SimGPU` keeps two clocks, the host's and the device's, and says apart what a timer may confuse:

- **Launches the host pays.** An eager call costs the host LAUNCH_S per kernel and queues its GPU work; the device
  starts it once its first launch is issued and never finishes before the host has issued the last one. The
  launch queue holds QUEUE launches: a host that issues more waits for the device. A CUDA graph replay costs the
  host GRAPH_LAUNCH_S plus GRAPH_NODE_S per kernel node, and no launch per kernel.
- **A warm and a cold L2.** A call's GPU work takes max(kernels · KERNEL_MIN_S, flops / FLOPS + memory time). Its
  working set (the model's peak bytes, inputs included) is what it touches; the L2 holds min(1, L2 / working set)
  of it, read at L2_BANDWIDTH, the rest from HBM (BANDWIDTH), after a first touch of the whole working set from HBM
  unless the L2 still holds it (warm: the same buffers were touched by a recent call). The L2 keeps the most
  recent working sets that fit together; any write of the L2's size or more (`write`, the old timer's flush)
  leaves nothing else in it.
- **Graph capture and replay** (torch.cuda.CUDAGraph and torch.cuda.graph): launches during a capture are recorded,
  not run, and cost the host as launches do; a replay runs them. Memory allocated during a capture is held by the
  graph (its private pool) until the graph goes. A variant in `SimGPU.uncapturable` raises in capture as PyTorch
  does for an operation a stream capture does not permit.
- **Counting.** Each CUDA event stamps the device clock when the work queued before it is done and the number of
  calls run by then, so `Event.calls_to` says how many calls ran between two events; every reading of two events
  is kept in `SimGPU.readings`. torch.profiler sees the kernels the device ran (one CUDA event per kernel, beside
  host-side events a counter must not count).

Its allocator counts live bytes (exact requested sizes, and blocks rounded up to 2 MiB as a caching allocator's
history would) and raises `torch.cuda.OutOfMemoryError` above a cap; a buffer is freed when its last Python
reference goes, so tensors kept alive by a traceback stay counted, as on a real GPU.

The model of each variant (kernels, FLOPs, bytes, peak bytes) is written here, from the variants' definitions,
independently of the engine: the tests compare what the campaign measures with the crossovers of *this*
model, found by brute force over N (`sim_n0`, `sim_n1`), and what the timer reads with `call_seconds` (device time,
warm L2) and `eager_seconds` (back-to-back eager calls).

`install(monkeypatch, sim)` points torch.cuda's queries, graphs, streams and events, torch.profiler, the campaign's
clock and the case builder at the simulation. Tensors are never made: a case's inputs are buffers of the simulated
allocator.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import types
from collections import OrderedDict, deque
from dataclasses import dataclass

import torch

LAUNCH_S = 6e-6
"""Host time of one eager kernel launch."""
GRAPH_LAUNCH_S = 4e-6
"""Host time of one graph replay, whatever its size ..."""
GRAPH_NODE_S = 2e-8
"""... plus this per kernel node."""
QUEUE = 1024
"""Launches the device's queue holds; the host waits for the device beyond it."""
KERNEL_MIN_S = 2.5e-6
BANDWIDTH = 2.8e12
L2_BANDWIDTH = 3 * BANDWIDTH
FLOPS = {"fp32": 50e12, "bf16": 600e12}
BYTES = {"fp32": 4, "bf16": 2}
H100_L2 = 50 << 20
CHUNK = 64
"""linear-chunked's chunk length (the default `--chunk`)."""
SWEEP = "sweep"
"""A synthetic one-kernel variant whose device time is proportional to N (`model`): SWEEP_FLOPS per token, and
SWEEP_BYTES of traffic per token over a fixed working set of SWEEP_FOOTPRINT (it fits in the L2)."""
SWEEP_FLOPS = 1e6
SWEEP_BYTES = 2e4
SWEEP_FOOTPRINT = 32 << 20
MANY = "many-short"
"""A synthetic call of MANY_KERNELS kernels, each at the device's floor (KERNEL_MIN_S), whatever N: launch-bound
and longer than 200 µs, on the device (MANY_KERNELS · KERNEL_MIN_S) and more so on the host (MANY_KERNELS ·
LAUNCH_S): what a timer that let a call's duration choose its method (graph replay below 200 µs, eager above)
would read as the host's launches."""
MANY_KERNELS = 100


@dataclass(frozen=True)
class Model:
    """One call of a variant on the simulated GPU."""

    kernels: int
    flops: float
    bytes: float
    peak: int
    """Requested bytes above the baseline at the call's peak, its inputs included: also its working set."""


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
    if variant == "linear-chunked-fused":  # fla's chunk kernels: per-chunk states written and read, C×C on chip
        states = bh * (N // CHUNK + 1) * d * d
        return Model(10, bh * (4 * N * d * d + 4 * N * CHUNK * d), io + (2 * states + 8 * bh * N * d) * e,
                     io + (states + 3 * bh * N * d) * e)  # fmt: skip
    if variant in ("op:softmax-last-axis", "op:softmax-sequence-axis"):  # Latte's key softmax, one kernel
        elements = bh * N * d  # (b, h, N, L) with L = d latents
        strided = 4 if variant.endswith("sequence-axis") else 1  # a reduction across rows reads 4× the sectors
        return Model(1, 5 * elements, 2 * elements * e * strided, 2 * elements * e)
    if variant == SWEEP:
        return Model(1, SWEEP_FLOPS * N, SWEEP_BYTES * N, SWEEP_FOOTPRINT)
    if variant == MANY:
        return Model(MANY_KERNELS, 0.0, 0.0, 1 << 20)
    raise KeyError(variant)


def memory_seconds(traffic: float, footprint: float, warm: bool) -> float:
    """Seconds to move `traffic` bytes over a working set of `footprint` bytes. The L2 holds a share
    min(1, L2 / footprint) of the working set, read at L2_BANDWIDTH, the rest from HBM; a cold call (the L2 does
    not hold its working set) first touches it from HBM."""
    share = min(1.0, H100_L2 / footprint) if footprint > 0 else 1.0
    first = 0.0 if warm else min(traffic, footprint)
    return first / BANDWIDTH + (traffic - first) * (share / L2_BANDWIDTH + (1 - share) / BANDWIDTH)


def device_seconds(m: Model, dtype: str, warm: bool = True) -> float:
    """The GPU's time for one call's kernels, with its working set in the L2 (`warm`) or not."""
    return max(m.kernels * KERNEL_MIN_S, m.flops / FLOPS[dtype] + memory_seconds(m.bytes, m.peak, warm))


def call_seconds(variant: str, N: int, d: int, b: int, h: int, dtype: str) -> float:
    """What the timer's device time should read: the kernels' time of a call that follows an identical call (the
    L2 warm where the working set fits), with no launch cost (graph replay)."""
    return device_seconds(model(variant, N, d, b, h, dtype), dtype, warm=True)


def eager_seconds(variant: str, N: int, d: int, b: int, h: int, dtype: str) -> float:
    """What back-to-back eager calls take per call: the device's time, or the host's launches where they are longer."""
    return max(call_seconds(variant, N, d, b, h, dtype), model(variant, N, d, b, h, dtype).kernels * LAUNCH_S)


def sim_n0(a: str, b_: str, d: int, b: int, h: int, dtype: str, n_max: int) -> int | None:
    """The first N from which B takes no longer than A on the simulated GPU (device time)."""
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


@dataclass(frozen=True)
class Work:
    """One call's GPU work: its kernels, compute seconds, bytes moved, and the working set it touches (`touches`
    names it: the same buffers, the same key)."""

    kernels: int
    compute_s: float
    traffic: float = 0.0
    footprint: float = 0.0
    touches: object = None


class SimGPU:
    """Two clocks, an L2, a launch queue, a capped allocator, and counters of what was done."""

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
        """Calls the device has run (each eager call, each call of a replayed graph)."""
        self.launches = 0
        """Kernels launched one by one by the host (eager), not counting replays."""
        self.ooms = 0
        self.l2: OrderedDict[object, float] = OrderedDict()
        """Working sets the L2 holds, oldest first."""
        self.queue: deque[float] = deque()
        """When each queued launch completes on the device."""
        self.capturing: SimGraph | None = None
        self.profiling: list[Work] | None = None
        self.profiler_error: str | None = None
        self.profiler_kinds = True
        """False: the profiler's events carry no activity type (an older torch)."""
        """Set: torch.profiler fails with this message (a machine where CUPTI is not allowed)."""
        self.uncapturable: set[str] = set()
        """Variants whose calls cannot be captured in a CUDA graph (a synchronisation inside them)."""
        self.refused = 0
        """Calls that raised because they cannot be captured."""
        self.captures = 0
        """Graph captures begun (failed ones included)."""
        self.profiles = 0
        """Profiler sessions opened."""
        self.readings: list[tuple[float, int]] = []
        """(seconds, calls) of every pair of events read with elapsed_time."""
        self._serial = itertools.count()

    # -- the device
    def _execute(self, work: Work, start: float) -> float:
        """Run `work` on the device from `start`; returns when it ends, and leaves its working set in the L2."""
        warm = work.touches is not None and work.touches in self.l2
        memory = memory_seconds(work.traffic, work.footprint, warm)
        end = start + max(work.kernels * KERNEL_MIN_S, work.compute_s + memory)
        if work.footprint >= H100_L2:  # what it leaves of its working set fills the L2
            self.l2.clear()
        if work.touches is not None:
            self.l2[work.touches] = min(work.footprint, H100_L2)
            self.l2.move_to_end(work.touches)
            while sum(self.l2.values()) > H100_L2:
                self.l2.popitem(last=False)
        self.calls += 1
        return end

    def _wait_for_queue(self, launches: int) -> None:
        """The host waits until the queue has room for `launches` more."""
        while self.queue and self.queue[0] <= self.host:
            self.queue.popleft()
        excess = min(len(self.queue), len(self.queue) + launches - QUEUE)
        if excess > 0:
            self.host = max(self.host, self.queue[excess - 1])
            for _ in range(excess):
                self.queue.popleft()

    # -- the host
    def launch(
        self, kernels: int, seconds: float = 0.0, *, traffic: float = 0.0, footprint: float = 0.0, touches=None
    ) -> None:
        """An eager call: `kernels` launches paid by the host; `seconds` of compute and `traffic` bytes over a
        working set of `footprint` bytes named `touches` on the device. Recorded, not run, during a capture."""
        work = Work(kernels, seconds, traffic, footprint, touches)
        if self.capturing is not None:
            self.capturing.works.append(work)
            self.host += kernels * LAUNCH_S  # capturing issues the launches' API calls
            return
        if self.profiling is not None:
            self.profiling.append(work)
        self._wait_for_queue(kernels)
        start = max(self.gpu, self.host + LAUNCH_S)
        self.host += kernels * LAUNCH_S
        self.launches += kernels
        self.gpu = max(self._execute(work, start), self.host)
        self.queue.extend([self.gpu] * kernels)

    def write(self, nbytes: float) -> None:
        """One kernel that writes `nbytes` of a fresh buffer (the old timer's L2 flush: twice the L2)."""
        self.launch(1, traffic=nbytes, footprint=nbytes, touches=("write", next(self._serial)))

    def replay(self, graph: SimGraph) -> None:
        """One graph launch: a small host cost, then the recorded calls back to back on the device."""
        nodes = sum(w.kernels for w in graph.works)
        self._wait_for_queue(1)
        self.host += GRAPH_LAUNCH_S + nodes * GRAPH_NODE_S
        end = max(self.gpu, self.host)
        for work in graph.works:
            if self.profiling is not None:
                self.profiling.append(work)
            end = self._execute(work, end)
        self.gpu = end
        self.queue.append(end)

    def synchronize(self) -> None:
        self.host = max(self.host, self.gpu)
        self.queue.clear()

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
        return Buffer(self, nbytes, rounded, next(self._serial))

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

    def __init__(self, sim: SimGPU, nbytes: int, rounded: int, serial: int = 0) -> None:
        self.sim, self.nbytes, self.rounded, self.serial = sim, nbytes, rounded, serial

    def __del__(self) -> None:
        self.sim.requested -= self.nbytes
        self.sim.blocks -= self.rounded


class SimGraph:
    """torch.cuda.CUDAGraph on the simulation: the calls recorded in a capture, and the memory its pool holds."""

    def __init__(self, sim: SimGPU) -> None:
        self.sim = sim
        self.works: list[Work] = []
        self.pool: Buffer | None = None
        self.captured = False

    def replay(self) -> None:
        if not self.captured:
            raise RuntimeError("CUDA graph replayed before it was captured")
        self.sim.replay(self)

    def reset(self) -> None:
        self.works, self.pool, self.captured = [], None, False


def capture(sim: SimGPU):
    """torch.cuda.graph on the simulation: launches inside are recorded into the graph; what the calls allocate
    while it captures stays allocated (the graph's pool) until the graph goes."""

    @contextlib.contextmanager
    def graph(cuda_graph: SimGraph, pool=None, stream=None, capture_error_mode: str = "global", **options):
        sim.synchronize()  # as torch.cuda.graph does on entry
        sim.captures += 1
        cuda_graph.reset()
        before, top = sim.requested, [sim.requested]
        allocate = sim.allocate

        def tracking(nbytes: int) -> Buffer:
            buffer = allocate(nbytes)
            top[0] = max(top[0], sim.requested)
            return buffer

        sim.capturing, sim.allocate = cuda_graph, tracking  # type: ignore[method-assign]
        try:
            yield
        finally:
            sim.capturing = None
            del sim.allocate  # the class's own again
        cuda_graph.pool = sim.allocate(top[0] - before) if top[0] > before else None
        cuda_graph.captured = True

    return graph


class Event:
    """A CUDA event on the simulated device: when the work queued before it is done, and how many calls had run."""

    def __init__(self, sim: SimGPU) -> None:
        self.sim, self.at, self.calls = sim, None, 0

    def record(self, stream=None) -> None:
        self.at = max(self.sim.gpu, self.sim.host)
        self.calls = self.sim.calls

    def calls_to(self, end: Event) -> int:
        """Calls the device ran between this event and `end`."""
        return end.calls - self.calls

    def elapsed_time(self, end: Event) -> float:
        seconds = end.at - self.at
        self.sim.readings.append((seconds, self.calls_to(end)))
        return seconds * 1e3


class Stream:
    """A CUDA stream on the simulation: one timeline, so waits between streams are nothing to do."""

    def wait_stream(self, other: Stream) -> None:
        return None


class Profile:
    """torch.profiler.profile on the simulation: one CUDA event per kernel the device ran while it was open, beside
    host-side events (an operator, its runtime call) and a synchronisation that are not kernels."""

    def __init__(self, sim: SimGPU, *args, **kwargs) -> None:
        self.sim = sim
        self.seen: list[Work] = []

    def __enter__(self) -> Profile:
        self.sim.profiles += 1
        if self.sim.profiler_error:
            raise RuntimeError(self.sim.profiler_error)
        self.sim.profiling = self.seen
        return self

    def __exit__(self, *exc) -> None:
        self.sim.profiling = None

    def events(self) -> list:
        cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU

        def event(name: str, device, kind: str) -> types.SimpleNamespace:
            kinds = {"activity_type": kind} if self.sim.profiler_kinds else {}
            return types.SimpleNamespace(name=name, device_type=device, **kinds)

        out = [event("Context Sync", cuda, "cuda_sync")]
        for i, work in enumerate(self.seen):
            out.append(event(f"aten::call{i}", cpu, "cpu_op"))
            for k in range(work.kernels):
                out += [event("cudaLaunchKernel", cpu, "cuda_runtime"), event(f"kernel{i}.{k}", cuda, "kernel")]
        return out


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
            if sim.capturing is not None and variant in sim.uncapturable:
                sim.refused += 1
                raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
            scratch = sim.allocate(max(0, m.peak - inputs_bytes - out_bytes))
            out = sim.allocate(out_bytes)
            sim.launch(m.kernels, m.flops / FLOPS[dtype], traffic=m.bytes, footprint=m.peak,
                       touches=tuple(b.serial for b in inputs))  # fmt: skip
            del scratch
            return out

        return Case(variant, scope, sizes, dtype, device, run, make)

    return build


def install(monkeypatch, sim: SimGPU) -> None:
    """Point torch.cuda, torch.profiler, the campaign's clock and the case builder at `sim` (undone by
    monkeypatch). The timer's caches (kernel counts, calls that cannot be captured) start empty."""
    from attn_cost.profilers.campaign import state as campaign
    from attn_cost.profilers.measure import gpu_timing, opchecks, profile, sdpa

    props = types.SimpleNamespace(
        name=sim.name, major=9, minor=0, total_memory=sim.cap,
        multi_processor_count=132, L2_cache_size=H100_L2,
    )  # fmt: skip
    cuda = torch.cuda
    stream = Stream()
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
        "CUDAGraph": lambda *a, **k: SimGraph(sim),
        "graph": capture(sim),
        "Stream": lambda *a, **k: Stream(),
        "current_stream": lambda *a: stream,
        "stream": lambda s: contextlib.nullcontext(),
    }.items():
        monkeypatch.setattr(cuda, name, value)
    monkeypatch.setattr(torch.profiler, "profile", lambda *a, **k: Profile(sim, *a, **k))
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(profile, "build_case", fake_case(sim))
    monkeypatch.setattr(opchecks, "build_case", lambda name, sizes, dtype, device: fake_case(sim)(
        name, "core", sizes, dtype, device))  # fmt: skip
    fused = lambda name, device, dtype, head_dim, causal=False: name or ("flash" if dtype != "fp32" else "efficient")  # noqa: E731
    monkeypatch.setattr(sdpa, "probe_backend", fused)  # what PyTorch picks on an H100
    if hasattr(gpu_timing, "l2_flush"):  # timer v2's flush: a write of twice the L2
        monkeypatch.setattr(gpu_timing, "l2_flush", lambda: lambda: sim.write(2 * H100_L2))
    for cache in ("_KERNELS", "_EAGER_ONLY"):
        if hasattr(gpu_timing, cache):
            monkeypatch.setattr(gpu_timing, cache, {})
    monkeypatch.setattr(campaign, "time", types.SimpleNamespace(monotonic=lambda: sim.host))
    clock = types.SimpleNamespace(perf_counter=lambda: sim.host, strftime=time.strftime, gmtime=time.gmtime)
    monkeypatch.setattr(gpu_timing, "time", clock)
