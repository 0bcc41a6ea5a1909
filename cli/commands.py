"""Imports every command module so that they register on the typer app."""

from attn_cost.cli import analytic, calibrate, campaign, measure, report, results  # noqa: F401
