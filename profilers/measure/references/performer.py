"""Reference implementation of Performer's FAVOR+ (`costmodel/variants/performer.py`): m positive orthogonal random
features, linear attention on them."""

from __future__ import annotations

import math

import torch
from attn_cost.profilers.measure.references import reference, take
from torch import Tensor


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


def _omega(s, p) -> Tensor:
    omega = favor_features(s.features, s.d) * s.d**-0.25
    return omega.T.contiguous().to(device=p.device, dtype=p.dtype)


@reference("performer", constants=lambda s, p: {"omega_t": _omega(s, p)})
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
