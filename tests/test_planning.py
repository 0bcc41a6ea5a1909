"""A GPU campaign's plan before it measures: the shape that loads the device, and each unit's predicted cost.

Expected values are hand arithmetic on synthetic prices (seconds per call as a function of N), not the planner's
output.
"""

from __future__ import annotations

import numpy as np
import pytest
from attn_cost.profilers.campaign.planning import (
    MAX_CALL_S,
    WAVES,
    launch_bound_shape,
    loaded_shape,
    unit_cost,
)


@pytest.mark.parametrize("sms", [58, 108, 132, 304])
def test_the_default_shape_gives_a_one_block_per_head_kernel_several_full_waves(sms) -> None:
    heads, batch = loaded_shape(sms)
    assert heads == 8
    assert heads * batch >= WAVES * sms > heads * (batch - 1)  # enough heads, and no more than one batch over
    assert launch_bound_shape(sms, heads, batch) is None


def test_a_head_count_or_batch_the_user_gives_is_kept() -> None:
    assert loaded_shape(132, heads=16) == (16, 33)  # 16 · 33 = 528 = 4 · 132
    assert loaded_shape(132, batch=4) == (132, 4)
    assert loaded_shape(132, heads=1, batch=32) == (1, 32)


def test_a_shape_that_leaves_sms_idle_is_labelled() -> None:
    words = launch_bound_shape(132, 1, 32)
    assert words is not None and "32 heads for 132 SMs" in words and "100 SMs idle" in words


def _price(table: dict):
    return lambda variant, ns: table[variant](np.asarray(ns, dtype=float))


def test_a_unit_of_short_calls_costs_its_lengths_timed_runs() -> None:
    """Both variants 10 µs at every N, B no slower: the search walks down from 256 to 8 (six octaves), each
    length costing per variant 0.03 s + 5 calls + 3 runs × 2 timings × 20 ms."""
    flat = lambda ns: np.full_like(ns, 1e-5)  # noqa: E731
    cost = unit_cost(_price({"a": flat, "b": flat}), "a", "b", 256, 65536, repeats=3, replicates=2, run_s=0.02)
    assert cost.crossing is None and cost.lengths == 6
    assert cost.seconds == pytest.approx(6 * 2 * (0.03 + 5e-5 + 3 * 2 * 0.02))


def test_a_units_search_stops_where_calls_get_too_long_and_its_crossing_is_predicted() -> None:
    """A takes 1e-9·N² s and B 1e-6·N s: B is no slower from N = 1,000; A's call passes MAX_CALL_S at
    N = √(MAX_CALL_S / 1e-9), so the longest octave length under it is the cap."""
    price = _price({"a": lambda ns: 1e-9 * ns**2, "b": lambda ns: 1e-6 * ns})
    cost = unit_cost(price, "a", "b", 64, 65536, repeats=3, replicates=2, run_s=0.02)
    limit = (MAX_CALL_S / 1e-9) ** 0.5
    assert cost.n_cap == max(8 * 2**k for k in range(14) if 8 * 2**k <= limit)
    assert 1000 <= cost.crossing <= 1000 + 8  # the first length of the planner's grid past the crossing
    # octaves 64 … 1,024 (5), a bisection there (6) and 2 replicates × 4 lengths around it
    assert cost.lengths == 5 + 6 + 8


def test_a_unit_whose_calls_are_long_costs_more_than_a_cap() -> None:
    slow = lambda ns: np.full_like(ns, 0.04)  # noqa: E731
    fast = lambda ns: np.full_like(ns, 0.001)  # noqa: E731
    cost = unit_cost(_price({"a": slow, "b": fast}), "a", "b", 1024, 65536, repeats=3, replicates=2, run_s=0.02)
    # B faster throughout: octaves from 8 to 1,024 (8 lengths); A's runs are 3 calls long (0.12 s each)
    per_length = (0.03 + 5 * 0.04 + 3 * 2 * 0.12) + (0.03 + 5 * 0.001 + 3 * 2 * 0.02)
    assert cost.lengths == 8 and cost.seconds == pytest.approx(8 * per_length)
    assert cost.seconds > 8
