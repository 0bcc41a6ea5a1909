"""attn-cost: exact cost formulas, crossovers and device checks for attention variants.

The repository keeps the design card's top-level folders (`costmodel/`, `profilers/`, `cli/`); installed,
they live under this namespace as `attn_cost.costmodel`, `attn_cost.profilers` and `attn_cost.cli`, so they
never collide with another distribution's `cli` or `costmodel`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attn-cost")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
