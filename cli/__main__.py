"""`python -m cli` runs the same entry point as the `attn-cost` script."""

from attn_cost.cli.entry import run

run()
