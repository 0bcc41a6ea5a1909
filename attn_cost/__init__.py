"""attn-cost: exact cost formulas, crossovers and device checks for attention variants.

The repository keeps the design card's top-level folders (`costmodel/`, `profilers/`, `cli/`); installed,
they live under this namespace as `attn_cost.costmodel`, `attn_cost.profilers` and `attn_cost.cli`, so they
never collide with another distribution's `cli` or `costmodel`.
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`attn_cost.__version__`, read from the installed metadata only when asked for: the console
    script imports this package first, and stays light until its Ctrl-C handler is in place."""
    if name != "__version__":
        raise AttributeError(f"module 'attn_cost' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("attn-cost")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"
