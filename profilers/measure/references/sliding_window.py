"""Reference implementations of sliding-window attention (`costmodel/variants/sliding_window.py`): the banded
kernel (an N×w score band, K and V through strided windows), the fused form one query at a time, and the decoding
step over a rolling buffer."""

from __future__ import annotations

import math

import torch
from attn_cost.profilers.measure.references import decode_reference, reference, take
from torch import Tensor


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


def window_mask(n: int, w: int, device: str) -> Tensor:
    """(N, 1, w): slot j of query i holds token i − w + 1 + j, padding when that is negative."""
    pos = torch.arange(n, device=device).view(n, 1, 1) - w + 1 + torch.arange(w, device=device).view(1, 1, w)
    return pos < 0


def _window(s, p) -> dict:
    return {"w": s.window, "mask": window_mask(s.N, s.window, p.device)}


@reference("sliding-window", constants=_window)
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


@reference("sliding-window-fused", constants=_window)
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


@decode_reference("sliding-window", "sliding-window-fused")
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
