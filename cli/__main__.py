"""`python -m cli` runs the same entry point as the `attn-cost` script."""

from attn_cost.cli.app import run

run()
