"""Op checks: one op timed alone in two layouts, to tell whether a variant is slow because of that op's layout.

Latte normalises its keys with a softmax along the sequence axis: over N rows of a (b, h, N, L) tensor, a
reduction whose elements are L apart in memory. The same softmax along the last axis of the transposed (b, h, L, N)
tensor reads the same bytes contiguously. Timed side by side at the same sizes, the two say whether the strided
reduction, rather than a kernel short of parallelism, is what holds Latte below the model's streaming rate (issue
40; the datasheet model prices both at the bandwidth). Each timing is stored like a variant's, under the op's own
name, so a rerun reuses it and an export carries it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from attn_cost.costmodel.dtypes import dtype_bytes
from attn_cost.profilers.measure.cases import DTYPES, Case
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.measure.timing import OutOfMemoryError, time_cases
from attn_cost.profilers.store.store import ResultStore, record_key

SOFTMAX_AXES = {"op:softmax-sequence-axis": -2, "op:softmax-last-axis": -1}
"""The two layouts of Latte's key softmax: along the sequence of (b, h, N, L), along the last axis of (b, h, L, N)."""


@dataclass(frozen=True)
class AxisCheck:
    """One length: seconds per call of the softmax along each axis, and the bytes each reads and writes."""

    n: int
    sequence_axis_s: float | None
    last_axis_s: float | None
    bytes: int

    def as_json(self) -> dict:
        return {"N": self.n, "sequence_axis_s": self.sequence_axis_s, "last_axis_s": self.last_axis_s,
                "bytes": self.bytes}  # fmt: skip


def build_case(name: str, sizes: Sizes, dtype: str, device: str) -> Case:
    """The softmax of one layout as a timed case."""
    dim = SOFTMAX_AXES[name]
    shape = (sizes.b, sizes.h, sizes.N, sizes.latents) if dim == -2 else (sizes.b, sizes.h, sizes.latents, sizes.N)

    def make() -> list[torch.Tensor]:
        return [torch.randn(shape, dtype=DTYPES[dtype], device=device)]

    def run(inputs: list[torch.Tensor]) -> torch.Tensor:
        return torch.softmax(inputs[0], dim=dim)

    return Case(name, "core", sizes, dtype, device, run, make)


def softmax_axes(
    store: ResultStore, device: str, dtype: str, template: Sizes, lengths: list[int], repeats: int = 3
) -> list[AxisCheck]:
    """Latte's key softmax along the sequence axis against the same softmax along the last axis, at each length
    (stored timings reused; a length that does not fit is None)."""
    out = []
    for n in lengths:
        sizes = Sizes(N=n, d=template.d, h=template.h, b=template.b, L=template.L)
        seconds: dict[str, float | None] = {}
        for name in SOFTMAX_AXES:
            key = record_key("time", name, "core", dtype, sizes.as_dict(), store.device)
            rec = store.get(key)
            if rec is None:
                try:
                    (stats,) = time_cases([build_case(name, sizes, dtype, device)], repeats, 2)
                    rec = store.add({"kind": "time", "key": key, "variant": name, "scope": "core", "dtype": dtype,
                                     "sizes": sizes.as_dict(), "time": stats.as_json(), "status": "ok"})  # fmt: skip
                except OutOfMemoryError:
                    rec = store.add({"kind": "time", "key": key, "variant": name, "scope": "core", "dtype": dtype,
                                     "sizes": sizes.as_dict(), "time": None, "status": "oom"})  # fmt: skip
            seconds[name] = rec["time"]["median"] if rec["status"] == "ok" and rec["time"] else None
        elements = sizes.b * sizes.h * n * sizes.latents
        nbytes = 2 * elements * dtype_bytes(dtype)
        out.append(AxisCheck(n, seconds["op:softmax-sequence-axis"], seconds["op:softmax-last-axis"], nbytes))
    return out
