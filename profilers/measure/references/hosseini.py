"""Hosseini et al.'s layers (`costmodel/variants/hosseini.py`): run as a whole layer by the cases
(`measure.cases`), with the projections each keeps; no core of their own."""

from __future__ import annotations

from attn_cost.profilers.measure.references import layer_reference

layer_reference("optimized-attention", "QK")
layer_reference("efficient-attention", "Q")
layer_reference("super-attention", "super")
