"""The catalogue: every attention variant, each written once as an op list.

A variant module registers its builders with `@variant(...)`; `get_variant` and `derive` look
them up by canonical name (lowercase, hyphenated, as in the design card).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from costmodel.conventions import unknown
from costmodel.derive import Derived
from costmodel.errors import UserError
from costmodel.graph import Graph, Tensor
from costmodel.symbols import N, b, d, h


@dataclass(frozen=True)
class Variant:
    """A registered variant: its name, a one-line summary and the function that writes its ops."""

    name: str
    summary: str
    source: str
    build: Callable[[Graph], None]
    family: str
    extra_dims: tuple[sp.Symbol, ...] = ()
    """Symbols besides N, d, h, b that its costs depend on (e.g. Latte's L)."""


REGISTRY: dict[str, Variant] = {}


def variant(name: str, summary: str, *, source: str, family: str, extra_dims: tuple[sp.Symbol, ...] = ()):
    """Register a builder under a canonical name."""

    def register(build: Callable[[Graph], None]) -> Callable[[Graph], None]:
        if name in REGISTRY:
            raise RuntimeError(f"variant {name} registered twice")
        REGISTRY[name] = Variant(name, summary, source, build, family, extra_dims)
        return build

    return register


def qkv(g: Graph, dv: sp.Expr = d) -> tuple[Tensor, Tensor, Tensor]:
    """Per-head queries, keys and values, shape (b, h, N, d)."""
    return g.input("Q", b, h, N, d), g.input("K", b, h, N, d), g.input("V", b, h, N, dv)


def get_variant(name: str) -> Variant:
    """Look a variant up by canonical name; unknown names get a suggestion."""
    _load()
    try:
        return REGISTRY[name]
    except KeyError:
        raise UserError(unknown("variant", name, REGISTRY)) from None


def all_variants() -> list[Variant]:
    _load()
    return list(REGISTRY.values())


@lru_cache(maxsize=None)
def derive(name: str) -> Derived:
    """Build a variant's graph and derive its costs (cached per process)."""
    v = get_variant(name)
    g = Graph(v.name)
    v.build(g)
    if not g.ops or not g.outputs:
        raise RuntimeError(f"variant {name} produced no ops or no output")
    return Derived(g)


def _load() -> None:
    from costmodel.variants import softmax, taylorshift  # noqa: F401  (registers on import)
