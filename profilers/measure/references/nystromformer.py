"""Reference implementation of Nyströmformer (`costmodel/variants/nystromformer.py`): c segment-mean landmarks, three
softmax kernels and a 6-iteration pseudo-inverse."""

from __future__ import annotations

import math

import torch
from attn_cost.profilers.measure.references import reference, take
from torch import Tensor


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


def _nystrom(s, p) -> dict:
    bounds, lengths = segments(s.N, s.landmarks, p.device)
    eye = torch.eye(s.landmarks, device=p.device, dtype=p.dtype)
    return {"bounds": bounds, "lengths": lengths.to(p.dtype), "eye": {n: eye * n for n in (7, 15, 13)}}


@reference("nystromformer", constants=_nystrom)
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
