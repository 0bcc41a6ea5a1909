"""PyTorch reference implementations of every variant, in the op order of the engine's descriptions.

Each function takes its inputs as a list and empties it (`take`): the variant owns its inputs and
drops each one after its last use, exactly as the engine's liveness walk assumes. Every line
allocates what the matching engine op allocates and nothing else (in-place steps where the engine
says "in place", `out=` where it writes into an existing buffer), so the live-tensor tracer measures
the modelled peak. What a measurement counts: the inputs until their last use, every intermediate,
and the outputs; never the parameters or constant buffers (a causal mask), which exist before the call.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata

import torch
import torch.nn.functional as F  # noqa: N812
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


# -- softmax ------------------------------------------------------------------------------------


def softmax(inputs: list[Tensor], mask: Tensor | None = None) -> Tensor:
    q, k, v = take(inputs)
    s = q @ k.transpose(-1, -2)
    del q, k
    s.mul_(1 / math.sqrt(v.shape[-1]))
    if mask is not None:
        s.masked_fill_(mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    del s
    return p @ v


def softmax_fused(inputs: list[Tensor], causal: bool = False) -> Tensor:
    q, k, v = take(inputs)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


# -- TaylorShift --------------------------------------------------------------------------------


def taylorshift_direct(inputs: list[Tensor], tau: float = 1.0) -> Tensor:
    q, k, v = take(inputs)
    n, d = q.shape[-2], q.shape[-1]
    q = l2normalize(q, tau)
    k = l2normalize(k, 1.0)
    s = q @ k.transpose(-1, -2)
    del q, k
    p = s * s  # x²/2 + x + 1 with one new N×N tensor: the original x is still needed
    p.mul_(0.5).add_(s).add_(1)
    del s
    rows = p.sum(-1, keepdim=True)
    rows.mul_(math.sqrt(d / n))
    p.div_(rows)
    del rows
    return p @ v


def taylorshift_efficient(inputs: list[Tensor], tau: float = 1.0) -> Tensor:
    """Algorithm 1 of the paper."""
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    alpha = d**0.25
    v1 = v.new_empty(b, h, n, d + 1)  # V ← [√(d/N)·1, V] / N
    v1[..., :1].fill_(math.sqrt(d / n) / n)
    torch.mul(v, 1 / n, out=v1[..., 1:])
    del v
    q = l2normalize(q, alpha * tau)
    k = l2normalize(k, alpha)
    kk = outer(k, k)
    a_mod = kk.transpose(-1, -2) @ v1
    del kk
    kv = k.transpose(-1, -2) @ v1
    del k
    col = v1.sum(-2, keepdim=True)
    del v1
    qq = outer(q, q)
    y = qq @ a_mod
    del qq, a_mod
    y.mul_(0.5)
    y3 = y.view(b * h, n, d + 1)  # y += α²·q(kᵀv), in place (out= keeps it visible to FlopCounterMode)
    torch.baddbmm(y3, q.view(b * h, n, d), kv.view(b * h, d, d + 1), alpha=alpha**2, out=y3)
    del y3
    del q, kv
    y.add_(col, alpha=alpha**4)
    del col
    return y[..., 1:] / y[..., :1]


# -- linear attention ---------------------------------------------------------------------------


def linear(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    fk = elu1(k)
    del k
    kv = fk.transpose(-1, -2) @ v
    del v
    z = fk.sum(-2, keepdim=True)
    del fk
    fq = elu1(q)
    del q
    num = fq @ kv
    del kv
    den = fq @ z.transpose(-1, -2)
    del fq, z
    return num.div_(den)


def linear_causal(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    fk = elu1(k)
    del k
    s = outer(fk, v)
    del v
    s.cumsum_(-2)
    z = fk.cumsum_(-2)
    del fk
    fq = elu1(q).unsqueeze(-2)
    del q
    num = fq @ s.view(b, h, n, d, d)
    del s
    den = fq @ z.unsqueeze(-1)
    del fq, z
    return num.div_(den).view(b, h, n, d)


def linear_step(token: list[Tensor], s: Tensor, z: Tensor) -> Tensor:
    """One token [q, k, v] of the recurrence: s += φ(k)vᵀ, z += φ(k), y = φ(q)ᵀs / φ(q)ᵀz."""
    q, k, v = take(token)
    fk = elu1(k)
    del k
    kv = outer(fk, v)
    del v
    s.add_(kv.view(s.shape))
    del kv
    z.add_(fk.view(z.shape))
    del fk
    fq = elu1(q).unsqueeze(-2)
    del q
    num = fq @ s
    den = fq @ z
    del fq
    return num.div_(den)


def linear_recurrent(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    s = q.new_zeros(b, h, d, d)
    z = q.new_zeros(b, h, d, 1)
    y = q.new_empty(b, h, n, d)
    for t in range(n):
        y[:, :, t] = linear_step([q[:, :, t], k[:, :, t], v[:, :, t]], s, z).squeeze(-2)
    return y


# -- Latte --------------------------------------------------------------------------------------


def latte(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    pk = torch.softmax(k, dim=-2)
    del k
    m = pk.transpose(-1, -2) @ v
    del pk, v
    pq = torch.softmax(q, dim=-1)
    del q
    return pq @ m


def latte_causal(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, latents = q.shape
    d = v.shape[-1]
    top = k.amax(dim=-2, keepdim=True)
    e = k - top
    del k, top
    e.exp_()
    vt = outer(e, v)
    del v
    vt.cumsum_(-2)
    alpha = e.cumsum_(-2)
    del e
    gamma = torch.softmax(q, dim=-1)
    del q
    gamma.div_(alpha)
    del alpha
    return (gamma.unsqueeze(-2) @ vt.view(b, h, n, latents, d)).view(b, h, n, d)


def latte_step(token: list[Tensor], m: Tensor, alpha: Tensor, vt: Tensor) -> Tensor:
    """One token [p(l|t), k, v] of the scan: move the sums to the new running maximum, add the
    token, read out."""
    p, k, v = take(token)
    top = torch.maximum(m, k)
    back = (m - top).exp_()
    add = (k - top).exp_()
    del k
    alpha.mul_(back).add_(add)
    vt.mul_(back.unsqueeze(-1))
    del back
    vt.add_(outer(add, v).view(vt.shape))
    del add, v
    m.copy_(top)
    del top
    gamma = p / alpha
    del p
    return gamma.unsqueeze(-2) @ vt


def latte_recurrent(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, latents = q.shape
    d = v.shape[-1]
    p = torch.softmax(q, dim=-1)
    del q
    m = p.new_full((b, h, latents), float("-inf"))
    alpha = p.new_zeros(b, h, latents)
    vt = p.new_zeros(b, h, latents, d)
    y = p.new_empty(b, h, n, d)
    for t in range(n):
        y[:, :, t] = latte_step([p[:, :, t], k[:, :, t], v[:, :, t]], m, alpha, vt).squeeze(-2)
    return y


# -- decoding steps -----------------------------------------------------------------------------


def _write_token(k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor) -> None:
    k_cache[:, :, -1] = k.squeeze(-2)
    v_cache[:, :, -1] = v.squeeze(-2)


def softmax_decode(inputs: list[Tensor]) -> Tensor:
    q, k, v, k_cache, v_cache = take(inputs)
    _write_token(k, v, k_cache, v_cache)
    del k, v
    s = q @ k_cache.transpose(-1, -2)
    del q
    s.mul_(1 / math.sqrt(v_cache.shape[-1]))
    p = torch.softmax(s, dim=-1)
    del s
    return p @ v_cache


def softmax_fused_decode(inputs: list[Tensor]) -> Tensor:
    q, k, v, k_cache, v_cache = take(inputs)
    _write_token(k, v, k_cache, v_cache)
    del k, v
    return F.scaled_dot_product_attention(q, k_cache, v_cache)


def linear_decode(inputs: list[Tensor]) -> Tensor:
    """inputs = [q, k, v, s, z]; the token's q, k, v are handed on to the step."""
    s, z = inputs[3:]
    del inputs[3:]
    return linear_step(inputs, s, z)


def latte_decode(inputs: list[Tensor]) -> Tensor:
    """inputs = [q, k, v, m, α, ṽ]; q is replaced by p(l|t) = softmax(q) before the step."""
    m, alpha, vt = inputs[3:]
    del inputs[3:]
    inputs[0] = torch.softmax(inputs[0], dim=-1)
    return latte_step(inputs, m, alpha, vt)


# -- grouped-query, sliding-window, Linformer, Performer, Nyströmformer, fused causal linear -------


def gqa(inputs: list[Tensor]) -> Tensor:
    """The query heads of a group stacked along the sequence (a view): one SDPA per key/value head."""
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    kv = k.shape[1]
    y = F.scaled_dot_product_attention(q.view(b, kv, (h // kv) * n, d), k, v)
    return y.view(b, h, n, d)


def gqa_causal(inputs: list[Tensor]) -> Tensor:
    q, k, v = take(inputs)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def gqa_decode(inputs: list[Tensor]) -> Tensor:
    q, k, v, k_cache, v_cache = take(inputs)
    _write_token(k, v, k_cache, v_cache)
    del k, v
    b, h, _, d = q.shape
    kv = k_cache.shape[1]
    return F.scaled_dot_product_attention(q.view(b, kv, h // kv, d), k_cache, v_cache).view(b, h, 1, d)


def _padded(x: Tensor, w: int) -> Tensor:
    """w−1 rows of zeros in front of the sequence: row i + w − 1 is token i."""
    b, h, n, d = x.shape
    xp = x.new_zeros(b, h, n + w - 1, d)
    xp[:, :, w - 1 :] = x
    return xp


def _windows(xp: Tensor, w: int) -> Tensor:
    """The N overlapping windows of w rows of a padded (b, h, N+w−1, d) tensor: a strided view, no copy."""
    b, h, rows, d = xp.shape
    sb, sh, sn, sd = xp.stride()
    return xp.as_strided((b, h, rows - w + 1, w, d), (sb, sh, sn, sn, sd))


def _band_bmm(a: Tensor, bw: Tensor, out: Tensor) -> Tensor:
    """out[β, i] = a[β, i] @ bw[β, i] for every batch-head β: one bmm per head over the N windows,
    reading the windows through their strides (torch.matmul on the 5-D view would copy them)."""
    for ib in range(a.shape[0]):
        for ih in range(a.shape[1]):
            torch.bmm(a[ib, ih], bw[ib, ih], out=out[ib, ih])
    return out


def sliding_window(inputs: list[Tensor], w: int, mask: Tensor) -> Tensor:
    """A banded kernel: the N×w score band materialised, K and V read through strided windows of the
    padded sequence. mask: (N, 1, w), True on the padding slots of each query's window."""
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    kp = _padded(k, w)
    del k
    s = _band_bmm(q.unsqueeze(-2), _windows(kp, w).transpose(-1, -2), q.new_empty(b, h, n, 1, w))
    del q, kp
    s.mul_(1 / math.sqrt(d))
    s.masked_fill_(mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    del s
    vp = _padded(v, w)
    del v
    y = _band_bmm(p, _windows(vp, w), p.new_empty(b, h, n, 1, d))
    return y.view(b, h, n, d)


def sliding_window_decode(inputs: list[Tensor], slot: int = 0, valid: int | None = None) -> Tensor:
    """One token with a rolling buffer of w keys and values: the new k, v overwrite slot N mod w.
    Before the buffer is full (valid = N + 1 < w) its empty slots are masked (in place)."""
    q, k, v, k_cache, v_cache = take(inputs)
    k_cache[:, :, slot] = k.squeeze(-2)
    v_cache[:, :, slot] = v.squeeze(-2)
    del k, v
    s = q @ k_cache.transpose(-1, -2)
    del q
    s.mul_(1 / math.sqrt(v_cache.shape[-1]))
    if valid is not None and valid < s.shape[-1]:
        s[..., valid:].fill_(float("-inf"))
    p = torch.softmax(s, dim=-1)
    del s
    return p @ v_cache


def sliding_window_fused(inputs: list[Tensor], w: int, mask: Tensor) -> Tensor:
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    kp = _padded(k, w)
    del k
    vp = _padded(v, w)
    del v
    y = q.new_empty(b, h, n, d)
    for i in range(n):
        s = q[:, :, i : i + 1] @ kp[:, :, i : i + w].transpose(-1, -2)
        s.mul_(1 / math.sqrt(d))
        s.masked_fill_(mask[i], float("-inf"))
        p = torch.softmax(s, dim=-1)
        del s
        y[:, :, i] = (p @ vp[:, :, i : i + w]).squeeze(-2)
        del p
    return y


def window_mask(n: int, w: int, device: str) -> Tensor:
    """(N, 1, w): slot j of query i holds token i − w + 1 + j, padding when that is negative."""
    pos = torch.arange(n, device=device).view(n, 1, 1) - w + 1 + torch.arange(w, device=device).view(1, 1, w)
    return pos < 0


def linformer(inputs: list[Tensor], e: Tensor, f: Tensor) -> Tensor:
    q, k, v = take(inputs)
    kp = e @ k
    del k
    s = q @ kp.transpose(-1, -2)
    del q, kp
    s.mul_(1 / math.sqrt(v.shape[-1]))
    p = torch.softmax(s, dim=-1)
    del s
    vp = f @ v
    del v
    return p @ vp


def favor_features(m: int, d: int, seed: int = 0) -> Tensor:
    """Ω (m×d): blocks of d orthogonal rows (QR of a Gaussian), each row rescaled to the norm of a
    Gaussian vector (FAVOR+, orthogonal random features). The signs of R's diagonal are moved into Q,
    which makes Q uniformly (Haar) distributed (Mezzadri 2007); without it the estimate is biased."""
    gen = torch.Generator().manual_seed(seed)
    blocks = []
    for _ in range(-(-m // d)):
        qr, r = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
        blocks.append((qr * torch.sign(torch.diagonal(r))).T)
    omega = torch.cat(blocks)[:m]
    return omega * torch.randn(m, d, generator=gen, dtype=torch.float64).norm(dim=1, keepdim=True)


def _favor(box: list[Tensor], omega_t: Tensor) -> Tensor:
    """φ(x) = exp(x̂Ωᵀ − ‖x̂‖²/2), x̂ = x/d^¼ (omega_t is Ωᵀ/d^¼); box = [x], emptied."""
    (x,) = take(box)
    gain = 0.5 / math.sqrt(x.shape[-1])
    p = x @ omega_t
    sq = x * x
    del x
    n = sq.sum(-1, keepdim=True)
    del sq
    p.sub_(n, alpha=gain)
    del n
    return p.exp_()


def performer(inputs: list[Tensor], omega_t: Tensor) -> Tensor:
    q, k, v = take(inputs)
    box = [k]
    del k
    fk = _favor(box, omega_t)
    kv = fk.transpose(-1, -2) @ v
    del v
    z = fk.sum(-2, keepdim=True)
    del fk
    box = [q]
    del q
    fq = _favor(box, omega_t)
    num = fq @ kv
    del kv
    den = fq @ z.transpose(-1, -2)
    del fq, z
    return num.div_(den)


def segments(n: int, c: int, device: str) -> tuple[Tensor, Tensor]:
    """Boundaries ⌊iN/c⌋ (i = 0…c) of c consecutive segments and their lengths (at least 1: an empty
    segment, when N < c, gives a zero landmark)."""
    bounds = torch.tensor([i * n // c for i in range(c + 1)], device=device)
    return bounds, (bounds[1:] - bounds[:-1]).clamp_(min=1).view(c, 1)


def _landmarks(x: Tensor, bounds: Tensor, lengths: Tensor) -> Tensor:
    b, h, n, d = x.shape
    cs = x.new_zeros(b, h, n + 1, d)
    cs[:, :, 1:] = x
    cs.cumsum_(-2)
    edges = cs.index_select(-2, bounds)
    del cs
    xl = edges[:, :, 1:] - edges[:, :, :-1]
    del edges
    return xl.div_(lengths)


def _softmax_scaled(box: list[Tensor], scale: float) -> Tensor:
    """softmax(s·scale) with s scaled in place; box = [s], emptied."""
    (s,) = take(box)
    s.mul_(scale)
    return torch.softmax(s, dim=-1)


def _pinv(a: Tensor, eye: dict[int, Tensor], iterations: int = 6) -> Tensor:
    col = a.sum(-2, keepdim=True)
    top = col.amax(-1, keepdim=True)
    del col
    z = a.transpose(-1, -2) / top
    del top
    for _ in range(iterations):
        az = a @ z
        t = eye[7] - az
        t = az @ t
        torch.sub(eye[15], t, out=t)
        t = az @ t
        del az
        torch.sub(eye[13], t, out=t)
        z = z @ t
        del t
        z.mul_(0.25)
    return z


def nystromformer(inputs: list[Tensor], bounds: Tensor, lengths: Tensor, eye: dict[int, Tensor]) -> Tensor:
    q, k, v = take(inputs)
    scale = 1 / math.sqrt(q.shape[-1])
    ql = _landmarks(q, bounds, lengths)
    kl = _landmarks(k, bounds, lengths)
    box = [ql @ k.transpose(-1, -2)]
    del k
    bk = _softmax_scaled(box, scale)
    bv = bk @ v
    del bk, v
    box = [ql @ kl.transpose(-1, -2)]
    del ql
    ak = _softmax_scaled(box, scale)
    box = [q @ kl.transpose(-1, -2)]
    del q, kl
    fk = _softmax_scaled(box, scale)
    z = _pinv(ak, eye)
    del ak
    wz = fk @ z
    del fk, z
    return wz @ bv


def linear_causal_fused(inputs: list[Tensor]) -> Tensor:
    """The authors' fused causal product: one d×d_v state per head updated token by token (no
    N·d·d_v tensor); the denominator from a cumulative sum of φ(K), as in their CausalLinearAttention."""
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    fq = elu1(q)
    del q
    fk = elu1(k)
    del k
    zc = fk.cumsum(-2)
    den = fq.unsqueeze(-2) @ zc.unsqueeze(-1)
    del zc
    s = fq.new_zeros(b * h, d, d)
    y = fq.new_empty(b, h, n, d)
    for t in range(n):
        torch.baddbmm(s, fk[:, :, t].reshape(b * h, d, 1), v[:, :, t].reshape(b * h, 1, d), out=s)
        y[:, :, t] = torch.bmm(fq[:, :, t].reshape(b * h, 1, d), s).view(b, h, d)
    del fq, fk, v, s
    return y.div_(den.view(b, h, n, 1))


def linear_chunked(inputs: list[Tensor], chunk: int, upper: Tensor) -> Tensor:
    """Chunkwise causal linear attention with every chunk's entering state materialised (flash-linear-attention's
    chunk form, in plain PyTorch); `upper`: the C×C mask above the diagonal. A last chunk shorter than C is padded
    with zero rows (its queries are dropped from the output; no earlier query sees its keys)."""
    q, k, v = take(inputs)
    b, h, n, d = q.shape
    pad = -n % chunk
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    shape = (b, h, (n + pad) // chunk, chunk, d)
    fq = elu1(q).view(shape)
    del q
    fk = elu1(k).view(shape)
    del k
    vc = v.view(shape)
    del v
    u = fk.transpose(-1, -2) @ vc
    uz = fk.sum(-2, keepdim=True)
    s = u.cumsum(2).sub_(u)
    del u
    z = uz.cumsum(2).sub_(uz)
    del uz
    num = fq @ s
    del s
    den = fq @ z.transpose(-1, -2)
    del z
    a = fq @ fk.transpose(-1, -2)
    del fq, fk
    a.masked_fill_(upper, 0)
    flat = num.view(-1, chunk, d)
    torch.baddbmm(flat, a.view(-1, chunk, chunk), vc.reshape(flat.shape), out=flat)
    del vc
    den.add_(a.sum(-1, keepdim=True))
    del a
    return num.div_(den).view(b, h, n + pad, d)[:, :, :n]


# -- flash-linear-attention's fused chunk kernels, where they run --------------------------------

FLA_CHUNK = 64
"""The chunk length flash-linear-attention's chunk_linear_attn runs (chunk_simple_gla's own, not an argument)."""
FLA_DEVICE = "cuda"
"""The device its Triton kernels run on."""


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


PYTORCH_CHUNKS = Implementation(
    "pytorch", "pytorch chunked form (linear-chunked's reference)", f"torch {torch.__version__}", native=False
)


@functools.cache
def fla_linear_attn() -> tuple[Callable | None, str]:
    """flash-linear-attention's chunk_linear_attn and its version, or None and why it cannot run here (it is
    Triton: CUDA only)."""
    try:
        version = metadata.version("fla-core")
    except metadata.PackageNotFoundError:
        return None, "fla-core is not installed (pip install fla-core, on a CUDA machine with Triton)"
    if not torch.cuda.is_available():
        return None, f"fla-core {version} is installed, but its Triton kernels need a CUDA device"
    try:
        from fla.ops.linear_attn import chunk_linear_attn
    except Exception as e:  # any failure to import (Triton missing or too old) means: not usable here
        return None, f"fla-core {version} does not import: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return chunk_linear_attn, version


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


def linear_chunked_fused(inputs: list[Tensor], chunk: int, upper: Tensor) -> Tensor:
    """Causal linear attention by flash-linear-attention's chunk kernels: φ = elu + 1 applied first (two
    element-wise kernels), then chunk_linear_attn(φ(Q), φ(K), V, scale=1, normalize=True) on [B, T, H, K] views of
    the inputs (`Implementation.token_major`: no copy). Where it cannot run (no CUDA, no fla-core, a chunk other
    than 64) the PyTorch chunked form runs instead (`chunk_implementation` says which; the record keeps it)."""
    if not chunk_implementation(chunk, inputs[0].device.type).native:
        return linear_chunked(inputs, chunk, upper)
    fn = fla_linear_attn()[0]
    assert fn is not None  # chunk_implementation chose it
    q, k, v = take(inputs)
    fq = elu1(q).transpose(1, 2)
    del q
    fk = elu1(k).transpose(1, 2)
    del k
    o, _ = fn(fq, fk, v.transpose(1, 2), scale=1.0, normalize=True)
    return o.transpose(1, 2)


# -- the registry: which function implements which variant ---------------------------------------


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


REFERENCES: dict[str, Reference] = {
    "softmax": Reference(softmax, decode=softmax_decode),
    "softmax-causal": Reference(softmax, decode=softmax_decode, options={"causal": True}),
    "softmax-fused": Reference(softmax_fused, decode=softmax_fused_decode),
    "softmax-fused-causal": Reference(softmax_fused, decode=softmax_fused_decode, options={"causal": True}),
    "taylorshift-direct": Reference(taylorshift_direct),
    "taylorshift-efficient": Reference(taylorshift_efficient),
    "linear": Reference(linear),
    "linear-causal": Reference(linear_causal, decode=linear_decode),
    "linear-recurrent": Reference(linear_recurrent, decode=linear_decode),
    "latte": Reference(latte),
    "latte-causal": Reference(latte_causal, decode=latte_decode),
    "latte-recurrent": Reference(latte_recurrent, decode=latte_decode),
    "optimized-attention": Reference(layer="QK"),
    "efficient-attention": Reference(layer="Q"),
    "super-attention": Reference(layer="super"),
    "gqa": Reference(gqa, decode=gqa_decode),
    "gqa-causal": Reference(gqa_causal, decode=gqa_decode),
    "sliding-window": Reference(sliding_window, decode=sliding_window_decode, constants=lambda s, p: _window(s, p)),
    "sliding-window-fused": Reference(
        sliding_window_fused, decode=sliding_window_decode, constants=lambda s, p: _window(s, p)
    ),
    "linformer": Reference(
        linformer, constants=lambda s, p: {"e": p.get("E", s.proj, s.N), "f": p.get("F", s.proj, s.N)}
    ),
    "performer": Reference(performer, constants=lambda s, p: {"omega_t": _omega(s, p)}),
    "nystromformer": Reference(nystromformer, constants=lambda s, p: _nystrom(s, p)),
    "linear-causal-fused": Reference(linear_causal_fused, decode=linear_decode),
    "linear-chunked": Reference(linear_chunked, decode=linear_decode, constants=lambda s, p: _chunks(s, p)),
    "linear-chunked-fused": Reference(
        linear_chunked_fused,
        decode=linear_decode,
        constants=lambda s, p: _chunks(s, p),
        implementation=lambda s, device: chunk_implementation(s.chunk, device),
        stands_in="linear-chunked",
    ),
}


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


def _window(s, p) -> dict:
    return {"w": s.window, "mask": window_mask(s.N, s.window, p.device)}


def _chunks(s, p) -> dict:
    upper = torch.ones(s.chunk, s.chunk, dtype=torch.bool, device=p.device).triu_(1)
    return {"chunk": s.chunk, "upper": upper}


def _omega(s, p) -> Tensor:
    omega = favor_features(s.features, s.d) * s.d**-0.25
    return omega.T.contiguous().to(device=p.device, dtype=p.dtype)


def _nystrom(s, p) -> dict:
    bounds, lengths = segments(s.N, s.landmarks, p.device)
    eye = torch.eye(s.landmarks, device=p.device, dtype=p.dtype)
    return {"bounds": bounds, "lengths": lengths.to(p.dtype), "eye": {n: eye * n for n in (7, 15, 13)}}
