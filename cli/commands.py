"""Imports every command module so that they register on the typer app."""

from attn_cost.cli import analytic, calibrate, campaign, claims, measure, report, results, trace  # noqa: F401
from attn_cost.cli import iotraffic  # noqa: F401
