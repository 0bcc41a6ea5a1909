"""The kernels a user can pick on a datasheet GPU (`--kernel NAME`), one declaration each: which op family it runs
(fused attention or fla's chunk kernels), which GPUs, dtypes and head dims it takes, and how `GpuModel` prices it
(`pricing`: the backend of `GpuModel.attention`, or the chunk kernels' layout). Facts from docs/kernels.md (read from
each kernel's source, file and commit there) and docs/linear-kernels.md.

`sdpa`, the default for fused attention, is the backend PyTorch's SDPA picks (`sdpa_pick`, with the reason it
gives); `fla-chunk` the default for the chunked linear family. A kernel the GPU, dtype or head dim cannot run is
refused in one line (`refusal`).
"""

from __future__ import annotations

from dataclasses import dataclass

from attn_cost.costmodel.errors import UserError, unknown
from attn_cost.profilers.devicemodel.datasheet.data import Datasheet

FUSED, CHUNK = "fused attention", "chunked linear attention"
"""The op families a kernel choice replaces (`attention` and `chunked`/`linear-rnn` kernels of the op lists)."""


@dataclass(frozen=True)
class Choice:
    """One kernel a user can pick, as its source lays it out."""

    name: str
    family: str
    """FUSED or CHUNK."""
    title: str
    """In words, for captions."""
    pricing: str
    """How `GpuModel` prices it: fused attention's backend (`flash`: FlashAttention-2's tiles and mma.sync ceiling;
    `fa3`: FlashAttention-3's warpgroup tiles with the softmax under the products; `cudnn`: cuDNN's graphs at the
    tensor peak; `efficient`: the memory-efficient kernel's blocks; `math`: the unfused ops), or fla's chunk layout
    (`chunk`: chunk_fwd_h walking the chunks, the rest one block per chunk; `fused-chunk`: one kernel walking the
    chunks per batch·head and tile)."""
    archs: tuple[str, ...] | None = None
    """The architectures it runs on (None: every one)."""
    dtypes: tuple[str, ...] | None = None
    """The element types it takes (None: every one)."""
    max_d: int = 256
    d_multiple: int = 1
    bf16_archs: tuple[str, ...] | None = None
    """The architectures it takes bf16 on, where fewer than it runs on (None: every one)."""


ANY_D = 1 << 30
"""A kernel that takes every head dim (the model prices what the catalogue's sizes allow)."""
_NVIDIA_SM80 = ("sm80", "sm86", "sm89", "sm90", "sm100", "sm120")
_ROCM = ("cdna2", "cdna3")
"""AMD Instinct GPUs, where PyTorch's SDPA runs flash and memory-efficient kernels of its own (AOTriton) and the
flash-attn package has a ROCm build (Composable Kernel)."""
_HALF = ("fp16", "bf16")

CHOICES: dict[str, Choice] = {c.name: c for c in (
    Choice("sdpa", FUSED, "PyTorch SDPA (the backend it picks)", "sdpa", max_d=ANY_D),
    Choice("sdpa-flash", FUSED, "PyTorch SDPA, flash backend (FlashAttention-2)", "flash", (*_NVIDIA_SM80, *_ROCM),
           _HALF, 256, 8),
    Choice("sdpa-efficient", FUSED, "PyTorch SDPA, memory-efficient backend", "efficient",
           ("sm70", "sm75", *_NVIDIA_SM80, *_ROCM), None, ANY_D, 8, bf16_archs=(*_NVIDIA_SM80, *_ROCM)),
    Choice("sdpa-cudnn", FUSED, "PyTorch SDPA, cuDNN backend", "cudnn", _NVIDIA_SM80, _HALF, 128, 8),
    Choice("sdpa-math", FUSED, "PyTorch SDPA, math backend (the unfused ops)", "math", None, None, ANY_D),
    Choice("flash-attn-2", FUSED, "FlashAttention-2 (flash-attn)", "flash", (*_NVIDIA_SM80, *_ROCM), _HALF, 256, 8),
    Choice("flash-attn-3", FUSED, "FlashAttention-3 (flash_attn_interface)", "fa3", ("sm90",), _HALF, 256, 8),
    Choice("fla-chunk", CHUNK, "flash-linear-attention's chunk kernels", "chunk", max_d=ANY_D),
    Choice("fla-fused-chunk", CHUNK, "flash-linear-attention's fused_chunk kernel", "fused-chunk", max_d=ANY_D),
)}  # fmt: skip
DEFAULTS = {FUSED: "sdpa", CHUNK: "fla-chunk"}

PyTorch = tuple[int, int]
"""A PyTorch release (major, minor): SDPA's choices changed between releases."""
CUDNN_FIRST: PyTorch = (2, 9)
"""From this release SDPA tries cuDNN first on sm90 and sm100 (with cuDNN ≥ 9.9; docs/kernels.md §3)."""
MATH_UPCAST: PyTorch = (2, 5)
"""From this release SDPA's math backend computes fp16 and bf16 inputs in fp32 (pytorch#128922, #135964:
`torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp`, default off); before it, in the inputs' dtype."""


def choice(name: str) -> Choice:
    """The kernel `--kernel` names (one line for an unknown name)."""
    if name not in CHOICES:
        raise UserError(unknown("--kernel", name, CHOICES))
    return CHOICES[name]


def refusal(c: Choice, sheet: Datasheet, dtype: str, d: int | None = None) -> str | None:
    """Why the kernel cannot run on this GPU, dtype or head dim (None where it can)."""
    if c.archs is not None and sheet.arch not in c.archs:
        return f"{c.title} does not run on {sheet.title} ({sheet.arch}; it runs on {', '.join(c.archs)})"
    if c.dtypes is not None and dtype not in c.dtypes:
        return f"{c.title} takes {' and '.join(c.dtypes)} only, not {dtype}"
    if dtype == "bf16" and c.bf16_archs is not None and sheet.arch not in c.bf16_archs:
        return f"{c.title} takes bf16 on {', '.join(c.bf16_archs)} only; {sheet.title} is {sheet.arch}"
    if d is not None and (d > c.max_d or d % c.d_multiple):
        rules = ([f"at most {c.max_d}"] if c.max_d < ANY_D else []) + ([f"a multiple of {c.d_multiple}"]
                                                                     if c.d_multiple > 1 else [])  # fmt: skip
        return f"{c.title} takes head dims {' and '.join(rules)}, not d = {d}"
    return None


def sdpa_pick(sheet: Datasheet, dtype: str, d: int, pytorch: PyTorch | None = None) -> tuple[Choice, str]:
    """The backend PyTorch's SDPA runs (`select_sdp_backend`: the first of its order whose checks pass), with why:
    cuDNN first on sm90 and sm100 (PyTorch ≥ 2.9 with cuDNN ≥ 9.9, head dim ≤ 128), then flash, memory-efficient,
    math (docs/kernels.md §3). `pytorch`: the release (None: a current one)."""
    order = ["sdpa-flash", "sdpa-efficient", "sdpa-math"]
    release = "PyTorch ≥ 2.9" if pytorch is None else f"PyTorch {pytorch[0]}.{pytorch[1]}"
    first = "flash, memory-efficient, math" + ("" if pytorch is None else f" ({release})")
    if sheet.arch in ("sm90", "sm100") and (pytorch is None or pytorch >= CUDNN_FIRST):
        order.insert(0, "sdpa-cudnn")
        first = f"cuDNN first on {sheet.arch} ({release}), then flash, memory-efficient, math"
    skipped: list[str] = []
    for name in order:
        why = refusal(CHOICES[name], sheet, dtype, d)
        if why is None:
            passed = f" ({'; '.join(skipped)})" if skipped else ""
            return CHOICES[name], f"SDPA's pick for {sheet.arch}, {dtype}, d = {d}: it tries {first}{passed}"
        skipped.append(why.replace("PyTorch SDPA, ", ""))
    raise AssertionError("the math backend runs everything")


def resolve(
    name: str | None, family: str, sheet: Datasheet, dtype: str, d: int, pytorch: PyTorch | None = None
) -> tuple[Choice, str]:
    """The kernel that prices `family` at this head dim, and why: the one asked for (refused in one line where it
    cannot run), else the family's default (`sdpa` picks its backend, as the PyTorch release `pytorch` does)."""
    asked = choice(name) if name is not None else None
    c = asked if asked is not None and asked.family == family else CHOICES[DEFAULTS[family]]
    why = refusal(c, sheet, dtype, d)
    if why is not None:
        raise UserError(f"--kernel {c.name}: {why}")
    if c.name == "sdpa":
        picked, reason = sdpa_pick(sheet, dtype, d, pytorch)
        return picked, reason
    return c, "asked for with --kernel" if c is asked else f"the default for {family}"
