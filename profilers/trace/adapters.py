"""Adapters that give any attention module one call shape: a core function (q, k, v) -> y, a layer taking x,
and the attention classes of Hugging Face `transformers` (their masks, position ids and config)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from attn_cost.costmodel.errors import UserError


class Core(torch.nn.Module):
    """Wraps a function (q, k, v) -> y."""

    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, q, k, v):
        return self.fn(q, k, v)


class _SelfAttention(torch.nn.Module):
    """A module whose forward takes query, key and value (nn.MultiheadAttention), run as self-attention; a
    required mask or position argument gets None (no mask)."""

    def __init__(self, inner: torch.nn.Module, names: list[str]) -> None:
        super().__init__()
        self.inner = inner
        self.given = [not any(w in n.lower() for w in ("mask", "pos", "bias", "rel")) for n in names]

    def forward(self, x):
        return self.inner(*[x if given else None for given in self.given])


def by_arguments(module: torch.nn.Module) -> torch.nn.Module:
    """What a module's forward takes decides how it is run: one tensor, a layer; several (query, key, value),
    self-attention on x when the module has an embedding width, else per-head (b, h, N, d) tensors, a core."""
    if isinstance(module, (Core, _HFAttention)):
        return module
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return module
    required = [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in required]
    if len(required) < 2:
        return module
    try:
        embed_width(module, Path("."), "")
    except UserError:
        if len(required) == 3:
            return Core(module)
        raise
    return _SelfAttention(module, names)


class _HFAttention(torch.nn.Module):
    """A `transformers` attention class, called as its model calls it: rotary position embeddings from the
    model's own `*RotaryEmbedding`, the mask its model gives this layer (the layer type the config names, built
    by the function `transformers.masking_utils` maps that type to), no mask for an encoder; the attention
    output (element 0). transformers' own functions are called with the arguments their installed signature
    declares (`_call_declared`), so a renamed or newly required argument does not break the call."""

    def __init__(self, attn: torch.nn.Module, config: Any) -> None:
        super().__init__()
        self.attn, self.config = attn, config
        params = inspect.signature(attn.forward).parameters
        self.wants = {k for k in ("position_embeddings", "attention_mask", "position_ids") if k in params}
        required = [k for k, p in params.items() if p.default is p.empty and p.kind == p.POSITIONAL_OR_KEYWORD]
        self.others = [k for k in required[1:] if k not in self.wants]
        types = getattr(config, "layer_types", None)
        index = getattr(attn, "layer_idx", None) or 0
        self.layer_type = types[index] if isinstance(types, (list, tuple)) and index < len(types) else None
        rope = _sibling(attn, "RotaryEmbedding")
        self.rotary = rope(config=config) if rope is not None and "position_embeddings" in self.wants else None
        self.causal = bool(getattr(attn, "is_causal", False) or getattr(config, "is_decoder", False))
        self.positions = bool(self.wants & {"position_embeddings", "position_ids"} or self.causal)

    def arguments(self, x: torch.Tensor, position_ids: Any) -> dict[str, Any]:
        """The keyword arguments the model passes its attention layer for one unpadded sequence per row."""
        kwargs: dict[str, Any] = {}
        if "position_ids" in self.wants:
            kwargs["position_ids"] = position_ids
        if self.causal and "attention_mask" in self.wants:  # the mask first, as the models build them
            kwargs["attention_mask"] = _hf_mask(self.config, x, position_ids, self.layer_type)
        if self.rotary is not None:
            kwargs["position_embeddings"] = _call_declared(
                self.rotary, x, {"position_ids": position_ids, "layer_type": self.layer_type})
        for name in self.others:  # required arguments the model passes as None here (Falcon's alibi without ALiBi)
            kwargs.setdefault(name, None)
        return kwargs

    def forward(self, x):
        # the position ids live through the call, as in the model's forward
        position_ids = torch.arange(x.shape[1], device=x.device).unsqueeze(0) if self.positions else None
        out = self.attn(x, **self.arguments(x, position_ids))
        return out[0] if isinstance(out, (tuple, list)) else out


def _sibling(module: torch.nn.Module, suffix: str) -> type | None:
    """A class defined beside the module's class whose name ends with `suffix` (its RotaryEmbedding)."""
    home = sys.modules.get(type(module).__module__)
    found = [v for k, v in vars(home or object()).items() if k.endswith(suffix) and isinstance(v, type)]
    prefix = type(module).__name__.replace("Attention", "")
    return next((c for c in found if c.__name__.startswith(prefix)), found[0] if found else None)


def _call_declared(fn: Any, first: Any, known: dict[str, Any]) -> Any:
    """Call a transformers function or module with `first` as its first argument and, of `known`, the keyword
    arguments its installed signature declares; any other argument it requires without a default gets None,
    what a model passes for what it does not have (no cache, no padding mask): the names change between
    releases (transformers 5.24 requires `cache` where 4.56 took `past_key_values` and `cache_position`)."""
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    params = list(inspect.signature(target).parameters.values())[1:]
    kwargs = {p.name: known[p.name] for p in params if p.name in known}
    for p in params:
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            kwargs.setdefault(p.name, None)
    return fn(first, **kwargs)


def _hf_mask(config: Any, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None) -> Any:
    """The mask the model gives a layer, for one unpadded sequence: the function `masking_utils` maps the
    layer's type to (a config with `layer_types`), else what its `create_masks_for_generate` chooses for a
    config without them (a sliding window, chunks, or causal). The position ids serve transformers' check for
    packed sequences, which reads tensor values: a symbolic run takes them as one sequence (`symbolic_run`)."""
    from transformers import masking_utils

    by_type = getattr(masking_utils, "LAYER_PATTERN_TO_MASK_FUNCTION_MAPPING", {})
    make = by_type.get(layer_type) if layer_type else None
    if not callable(make):
        window = getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True)
        make = (masking_utils.create_sliding_window_causal_mask if window
                else masking_utils.create_chunked_causal_mask if getattr(config, "attention_chunk_size", None)
                else masking_utils.create_causal_mask)  # fmt: skip
    known = {"inputs_embeds": x, "input_embeds": x, "attention_mask": None, "cache": None, "past_key_values": None,
             "position_ids": position_ids, "cache_position": position_ids[0]}  # fmt: skip
    return _call_declared(make, config, known)


def adapt(module: torch.nn.Module, config: Any) -> torch.nn.Module:
    """Hugging Face attention classes need what their model hands them; other modules run as they are."""
    if config is not None and not isinstance(config, dict) and type(module).__module__.startswith("transformers."):
        return _HFAttention(module, config).eval()
    return module


def _inner(layer: torch.nn.Module) -> torch.nn.Module:
    """The user's module inside attn-cost's adapters."""
    if isinstance(layer, _HFAttention):
        return layer.attn
    return layer.inner if isinstance(layer, _SelfAttention) else layer


def embed_width(layer: torch.nn.Module, path: Path, name: str) -> int:
    """The width of a layer's input x (b, N, d_embed), read from the module."""
    inner = _inner(layer)
    config = getattr(layer, "config", None)
    for attr in ("d_embed", "embed_dim", "dim", "d_model", "hidden_size", "embed_size", "n_embd"):
        for owner in (inner, config):
            value = getattr(owner, attr, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    for m in layer.modules():
        if isinstance(m, torch.nn.Linear):
            return m.in_features
        weight = getattr(m, "weight", None)
        if type(m).__name__ == "Conv1D" and isinstance(weight, torch.Tensor):  # GPT-2's projections
            return int(weight.shape[0])
    raise UserError(f"{path}:{name}: cannot tell the module's embedding width: give it an attribute d_embed")


def heads_of(layer: torch.nn.Module) -> int | None:
    """How many heads a layer has, read from the module (or its config); None if it does not say."""
    inner = _inner(layer)
    owners = [inner, getattr(layer, "config", None), *list(inner.modules())[1:4]]
    for attr in ("num_heads", "num_attention_heads", "heads", "n_head", "n_heads", "nhead", "num_head"):
        for owner in owners:
            value = getattr(owner, attr, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None
