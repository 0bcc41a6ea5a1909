"""`python -m attn_cost`: the same entry point as the `attn-cost` console script."""

from attn_cost.cli.entry import run

run()
