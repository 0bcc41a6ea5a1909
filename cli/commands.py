"""Imports every command module so that they register on the typer app."""

from attn_cost.cli import analytic, measure, report  # noqa: F401
