"""Reference implementation of Linformer (`costmodel/variants/linformer.py`): K and V projected from N to k rows by
the learned E and F (taken from the case's parameters, so that training makes them trainable)."""

from __future__ import annotations

import math

import torch
from attn_cost.profilers.measure.references import reference, take
from torch import Tensor


def _projections(s, p) -> dict:
    return {"e": p.get("E", s.proj, s.N), "f": p.get("F", s.proj, s.N)}


@reference("linformer", constants=_projections)
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
