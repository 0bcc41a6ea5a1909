"""TaylorShift written the straightforward way, as a benchmark script would: no in-place ops, no `del`.

    attn-cost trace docs/examples/naive_taylorshift.py:direct
    attn-cost crossover --trace docs/examples/naive_taylorshift.py:direct \
        --trace docs/examples/naive_taylorshift.py:efficient --pair direct:efficient --d 8 --d 16 --d 32

The maths of Nauen et al. (arXiv 2403.02920, Eqs. 1 and 3; the normalisation of Sec. 3.3 left out, as in
the paper's complexity analysis), but every expression allocates: `0.5 * s.square() + s + 1` has three
N×N tensors alive at once, and `(0.5 * qq) @ a_mod` holds two N×d² tensors at once. The caller holds q,
k and v for the whole call. The catalogue's `taylorshift-direct` and `taylorshift-efficient` follow the
paper's memory analysis instead.
"""

import torch


def direct(q, k, v):
    """T-SM(QKᵀ)V with the N×N matrix materialised."""
    s = q @ k.transpose(-1, -2)
    p = 0.5 * s.square() + s + 1
    return (p / p.sum(-1, keepdim=True)) @ v


def efficient(q, k, v):
    """The O(Nd³) form via the row-wise tensor product ⊠ (the normaliser rides along as a column of ones)."""
    v = torch.cat([torch.ones_like(v[..., :1]), v], dim=-1)
    kk = (k.unsqueeze(-1) * k.unsqueeze(-2)).flatten(-2)
    a_mod = kk.transpose(-1, -2) @ v
    qq = (q.unsqueeze(-1) * q.unsqueeze(-2)).flatten(-2)
    y = (0.5 * qq) @ a_mod + q @ (k.transpose(-1, -2) @ v) + v.sum(-2, keepdim=True)
    return y[..., 1:] / y[..., :1]
