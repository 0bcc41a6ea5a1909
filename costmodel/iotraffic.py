"""IO-aware traffic of FlashAttention-style tiled kernels.

The unfused traffic (`Derived.traffic`) charges a fused attention op for reading Q, K and V once.
A tiled kernel cannot: its on-chip memory holds one block of queries and one of keys/values, so it
re-reads part of its input, and how much depends on the loop order:

- `fa2` (FlashAttention-2, the default): query blocks outer. Q, O and the log-sum-exp move once, K
  and V once per query block of B_r rows: e·(2Nd + 2N²d/B_r) + 4N bytes, Θ(N²d/B_r). B_r is the
  kernel's own tile (a compile-time choice per head dim and architecture), not a function of the
  on-chip memory M: more shared memory does not lower it.
- `fa1` (FlashAttention, Algorithm 1): key/value blocks outer, B_c = ⌈M/4d⌉ rows; Q, O, ℓ, m re-read
  and O, ℓ, m re-written per K/V block: Θ(N²d²/M) (Theorem 2 of Dao et al., 2022).

Either way the bytes grow as N², while a linear-time variant's grow as N: from some N the fused
kernel moves more bytes than linear attention, although it never materialises the N×N matrix.

Tiles: with `fa2` the FlashAttention-2 forward kernel's kBlockM × kBlockN for the head dim (rounded
up to a compiled one: 32, 64, 96, 128, 192, 256), the GPU's architecture and causality, as chosen in
flash-attention's `csrc/flash_attn/src/flash_fwd_launch_template.h` (no dropout): 128 × 128 at
d ≤ 64; 128 × 64 at d = 96, 128 and 192 on sm80/sm90 (sm86/sm89: 128 × 32 non-causal, 64 × 64
causal at d = 128; 64 × 64 causal at d = 96); at d = 256 128 × 64 where a block can have 128 KiB
but an SM not 192 KiB (A100), else 64 × 64 (H100, sm86/sm89). With `fa1`, Algorithm 1's rule
on M: B_c = ⌈M/4d⌉, B_r = min(⌈M/4d⌉, d), M in elements of the activation dtype. M is the usable
shared memory per thread block (opt-in maximum) of the GPU given (its datasheet's figures: `Gpu`), not the SM's
L1 + shared total.
Given blocks override either rule; blocks whose Q, K and V tiles do not fit in M are refused.

Block counts are N/B (continuous): exact when B divides N, and the formula stays a polynomial in N.
Below one block a kernel reads its inputs once: the traffic is never less than the compulsory
bytes (Q, K, V read once, O and the log-sum-exp written once), a second branch of a maximum.
A decoding step's few query rows are one block. Every other op keeps its unfused traffic, and the
running statistics (ℓ, m, the log-sum-exp) are fp32.

The fused chunk kernels of linear attention (`linear_chunk`, linear-chunked-fused) are tiled by their chunks
already: their unfused traffic (`Derived.op_traffic`) is what flash-linear-attention's two kernels move (K and V
read by both, Q by the second, the state entering each chunk written and read back, the output written; the C×C
scores and the running state on chip), exact where one K×V tile covers the head dim (d ≤ 64).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy as sp
from attn_cost.costmodel.derive import Derived
from attn_cost.costmodel.dtypes import dtype_bytes
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.graph import Op
from attn_cost.costmodel.symbols import N

ORDERS: dict[str, str] = {
    "fa2": "FlashAttention-2: query blocks outer; K and V streamed once per query block (B_r rows): Θ(N²d/B_r)",
    "fa1": "FlashAttention (Algorithm 1): key/value blocks outer; Q, O, ℓ, m re-read once per K/V block "
    "(B_c = ⌈M/4d⌉ rows): Θ(N²d²/M)",
}


@dataclass(frozen=True)
class Gpu:
    """What the tiled kernels see of a GPU: its architecture and shared memory, as its datasheet gives them (the
    datasheet table, profilers/data/gpus.json, is the one list of GPUs: `Datasheet.gpu` makes one of these; the
    engine takes the figures as arguments and reads no table)."""

    name: str
    arch: str
    """Compute capability: sm80, sm86, sm89, sm90 (cdna3: AMD's, tiled as sm90 is)."""
    smem_per_block: int
    """Usable shared memory of one thread block, bytes (the opt-in maximum)."""
    smem_per_sm: int
    """Shared memory of one streaming multiprocessor, bytes."""


KERNEL_HEAD_DIMS = (32, 64, 96, 128, 192, 256)
"""Head dims FlashAttention-2 compiles forward kernels for; a smaller d runs the next one up."""


def fa2_tiles(gpu: Gpu, d: int, causal: bool) -> tuple[int, int] | None:
    """kBlockM × kBlockN of FlashAttention-2's forward kernel (flash_fwd_launch_template.h, no dropout)."""
    hd = next((k for k in KERNEL_HEAD_DIMS if d <= k), None)
    sm8x = gpu.arch in ("sm86", "sm89")
    if hd is None:
        return None
    if hd <= 64:
        return 128, 128
    if hd == 96:
        return (64, 64) if sm8x and causal else (128, 64)
    if hd == 128:
        if sm8x:
            return (64, 64) if causal else (128, 32)
        return 128, 64
    if hd == 192:
        return 128, 64
    big = gpu.smem_per_block >= 2 * hd * (128 + 2 * 64) and gpu.smem_per_sm < 4 * hd * (64 + 2 * 64)
    return (128, 64) if big else (64, 64)


def tile_bytes(d: int, dtype: str, block_q: int, block_kv: int) -> int:
    """Shared memory one block of a tiled fused kernel holds: a tile of B_r query rows and two of B_c key and value
    rows at head dim d."""
    return dtype_bytes(dtype) * d * (block_q + 2 * block_kv)


FITS_HEAD_DIMS = tuple(k for k in KERNEL_HEAD_DIMS if k <= 128)
"""The head dims at which a GPU must hold FlashAttention-2's forward tiles to be one that `io --gpu` and the
datasheet model price (`unfit`): every compiled head dim up to 128, those of nearly every model."""


def unfit(gpu: Gpu) -> str | None:
    """Why a GPU cannot run the fused attention kernel `io --gpu` and the datasheet model tile by (one line), None
    where it can: its shared memory per block must hold FlashAttention-2's forward tiles, causal or not, in bf16 at
    every head dim of `FITS_HEAD_DIMS` (a datasheet row is checked so when it is read: a row that cannot is left
    out of every command alike)."""
    for hd in FITS_HEAD_DIMS:
        for causal in (False, True):
            tiles = fa2_tiles(gpu, hd, causal)
            assert tiles is not None  # every compiled head dim has a kernel
            need = tile_bytes(hd, "bf16", *tiles)
            if need > gpu.smem_per_block:
                return (f"its {gpu.smem_per_block:,} bytes of shared memory per block cannot hold FlashAttention-2's "
                        f"{tiles[0]} × {tiles[1]} tiles at head dim {hd} ({need:,} bytes in bf16)")  # fmt: skip
    return None


@dataclass(frozen=True)
class Tiles:
    """What the tiled kernel is given: a GPU (its shared memory and architecture), optional explicit
    on-chip memory and blocks, loop order."""

    sram_bytes: int | None = None
    block_q: int | None = None
    block_kv: int | None = None
    order: str = "fa2"
    gpu: Gpu | None = None
    """The GPU whose tiles and shared memory are used; None: the blocks and the memory must be given."""

    def resolve(self, d: int, dtype: str, causal: bool = False) -> ResolvedTiles:
        """Block sizes for head dimension d: given ones, else the kernel's own (fa2) or Algorithm 1's rule (fa1)."""
        if self.order not in ORDERS:
            raise UserError(f"unknown kernel order {self.order!r} (known: {', '.join(ORDERS)})")
        for value, flag in ((self.sram_bytes, "--sram"), (self.block_q, "--block-q"), (self.block_kv, "--block-kv")):
            if value is not None and value < 1:
                raise UserError(f"{flag} must be a positive integer, got {value}")
        gpu = self.gpu
        if gpu is not None:
            sram = self.sram_bytes if self.sram_bytes is not None else gpu.smem_per_block
        elif self.sram_bytes is not None and (self.order == "fa1" or (self.block_q and self.block_kv)):
            sram = self.sram_bytes
        else:
            raise UserError("tiles need a GPU (its shared memory and kernel tiles), or the memory and blocks given")
        e = dtype_bytes(dtype)
        m = sram // e
        if self.order == "fa2":
            kernel = fa2_tiles(gpu, d, causal) if gpu is not None else None
            if kernel is None:
                if self.block_q is None or self.block_kv is None:
                    raise UserError(
                        f"FlashAttention-2 has no kernel for head dim {d} (at most 256): give --block-q and --block-kv"
                    )
                kernel = (self.block_q, self.block_kv)
            bq, bkv = self.block_q or kernel[0], self.block_kv or kernel[1]
            if gpu is None or (self.block_q and self.block_kv):
                source = "given"
            else:
                source = f"FlashAttention-2 forward kernel, {gpu.arch}"
        else:
            by_m = math.ceil(m / (4 * d))
            if self.block_q is None and self.block_kv is None and m < 4 * d:
                raise UserError(f"--sram {sram} bytes cannot hold one row each of Q, K, V and O at d = {d}")
            bq, bkv = self.block_q or min(by_m, d), self.block_kv or by_m
            source = "B_r = min(⌈M/4d⌉, d), B_c = ⌈M/4d⌉ (Algorithm 1)"
        need = tile_bytes(d, dtype, bq, bkv)
        if need > sram:
            raise UserError(
                f"tiles of {bq} query and {bkv} key/value rows need {need:,} bytes of shared memory at d = {d} "
                f"({dtype}), more than the {sram:,} bytes of --sram/--gpu"
            )
        return ResolvedTiles(self, d, dtype, sram, m, bq, bkv, source, gpu.name if gpu is not None else "")


@dataclass(frozen=True)
class ResolvedTiles:
    """Tiles with their block sizes fixed for one head dimension and dtype (recorded in every output)."""

    tiles: Tiles
    d: int
    dtype: str
    sram_bytes: int
    sram_elements: int
    block_q: int
    block_kv: int
    blocks_from: str
    gpu: str

    def as_json(self) -> dict:
        return {
            "order": self.tiles.order,
            "order_means": ORDERS[self.tiles.order],
            "gpu": self.gpu,
            "sram_bytes": self.sram_bytes,
            "sram_elements": self.sram_elements,
            "block_q": self.block_q,
            "block_kv": self.block_kv,
            "blocks_from": self.blocks_from,
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


def compulsory_traffic(op: Op, dtype: str) -> sp.Expr:
    """Bytes any kernel moves for one fused-attention op: Q, K, V read once, O and the log-sum-exp written once."""
    a = op.attrs
    e, stat = dtype_bytes(dtype), dtype_bytes("fp32")
    nq, nk = a["nq"], a["nk"]
    return sp.expand(a["batch"] * (e * (nq * a["dqk"] + nk * (a["dqk"] + a["dv"]) + nq * a["dv"]) + stat * nq))


def io_traffic(derived: Derived, tiles: ResolvedTiles, floor: bool = False) -> sp.Expr:
    """Traffic of a variant with its fused attention ops tiled and every other op unfused (inference);
    floor: each fused op at its compulsory bytes instead (the second branch of `io_branches`)."""
    if derived.graph.training:
        raise UserError("the tiled traffic model covers the forward pass: use --mode inference")
    total = sp.Integer(0)
    for op in derived.ops:
        if op.kind != "fused_attention":
            cost = derived.op_traffic(op, tiles.dtype)
        else:
            cost = compulsory_traffic(op, tiles.dtype) if floor else fused_op_traffic(op, tiles)
        total += cost * op.repeat
    return sp.expand(total)


def io_branches(derived: Derived, tiles: ResolvedTiles) -> tuple[sp.Expr, sp.Expr]:
    """The tiled traffic and the compulsory floor: the traffic is their maximum (below one block, a kernel
    reads its inputs once, never less)."""
    return io_traffic(derived, tiles), io_traffic(derived, tiles, floor=True)


def fused_causal(derived: Derived) -> bool:
    """Whether the variant's fused attention op is causal (the kernel's tiles may depend on it)."""
    return any(op.kind == "fused_attention" and op.attrs.get("causal") for op in derived.ops)


def has_fused(derived: Derived) -> bool:
    """Whether the variant runs a fused attention op (otherwise tiled and unfused traffic agree)."""
    return any(op.kind == "fused_attention" for op in derived.ops)
