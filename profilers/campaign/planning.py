"""What a campaign measures on a GPU before it measures it: the shape that loads the device, and each unit's cost.

Shape. A kernel with one block per head (linear attention's Kᵀ·V, a d×d product per head; SDPA at one query block)
leaves SMs idle while b·h is below the SM count, and then measures the host's launches, not the GPU. The default
shape gives such a kernel WAVES full waves over the SMs at the smallest length measured: h = GPU_HEADS heads (a
common head count) and b = ⌈WAVES · SMs / h⌉. A shape a user asks for is kept, and said to be launch-bound where
b·h is below the SM count.

Cost. Before a unit (a pair at one head dim and dtype) starts, its device time is predicted from a pricing of one
call (the datasheet model of the GPU, launches left out: the timer's device time is a graph replay) over the lengths
its search is expected to time: octaves from the search's start to the predicted crossing (to the longest length
when none is predicted), a bisection there, and the replicates around it; each length costs both variants' warm-up
and timed runs. A unit whose prediction exceeds its cap is not started, with the figures that decided it; a length
whose calls would exceed MAX_CALL_S is not searched (the search's longest length is capped there).

numpy only: the planner is priced by a function it is given, so it is tested without torch or a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

WAVES = 4
"""Full waves over the SMs that the default shape gives a kernel with one block per head."""
GPU_HEADS = 8
"""Heads of the default GPU shape (published attention benchmarks use 8 to 32)."""
MAX_CALL_S = 0.1
"""Longest call a search times on a GPU: a length whose calls would take longer is beyond the unit's reach."""
BISECTIONS = 6
"""Lengths a search times inside the crossing's octave (to 2 % of N)."""
BRACKET_LENGTHS = 4
"""Lengths each replicate re-times around a found crossing (the bracket and 10 % beyond it)."""

Price = Callable[[str, np.ndarray], np.ndarray]
"""Seconds of one call of a variant at each length."""


def loaded_shape(sm_count: int, heads: int | None = None, batch: int | None = None) -> tuple[int, int]:
    """(heads, batch) that give a one-block-per-head kernel WAVES waves over `sm_count` SMs; a given head count or
    batch is kept (only the other is derived; both given: both kept)."""
    target = WAVES * max(1, sm_count)
    if heads is not None and batch is not None:
        return heads, batch
    if batch is not None:
        return max(1, math.ceil(target / batch)), batch
    heads = heads or GPU_HEADS
    return heads, max(1, math.ceil(target / heads))


def launch_bound_shape(sm_count: int, heads: int, batch: int) -> str | None:
    """Why a shape leaves SMs idle (a label for the plan and each unit), or None where it fills them."""
    if heads * batch >= sm_count:
        return None
    return (
        f"launch-bound shape: b·h = {heads * batch} heads for {sm_count} SMs, so a kernel with one block per head "
        f"leaves {sm_count - heads * batch} SMs idle"
    )


@dataclass(frozen=True)
class UnitCost:
    """A unit's predicted device time and what it rests on."""

    seconds: float
    lengths: int
    """Lengths the search is expected to time."""
    n_cap: int
    """The longest length whose calls stay under MAX_CALL_S (the unit's search stops there)."""
    crossing: int | None
    """The predicted crossing (None: none before n_cap)."""

    def says(self) -> str:
        where = f"predicted crossing N ≈ {self.crossing:,}" if self.crossing else "no crossing predicted"
        return f"{where}, about {self.lengths} lengths up to N = {self.n_cap:,}: {self.seconds:.0f} s predicted"


def length_seconds(call_s: float, repeats: int, run_s: float, overhead_s: float) -> float:
    """Device time of timing one variant at one length: warm-up calls, then `repeats` runs of each of the two
    timings (graph replay and eager), each at least `run_s` and three calls long, and a fixed overhead (capture,
    counting the kernels, the host's issue time)."""
    return overhead_s + 5 * call_s + repeats * 2 * max(run_s, 3 * call_s)


def unit_cost(
    price: Price,
    a: str,
    b: str,
    start: int,
    n_max: int,
    *,
    repeats: int,
    replicates: int,
    run_s: float,
    overhead_s: float = 0.03,
    grain: int = 8,
) -> UnitCost:
    """The device time of profiling A against B from `start`, predicted with `price` (see the module)."""
    octaves = np.array([grain * 2**k for k in range(int(math.log2(max(n_max, grain) / grain)) + 1)], dtype=float)
    call = np.maximum(price(a, octaves), price(b, octaves))
    reach = octaves[call <= MAX_CALL_S]
    n_cap = int(min(n_max, reach[-1])) if reach.size else grain
    ns = np.unique(np.linspace(grain, n_cap, 512).round())
    faster = price(b, ns) <= price(a, ns)
    flips = np.nonzero(faster[1:] != faster[:-1])[0]
    crossing = int(ns[flips[-1] + 1]) if flips.size and faster[-1] else None
    target = crossing or (n_cap if not faster[-1] else grain)
    lo, hi = sorted((max(grain, start), max(grain, target)))
    walk = [float(min(n_cap, lo * 2**k)) for k in range(math.ceil(math.log2(hi / lo)) + 1)]
    near = [float(target)] * (BISECTIONS + (replicates * BRACKET_LENGTHS if crossing else 0))
    lengths = np.array(walk + (near if crossing else []), dtype=float)
    per_variant = [sum(length_seconds(float(t), repeats, run_s, overhead_s) for t in price(v, lengths)) for v in (a, b)]
    return UnitCost(sum(per_variant), len(lengths), n_cap, crossing)
