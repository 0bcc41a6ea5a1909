"""TaylorShift written the straightforward way, as a benchmark script would: no in-place ops, no `del`.

    attn-cost trace docs/examples/naive_taylorshift.py:direct
    attn-cost crossover --trace docs/examples/naive_taylorshift.py:direct \
        --trace docs/examples/naive_taylorshift.py:efficient --pair direct:efficient --d 8 --d 16 --d 32

The maths of Nauen et al. (arXiv 2403.02920, Eqs. 1 and 3; the normalisation of Sec. 3.3 left out, as
in the paper's complexity analysis), but every expression allocates: `0.5 * attn.square() + attn + 1`
has three N×N tensors alive at once, and `0.5 * box(q, q) @ a_mod` (evaluated as (½·(Q⊠Q))·A_mod)
holds two N×d² tensors at once. The caller holds q, k and v for the whole call. The catalogue's
`taylorshift-direct` and `taylorshift-efficient` follow the paper's memory analysis instead.
"""

import torch


def direct(q, k, v):
    """T-SM(QKᵀ)V with the N×N matrix materialised."""
    attn = q @ k.transpose(-1, -2)
    attn = 0.5 * attn.square() + attn + 1
    attn = attn / attn.sum(-1, keepdim=True)
    return attn @ v


def box(a, b):
    """Row-wise tensor product a ⊠ b: row n is vec(a_n ⊗ b_n)."""
    return (a.unsqueeze(-1) * b.unsqueeze(-2)).flatten(-2)


def efficient(q, k, v):
    """The O(Nd³) form via ⊠; the normaliser rides along as a column of ones prepended to V."""
    y = numerator(q, k, torch.cat([torch.ones_like(v[..., :1]), v], dim=-1))
    return y[..., 1:] / y[..., :1]


def numerator(q, k, v):
    """[normaliser, Y] before the division: ½(Q⊠Q)A_mod + Q(KᵀV) + ΣV, with A_mod = (K⊠K)ᵀV."""
    a_mod = box(k, k).transpose(-1, -2) @ v
    return 0.5 * box(q, q) @ a_mod + q @ (k.transpose(-1, -2) @ v) + v.sum(-2, keepdim=True)
