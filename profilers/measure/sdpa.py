"""Which kernel PyTorch's fused attention (`scaled_dot_product_attention`) runs: an explicit choice.

On CUDA one call of `F.scaled_dot_product_attention` may run FlashAttention-2, the memory-efficient
(xFormers) kernel, cuDNN's fused attention or the plain math composition, and they differ in speed
and in memory. `softmax-fused` measurements therefore name a backend: the one the user forced with
`--sdpa-backend` (through `torch.nn.attention.sdpa_kernel`), or the one PyTorch picks by itself
(read with `torch._fused_sdp_choice` at the measured shapes), recorded with every measurement.

`check_backend` refuses, in one line and before any tensor exists, a backend that cannot run on
the device, dtype and head dim at hand (the documented limits of PyTorch's dispatcher);
`probe_backend` then asks PyTorch's own dispatcher on tiny tensors, which also catches the limits
a rule here does not know (a new GPU, a PyTorch version).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from attn_cost.costmodel.dtypes import ACTIVATION, HALF
from attn_cost.costmodel.errors import UserError


@dataclass(frozen=True)
class Backend:
    """One SDPA kernel family and where PyTorch can run it."""

    name: str
    enum: str
    """Member of torch.nn.attention.SDPBackend."""
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    max_head_dim: int | None
    head_dim_multiple: int
    min_capability: tuple[int, int]
    """Lowest CUDA compute capability (ignored on the CPU)."""
    what: str


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "flash", "FLASH_ATTENTION", ("cuda", "cpu"), HALF, 256, 1, (8, 0),
            "FlashAttention-2 (CUDA: fp16/bf16, head dim <= 256, sm80+; the CPU has its own flash kernel)",
        ),
        Backend(
            "efficient", "EFFICIENT_ATTENTION", ("cuda",), ACTIVATION, None, 8, (5, 0),
            "memory-efficient attention (xFormers; CUDA only, bf16 needs sm80+; on sm80+ a head dim that is a "
            "multiple of 8 in fp16/bf16, of 4 in fp32)",
        ),
        Backend(
            "cudnn", "CUDNN_ATTENTION", ("cuda",), HALF, 128, 8, (8, 0),
            "cuDNN fused attention (CUDA: fp16/bf16, head dim a multiple of 8 up to 128, up to 256 on sm90 with "
            "cuDNN 9.10+, sm80+)",
        ),
        Backend(
            "math", "MATH", ("cuda", "cpu"), ACTIVATION, None, 1, (0, 0),
            "the unfused composition (matmul, softmax, matmul): runs everywhere",
        ),
    )
}  # fmt: skip
"""The choices of `--sdpa-backend`."""

CPU_FLASH_DTYPES = ACTIVATION
"""The CPU flash kernel (`_scaled_dot_product_flash_attention_for_cpu`) takes every activation dtype."""


def uses_sdpa(variant: str) -> bool:
    """Whether the reference implementation of `variant` calls scaled_dot_product_attention."""
    return variant.startswith("softmax-fused")


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise UserError(f"unknown SDPA backend {name!r} (known: {', '.join(BACKENDS)})")
    return BACKENDS[name]


def max_head_dim(be: Backend, capability: tuple[int, int] | None, cudnn_version: int | None) -> int | None:
    """The largest head dim PyTorch lets `be` take: cuDNN allows 256 on sm90 from cuDNN 9.10 (91000) on."""
    if be.name == "cudnn" and capability is not None and tuple(capability) >= (9, 0) and (cudnn_version or 0) >= 91000:
        return 256
    return be.max_head_dim


def head_dim_multiple(be: Backend, dtype: str, capability: tuple[int, int] | None) -> int:
    """The memory-efficient kernel's alignment on sm80+ (`minimum_gemm_alignment`): 8 in fp16/bf16, 4 in fp32;
    below sm80 (or capability unknown) PyTorch asks fp32 for 4 as well; other backends their fixed multiple."""
    if be.name == "efficient":
        return 4 if dtype == "fp32" else 8
    return be.head_dim_multiple


def check_backend(
    name: str,
    device: str,
    dtype: str,
    head_dim: int,
    capability: tuple[int, int] | None = None,
    cudnn_version: int | None = None,
) -> Backend:
    """The backend, or one UserError that says why it cannot run here. Pure Python: no torch."""
    be = get_backend(name)
    if device not in be.devices:
        raise UserError(
            f"SDPA backend {name} runs on CUDA only; this run is on the {device.upper()} (use math or flash)"
        )
    dtypes = CPU_FLASH_DTYPES if (device, name) == ("cpu", "flash") else be.dtypes
    if dtype not in dtypes:
        raise UserError(f"SDPA backend {name} does not run in {dtype} on {device} (it takes {', '.join(dtypes)})")
    if device == "cuda":
        most = max_head_dim(be, capability, cudnn_version)
        if most is not None and head_dim > most:
            raise UserError(f"SDPA backend {name} takes head dims up to {most}, got d = {head_dim}")
        multiple = head_dim_multiple(be, dtype, capability)
        if head_dim % multiple:
            raise UserError(
                f"SDPA backend {name} in {dtype} needs a head dim that is a multiple of {multiple}, got {head_dim}"
            )
        need = (8, 0) if (name, dtype) == ("efficient", "bf16") else be.min_capability
        if capability is not None and tuple(capability) < need:
            have = ".".join(map(str, capability))
            raise UserError(
                f"SDPA backend {name} in {dtype} needs compute capability {need[0]}.{need[1]}+, this GPU has {have}"
            )
    return be


def _enum(name: str):
    from torch.nn.attention import SDPBackend

    return getattr(SDPBackend, get_backend(name).enum)


def _name_of(choice: int) -> str:
    from torch.nn.attention import SDPBackend

    member = SDPBackend(choice).name
    return next((b.name for b in BACKENDS.values() if b.enum == member), member.lower())


def probe_backend(name: str | None, device: str, dtype: str, head_dim: int, causal: bool = False) -> str:
    """Ask PyTorch's dispatcher which kernel runs on tiny tensors of this dtype and head dim.

    With a forced backend, a UserError if the dispatcher refuses it; returns the backend's name."""
    import torch
    from attn_cost.profilers.measure.cases import DTYPES
    from torch.nn.attention import sdpa_kernel

    q = torch.zeros(1, 1, 16, head_dim, device=device, dtype=DTYPES[dtype])
    allowed = [_enum(name)] if name else [_enum(b) for b in BACKENDS]
    try:
        with sdpa_kernel(allowed):
            choice = int(torch._fused_sdp_choice(q, q, q, is_causal=causal))
    except RuntimeError:
        choice = -1
    if choice < 0:
        raise UserError(f"PyTorch cannot run SDPA backend {name} here ({device}, {dtype}, d = {head_dim})")
    return _name_of(choice)


def validate_choice(name: str | None, device: str, dtypes: list[str], head_dims: list[int]) -> None:
    """Refuse a forced backend that cannot run at any of the settings a command will measure."""
    if name is None:
        return
    capability = cudnn = None
    if device == "cuda":
        import torch

        capability = torch.cuda.get_device_capability(0)
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    for dtype in dtypes:
        for d in head_dims:
            check_backend(name, device, dtype, d, capability, cudnn)
            probe_backend(name, device, dtype, d)


def bind(case, name: str | None):
    """The case, its calls run inside sdpa_kernel([backend]) when a backend is forced."""
    if name is None or not uses_sdpa(case.variant):
        return case
    from torch.nn.attention import sdpa_kernel

    backend, inner = _enum(name), case.run

    def run(inputs: list) -> object:
        with sdpa_kernel([backend]):
            return inner(inputs)

    return replace(case, run=run, tag=f"{case.tag}|sdpa={name}")


def record_fields(variant: str, name: str | None, device: str, dtype: str, head_dim: int) -> dict:
    """What a measurement of `variant` records about SDPA: the backend and who chose it."""
    if not uses_sdpa(variant):
        return {}
    if name is not None:
        return {"sdpa_backend": name, "sdpa_chosen_by": "user"}
    return {"sdpa_backend": probe_backend(None, device, dtype, head_dim), "sdpa_chosen_by": "pytorch"}


def key_suffix(variant: str, name: str | None) -> str:
    """Appended to a result key, so that measurements with different forced backends never mix."""
    return f"|sdpa={name}" if name is not None and uses_sdpa(variant) else ""
