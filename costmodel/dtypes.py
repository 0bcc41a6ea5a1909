"""The dtypes attn-cost knows, each declared once: its bytes, its torch name, whether it can be the activation dtype
(`--dtype`), whether gradients flow through it, and whether tensor cores run its products. Every table of dtypes
elsewhere (the engine's bytes, the measured tensors, the SDPA backends, the tracer's storages, the GPU model) is
read from `DTYPES`."""

from __future__ import annotations

from dataclasses import dataclass

from attn_cost.costmodel.errors import UserError


@dataclass(frozen=True)
class Dtype:
    """One dtype, by its engine name (fp32, bf16, ...)."""

    name: str
    bytes: int
    """Bytes per element."""
    torch: str
    """The attribute of `torch` that is this dtype (`torch.bfloat16`)."""
    activation: bool = False
    """A dtype of the activations a command takes (`--dtype`): the variants are written, measured and priced in it."""
    floating: bool = False
    """Gradients flow through tensors of it (a float storage in a traced graph)."""
    tensor_cores: bool = False
    """Tensor cores run its products at their own rate (fp32 only through TF32, `tf32`, when allowed)."""
    storage: bool = True
    """A tensor can be stored in it (False for tf32: fp32 storage, a precision of the products only)."""


DTYPES: dict[str, Dtype] = {
    t.name: t
    for t in (
        Dtype("fp32", 4, "float32", activation=True, floating=True),
        Dtype("bf16", 2, "bfloat16", activation=True, floating=True, tensor_cores=True),
        Dtype("fp16", 2, "float16", activation=True, floating=True, tensor_cores=True),
        Dtype("tf32", 4, "float32", tensor_cores=True, storage=False),
        Dtype("fp64", 8, "float64", floating=True),
        Dtype("bool", 1, "bool"),
        Dtype("int32", 4, "int32"),
        Dtype("int64", 8, "int64"),
        Dtype("complex128", 16, "complex128"),
    )
}
"""Every dtype, the activation dtypes first (in the order commands list them)."""

ACTIVATION: tuple[str, ...] = tuple(n for n, t in DTYPES.items() if t.activation)
"""The dtypes a command takes with --dtype: fp32, bf16, fp16."""
HALF: tuple[str, ...] = tuple(n for n in ACTIVATION if DTYPES[n].bytes == 2)
"""The 16-bit activation dtypes (what FlashAttention and cuDNN's fused kernels take)."""
DTYPE_BYTES: dict[str, int] = {n: DTYPES[n].bytes for n in ACTIVATION}
"""Bytes per element of each activation dtype."""
STORAGE_BYTES: dict[str, int] = {n: t.bytes for n, t in DTYPES.items() if t.storage}
"""Bytes per element of every dtype a storage may have (masks and indices in traced code besides the activations)."""
FLOAT_DTYPES: tuple[str | None, ...] = (None, *(n for n, t in DTYPES.items() if t.floating))
"""Storage dtypes a gradient can flow through (None: the activation dtype)."""


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of an activation dtype; an unknown name is bad input."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise UserError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPE_BYTES)})") from None


def spelled(names: tuple[str, ...] = ACTIVATION, last: str = "or") -> str:
    """The names as a help text lists them: 'fp32, bf16 or fp16'."""
    return f"{', '.join(names[:-1])} {last} {names[-1]}" if len(names) > 1 else names[0]
