"""`python -m cli` runs the same entry point as the `attn-cost` script."""

from cli.app import run

run()
