"""The names measured devices go by: their device profiles' and op calibrations' slugs, shipped or the user's.

Below `datasheet/data.py` (whose rows may not take these names), `calibrated/data.py`, `measured/data.py` and
`kinds.py` (which resolves any name), so that none imports another's callers, and numpy- and scipy-free: `crossover`
reads them."""

from __future__ import annotations

from pathlib import Path

from attn_cost.profilers import DATA
from attn_cost.profilers.store.store import named_files

PROFILES = DATA / "devices"
"""The shipped device profiles."""
OPMODELS = DATA / "opmodels"
"""The shipped op calibrations."""


def known_profiles() -> dict[str, Path]:
    """Device profiles by name: shipped ones, overridden by the user's own."""

    return named_files(PROFILES, "devices")


def known_opmodels() -> dict[str, Path]:
    """Op calibrations by device slug: shipped ones, overridden by the user's own."""

    return named_files(OPMODELS, "opmodels")


def measured_names() -> list[str]:
    """The names of the devices measured here or shipped: their device profiles' and op calibrations' slugs."""

    return sorted({*known_profiles(), *known_opmodels()})
