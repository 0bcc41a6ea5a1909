"""Reference implementations of linear attention (`costmodel/variants/linear.py`, Katharopoulos et al., φ = elu+1):
bidirectional, causal with a materialised cumulative sum, the recurrent form, the authors' fused causal kernel, the
chunked form, and flash-linear-attention's fused chunk kernels where they run (`chunk_implementation`).

Each takes the graph's options as keywords, as the engine's op list has them (`Graph.feature`, `Graph.normalising`):
`feature_map` (elu1, relu, identity: `feature`) and `normalize` (False: the numerator is the output, and no op of
the denominator runs)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F  # noqa: N812
from attn_cost.profilers.measure.references import (
    Implementation,
    decode_reference,
    elu1,
    library_function,
    outer,
    reference,
    take,
)
from torch import Tensor


def feature(x: Tensor, feature_map: str) -> Tensor:
    """φ(x) as `Graph.feature` writes it: elu + 1 (two kernels), relu (one), or x itself (the identity: no copy)."""
    if feature_map == "identity":
        return x
    if feature_map == "relu":
        return F.relu(x)
    return elu1(x)


@reference("linear")
def linear(inputs: list[Tensor], feature_map: str = "elu1", normalize: bool = True) -> Tensor:
    q, k, v = take(inputs)
    fk = feature(k, feature_map)
    del k
    kv = fk.transpose(-1, -2) @ v
    del v
    z = fk.sum(-2, keepdim=True) if normalize else None
    del fk
    fq = feature(q, feature_map)
    del q
    num = fq @ kv
    del kv
    if z is None:
        return num
    den = fq @ z.transpose(-1, -2)
    del fq, z
    return num.div_(den)


@reference("linear-causal")
def linear_causal(inputs: list[Tensor], feature_map: str = "elu1", normalize: bool = True) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    fk = feature(k, feature_map)
    copy = fk is k  # φ is the identity: K itself, summed into a copy (the engine's op is then not in place)
    del k
    s = outer(fk, v)
    del v
    s.cumsum_(-2)
    if normalize:
        z = fk.cumsum(-2) if copy else fk.cumsum_(-2)
    del fk
    fq = feature(q, feature_map).unsqueeze(-2)
    del q
    num = fq @ s.view(b, h, n, d, d)
    del s
    if not normalize:
        return num.view(b, h, n, d)
    den = fq @ z.unsqueeze(-1)
    del fq, z
    return num.div_(den).view(b, h, n, d)


def linear_step(token: list[Tensor], s: Tensor, z: Tensor | None, feature_map: str = "elu1") -> Tensor:
    """One token [q, k, v] of the recurrence: s += φ(k)vᵀ, z += φ(k), y = φ(q)ᵀs / φ(q)ᵀz; without the normaliser
    (z None) y = φ(q)ᵀs."""
    q, k, v = take(token)
    fk = feature(k, feature_map)
    del k
    kv = outer(fk, v)
    del v
    s.add_(kv.view(s.shape))
    del kv
    if z is not None:
        z.add_(fk.view(z.shape))
    del fk
    fq = feature(q, feature_map).unsqueeze(-2)
    del q
    num = fq @ s
    if z is None:
        return num
    den = fq @ z
    del fq
    return num.div_(den)


@reference("linear-recurrent")
def linear_recurrent(inputs: list[Tensor], feature_map: str = "elu1", normalize: bool = True) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    s = q.new_zeros(b, h, d, d)
    z = q.new_zeros(b, h, d, 1) if normalize else None
    y = q.new_empty(b, h, n, d)
    for t in range(n):
        y[:, :, t] = linear_step([q[:, :, t], k[:, :, t], v[:, :, t]], s, z, feature_map).squeeze(-2)
    return y


@reference("linear-causal-fused")
def linear_causal_fused(inputs: list[Tensor], feature_map: str = "elu1", normalize: bool = True) -> Tensor:
    """The authors' fused causal product: one d×d_v state per head updated token by token (no
    N·d·d_v tensor); the denominator from a cumulative sum of φ(K), as in their CausalLinearAttention."""
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    fq = feature(q, feature_map)
    del q
    fk = feature(k, feature_map)
    del k
    den = None
    if normalize:
        zc = fk.cumsum(-2)
        den = fq.unsqueeze(-2) @ zc.unsqueeze(-1)
        del zc
    s = fq.new_zeros(b * h, d, d)
    y = fq.new_empty(b, h, n, d)
    for t in range(n):
        torch.baddbmm(s, fk[:, :, t].reshape(b * h, d, 1), v[:, :, t].reshape(b * h, 1, d), out=s)
        y[:, :, t] = torch.bmm(fq[:, :, t].reshape(b * h, 1, d), s).view(b, h, d)
    del fq, fk, v, s
    return y if den is None else y.div_(den.view(b, h, n, 1))


def _chunks(s, p) -> dict:
    upper = torch.ones(s.chunk, s.chunk, dtype=torch.bool, device=p.device).triu_(1)
    return {"chunk": s.chunk, "upper": upper}


@reference("linear-chunked", constants=_chunks)
def linear_chunked(
    inputs: list[Tensor], chunk: int, upper: Tensor, feature_map: str = "elu1", normalize: bool = True
) -> Tensor:
    """Chunkwise causal linear attention with every chunk's entering state materialised (flash-linear-attention's
    chunk form, in plain PyTorch); `upper`: the C×C mask above the diagonal. A last chunk shorter than C is padded
    with zero rows (its queries are dropped from the output; no earlier query sees its keys)."""
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    pad = -n % chunk
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    shape = (b, h, (n + pad) // chunk, chunk, d)
    fq = feature(q, feature_map).view(shape)
    del q
    fk = feature(k, feature_map).view(shape)
    del k
    vc = v.view(shape)
    del v
    u = fk.transpose(-1, -2) @ vc
    uz = fk.sum(-2, keepdim=True) if normalize else None
    s = u.cumsum(2).sub_(u)
    del u
    if uz is not None:
        z = uz.cumsum(2).sub_(uz)
        del uz
    num = fq @ s
    del s
    if normalize:
        den = fq @ z.transpose(-1, -2)
        del z
    a = fq @ fk.transpose(-1, -2)
    del fq, fk
    a.masked_fill_(upper, 0)
    flat = num.view(-1, chunk, d)
    torch.baddbmm(flat, a.view(-1, chunk, chunk), vc.reshape(flat.shape), out=flat)
    del vc
    if not normalize:
        return num.view(b, h, n + pad, d)[:, :, :n]
    den.add_(a.sum(-1, keepdim=True))
    del a
    return num.div_(den).view(b, h, n + pad, d)[:, :, :n]


# -- flash-linear-attention's fused chunk kernels, where they run --------------------------------


FLA_CHUNK = 64
"""The chunk length flash-linear-attention's chunk_linear_attn runs (chunk_simple_gla's own, not an argument)."""
FLA_DEVICE = "cuda"
"""The device its Triton kernels run on."""


PYTORCH_CHUNKS = Implementation(
    "pytorch", "pytorch chunked form (linear-chunked's reference)", f"torch {torch.__version__}", native=False
)


def fla_linear_attn() -> tuple[Callable | None, str]:
    """flash-linear-attention's chunk_linear_attn and its version, or None and why it cannot run here (it is
    Triton: CUDA only)."""
    fn, said = library_function("fla-core", "fla.ops.linear_attn", "chunk_linear_attn")
    return fn, said.removeprefix("fla-core ") if fn is not None else said


def chunk_implementation(chunk: int, device: str) -> Implementation:
    """flash-linear-attention's chunk kernels on CUDA where fla-core imports and the chunk is its own (64); the
    PyTorch chunked form everywhere else."""
    fn, version = fla_linear_attn()
    if device == FLA_DEVICE and fn is not None and chunk == FLA_CHUNK:
        return Implementation("fla", "fla chunk_linear_attn", f"fla-core {version}", token_major=True)
    return PYTORCH_CHUNKS


def chunk_kernel(chunk: int, device: str) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """The engine's `linear_chunk` op as code, on (b, h, N, d) tensors: flash-linear-attention's kernels (the
    numerator: normalize=False, scale 1) where they run; elsewhere the PyTorch chunked form stands in for them
    (linear-chunked's reference: the same shapes, normalised, every intermediate in memory)."""
    if not chunk_implementation(chunk, device).native:
        upper = torch.ones(chunk, chunk, dtype=torch.bool, device=device).triu_(1)
        return lambda q, k, v: linear_chunked([q, k, v], chunk, upper)
    fn = fla_linear_attn()[0]
    assert fn is not None  # chunk_implementation chose it
    return lambda q, k, v: fn(*(x.transpose(1, 2) for x in (q, k, v)), scale=1.0, normalize=False)[0].transpose(1, 2)


@reference(
    "linear-chunked-fused",
    constants=_chunks,
    implementation=lambda s, device: chunk_implementation(s.chunk, device),
    stands_in="linear-chunked",
)
def linear_chunked_fused(
    inputs: list[Tensor], chunk: int, upper: Tensor, feature_map: str = "elu1", normalize: bool = True
) -> Tensor:
    """Causal linear attention by flash-linear-attention's chunk kernels: φ applied first (elu + 1: two element-wise
    kernels), then chunk_linear_attn(φ(Q), φ(K), V, scale=1, normalize=normalize) on [B, T, H, K] views of the
    inputs (`Implementation.token_major`: no copy). Where it cannot run (no CUDA, no fla-core, a chunk other than 64)
    the PyTorch chunked form runs instead (`chunk_implementation` says which; the record keeps it)."""
    if not chunk_implementation(chunk, inputs[0].device.type).native:
        return linear_chunked(inputs, chunk, upper, feature_map, normalize)
    fn = fla_linear_attn()[0]
    assert fn is not None  # chunk_implementation chose it
    q, k, v = take(inputs)
    fq = feature(q, feature_map).transpose(1, 2)
    del q
    fk = feature(k, feature_map).transpose(1, 2)
    del k
    o, _ = fn(fq, fk, v.transpose(1, 2), scale=1.0, normalize=normalize)
    return o.transpose(1, 2)


@decode_reference("linear-causal", "linear-recurrent", "linear-causal-fused", "linear-chunked", "linear-chunked-fused")
def linear_decode(inputs: list[Tensor], feature_map: str = "elu1", normalize: bool = True) -> Tensor:
    """inputs = [q, k, v, s, z] ([q, k, v, s] without the normaliser); the token's q, k, v are handed on to the
    step."""
    s, z = inputs[3], inputs[4] if normalize else None
    del inputs[3:]
    return linear_step(inputs, s, z, feature_map)
