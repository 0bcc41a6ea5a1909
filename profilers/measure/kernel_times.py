"""The kernels `--kernel` names, timed where they run: each one this machine runs (`kernels_here`) at loaded shapes,
forward and forward + backward, written as a table in the published tables' long format (`datasheet.published`),
so the datasheet model is judged on it as on any published table (`benchmarks/gpu_kernels.py --measured FILE`).
How each point is timed: `HARNESS`.
"""

from __future__ import annotations

import csv
import importlib.util
import io
from collections.abc import Callable
from dataclasses import dataclass

import torch
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.devicemodel.datasheet.kernels import CHOICES, CHUNK
from attn_cost.profilers.devicemodel.datasheet.published import COLUMNS, MADE_BY
from attn_cost.profilers.measure import gpu_timing, sdpa
from attn_cost.profilers.measure.cases import build_case
from attn_cost.profilers.measure.references import implementation_of
from attn_cost.profilers.measure.references.linear import (
    FLA_CHUNK,
    chunk_implementation,
    fla_linear_attn,
    library_function,
)
from attn_cost.profilers.measure.references.linear_rnn import LIBRARY_CHUNK
from attn_cost.profilers.measure.sizes import Sizes
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.benchmark import Timer

HARNESS = (
    "FlashAttention-2's benchmark shapes (16,384 tokens a batch, hidden 2,048: b = 16,384 / N, h = 2,048 / d, "
    "unless --b and --h say otherwise); fused attention causal and not, fla's chunk kernels causal (retention by "
    "its own chunk and fused_chunk calls, the other linear layers as attn-cost's chunked references); a time is "
    "the device time of one call (CUDA: warmed until steady, then attn-cost's bench_seconds, the median of a run "
    "of CUDA-graph replays or of eager calls between events; a CPU: torch.utils.benchmark's blocked_autorange "
    "median), forward + backward one call that runs both"
)
"""How a point is timed, as the table's `# harness:` line says it."""
TOKENS, HIDDEN = 16384, 2048
"""b·N and h·d of every shape: FlashAttention-2's benchmark harness."""
HEAD_DIMS = (64, 128)
LENGTHS = (1024, 2048, 4096, 8192, 16384)
DIRECTIONS = ("fwd", "fwdbwd")
PACKAGES = {"flash-attn-2": ("flash_attn", "flash-attn"), "flash-attn-3": ("flash_attn_interface",
            "FlashAttention-3's hopper/ build")}  # fmt: skip
"""The kernels a package of their own runs: the module it imports and what provides it."""
LINEAR_LAYERS = ("retention", "gla", "deltanet", "gated-deltanet", "mamba2")
"""The linear layers fla's chunk kernels (mamba-ssm's for Mamba-2) are timed on, where they run (`chunk_variants`)."""
FUSED_CHUNK_VARIANT = "retention"
"""What fla's fused_chunk kernel is timed as (`fla.ops.retention.fused_chunk_retention`, as fla's README tables)."""


def kernels_here(device: str, sdpa_runs: dict, fla: dict) -> dict:
    """Each kernel `--kernel` names: whether it runs on this machine and, where not, why. SDPA's backends as its
    dispatcher ran them (`sdpa_runs`: backend → dtype → head dims, `attn-cost doctor`'s table), the flash-attn
    packages where their module is installed on a CUDA device, fla's kernels where fla-core's chunk kernels run
    (`fla`: usable and why not)."""
    out: dict[str, dict] = {}
    for name, choice in CHOICES.items():
        why: str | None = None
        if name == "sdpa":
            why = None if any(any(ds) for by in sdpa_runs.values() for ds in by.values()) else "no SDPA backend runs"
        elif name.startswith("sdpa-"):
            backend = name.removeprefix("sdpa-")
            here = "this CUDA device" if device == "cuda" else "the CPU"
            runs = any(sdpa_runs.get(backend, {}).values())
            why = None if runs else f"PyTorch's SDPA does not run its {backend} backend on {here}"
        elif choice.family == CHUNK:
            why = None if fla["usable"] else fla["why"]
        elif name in PACKAGES:
            module, provider = PACKAGES[name]
            if device != "cuda":
                why = "needs a CUDA device"
            elif importlib.util.find_spec(module) is None:
                why = f"{provider} is not installed (module {module})"
        out[name] = {"here": why is None, "why": why}
    return out


def sdpa_table(device: str, head_dims: tuple[int, ...], dtypes: tuple[str, ...]) -> dict:
    """Per SDPA backend and dtype, the head dims (of `head_dims`) at which PyTorch's dispatcher runs it here, and its
    own choice at d = 64 (`attn-cost doctor`'s table)."""
    capability = torch.cuda.get_device_capability(0) if device == "cuda" else None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    table: dict = {}
    for name in sdpa.BACKENDS:
        for dtype in dtypes:
            runs = []
            for d in head_dims:
                try:
                    sdpa.check_backend(name, device, dtype, d, capability, cudnn)
                    sdpa.probe_backend(name, device, dtype, d)
                except (UserError, RuntimeError):
                    continue
                runs.append(d)
            table.setdefault(name, {})[dtype] = runs
    default: dict[str, str | None] = {}
    for dtype in ("fp32", "bf16"):
        try:
            default[dtype] = sdpa.probe_backend(None, device, dtype, 64)
        except (UserError, RuntimeError):
            default[dtype] = None
    return {"head_dims_tried": list(head_dims), "runs": table, "default_at_d64": default}


def fla_status(device: str) -> dict:
    """Whether linear-chunked-fused runs flash-linear-attention's chunk kernels here (fla-core on CUDA), and why not."""
    fn, why = fla_linear_attn()
    impl = chunk_implementation(FLA_CHUNK, device)
    reason = None if impl.native else why if fn is None else f"this run is on the {device.upper()}"
    return {"usable": impl.native, "runs": impl.name, "version": impl.version, "why": reason}


@dataclass(frozen=True)
class Shape:
    """One timed point: a kernel running a variant at a shape, forward or forward + backward."""

    kernel: str
    variant: str
    direction: str
    causal: bool
    b: int
    h: int
    n: int
    d: int


def chunk_variants(device: str) -> list[str]:
    """The linear layers whose chunked form runs the libraries' own kernels here (fla-core's chunk kernels, mamba-ssm's
    for Mamba-2: `references.implementation_of`), each timed as `fla-chunk`."""
    probe = Sizes(N=LIBRARY_CHUNK, d=64, C=LIBRARY_CHUNK)
    out = []
    for variant in LINEAR_LAYERS:
        impl = implementation_of(variant, probe, device)
        if impl is not None and impl.native:
            out.append(variant)
    return out


def shapes(
    kernels: list[str],
    head_dims: tuple[int, ...] = HEAD_DIMS,
    lengths: tuple[int, ...] = LENGTHS,
    batch: int | None = None,
    heads: int | None = None,
    layers: tuple[str, ...] = (FUSED_CHUNK_VARIANT,),
) -> list[Shape]:
    """Every point of these kernels, the shortest lengths first (a run cut off keeps them); b = 16,384 / N and
    h = 2,048 / d unless given. Fused attention causal and not; fla's chunk kernels causal, for each of `layers`
    (`chunk_variants`), its fused_chunk kernel for retention."""
    out = []
    for n in sorted(lengths):
        for kernel in kernels:
            if CHOICES[kernel].family == CHUNK:
                variants = [(v, True) for v in (layers if kernel == "fla-chunk" else (FUSED_CHUNK_VARIANT,))]
            else:
                variants = [("softmax-fused", False), ("softmax-fused-causal", True)]
            b = batch or max(1, TOKENS // n)
            out += [Shape(kernel, variant, direction, causal, b, heads or max(1, HIDDEN // d), n, d)
                    for d in head_dims for variant, causal in variants for direction in DIRECTIONS]  # fmt: skip
    return out


def _sdpa(backend: str | None, causal: bool) -> Callable:
    enum = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}  # fmt: skip

    def attend(q, k, v):
        if backend is None:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        with sdpa_kernel(enum[backend]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return attend


def _package(module: str, causal: bool) -> Callable:
    fn = importlib.import_module(module).flash_attn_func

    def attend(q, k, v):
        out = fn(q, k, v, causal=causal)
        return out[0] if isinstance(out, tuple) else out  # FlashAttention-3's returns (out, lse) in some versions

    return attend


def _fla(kernel: str) -> Callable:
    """fla's retention kernel itself (chunk or fused_chunk), its autograd included."""
    name = "chunk_retention" if kernel == "fla-chunk" else "fused_chunk_retention"
    fn, why = library_function("fla-core", "fla.ops.retention", name)
    if fn is None:
        raise RuntimeError(why)
    return lambda q, k, v: fn(q, k, v)[0]


def _layer_call(shape: Shape, dtype: str, device: str) -> Callable[[], object]:
    """A linear layer's chunked form at the shape, as the profiler runs it (`build_case`, core scope: its gates' ops
    and the library's chunk kernels on token-major views, C = 64). Forward + backward where the case's ops take
    gradients; where one does not (an op written with out=), the point says so and is not timed."""
    sizes = Sizes(N=shape.n, d=shape.d, h=shape.h, b=shape.b, C=LIBRARY_CHUNK)
    case = build_case(shape.variant, "core", sizes, dtype, device)
    inputs = case.make_inputs()
    if shape.direction == "fwd":

        def forward() -> object:
            with torch.no_grad():
                return case.run(list(inputs))

        return forward
    leaves = [x.detach().requires_grad_(x.is_floating_point()) for x in inputs]
    grad = torch.randn_like(case.run(list(leaves)))

    def both() -> object:
        out = case.run(list(leaves))
        out.backward(grad)
        return out

    return both


def call_of(shape: Shape, dtype: str, device: str) -> Callable[[], object]:
    """One call of the kernel at the shape on its inputs (made once): SDPA's layout (b, h, N, d), the packages' and
    fla's (b, N, h, d); forward + backward runs the forward and the backward of its output."""
    kernel = shape.kernel
    if kernel == "fla-chunk" and shape.variant != FUSED_CHUNK_VARIANT:
        return _layer_call(shape, dtype, device)
    if kernel.startswith("sdpa"):
        attend, layout = _sdpa(None if kernel == "sdpa" else kernel.removeprefix("sdpa-"), shape.causal), "bhnd"
    elif kernel in PACKAGES:
        attend, layout = _package(PACKAGES[kernel][0], shape.causal), "bnhd"
    else:
        attend, layout = _fla(kernel), "bnhd"
    dims = (shape.b, shape.h, shape.n, shape.d) if layout == "bhnd" else (shape.b, shape.n, shape.h, shape.d)
    backward = shape.direction == "fwdbwd"
    element = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    q, k, v = (torch.randn(dims, dtype=element, device=device, requires_grad=backward) for _ in range(3))
    if not backward:

        def forward() -> object:
            with torch.no_grad():
                return attend(q, k, v)

        return forward
    grad = torch.randn_like(attend(q, k, v))

    def both() -> object:
        out = attend(q, k, v)
        out.backward(grad)
        return out

    return both


def device_seconds(call: Callable[[], object], device: str) -> float:
    """The device time of one call (see the module's docstring)."""
    if device == "cuda":
        gpu_timing.warm_until_steady(call, gpu_timing.event_clock)  # a Triton kernel compiles on its first call
        return gpu_timing.bench_seconds(call)
    return float(Timer("call()", globals={"call": call}).blocked_autorange(min_run_time=0.2).median)


def time_point(shape: Shape, dtype: str, device: str, gpu: str) -> tuple[dict[str, object] | None, str]:
    """A point's row in the long format and '', or None and why it has no time (out of memory, or the kernel's own
    refusal of this shape, in its words)."""
    try:
        seconds = device_seconds(call_of(shape, dtype, device), device)
    except (torch.cuda.OutOfMemoryError, MemoryError):
        return None, "out of memory"
    except (RuntimeError, ValueError, TypeError) as e:
        return None, " ".join(str(e).split())[:160] or type(e).__name__
    finally:
        if device == "cuda":
            torch.cuda.empty_cache()
    row: dict[str, object] = dict.fromkeys(COLUMNS, "")
    row.update(gpu=gpu, kernel=shape.kernel, variant=shape.variant, dtype=dtype, direction=shape.direction,
               causal=str(shape.causal).lower(), b=shape.b, h=shape.h, n=shape.n, d=shape.d, quantity="ms",
               value=f"{seconds * 1e3:.6g}")  # fmt: skip
    if CHOICES[shape.kernel].family == CHUNK:
        state = Sizes(N=shape.n, d=shape.d)._extra("d_state") if shape.variant == "mamba2" else ""
        row.update(d_v=shape.d, chunk=LIBRARY_CHUNK, d_state=state)
    return row, ""


def table_text(rows: list[dict], header: dict[str, str]) -> str:
    """The long-format CSV: `# key: text` header lines (this module's `made by` first), the columns, the rows."""
    buffer = io.StringIO()
    buffer.write(f"# made by: {MADE_BY}\n")
    for key, text in header.items():
        buffer.write(f"# {key}: {' '.join(str(text).split())}\n")
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
