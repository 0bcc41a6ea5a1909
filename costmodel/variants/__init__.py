"""The catalogue: every attention variant, each written once as an op list.

A variant module registers an attention *core* (per-head q, k, v in, per-head output out) with
`@variant`, or a whole *layer* (x in, x out, projections included) with `@layer_variant` when the
mechanism is defined by its projections (Hosseini et al.). `@decode_step` attaches the cost of one
generated token. `costmodel.scopes` puts any of them inside a layer, a block, a model.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import sympy as sp
from attn_cost.costmodel.counting import Counting
from attn_cost.costmodel.derive import Derived
from attn_cost.costmodel.errors import UserError, unknown
from attn_cost.costmodel.graph import Graph, Tensor
from attn_cost.costmodel.plugins import load_configured
from attn_cost.costmodel.scopes import SCOPES, build_graph
from attn_cost.costmodel.symbols import d, h

CoreFn = Callable[..., Tensor]
"""(g, q, k, v, *extra inputs) -> y: an attention core (`Variant.extra_inputs`: a gate's, β's)."""
LayerFn = Callable[[Graph, Tensor], Tensor]
DecodeFn = Callable[[Graph], None]


@dataclass(frozen=True)
class Variant:
    """A registered variant and the functions that write its ops."""

    name: str
    summary: str
    source: str
    family: str
    core: CoreFn | None = None
    """(g, q, k, v, *extra inputs) -> y over per-head tensors (b, h, N, ·)."""
    layer: LayerFn | None = None
    """(g, x) -> y over (b, N, d_embed), for variants defined together with their projections."""
    decode: DecodeFn | None = None
    """One generated token given N tokens of context (KV cache or recurrent state)."""
    qk_width: sp.Expr = d
    """Per-head width of the query/key inputs (d; Latte's latent logits have L)."""
    kv_heads: sp.Expr = h
    """Heads of the key/value inputs (h; grouped-query attention has h_kv)."""
    v_width: sp.Expr = d
    """Per-head width of the value input (d; d_v where keys and values have widths of their own)."""
    qk_heads: sp.Expr | None = None
    """Heads of the query and key inputs where they are fewer than the values' (Mamba-2's G groups of B and C)."""
    extra_inputs: tuple[tuple[str, sp.Expr], ...] = ()
    """Per-token inputs besides Q, K and V, as (name, width per head; 1: one scalar a token and head), with the
    values' heads: the pre-activations of a gate or of β. The core scope hands them to the core after Q, K, V; a
    layer projects each from X as it projects Q, K and V."""
    causal: bool = False
    causal_form: str | None = None
    """The registered causal counterpart of a bidirectional variant."""
    bias: str = "all"
    """Which projections of its layer carry a bias (`scopes.BIASES`): what the implementation it describes does."""

    @property
    def scopes(self) -> list[str]:

        return [s for s in SCOPES if (s != "core" or self.core) and (s != "decode" or self.decode)]


REGISTRY: dict[str, Variant] = {}


def variant(name: str, summary: str, *, source: str, family: str, **options) -> Callable[[CoreFn], CoreFn]:
    """Register an attention core under a canonical name."""

    def register(core: CoreFn) -> CoreFn:
        add_variant(Variant(name, summary, source, family, core=core, **options))
        return core

    return register


def layer_variant(name: str, summary: str, *, source: str, family: str, **options) -> Callable[[LayerFn], LayerFn]:
    """Register a variant that only exists as a whole layer (its projections are part of it)."""

    def register(layer: LayerFn) -> LayerFn:
        add_variant(Variant(name, summary, source, family, layer=layer, **options))
        return layer

    return register


def decode_step(*names: str) -> Callable[[DecodeFn], DecodeFn]:
    """Attach a one-token decoding step to registered variants that have none (a second step for a variant would
    silently replace its first, as a second @variant of a name would: both are refused)."""

    def register(fn: DecodeFn) -> DecodeFn:
        for name in names:
            if name not in REGISTRY:
                raise UserError(unknown("variant", name, REGISTRY) + ": @decode_step needs a registered variant")
            if REGISTRY[name].decode is not None:
                raise UserError(f"variant {name!r} already has a decoding step (source: {REGISTRY[name].source}): "
                                "write a new variant with its own @decode_step instead")  # fmt: skip
        for name in names:
            REGISTRY[name] = replace(REGISTRY[name], decode=fn)
        return fn

    return register


def add_variant(v: Variant) -> None:
    if v.name in REGISTRY:
        known = REGISTRY[v.name].source
        raise UserError(f"variant {v.name!r} is already registered (source: {known}); choose another name")
    REGISTRY[v.name] = v


def get_variant(name: str) -> Variant:
    """Look a variant up by canonical name; unknown names get a suggestion."""
    _load()
    try:
        return REGISTRY[name]
    except KeyError:
        raise UserError(unknown("variant", name, REGISTRY)) from None


def catalogue_only() -> bool:
    """Whether every registered variant is the catalogue's own, as this package writes it: no variant file, plugin,
    traced code or test has registered one or given one a decoding step (`memo` keeps derivations only then)."""
    _load()
    ours = f"{__name__}."
    return all(fn.__module__.startswith(ours) for v in REGISTRY.values() for fn in (v.core, v.layer, v.decode)
               if fn is not None)  # fmt: skip


def all_variants() -> list[Variant]:
    _load()
    return list(REGISTRY.values())


@cache
def derive(
    name: str,
    scope: str = "core",
    mode: str = "inference",
    kv: bool = False,
    bias: str | None = None,
    dropout: sp.Expr | None = None,
    padding: bool = False,
    feature_map: str = "elu1",
    normalize: bool = True,
) -> Derived:
    """Build a variant's graph at a scope and mode and derive its costs (cached per process);
    kv: keys and values of their own length N_kv (`--n-kv`); bias: which projections carry a bias
    (None: the variant's own, `Variant.bias`); dropout, padding: attention dropout probability in training and a
    key padding mask (`--dropout`, `--padding-mask`); feature_map, normalize: a linear attention's φ and its
    normaliser (`--feature-map`, `--normalize`)."""

    return Derived(build_graph(get_variant(name), scope, mode, kv, bias, dropout, padding, feature_map, normalize))


def derive_counted(name: str, scope: str, mode: str, counting: Counting) -> Derived:
    """`derive` with the graph options a `Counting` carries: N_kv, biases, dropout, padding mask, feature map and
    normaliser."""
    return derive(name, scope, mode, counting.n_kv is not None, counting.bias, counting.dropout, counting.padding_mask,
                  counting.feature_map, counting.normalize)  # fmt: skip


def _load() -> None:
    """Import every module of this package (each registers its variants as it is imported, in the order of their
    names), then the user's own variant files: a catalogue variant touches its own module only."""
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        importlib.import_module(f"{__name__}.{module}")
    _load_user_files()


def _load_user_files() -> None:
    """The user's own variant files: ATTN_COST_VARIANTS and the `attn_cost.variants` entry points."""

    load_configured()
