"""PyTorch reference implementations of every variant, in the op order of the engine's descriptions: one module
per paper, named as its module in `costmodel/variants/`, each implementation registered beside it (`@reference`,
`@decode_reference`, `layer_reference`) and every module of this package loaded with it, so that a new variant
touches its own two files only.

Each function takes its inputs as a list and empties it (`take`): the variant owns its inputs and
drops each one after its last use, exactly as the engine's liveness walk assumes. Every line
allocates what the matching engine op allocates and nothing else (in-place steps where the engine
says "in place", `out=` where it writes into an existing buffer), so the live-tensor tracer measures
the modelled peak. What a measurement counts: the inputs until their last use, every intermediate,
and the outputs; never the parameters or constant buffers (a causal mask), which exist before the call.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import metadata

import torch
import torch.nn.functional as F  # noqa: N812
from attn_cost.costmodel.errors import UserError
from torch import Tensor


def take(inputs: list[Tensor]) -> list[Tensor]:
    """Move the tensors out of the caller's list, so that dropping them frees them."""
    out = list(inputs)
    inputs.clear()
    return out


# -- building blocks shared by several variants -------------------------------------------------


def l2normalize(x: Tensor, gain: float) -> Tensor:
    """gain · x / ‖x‖ row-wise; one row vector of scratch (the norms), one output."""
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    norm.reciprocal_().mul_(gain)
    return x * norm


def outer(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise tensor product a ⊠ b: (…, p), (…, q) -> (…, p·q)."""
    return (a.unsqueeze(-1) * b.unsqueeze(-2)).flatten(-2)


def elu1(x: Tensor) -> Tensor:
    return F.elu(x).add_(1)


@functools.cache
def library_function(dist: str, module: str, name: str) -> tuple[Callable | None, str]:
    """A kernel library's function (flash-linear-attention's chunk kernels, mamba_ssm's SSD) and its version, or None
    and why it cannot run here: the distribution is not installed, there is no CUDA device (their kernels are
    Triton), or it does not import."""
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None, f"{dist} is not installed (pip install {dist}, on a CUDA machine with Triton)"
    if not torch.cuda.is_available():
        return None, f"{dist} {version} is installed, but its Triton kernels need a CUDA device"
    try:
        fn = getattr(importlib.import_module(module), name)
    except Exception as e:  # any failure to import (Triton missing or too old) means: not usable here
        return None, f"{dist} {version} does not import: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return fn, f"{dist} {version}"


def write_token(k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor) -> None:
    """A decoding step's new key and value into the last slot of the KV cache."""
    k_cache[:, :, -1] = k.squeeze(-2)
    v_cache[:, :, -1] = v.squeeze(-2)


# -- the registry: which function implements which variant ---------------------------------------


@dataclass(frozen=True)
class Implementation:
    """What runs a variant's reference here, for a variant that more than one implementation can run."""

    key: str
    """A short name for result keys: measurements by two implementations never mix."""
    name: str
    version: str | None
    native: bool = True
    """False: code that stands in for the variant's own implementation, which cannot run here (`Reference.stands_in`
    names the variant whose formulas describe it)."""
    token_major: bool = False
    """Inputs drawn in [B, T, H, K] storage, the layout the library takes and a layer's projections make, and handed
    to the reference as (b, h, N, d) views: no transpose or copy inside the timed call."""

    def record(self) -> dict:
        """What a measurement records about it."""
        return {"implementation": self.name, "implementation_version": self.version}


@dataclass(frozen=True)
class Reference:
    """How to run one variant: its core (per-head q, k, v), its own layer, its decoding step."""

    core: Callable[..., Tensor] | None = None
    layer: str | None = None
    """Which projections a Hosseini layer keeps ('Q', 'K'), or 'super'."""
    decode: Callable[[list[Tensor]], Tensor] | None = None
    options: dict = field(default_factory=dict)
    """Extra keyword arguments of `core`: 'causal' asks for the causal mask or is_causal."""
    constants: Callable[..., dict] | None = None
    """(sizes, params) -> keyword arguments of `core` made before the call: masks, random features,
    learned projections (taken from `params`, so that training makes them trainable)."""
    implementation: Callable[..., Implementation] | None = None
    """(sizes, device) -> what runs the core there, for a variant more than one implementation can run."""
    stands_in: str | None = None
    """The variant whose reference runs in place of this one's own implementation where that cannot run (its
    formulas are then those of what runs: `stand_in`)."""
    chunked: Callable[[list[Tensor], int], Tensor] | None = None
    """(inputs, chunk) -> output: the variant's chunked form in plain PyTorch, whose products are those of the
    variant's own op list (the chunk kernels'), where what runs here is another form (its recurrence): `check-flops`
    counts it too."""


REFERENCES: dict[str, Reference] = {}
"""Every variant's reference by canonical name, filled by the modules of this package as they load."""


def reference(name: str, **how) -> Callable[[Callable[..., Tensor]], Callable[..., Tensor]]:
    """Register the decorated function as the core of variant `name` (keyword arguments: `Reference`'s fields,
    `options`, `constants`, `implementation`, `stands_in`); one function may implement several variants."""

    def register(core: Callable[..., Tensor]) -> Callable[..., Tensor]:
        _add(name, Reference(core, **how))
        return core

    return register


def layer_reference(name: str, layer: str) -> None:
    """Register variant `name` as a Hosseini layer run whole, keeping the projections `layer` names."""
    _add(name, Reference(layer=layer))


def decode_reference(*names: str) -> Callable[[Callable[[list[Tensor]], Tensor]], Callable[[list[Tensor]], Tensor]]:
    """Attach the decorated function as the decoding step of the registered variants `names`."""

    def register(step: Callable[[list[Tensor]], Tensor]) -> Callable[[list[Tensor]], Tensor]:
        for name in names:
            if name not in REFERENCES or REFERENCES[name].decode is not None:
                raise UserError(f"{name!r} has no reference to add a decoding step to, or has one already")
            REFERENCES[name] = replace(REFERENCES[name], decode=step)
        return step

    return register


def _add(name: str, ref: Reference) -> None:
    if name in REFERENCES:
        raise UserError(f"variant {name!r} has a reference implementation already")
    REFERENCES[name] = ref


def stand_in(variant: str, sizes, device: str, scope: str = "core") -> str:
    """The variant whose formulas describe what runs `variant`'s reference at these sizes on this device: itself,
    or the variant whose code runs in its place (linear-chunked-fused without flash-linear-attention)."""
    impl, ref = implementation_of(variant, sizes, device, scope), REFERENCES[variant]
    return variant if impl is None or impl.native or ref.stands_in is None else ref.stands_in


def implementation_of(variant: str, sizes, device: str, scope: str = "core") -> Implementation | None:
    """What runs `variant`'s core at these sizes on this device (at every scope but decode, whose step is its own),
    for a variant more than one implementation can run (None for the others: their reference is the one)."""
    ref = REFERENCES.get(variant)
    if ref is None or ref.implementation is None or scope == "decode":
        return None
    return ref.implementation(sizes, device)


def _load() -> None:
    """Import every module of this package: each registers its references as it is imported."""
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        importlib.import_module(f"{__name__}.{module}")


_load()
