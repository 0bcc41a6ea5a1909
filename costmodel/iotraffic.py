"""IO-aware traffic of FlashAttention-style tiled kernels.

The unfused traffic (`Derived.traffic`) charges a fused attention op for reading Q, K and V once.
A tiled kernel cannot: its on-chip memory M holds one block of queries and one of keys/values, so
it streams K and V once per query block (FlashAttention-2 order), or Q and the running output once
per key/value block (FlashAttention's Algorithm 1). Either way the bytes grow as N²d²/M (Theorem 2
of Dao et al., 2022), while a linear-time variant's grow as N: from some N the fused kernel moves
more bytes than linear attention, although it never materialises the N×N matrix.

Block sizes follow Algorithm 1: B_c = ⌈M/4d⌉ key rows, B_r = min(⌈M/4d⌉, d) query rows, M counted
in elements of the activation dtype; both can be set instead. Block counts are N/B (continuous):
exact when B divides N, and the formula stays a polynomial in N; a decoding step's few query rows
are one block. Every other op keeps its unfused
traffic, and the running statistics (ℓ, m, the log-sum-exp) are fp32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy as sp
from attn_cost.costmodel.derive import Derived, dtype_bytes
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.graph import Op
from attn_cost.costmodel.symbols import N

ORDERS: dict[str, str] = {
    "fa2": "FlashAttention-2: query blocks outer; K and V streamed once per query block (B_r rows)",
    "fa1": "FlashAttention (Algorithm 1): key/value blocks outer; Q, O, ℓ, m re-read once per K/V block (B_c rows)",
}
DEFAULT_SRAM = 192 * 1024
"""Bytes of on-chip memory per streaming multiprocessor (A100: 192 KiB of L1/shared memory)."""


@dataclass(frozen=True)
class Tiles:
    """What the tiled kernel is given: on-chip memory, optional explicit blocks, loop order."""

    sram_bytes: int = DEFAULT_SRAM
    block_q: int | None = None
    block_kv: int | None = None
    order: str = "fa2"

    def resolve(self, d: int, dtype: str) -> ResolvedTiles:
        """Block sizes for head dimension d: given ones, else Algorithm 1's rule on M."""
        if self.order not in ORDERS:
            raise UserError(f"unknown kernel order {self.order!r} (known: {', '.join(ORDERS)})")
        for value, flag in ((self.sram_bytes, "--sram"), (self.block_q, "--block-q"), (self.block_kv, "--block-kv")):
            if value is not None and value < 1:
                raise UserError(f"{flag} must be a positive integer, got {value}")
        m = self.sram_bytes // dtype_bytes(dtype)
        by_m = math.ceil(m / (4 * d))
        if self.block_q is None and self.block_kv is None and m < 4 * d:
            raise UserError(f"--sram {self.sram_bytes} bytes cannot hold one row each of Q, K, V and O at d = {d}")
        return ResolvedTiles(self, d, dtype, m, self.block_q or min(by_m, d), self.block_kv or by_m)


@dataclass(frozen=True)
class ResolvedTiles:
    """Tiles with their block sizes fixed for one head dimension and dtype (recorded in every output)."""

    tiles: Tiles
    d: int
    dtype: str
    sram_elements: int
    block_q: int
    block_kv: int

    def as_json(self) -> dict:
        return {
            "order": self.tiles.order,
            "order_means": ORDERS[self.tiles.order],
            "sram_bytes": self.tiles.sram_bytes,
            "sram_elements": self.sram_elements,
            "block_q": self.block_q,
            "block_kv": self.block_kv,
            "blocks_from": (
                f"B_r {'given' if self.tiles.block_q else '= min(⌈M/4d⌉, d)'}, "
                f"B_c {'given' if self.tiles.block_kv else '= ⌈M/4d⌉'}"
            ),
            "d": self.d,
            "dtype": self.dtype,
        }


def fused_op_traffic(op: Op, tiles: ResolvedTiles) -> sp.Expr:
    """Bytes one tiled fused-attention op reads and writes (high-bandwidth memory only)."""
    a = op.attrs
    e = dtype_bytes(tiles.dtype)
    stat = dtype_bytes("fp32")
    nq, nk, dqk, dv = a["nq"], a["nk"], a["dqk"], a["dv"]
    if tiles.tiles.order == "fa2":
        br = sp.Integer(tiles.block_q)
        if N not in sp.sympify(nq).free_symbols:  # a few query rows (decoding): one block
            kv_rows = nk
        elif a["causal"]:  # query block i reads the (i+1)·B_r keys at or below the diagonal
            kv_rows = (nq**2 / br + nq) / 2
        else:
            kv_rows = nq / br * nk
        total = e * (nq * dqk + kv_rows * (dqk + dv) + nq * dv) + stat * nq
    else:
        bc = sp.Integer(tiles.block_kv)
        # K_j and V_j once; Q_i, O_i, ℓ_i, m_i read and O_i, ℓ_i, m_i written per (i, j) pair; O, ℓ, m initialised
        pairs_rows = (nk**2 / bc + nk) / 2 if a["causal"] else nk / bc * nq
        total = e * (nk * (dqk + dv) + pairs_rows * (dqk + 2 * dv) + nq * dv) + stat * (4 * pairs_rows + 2 * nq)
    return sp.expand(a["batch"] * total)


def io_traffic(derived: Derived, tiles: ResolvedTiles) -> sp.Expr:
    """Traffic of a variant with its fused attention ops tiled and every other op unfused (inference)."""
    if derived.graph.training:
        raise UserError("the tiled traffic model covers the forward pass: use --mode inference")
    total = sp.Integer(0)
    for op in derived.ops:
        cost = fused_op_traffic(op, tiles) if op.kind == "fused_attention" else derived.op_traffic(op, tiles.dtype)
        total += cost * op.repeat
    return sp.expand(total)


def has_fused(derived: Derived) -> bool:
    """Whether the variant runs a fused attention op (otherwise tiled and unfused traffic agree)."""
    return any(op.kind == "fused_attention" for op in derived.ops)
