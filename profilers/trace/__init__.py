"""A variant from the user's own PyTorch code, run with symbolic sizes and mapped onto the engine's ops.

`attn-cost trace PATH:NAME` builds NAME from PATH: a function `(q, k, v) -> y` over per-head tensors
(b, h, N, d) (an attention core), or an `nn.Module` class whose `forward` takes x of shape (b, N, d_embed)
(a layer; constructor arguments from `--init key=value` and `--config config.json`, a Hugging Face
config file for the attention classes of `transformers`). Two runs of the code with symbolic sizes:

- **as written**: the code runs eagerly on fake tensors whose sizes are symbols (torch's FakeTensorMode
  and ShapeEnv, the machinery under torch.export). A TorchDispatchMode records every ATen op as the
  live-tensor tracer and FlopCounterMode see them on real tensors (matmul's contiguous copies, SDPA's CPU
  kernel reading its mask, dropout in eval as no op at all) and when each storage dies (a Python name
  keeps a tensor alive until it goes out of scope). Every op is mapped onto one of the engine's op kinds
  by a small rule in `RULES` (the style of torch.utils.flop_counter's registry); the deaths become the
  liveness the engine walks. So the FLOPs are FlopCounterMode's and the peak is the live-tensor tracer's,
  as formulas in N; the conditions on the sizes the code branched on are reported ("holds for N ≥ 4").
- **exported graph** (the ideal): `torch.export` with dynamic shapes, mapped by the same rules, every
  tensor freed after its last use. Its peak is reported beside the code's where they differ, with the
  runtime asserts torch.export recorded.

Importing PATH runs its module-level code, as `python PATH` would; what it prints goes to stderr.
Parameters and buffers exist before the call and are not counted in the live set (as in the live-tensor
tracer); the arguments (q, k, v or x) are held by the caller for the whole call.
"""

from __future__ import annotations

import ast
import gc
import importlib.util
import inspect
import json
import logging
import math
import operator
import os
import re
import sys
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import sympy as sp
import torch
from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.derive import Derived
from attn_cost.costmodel.errors import UserError, printable
from attn_cost.costmodel.graph import Graph, Storage, Tensor
from attn_cost.costmodel.paths import check_input, real
from attn_cost.costmodel.plugins import check, located, state_kept
from attn_cost.costmodel.symbols import BY_NAME, N, Pads, b, d, h, padded
from attn_cost.costmodel.variants import REGISTRY, Variant, _add, all_variants, derive
from attn_cost.profilers.measure.flops import CPU_SDPA
from attn_cost.profilers.measure.memory import LiveTensorTracer
from attn_cost.profilers.store.files import read_input
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.export import Dim
from torch.export import export as torch_export
from torch.export.graph_signature import InputKind
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, statically_known_true
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.flop_counter import FlopCounterMode

aten = torch.ops.aten

EXAMPLE = {"b": 2, "h": 3, "N": 13, "d": 8}
"""Default sizes of the example inputs (distinct, so that no two dims are confused)."""
N_TRIES = (13, 16, 32, 64, 24, 128)
"""Example lengths tried in turn when the code rejects the previous one (a window or block size)."""
D_TRIES = (8, 16, 32, 64)
"""Example head widths tried in turn for a core whose code needs another d."""
SYMBOLS = {"b": b, "h": h, "N": N, "d": d}
CORE_DIMS = ("b", "h", "N", "d")
LAYER_DIMS = ("b", "N")
_HERE = (str(Path(torch.__file__).parent), str(Path(__file__).resolve().parents[2]))
_PLUMBING = ("/typer/", "/click/", "runpy.py", "<frozen", "/_pytest/", "/pluggy/")
"""Frames under these folders (torch, attn-cost) are not the user's: an op is located in the frame below."""


# -- running the user's code ---------------------------------------------------------------------------


@contextmanager
def user_code(what: str) -> Iterator[None]:
    """Run the user's code: its prints go to stderr (stdout may be JSON), torch's warnings and logs are
    silenced, torch's global switches are set back after it (`plugins.state_kept`: a default dtype of float64
    set at import changes no later answer), and `sys.exit()`, a BaseException that is not an Exception or a
    missing package become one line (exit 2). nn.MultiheadAttention runs its slow path: the fused fast path
    (eval, no grad) computes the same products inside one kernel that neither FlopCounterMode nor a
    live-tensor tracer can see into."""

    stdout = sys.stdout
    sys.stdout = sys.stderr
    loggers = [logging.getLogger(name) for name in ("torch", "transformers")]
    levels = [x.level for x in loggers]
    for x in loggers:
        x.setLevel(logging.CRITICAL)
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with warnings.catch_warnings(), state_kept():
            warnings.simplefilter("ignore")
            yield
    except SystemExit as e:
        raise UserError(f"{what} called sys.exit({e.code if e.code is not None else ''})") from None
    except ModuleNotFoundError as e:
        raise UserError(f"{what} needs the package {e.name!r}, which is not installed (pip install {e.name})") from None
    except (Exception, KeyboardInterrupt):  # the caller says what an error means where it ran; Ctrl-C stays Ctrl-C
        raise
    except BaseException as e:  # GeneratorExit, a class of its own: no caller expects one
        said = f": {_first_line(e)}" if _first_line(e) else ""
        raise UserError(f"{_user_line(e) or what + ': '}raised {type(e).__name__}{said}") from None
    finally:
        sys.stdout = stdout
        for x, level in zip(loggers, levels, strict=True):
            x.setLevel(level)
        torch.backends.mha.set_fastpath_enabled(fastpath)


def split_spec(spec: str) -> tuple[Path, str]:
    """'path/to/file.py:name' or 'package.module:name' -> (the file, name)."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise UserError(f"--trace takes PATH:NAME (a Python file and a function or nn.Module in it), got {spec!r}")
    p = Path(path).expanduser()
    if p.is_file():
        return p, name
    if os.path.lexists(p):  # a folder, a FIFO, a device, a link loop: say which
        check_input(p, "a Python file")
    if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", path):
        try:
            with user_code(f"importing {path}"):
                found = importlib.util.find_spec(path)
        except (ImportError, ValueError):
            found = None
        if found is not None and found.origin and Path(found.origin).is_file():
            return Path(found.origin), name
    raise UserError(f"trace {spec}: no such file {path} (nor an importable module)")


def _dotted(path: Path) -> str | None:
    """The module name of a file inside an installed package (so that its relative imports work)."""
    resolved = real(path)
    for entry in sys.path:
        if not entry or ("site-packages" not in entry and "dist-packages" not in entry):
            continue
        try:
            parts = resolved.relative_to(real(Path(entry))).with_suffix("").parts
        except ValueError:
            continue
        if len(parts) > 1 and all(x.isidentifier() for x in parts):
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def load_object(path: Path, name: str) -> tuple[Any, Any]:
    """Import the user's file (its folder on sys.path, as `python PATH` has it; a file of an installed package
    by its module name) and return (module, object)."""

    dotted = _dotted(path)
    module_name = dotted or f"attn_cost_traced_{path.stem}_{abs(hash(str(real(path))))}"
    if module_name in sys.modules:
        module = sys.modules[module_name]
    elif dotted:
        try:
            with user_code(f"importing {dotted}"):
                module = importlib.import_module(dotted)
        except UserError:
            raise
        except Exception as e:
            raise UserError(located(e, [path], what=f"importing {dotted}")) from None
    else:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise UserError(f"trace {path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        folder = str(real(path).parent)
        sys.path.insert(0, folder)
        try:
            with user_code(f"importing {path}"):
                spec.loader.exec_module(module)
        except UserError:
            del sys.modules[module_name]
            raise
        except Exception as e:
            del sys.modules[module_name]
            raise UserError(located(e, [path], what=f"importing {path}")) from None
        finally:
            if folder in sys.path:
                sys.path.remove(folder)
    if not hasattr(module, name):
        found = [k for k, v in vars(module).items() if callable(v) and getattr(v, "__module__", None) == module_name]
        raise UserError(f"{path} has no {name!r} (it defines: {', '.join(found) or 'nothing callable'})")
    return module, getattr(module, name)


def parse_init(items: list[str] | None) -> dict[str, Any]:
    """--init key=value ... -> keyword arguments (values read as Python literals, else strings)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise UserError(f"--init takes key=value (a constructor argument), got {item!r}")
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            parsed = value.strip()
        if key.strip() in out and out[key.strip()] != parsed:
            raise UserError(f"--init gives {key.strip()} twice, with different values: give each argument once")
        out[key.strip()] = parsed
    return out


def parse_example(text: str | None, flag: str = "--example") -> dict[str, int]:
    """--example N=16,d=32 -> {'N': 16, 'd': 32} (the sizes of the example inputs; --check's the same way).
    Each size once: `N=16,N=32` would leave one of them unused without a word."""
    if text is None:
        return {}
    form = f"{flag} takes sizes like N=16,d=32 (b, h, N, d, each at least 2)"
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, sep, value = (x.strip() for x in item.partition("="))
        if not sep or key not in EXAMPLE or not value.isdecimal() or int(value) < 2:
            raise UserError(f"{form}, got {item!r}")
        if key in out:
            raise UserError(f"{flag} gives {key} twice ({key}={out[key]} and {item}): give each size once")
        out[key] = int(value)
    if not out:
        raise UserError(f"{form}, got {text!r}: give at least one size, or leave {flag} out")
    return out


EXAMPLE_ELEMENTS = 1 << 24
"""The most elements an example input may have: torch.export runs the code on real inputs of the example sizes,
and the formulas, in symbols, are the same at any size the code accepts."""


def sizes_for(kind: str, given: dict[str, int], base: dict[str, int], width: int | None, flag: str,
              fixed: dict[str, int] | None = None) -> dict[str, int]:  # fmt: skip
    """The sizes `--example` or `--check` gave, over `base`, checked against what the code is: a module's widths
    are its own (b and N only), a size the code fixes cannot change, and the inputs must fit EXAMPLE_ELEMENTS (an
    example) or memory (a check, bounded by `check_bounds`)."""
    dims = CORE_DIMS if kind == "core" else LAYER_DIMS
    for key in given:
        if key not in dims:
            raise UserError(f"{flag} {key}=...: the module's widths are its own (d_embed = {width}): give b and N")
        if fixed and key in fixed and given[key] != fixed[key]:
            raise UserError(f"{flag} {key}={given[key]}: the code fixes {key} = {fixed[key]} (its formulas hold at "
                            "that size only)")  # fmt: skip
    sizes = {**base, **given}
    elements = math.prod(sizes[k] for k in CORE_DIMS) if kind == "core" else sizes["b"] * sizes["N"] * (width or 1)
    if flag == "--example" and elements > EXAMPLE_ELEMENTS:
        raise UserError(f"--example {_shown(sizes, kind)}: each example input would hold {elements:,} elements, "
                        f"at most {EXAMPLE_ELEMENTS:,}: the example only shows the code its shapes (the formulas are "
                        "in symbols), choose smaller sizes")  # fmt: skip
    return sizes


def _shown(sizes: dict[str, int], kind: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sizes.items() if kind == "core" or k in LAYER_DIMS)


def load_config(path: Path | None) -> Any:
    """--config FILE.json: a Hugging Face config (it has 'model_type') or plain keyword arguments."""
    if path is None:
        return None
    raw = read_input(Path(path), "a --config file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise UserError(f"--config {path}: not a JSON file ({e})") from None
    if not isinstance(data, dict):
        raise UserError(f"--config {path}: a JSON object of settings is needed")
    if "model_type" not in data:
        return data
    try:
        from transformers import AutoConfig
    except ImportError:
        raise UserError(f"--config {path} is a Hugging Face config: pip install transformers") from None
    model_type = data.pop("model_type")
    try:
        with user_code(f"--config {path}"):
            config = AutoConfig.for_model(model_type, **data)
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"--config {path}: {e}") from None
    impl = data.get("attn_implementation") or data.get("_attn_implementation")
    if impl:
        config._attn_implementation = impl
    return config


def build(obj: Any, path: Path, name: str, init: dict[str, Any], config: Any) -> torch.nn.Module:
    """The module to run: a class built with the user's arguments (and config), or a (q, k, v) function."""
    if isinstance(obj, torch.nn.Module):  # an instance the file builds itself: run as it is, in eval
        if init or config is not None:
            raise UserError(f"{path}:{name} is a module instance: --init and --config are for its class")
        return _adapt(obj.eval(), getattr(obj, "config", None))
    if not (isinstance(obj, type) and issubclass(obj, torch.nn.Module)):
        if not callable(obj):
            raise UserError(f"{path}:{name} is neither a function (q, k, v) -> y nor an nn.Module subclass")
        if init or config is not None:
            raise UserError(f"{path}:{name} is a function: --init and --config are for an nn.Module class")
        return _Core(obj)
    args: list[Any] = []
    kwargs = dict(init)
    if isinstance(config, dict):
        kwargs = {**config, **kwargs}
    elif config is not None:
        impl = kwargs.pop("attn_implementation", None)
        if impl:
            config._attn_implementation = impl
        for key in [k for k in kwargs if hasattr(config, k) and k not in _init_params(obj)]:
            setattr(config, key, kwargs.pop(key))
        if "config" in _init_params(obj) and next(iter(_required(obj)), "config") != "config":
            kwargs["config"] = config  # BartAttention(embed_dim, num_heads, ..., config=...)
        else:
            args.append(config)
        if "layer_idx" in _init_params(obj) and "layer_idx" not in kwargs:
            kwargs["layer_idx"] = 0
    accepted = _init_params(obj)
    takes_any = _takes_kwargs(obj)
    attributes = {k: kwargs.pop(k) for k in list(kwargs) if k not in accepted and not takes_any}
    torch.manual_seed(0)
    try:
        with user_code(f"{path}:{name}"):
            module = obj(*args, **kwargs)
    except UserError:
        raise
    except Exception as e:
        need = _required(obj)
        hint = ""
        if need:
            hint = (f"; it takes {', '.join(need)}: give them with `attn-cost trace --init key=value` or --config "
                    "FILE.json, or name an instance built in your file (ATTN = MyAttention(...))")
        raise UserError(f"{path}:{name}(...) failed: {type(e).__name__}: {_first_line(e)}{hint}") from None
    for key, value in attributes.items():  # --init fused_attn=False: an attribute the class sets itself
        if not hasattr(module, key):
            raise UserError(f"--init {key}: {obj.__name__} takes no argument {key!r} and has no such attribute "
                            f"(it takes: {', '.join(sorted(accepted - {'self'})) or 'nothing'})")  # fmt: skip
        setattr(module, key, value)
    module.eval()
    return _adapt(module, config)


def _init_params(cls: type) -> set[str]:
    try:
        return set(inspect.signature(cls.__init__).parameters)
    except (TypeError, ValueError):
        return set()


def _takes_kwargs(cls: type) -> bool:
    try:
        return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values())
    except (TypeError, ValueError):
        return True


def _required(cls: type) -> list[str]:
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


class _Core(torch.nn.Module):
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


def _by_arguments(module: torch.nn.Module) -> torch.nn.Module:
    """What a module's forward takes decides how it is run: one tensor, a layer; several (query, key, value),
    self-attention on x when the module has an embedding width, else per-head (b, h, N, d) tensors, a core."""
    if isinstance(module, (_Core, _HFAttention)):
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
            return _Core(module)
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
    packed sequences, which reads tensor values: a symbolic run takes them as one sequence (`_symbolic_run`)."""
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


def _adapt(module: torch.nn.Module, config: Any) -> torch.nn.Module:
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
        if type(m).__name__ == "Conv1D" and hasattr(m, "weight"):  # GPT-2's projections
            return int(m.weight.shape[0])
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


def _first_line(e: BaseException | None) -> str:
    text = str(e).strip().splitlines()
    lines = [x.strip(" -") for x in text if x.strip() and "For more information" not in x]
    return lines[1] if len(lines) > 1 and lines[0].startswith("Constraints violated") else (lines[0] if lines else "")


# -- the code as written: an eager run on fake tensors with symbolic sizes -----------------------------


@dataclass(frozen=True)
class _Meta:
    """What a recorded op's output looked like: its symbolic shape, dtype and storage (by number)."""

    shape: tuple[Any, ...]
    dtype: torch.dtype
    storage: int
    transposed: bool = False
    """Its last two dimensions swapped against row-major order (`_transposed_view`)."""


@dataclass(eq=False)
class _Ref:
    """An argument of a recorded op: output `index` of an earlier op, or a leaf (input, parameter, constant)."""

    owner: Any
    index: int
    op: str = "ref"


@dataclass(eq=False)
class _EagerNode:
    """One ATen op of the eager run, in the shape of an fx node (target, args, kwargs, meta)."""

    name: str
    target: Any
    args: tuple
    kwargs: dict
    meta: dict
    outs: list[_Ref] = field(default_factory=list)
    op: str = "call_function"


@dataclass
class Recording:
    """The ops of one eager run and the storages that died after each."""

    nodes: list[_EagerNode]
    deaths: dict[int, list[int]]
    """Node index -> storages (by number) that died after it and before the next op."""
    leaves: dict[int, tuple[str, Any]]
    """Storage number -> ('input', position) | ('param', name) | ('const', name)."""
    shapes: dict[int, tuple[Any, ...]]
    """Leaf storage number -> the shape of the leaf tensor."""
    refs: dict[int, _Ref]
    """Leaf storage number -> the _Ref standing for it in the nodes' arguments."""
    output: Any
    """The _Ref of the returned tensor."""
    symbols: dict[Any, str]
    """ShapeEnv symbol -> dim name ('N', 'b', ...)."""
    guards: list[str]
    """Conditions on the sizes the code branched on, in the engine's symbols."""
    fixed: dict[str, int]
    """Dims the code fixed to their example value."""
    divisors: dict[str, int] = field(default_factory=dict)
    """Dim -> m where the code requires dim % m == 0 (the formulas then hold for multiples of m)."""
    pads: int = 0
    """m where the run took the branch of code that pads N up to a multiple of m (N % m > 0): its sizes are
    written in ⌈N/m⌉, and its padding copies exist only where N is not a multiple (`Graph.padding`)."""
    pinned_at: str = ""
    """Where N became a constant (the op and the line), if it did."""
    whole: Recording | None = None
    """With `pads`: the run at a multiple of m, where the code pads nothing (the padded formulas are checked
    against it, and its conditions join this run's)."""
    exprs: list = field(default_factory=list)
    """The ShapeEnv's guards in the engine's symbols (`guards` reads them)."""
    example: dict[str, int] = field(default_factory=dict)
    """The sizes the run was made at."""

    def unpadded(self) -> None:
        """Take the run as it is (its sizes as recorded, its guards as they read at every N), not as padding."""
        self.pads, self.whole = 0, None
        self.guards = guard_texts(self.exprs, self.divisors, self.example)


class _Recorder:
    """A TorchDispatchMode (made lazily: torch.utils._python_dispatch is heavy to import) recording ops."""

    def __new__(cls, fake: Any):

        class Mode(TorchDispatchMode):
            def __init__(self) -> None:
                super().__init__()
                self.fake = fake
                self.nodes: list[_EagerNode] = []
                self.alive: dict[int, tuple[StorageWeakRef, int]] = {}
                self.count = 0
                self.deaths: dict[int, list[int]] = {}
                self.by_tensor: dict[int, tuple[Any, _Ref]] = {}
                self.leaves: dict[int, tuple[str, Any]] = {}
                self.leaf_refs: dict[int, _Ref] = {}
                self.shapes: dict[int, tuple[Any, ...]] = {}
                self.watch: tuple[Any, Any] | None = None
                self.pinned_at = ""

            def storage(self, t: torch.Tensor) -> tuple[int, bool]:
                s = t.untyped_storage()
                key = s._cdata
                known = self.alive.get(key)
                if known is not None and not known[0].expired():
                    return known[1], False
                if known is not None:
                    self.deaths.setdefault(len(self.nodes) - 1, []).append(known[1])
                self.count += 1
                self.alive[key] = (StorageWeakRef(s), self.count)
                return self.count, True

            def leaf(self, t: torch.Tensor, kind: str, label: Any) -> _Ref:
                sid, _ = self.storage(t)
                ref = _Ref(("leaf", sid), 0, "leaf")
                self.leaves.setdefault(sid, (kind, label))
                self.shapes.setdefault(sid, tuple(t.shape))
                self.leaf_refs.setdefault(sid, ref)
                self.by_tensor[id(t)] = (weakref.ref(t), ref)
                return ref

            def sweep(self) -> None:
                for key in [k for k, (r, _) in self.alive.items() if r.expired()]:
                    self.deaths.setdefault(len(self.nodes) - 1, []).append(self.alive.pop(key)[1])

            def ref_of(self, t: torch.Tensor) -> _Ref:
                known = self.by_tensor.get(id(t))
                if known is not None and known[0]() is t:
                    return known[1]
                return self.leaf(t, "const", f"constant{len(self.leaf_refs)}")

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):

                kwargs = kwargs or {}
                self.sweep()

                def fake(a):
                    if isinstance(a, torch.Tensor) and not isinstance(a, FakeTensor):
                        f = self.fake.from_tensor(a, static_shapes=True)
                        self.leaf(f, "const", f"constant{len(self.leaf_refs)}")
                        return f
                    return a

                args, kwargs = tree_map(fake, (args, kwargs))
                special = SYMBOLIC_FAKES.get(func)
                out = special(*args, **kwargs) if special is not None else func(*args, **kwargs)
                if self.watch is not None and not self.pinned_at and self.watch[1] in self.watch[0].replacements:
                    loc, code = where(_EagerNode("", func, (), {}, {"stack_trace": _stack()}))
                    known = loc != "(unknown location)"
                    self.pinned_at = f" at {loc} (`{code}`, aten.{func.__name__})" if known else " "
                outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
                if not outs:
                    return out
                node = _EagerNode(f"op{len(self.nodes)}", func, tree_map(self._arg, args), tree_map(self._arg, kwargs),
                                  {"stack_trace": _stack()})  # fmt: skip
                metas = []
                for i, t in enumerate(outs):
                    sid, _ = self.storage(t)
                    metas.append(_Meta(tuple(t.shape), t.dtype, sid, _transposed_view(t)))
                    ref = _Ref(node, i)
                    node.outs.append(ref)
                    self.by_tensor[id(t)] = (weakref.ref(t), ref)
                multi = isinstance(out, (tuple, list))
                node.meta["val"] = metas if multi else metas[0]
                self.nodes.append(node)
                return out

            def _arg(self, a):
                return self.ref_of(a) if isinstance(a, torch.Tensor) else a

        return Mode()


def _pad(x: torch.Tensor, pad: list, value: float = 0.0) -> torch.Tensor:
    """constant_pad_nd on fake tensors with symbolic sizes (torch's fake kernel fixes every size to its example
    value): a new tensor of the padded shape; its values do not matter."""
    shape = list(x.shape)
    for i in range(len(pad) // 2):
        shape[-1 - i] = shape[-1 - i] + pad[2 * i] + pad[2 * i + 1]
    return x.new_empty(shape)


def _polar(magnitude: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """polar on fake tensors (its fake kernel fixes the sizes): a complex tensor of the broadcast shape."""
    shape = torch.broadcast_shapes(magnitude.shape, angle.shape)
    return magnitude.new_empty(shape, dtype=torch.complex64 if magnitude.dtype == torch.float32 else torch.complex128)


SYMBOLIC_FAKES: dict[Any, Callable] = {aten.constant_pad_nd.default: _pad, aten.polar.default: _polar}
"""Ops whose fake kernel would fix symbolic sizes, run by a shape-only stand-in in the as-written run."""


def _stack() -> str:
    """The caller's frames outside torch, attn-cost and the command line's plumbing, in the format of an fx
    node's stack_trace."""
    entry = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    frames = [f for f in traceback.extract_stack()[:-2] if not f.filename.startswith(_HERE)
              and os.path.abspath(f.filename) != entry and not any(p in f.filename for p in _PLUMBING)]  # fmt: skip
    return "\n".join(f'  File "{f.filename}", line {f.lineno}, in {f.name}\n    {f.line or ""}' for f in frames)


def _fake_env() -> tuple[Any, Any]:

    env = ShapeEnv(duck_shape=False)
    return env, FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)


def _sizes(env: Any, example: dict[str, int], dims: tuple[str, ...]) -> tuple[dict[str, Any], dict[Any, str]]:

    sym, names = {}, {}
    for k in dims:
        s = env.create_symbol(example[k], source=ConstantSource(k), dynamic_dim=DimDynamic.DYNAMIC)
        sym[k] = env.create_symintnode(s, hint=example[k], source=ConstantSource(k))
        names[s] = k
    return sym, names


def record(module: torch.nn.Module, kind: str, example: dict[str, int], width: int | None, where: str) -> Recording:
    """Run the module eagerly on fake inputs with symbolic sizes, recording its ops and deaths."""
    env, fake = _fake_env()
    dims = CORE_DIMS if kind == "core" else LAYER_DIMS
    sym, names = _sizes(env, example, dims)
    shape = tuple(sym[k] for k in CORE_DIMS) if kind == "core" else (sym["b"], sym["N"], width)
    with fake:
        inputs = [torch.empty(*shape) for _ in range(3 if kind == "core" else 1)]
        params = {k: fake.from_tensor(p, static_shapes=True) for k, p in module.named_parameters()}
        buffers = {k: fake.from_tensor(p, static_shapes=True) for k, p in module.named_buffers()}
    rec = _Recorder(fake)
    rec.watch = (env, next(s for s, k in names.items() if k == "N"))
    for i, t in enumerate(inputs):
        rec.leaf(t, "input", i)
    for k, t in params.items():
        rec.leaf(t, "param", k)
    for k, t in buffers.items():
        rec.leaf(t, "const", k)
    try:
        with user_code(where), torch.no_grad(), _symbolic_run(), fake, rec:
            out = torch.func.functional_call(module, {**params, **buffers}, tuple(inputs))
    except UserError:
        raise
    except Exception as e:
        if type(e).__name__ in DATA_DEPENDENT:
            loc = _user_line(e)
            raise UserError(
                f"{loc or where + ': '}the code reads tensor values to decide a size or a branch ({type(e).__name__}: "
                f"{_first_line(e)}): its costs depend on the data and cannot be derived as formulas in N"
            ) from None
        raise _RunError(e) from None
    result = _first_tensor(out)
    if result is None:
        raise UserError(f"{where} returns no tensor")
    ref = rec.ref_of(result)
    if ref.op == "leaf" and rec.leaves.get(ref.owner[1], ("",))[0] == "input":
        raise UserError(f"{where} returns its input unchanged: it produced no ops (is it attention?)")
    del out, result, inputs
    rec.sweep()
    deaths = {i: list(v) for i, v in rec.deaths.items()}
    exprs, fixed, divisors, pads = _conditions(env, names, example, lambda m: _pads_to(rec.nodes, names, m))
    guards = guard_texts(exprs, divisors, example, pads)
    return Recording(rec.nodes, deaths, rec.leaves, rec.shapes, rec.leaf_refs, ref, names, guards, fixed, divisors,
                     pads, rec.pinned_at, exprs=exprs, example=example)  # fmt: skip


DATA_DEPENDENT = ("DataDependentOutputException", "GuardOnDataDependentSymNode", "DynamicOutputShapeException",
                  "UnsupportedOperatorException", "PendingUnbackedSymbolNotFound")  # fmt: skip
"""Errors of a fake-tensor run that say the code depends on tensor values, not sizes."""


class _RunError(Exception):
    """The user's code raised while running on the example inputs."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _first_tensor(out: Any) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return next((t for t in out if isinstance(t, torch.Tensor)), None)
    return None


def _conditions(
    env: Any, names: dict[Any, str], example: dict[str, int], pads_to: Callable[[int], bool]
) -> tuple[list, dict, dict, int]:
    """The ShapeEnv's guards in the engine's symbols; the dims pinned to one value (no other value satisfies
    the guards); the divisors the code requires of a dim (N % 4 == 0 for a window of 4); the m of a branch on
    "N is not a multiple of m" whose run pads N up to a multiple of m (`pads_to(m)`), 0 where there is none (a
    branch on N's parity that pads nothing is a branch like any other)."""
    fixed: dict[str, int] = {}
    divisors: dict[str, int] = {}
    for s, value in env.replacements.items():
        if s in names and getattr(value, "is_number", False):
            fixed[names[s]] = int(value)
    raw = [sp.sympify(g.expr) for g in env.guards]
    for s, k in names.items():
        if k not in fixed and not _can_vary(raw, names, example, s):
            fixed[k] = example[k]
    subs = {s: (sp.Integer(fixed[k]) if k in fixed else SYMBOLS[k]) for s, k in names.items()}
    exprs = [e.xreplace(subs) for e in raw]
    for e in exprs:
        if isinstance(e, sp.Eq) and isinstance(e.lhs, sp.Symbol) and e.rhs.is_Integer and str(e.lhs) in SYMBOLS:
            fixed[str(e.lhs)] = int(e.rhs)
    for e in exprs:  # N % m == 0, or N % m <= 0 (a remainder > 0 branch not taken)
        divides = (isinstance(e, sp.Eq) and e.rhs == 0) or (isinstance(e, sp.LessThan) and e.rhs == 0) or (
            isinstance(e, sp.StrictLessThan) and e.rhs == 1)
        if divides and type(e.lhs).__name__ in ("Mod", "PythonMod"):
            x, m = e.lhs.args
            if isinstance(x, sp.Symbol) and str(x) in SYMBOLS and m.is_Integer:
                divisors[str(x)] = math.lcm(divisors.get(str(x), 1), int(m))
    m = 0 if divisors or "N" in fixed else _padding_branch(exprs, {k: example[k] for k in SYMBOLS if k in example})
    return exprs, fixed, divisors, m if m and pads_to(m) else 0


def guard_texts(exprs: list, divisors: dict[str, int], example: dict[str, int], pads: int = 0) -> list[str]:
    """A run's guards as readable conditions, those that always hold left out. On the branch that pads N to a
    multiple of `pads` (m), the guards are read there: the branch's own (N % m > 0) and those it always meets
    are left out, a guard on ⌈N/m⌉ > 1 reads N >= m + 1, and the others are written in ⌈N/m⌉."""
    whole = {SYMBOLS[k]: m * sp.Symbol(f"{k}_per_{m}", integer=True, positive=True) for k, m in divisors.items()}
    back = {sp.Symbol(f"{k}_per_{m}", integer=True, positive=True): SYMBOLS[k] / m for k, m in divisors.items()}
    out = [f"{k} % {m} == 0" for k, m in divisors.items()]
    for e in exprs:
        if isinstance(e, sp.Eq) and isinstance(e.lhs, sp.Symbol) and e.rhs.is_Integer and str(e.lhs) in SYMBOLS:
            continue  # a dim pinned to a value (`fixed`)
        if pads and N in e.free_symbols:
            if _pads_at(e, pads, example) is not None:
                continue
            t = _threshold(e, pads, example)
            if t is not None:
                if t > 1 and f"N >= {t}" not in out:
                    out.append(f"N >= {t}")
                continue
        try:
            plain = e.replace(lambda f: type(f).__name__ in INTEGER_FUNCTIONS, _plain).xreplace(whole)
            plain = sp.simplify(_on_padding_branch(plain, pads) if pads else plain)
            plain = plain.xreplace({_ceil_symbol(pads): sp.ceiling(N / pads)}) if pads else plain
        except Exception:  # sympy cannot simplify it (a division by a size): show it as it is
            plain = e
        if plain is sp.true or _always(e, divisors):
            continue
        text = condition_text(plain.xreplace(back) if plain is not e else e)
        if text and text not in out:
            out.append(text)
    return out


def _truths(guard: Any, m: int, example: dict[str, int]) -> list[list[bool]] | None:
    """Whether the guard holds at N = 1 … 8m, with the other dims at their example values, then at 2, 3 and 7
    (None where it does not evaluate to a truth value)."""
    others = sorted(guard.free_symbols - {N}, key=str)
    samples = [{s: sp.Integer(example.get(str(s), 2)) for s in others}, *({s: sp.Integer(v) for s in others}
                                                                         for v in (2, 3, 7))]  # fmt: skip
    try:
        e = _numeric(guard)
        return [[bool(e.xreplace(at).xreplace({N: n})) for n in range(1, 8 * m + 1)] for at in samples]
    except (TypeError, ValueError, ZeroDivisionError):
        return None


def _threshold(guard: Any, m: int, example: dict[str, int]) -> int | None:
    """t where the guard holds exactly for N >= t (N from 1 to 8m, the other dims at their example values and at
    a few others), None where it is not such a threshold (a guard on ⌈N/m⌉ > 1 reads N >= m + 1)."""
    found: set[int | None] = set()
    for truth in _truths(guard, m, example) or [[]]:
        t = truth.index(True) + 1 if True in truth else None
        found.add(t if t is not None and all(truth[t - 1 :]) else None)
    return found.pop() if len(found) == 1 else None


def _numeric(e: Any) -> Any:
    """A guard with torch's integer and float functions of sizes in sympy's (so that it evaluates)."""
    e = e.replace(lambda f: type(f).__name__ in INTEGER_FUNCTIONS, _plain)
    return e.replace(lambda f: type(f).__name__ in _FLOAT_FUNCTIONS, _float_plain)


def _pads_at(guard: Any, m: int, example: dict[str, int]) -> bool | None:
    """True where the guard is exactly "N is not a multiple of m" (the padding branch's own guard), False where
    it holds at every N that is not a multiple of m (the branch always meets it), None otherwise; N from 1 to
    8m, the other dims at their example values and at a few others."""
    truths = _truths(guard, m, example)
    if truths is None:
        return None
    padded = [n % m != 0 for n in range(1, 8 * m + 1)]
    if truths[0] == padded:
        return True
    return False if all(t for truth in truths for t, p in zip(truth, padded, strict=True) if p) else None


def _padding_branch(exprs: list, example: dict[str, int]) -> int:
    """The m (>= 2) of a guard that says N is not a multiple of m (the code may pad N), 0 if no guard says so."""
    for e in exprs:
        if e.free_symbols - {N}:
            continue
        found = {int(f.args[1]) for f in _numeric(e).atoms(sp.Mod) if f.args[1].is_Integer}
        found |= {int(sp.cancel(N / f.args[0])) for f in _numeric(e).atoms(sp.floor, sp.ceiling)
                  if sp.cancel(N / f.args[0]).is_Integer}  # fmt: skip
        for m in sorted(x for x in found if x >= 2):
            if _pads_at(e, m, example):
                return m
    return 0


def _pads_to(nodes: list[_EagerNode], symbols: dict[Any, str], m: int) -> bool:
    """Whether the run pads N up to a multiple of m: one of its tensors has m·⌈N/m⌉ rows, a size it computed
    from N mod m or ⌈N/m⌉ (F.pad, torch.cat with zeros, a zeros tensor written into: whatever made it). A run
    that merely branches on N mod m (on N's parity) has no such size."""
    subs = _Subs(m)
    subs.update({s: SYMBOLS[k] for s, k in symbols.items()})
    sizes = {x.node.expr: x for x in _run_sizes(nodes) if isinstance(x, torch.SymInt)}
    return any(sp.expand(_engine_expr(x, subs) - padded(N, m)) == 0 for x in sizes.values())


def _run_sizes(nodes: list[_EagerNode]) -> list[Any]:
    """Every size of every tensor the run made (SymInts and ints)."""
    metas = [v for node in nodes for v in (node.meta["val"] if isinstance(node.meta["val"], list)
                                           else [node.meta["val"]])]  # fmt: skip
    return [x for v in metas for x in v.shape]


def _always(guard: Any, divisors: dict[str, int]) -> bool:
    """The guard holds at every sample size (dims from 2, multiples of the required divisors): not worth saying."""

    dims = [k for k in SYMBOLS if SYMBOLS[k] in guard.free_symbols]
    grids = [[divisors.get(k, 1) * v for v in (2, 3, 5, 8, 13, 64, 1000, 4099)] for k in dims]
    try:
        return all(bool(guard.xreplace(dict(zip([SYMBOLS[k] for k in dims], p, strict=True)))) for p in product(*grids))
    except TypeError:
        return False


def _can_vary(guards: list, names: dict, example: dict[str, int], sym: Any) -> bool:
    """Some other value of one dim (the others at the example) satisfies every guard."""
    base = {s: example[k] for s, k in names.items()}
    start = base[sym]
    for value in (start + 1, start + 2, start + 3, start + 4, start + 8, 2 * start, 3 * start, 4 * start, 8 * start):
        point = {**base, sym: value}
        try:
            if all(bool(g.xreplace(point)) for g in guards):
                return True
        except TypeError:
            continue
    return False


def condition_text(e: Any) -> str:
    """A guard as a readable condition on b, h, N, d (== != % // and or)."""
    e = sp.sympify(e)
    if e is sp.true:
        return ""
    name = type(e).__name__
    if name in ("Or", "And"):
        return f" {name.lower()} ".join(f"({condition_text(a)})" for a in e.args)
    ops = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<", "LessThan": "<=", "StrictGreaterThan": ">",
           "GreaterThan": ">="}  # fmt: skip
    if name in ops:
        return f"{_arith(e.lhs)} {ops[name]} {_arith(e.rhs)}"
    return _arith(e)


def _arith(e: Any) -> str:
    name = type(e).__name__
    if name in ("Mod", "PythonMod"):
        return f"{_arith(e.args[0])} % {_arith(e.args[1])}"
    if name in ("FloorDiv", "IntTrueDiv"):
        return f"({_arith(e.args[0])}) // {_arith(e.args[1])}"
    if name == "CeilToInt":
        return f"ceil({_arith(e.args[0])})"
    if e.args and name not in ("Symbol", "Integer"):
        return str(e.func(*[sp.Symbol(_arith(a)) for a in e.args]))
    return str(e)


@contextmanager
def _symbolic_run():
    """math.sqrt on a symbolic size would fix that size to the example's value: use torch's symbolic sqrt; SDPA's
    flags computed from sizes are symbolic bools its argument parser refuses: decide them (a guard records it).
    transformers' check for packed sequences reads the position ids' values where the installed release finds
    an arange unpacked (5.x; 4.56 returns its tensor whatever the values, and needs nothing here), which a
    symbolic run has not: it takes them as one sequence per row (what arange gives, and what eager transformers
    then finds), and says so in the docs; its ops still run, as they do in eager mode."""
    sqrt = math.sqrt

    def symbolic_sqrt(x):
        return torch._sym_sqrt(x) if isinstance(x, (torch.SymInt, torch.SymFloat)) else sqrt(x)

    functional = torch.nn.functional
    sdpa = functional.scaled_dot_product_attention

    def concrete_flags(*args, **kwargs):  # `is_causal = mask is None and N > 1` is a symbolic bool: decide it
        args = tuple(bool(a) if isinstance(a, torch.SymBool) else a for a in args)
        kwargs = {k: bool(v) if isinstance(v, torch.SymBool) else v for k, v in kwargs.items()}
        return sdpa(*args, **kwargs)

    masking = sys.modules.get("transformers.masking_utils")
    packed = getattr(masking, "find_packed_sequence_indices", None)
    if packed is not None and packed(torch.arange(2).unsqueeze(0)) is not None:
        packed = None

    def unpacked(position_ids):  # eager transformers reads the values; under tracing it keeps a packed mask
        packed(position_ids)
        return None

    math.sqrt = symbolic_sqrt
    functional.scaled_dot_product_attention = concrete_flags
    if packed is not None:
        masking.find_packed_sequence_indices = unpacked
    try:
        yield
    finally:
        math.sqrt = sqrt
        functional.scaled_dot_product_attention = sdpa
        if packed is not None:
            masking.find_packed_sequence_indices = packed


# -- the exported graph: torch.export with dynamic shapes ----------------------------------------------


@dataclass
class Exported:
    """torch.export's program of the code and the runtime asserts it recorded (or why there is none)."""

    program: Any = None
    symbolic: tuple[str, ...] = ()
    asserts: list[str] = field(default_factory=list)
    failure: str = ""


def export(module: torch.nn.Module, kind: str, example: dict[str, int], width: int | None,
           divisor: dict[str, int] | None = None, upper: int | None = None) -> Exported:  # fmt: skip
    """Export with as many symbolic dims as the code allows (the exported graph is the ideal's source); N a
    multiple of `divisor['N']` and at most `upper` where the code's run required it."""
    divisor = divisor or {}

    symbolic = list(CORE_DIMS if kind == "core" else LAYER_DIMS)
    gen = torch.Generator().manual_seed(0)
    if kind == "core":
        args = tuple(torch.randn(*(example[k] for k in CORE_DIMS), generator=gen) for _ in range(3))
        axes = dict(enumerate(CORE_DIMS))
    else:
        args = (torch.randn(example["b"], example["N"], width, generator=gen),)
        axes = {0: "b", 1: "N"}
    step, top = divisor.get("N", 1), upper
    while True:  # drop the dims the code fixes, one export at a time; N must stay
        dims = {k: Dim(k, min=2) for k in symbolic}
        if step > 1:  # the code needs N % step == 0 (a window): N = step·K, as torch.export's derived dims say
            dims["N"] = step * Dim("N_per_step", min=1, max=top // step if top else None)
        elif top:  # the code bounds N (a table of positions): the export covers 2 <= N <= top
            dims["N"] = Dim("N", min=2, max=top)
        dynamic = tuple({ax: dims[k] for ax, k in axes.items() if k in dims} for _ in args)
        try:
            with user_code("torch.export"), _symbolic_run(), torch.no_grad():
                program = torch_export(module if kind == "core" else _First(module), args, dynamic_shapes=dynamic,
                                       prefer_deferred_runtime_asserts_over_guards=True)  # fmt: skip
        except UserError as e:
            return Exported(failure=str(e))
        except Exception as e:
            text = str(e)
            named = re.search(r"Constraints violated \(([^)]*)\)", text)
            fixed = {x.strip() for x in named.group(1).split(",")} if named else set()
            if ("Constraints violated" not in text and "specialized" not in text) or "N" in fixed or not fixed:
                return Exported(failure=_first_line(e))
            symbolic = [k for k in symbolic if k not in fixed]
            continue
        return Exported(program, tuple(symbolic), _asserts(program))


class _First(torch.nn.Module):
    """A layer with its input only, returning its first tensor (as the as-written run reads it)."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.inner = module

    def forward(self, x):
        return _first_tensor(self.inner(x))


def _asserts(program: Any) -> list[str]:
    """The runtime asserts of an exported program (a branch on N becomes one) and the ranges of its dims."""
    names: dict[Any, Any] = {}
    for node in program.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            dims = CORE_DIMS if val.dim() == 4 else ("b", "N")
            for size, k in zip(val.shape, dims, strict=False):
                if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sp.Symbol):
                    names.setdefault(size.node.expr, SYMBOLS[k])
    out = []
    for node in program.graph.nodes:
        if node.op == "call_function" and "_assert_scalar" in str(node.target) and len(node.args) > 1:
            found = re.search(r"expression (.*?) on line", str(node.args[1]))
            if found:
                try:
                    expr = sp.sympify(found.group(1), locals={"Mod": sp.Mod, "Eq": sp.Eq, "Ne": sp.Ne})
                except (sp.SympifyError, TypeError, SyntaxError):
                    continue
                text = condition_text(expr.xreplace({sp.Symbol(str(s)): v for s, v in names.items()}))
                if text and text not in out:
                    out.append(text)
    for s, rng in program.range_constraints.items():
        if s in names and isinstance(rng.upper, sp.Integer):
            out.append(f"{names[s]} <= {int(rng.upper)}")
    return out


# -- from the ATen graph to engine ops -----------------------------------------------------------------


@dataclass
class _Node:
    """What a rule sees: the fx node, its engine tensors and its output."""

    node: Any
    args: list[Any]
    kwargs: dict[str, Any]
    shape: tuple[sp.Expr, ...]


Rule = Callable[[_Node], tuple[str, tuple[Tensor, ...], dict[str, Any]]]


def _prod(xs) -> sp.Expr:
    return sp.Mul(*xs) if xs else sp.Integer(1)


def _tensors(n: _Node) -> tuple[Tensor, ...]:
    """The tensor arguments, those inside a list (torch.cat's) included: every one is read."""
    flat = [x for a in n.args for x in (a if isinstance(a, (list, tuple)) else [a])]
    return tuple(a for a in flat if isinstance(a, Tensor))


def _elementwise(kind: str, scalar_kind: str | None = None) -> Rule:
    """Element-wise op: with two tensors `kind`, with one tensor and a number `scalar_kind`."""

    def rule(n: _Node):
        ts = _tensors(n)
        gain = "α" if n.kwargs.get("alpha", 1) != 1 else None
        if len(ts) >= 2:
            return kind, ts, {"gain": gain}
        return scalar_kind or kind, ts, {"gain": gain}

    return rule


def _unary(kind: str) -> Rule:
    return lambda n: (kind, _tensors(n)[:1], {"gain": None})


def _reduce(kind: str, dim_at: int = 1) -> Rule:
    """A reduction (over an axis, or over everything); with two tensors, the element-wise form (max.other).
    `dim_at`: the position of the dims argument (2 for norms, whose second argument is the order)."""

    def rule(n: _Node):
        ts = _tensors(n)
        if len(ts) >= 2:
            return "maximum", ts[:2], {"gain": None}
        dims = n.args[dim_at] if len(n.args) > dim_at else n.kwargs.get("dim")
        if isinstance(dims, (list, tuple)):
            dims = dims[0] if len(dims) == 1 else None  # several axes at once: no one axis to name
        return kind, ts[:1], {"gain": None, "axis": dims if isinstance(dims, int) else None}

    return rule


def _pow(n: _Node):
    exponent = n.args[1] if len(n.args) > 1 else None
    if exponent == 2:
        return "mul", _tensors(n)[:1], {"gain": None}
    return "pointwise", _tensors(n)[:1], {"gain": None}


def _mm(n: _Node, a: Tensor, c: Tensor, accumulate: bool, gain: str | None = None) -> dict[str, Any]:
    m = sp.Integer(1) if len(a.shape) == 1 else a.shape[-2]
    k = a.shape[-1]
    cols = sp.Integer(1) if len(c.shape) == 1 else c.shape[-1]
    batch = sp.cancel(_prod(n.shape) / (m * cols))
    return {"m": m, "k": k, "n": cols, "batch": batch, "gain": gain, "accumulate": accumulate}


def _matmul(n: _Node):
    a, c = _tensors(n)[:2]
    return "matmul", (a, c), _mm(n, a, c, False)


def _baddbmm(n: _Node):
    """beta·input + alpha·(b1 @ b2): a product accumulated into the first argument."""
    acc, a, c = _tensors(n)[:3]
    gain = "α" if n.kwargs.get("alpha", 1) != 1 else None
    return "matmul", (acc, a, c), _mm(n, a, c, True, gain)


def _addmm_or_linear(n: _Node):
    """aten.linear(x, W, bias) and aten.addmm(bias, x, Wᵀ): a projection when W is a weight."""
    name = n.node.target.__name__
    if name.startswith("linear"):
        x, w = n.args[0], n.args[1]
        bias = n.args[2] if len(n.args) > 2 else None
        k, cols = w.shape[-1], w.shape[0]
    else:
        bias, x, w = n.args[0], n.args[1], n.args[2]
        k, cols = w.shape[0], w.shape[-1]
    attrs = {"m": _prod(x.shape[:-1]), "k": k, "n": cols, "batch": sp.Integer(1), "bias": bias is not None}
    if w.storage.producer == -1 and w.storage.numel == 0:  # a parameter or a buffer
        return "linear", (x,), attrs
    ins = (bias, x, w) if bias is not None else (x, w)
    mm = {"m": attrs["m"], "k": k, "n": cols, "batch": sp.Integer(1), "gain": None, "accumulate": bias is not None}
    return "matmul", ins, mm


def _einsum(n: _Node):
    """A two-operand contraction 'ij,jk->ik' ('...' stands for the leading dims): batch, m, k and n from the
    letters. More operands are contracted left to right by eager torch.einsum (the as-written run sees each
    product); the exported graph keeps one node, which is refused here."""
    equation, operands = n.args[0], n.args[1]
    if len(operands) != 2:
        raise _UnmappedError(f"einsum {equation!r} with {len(operands)} operands in the exported graph")
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    spare = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation)
    dots = "".join(next(spare) for _ in range(max(len(t.shape) for t in operands)))
    terms = [x.replace("...", dots[len(dots) - (len(t.shape) - len(x.replace("...", ""))):]) for x, t in
             zip(terms, operands, strict=True)]  # fmt: skip
    if not arrow:
        out = ("" if "..." not in lhs else dots) + "".join(sorted(c for c in "".join(terms)
                                                                   if "".join(terms).count(c) == 1 and c not in dots))
    out = out.replace("...", dots[len(dots) - (len(n.shape) - len(out.replace("...", ""))):])
    left, right = terms
    size: dict[str, sp.Expr] = {}
    for letters, t in ((left, operands[0]), (right, operands[1])):
        for c, s in zip(letters, t.shape, strict=True):
            if c not in size or size[c] == 1:
                size[c] = s
    if any(ch not in right + out for ch in left) or any(ch not in left + out for ch in right):
        raise _UnmappedError(f"einsum {equation!r} sums a letter over one operand only")
    pick = lambda keep: _prod([size[c] for c in size if keep(c)])  # noqa: E731
    attrs = {
        "batch": pick(lambda c: c in left and c in right and c in out),
        "m": pick(lambda c: c in left and c not in right),
        "k": pick(lambda c: c in left and c in right and c not in out),
        "n": pick(lambda c: c in right and c not in left),
        "gain": None,
        "accumulate": False,
    }
    return "matmul", tuple(operands), attrs


def _sdpa(n: _Node):
    """SDPA (the exported node, or the CPU kernel eager PyTorch runs): q, k, v and the mask it reads."""
    q, k, v = n.args[:3]
    mask = n.kwargs.get("attn_mask")
    if mask is None and len(n.args) > 3 and isinstance(n.args[3], Tensor):
        mask = n.args[3]
    causal = n.kwargs.get("is_causal", n.args[5] if len(n.args) > 5 and isinstance(n.args[5], bool) else False)
    if n.node.target.__name__.startswith("_scaled_dot_product"):
        causal = n.args[4] if len(n.args) > 4 else n.kwargs.get("is_causal", False)
    return "fused_attention", (q, k, v), {"causal": bool(causal), "mask": mask if isinstance(mask, Tensor) else None}


def _conv(n: _Node):
    """A convolution as a product: each output element is a dot product over c_in/groups × kernel values
    (what FlopCounterMode counts: 2 per multiply-add)."""
    x, w = n.args[0], n.args[1]
    bias = n.args[2] if len(n.args) > 2 and isinstance(n.args[2], Tensor) else None
    if len(n.args) > 6 and n.args[6] is True:
        raise _UnmappedError("transposed convolution")
    cols = w.shape[0]
    attrs = {"m": sp.cancel(_prod(n.shape) / cols), "k": _prod(w.shape[1:]), "n": cols, "batch": sp.Integer(1),
             "bias": bias is not None}  # fmt: skip
    if w.storage.producer == -1 and w.storage.numel == 0:
        return "linear", (x,), attrs
    raise _UnmappedError("a convolution whose weight is computed in the forward")


def _fill(n: _Node):
    return "fill", (), {"gain": None}


def _copy(n: _Node):
    ts = _tensors(n)
    return "copy", ts[1:] if n.node.target.__name__.startswith("copy_") else ts, {"gain": None, "overwrite": True}


def _mask(n: _Node):
    return "mask", _tensors(n), {"gain": None}


def _compare(n: _Node):
    return "compare", _tensors(n), {"gain": None}


POINTWISE = (
    "relu", "sigmoid", "tanh", "sqrt", "rsqrt", "log", "log1p", "expm1", "exp2", "abs", "sin", "cos", "erf",
    "silu", "sign", "sgn", "clamp", "clamp_min", "clamp_max", "hardtanh", "leaky_relu", "softplus", "mish",
    "floor", "ceil", "round", "trunc", "frac", "log2", "log10", "nan_to_num", "hardsigmoid", "hardswish", "elu",
    "relu6", "selu", "celu", "logsigmoid", "erfinv", "tan", "atan", "sinh", "cosh",
)  # fmt: skip
"""Element-wise functions of one tensor the engine counts as one op per element (kind `pointwise`)."""

COMPARE = (
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "logical_xor", "bitwise_and",
    "bitwise_or", "bitwise_not", "bitwise_xor", "__and__", "__or__", "__xor__", "__invert__", "isinf", "isnan",
    "isfinite", "isneginf", "isposinf",
)  # fmt: skip
"""Comparisons and logic that build masks (kind `compare`: one op per output element, real memory)."""

GATHER = (
    "index", "index_select", "gather", "embedding", "take_along_dim", "constant_pad_nd", "pad", "repeat",
    "repeat_interleave", "roll", "flip", "to", "_to_copy", "type_as", "masked_select", "tile", "index_put",
    "scatter", "index_copy", "dropout", "native_dropout", "feature_dropout", "alpha_dropout", "diag_embed",
    "expand_copy", "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d", "_pad_enum",
    "scatter_add", "index_add", "scatter_reduce", "index_fill", "masked_scatter", "polar", "complex",
    "view_as_real", "view_as_complex", "_conj", "resolve_conj", "resolve_neg",
)  # fmt: skip
"""Data movement into a new tensor (kind `copy`): indexing, padding, dtype conversion, dropout in eval when it
copies. Every tensor argument (index tensors included) is read."""

FACTORIES = (
    "fill", "zero", "empty", "new_empty", "zeros", "new_zeros", "ones", "new_ones", "full", "new_full", "zeros_like",
    "ones_like", "empty_like", "full_like", "arange", "eye", "scalar_tensor", "empty_strided", "new_empty_strided",
    "linspace", "randn", "rand", "randn_like", "rand_like", "normal", "randint", "tensor", "triu_indices",
    "tril_indices", "empty_permuted",
)  # fmt: skip
"""New tensors from sizes alone (kind `fill`: memory, no arithmetic)."""

RULES: dict[str, Rule] = {
    # products
    "matmul": _matmul,
    "mm": _matmul,
    "bmm": _matmul,
    "baddbmm": _baddbmm,
    "addmm": _addmm_or_linear,
    "linear": _addmm_or_linear,
    "einsum": _einsum,
    "convolution": _conv,
    "conv1d": _conv,
    "conv2d": _conv,
    "conv3d": _conv,
    "scaled_dot_product_attention": _sdpa,
    "_scaled_dot_product_flash_attention_for_cpu": _sdpa,
    "_scaled_dot_product_flash_attention": _sdpa,
    "_scaled_dot_product_efficient_attention": _sdpa,
    "_scaled_dot_product_cudnn_attention": _sdpa,
    # element-wise
    "add": _elementwise("add"),
    "sub": _elementwise("sub"),
    "rsub": _elementwise("sub"),
    "diff": _elementwise("sub"),
    "mul": _elementwise("mul", "scale"),
    "div": _elementwise("div", "scale"),
    "floor_divide": _elementwise("div", "scale"),
    "remainder": _elementwise("div", "scale"),
    "fmod": _elementwise("div", "scale"),
    "maximum": _elementwise("maximum"),
    "minimum": _elementwise("maximum"),
    "neg": _unary("scale"),
    "reciprocal": _unary("div"),
    "square": _unary("mul"),
    "pow": _pow,
    "exp": _unary("exp"),
    "gelu": _unary("gelu"),
    **{op: _unary("pointwise") for op in POINTWISE},
    "elu": _unary("elu1"),
    "masked_fill": _mask,
    "tril": _mask,
    "triu": _mask,
    "where": _mask,
    **{op: _compare for op in COMPARE},
    # row-wise and reductions
    "softmax": _unary("softmax"),
    "_softmax": _unary("softmax"),
    "_safe_softmax": _unary("softmax"),
    "log_softmax": _unary("softmax"),
    "_log_softmax": _unary("softmax"),
    "layer_norm": _unary("layernorm"),
    "native_layer_norm": _unary("layernorm"),
    "sum": _reduce("sum"),
    "mean": _reduce("sum"),
    "linalg_vector_norm": _reduce("norm", dim_at=2),
    "norm": _reduce("norm", dim_at=2),
    "amax": _reduce("max"),
    "amin": _reduce("max"),
    "max": _reduce("max"),
    "min": _reduce("max"),
    "argmax": _reduce("max"),
    "argmin": _reduce("max"),
    "cumsum": _unary("cumsum"),
    "cumprod": _unary("cumsum"),
    "logsumexp": _reduce("sum"),
    "prod": _reduce("sum"),
    "var": _reduce("sum"),
    "std": _reduce("sum"),
    "var_mean": _reduce("sum"),
    "std_mean": _reduce("sum"),
    "topk": _reduce("max"),
    "sort": _reduce("max"),
    "argsort": _reduce("max"),
    "kthvalue": _reduce("max"),
    "rms_norm": _unary("layernorm"),
    "_fused_rms_norm": _unary("layernorm"),
    "native_group_norm": _unary("layernorm"),
    "native_batch_norm": _unary("layernorm"),
    "_native_batch_norm_legit_no_training": _unary("layernorm"),
    "addcmul": _elementwise("mul"),
    "addcdiv": _elementwise("div"),
    "lerp": _elementwise("add"),
    "xlogy": _elementwise("mul"),
    "atan2": _elementwise("div"),
    "hypot": _elementwise("add"),
    "bucketize": _compare,
    "searchsorted": _compare,
    # data movement and allocation
    "copy": _copy,
    "clone": _copy,
    "contiguous": _copy,
    "cat": _copy,
    "stack": _copy,
    **{op: _copy for op in GATHER},
    **{op: _fill for op in FACTORIES},
}
"""ATen op (overload packet, trailing '_' dropped) -> engine op kind, inputs and attributes."""

VIEWS = {
    "view", "_unsafe_view", "reshape", "transpose", "t", "permute", "unsqueeze", "squeeze", "expand", "slice",
    "select", "flatten", "unflatten", "alias", "narrow", "as_strided", "split", "split_with_sizes", "chunk",
    "unbind", "detach", "contiguous", "clone", "movedim", "swapaxes", "expand_as", "view_as", "reshape_as",
    "lift_fresh_copy", "lift_fresh", "_reshape_alias", "diagonal", "unfold", "view_as_real", "view_as_complex",
    "real", "imag", "tensor_split", "unsafe_split", "_unsafe_index", "dropout", "transpose_copy", "permute_copy",
    "alias_copy", "t_copy", "swapdims", "mT", "mH", "adjoint", "align_as", "type_as", "to", "_to_copy",
}  # fmt: skip
"""Ops that return their input (or a view of it) when they can; when their output has its own storage, the
op's rule (or a copy) applies."""

FIXED_DTYPES = {torch.bool: "bool", torch.int32: "int32", torch.int64: "int64", torch.uint8: "bool",
                torch.int8: "bool", torch.int16: "fp16", torch.float64: "fp64", torch.complex64: "fp64",
                torch.complex128: "complex128", torch.float16: "fp16", torch.bfloat16: "bf16"}  # fmt: skip
"""dtypes other than the activation's (float32 in the run) and their engine names, by their bytes (one-byte
integers count as bool's byte, complex64 as fp64's 8); float32 tensors follow the activation dtype, --dtype."""

SKIP = {"sym_size", "_assert_scalar", "_assert_tensor_metadata", "sym_constrain_range_for_size", "sym_numel",
        "sym_stride", "sym_storage_offset", "_assert_async", "_functional_assert_async"}  # fmt: skip
"""Nodes that are not tensor work (sizes, asserts). Dropout is not here: in eval it returns its input."""


class _UnmappedError(Exception):
    """An ATen node no rule can map (the message says why)."""


INTEGER_FUNCTIONS = ("FloorDiv", "CeilDiv", "CleanDiv", "Mod", "PythonMod", "IntTrueDiv", "CeilToInt", "FloorToInt",
                     "TruncToInt")  # fmt: skip
"""torch's integer functions of sizes, rewritten in sympy's floor, ceiling and Mod."""


def _plain(f: Any) -> sp.Expr:
    name, args = type(f).__name__, f.args
    if name in ("FloorDiv", "CleanDiv"):
        return sp.floor(args[0] / args[1])
    if name == "CeilDiv":
        return sp.ceiling(args[0] / args[1])
    if name == "IntTrueDiv":
        return args[0] / args[1]
    if name == "CeilToInt":
        return sp.ceiling(args[0])
    if name in ("FloorToInt", "TruncToInt"):
        return sp.floor(args[0])
    return sp.Mod(*args)


class _Subs(dict):
    """ShapeEnv symbol -> engine expression; `post` undoes the substitution N = m·K made where the code requires
    N % m == 0, so that floor(N/m) of a reshape into windows is the polynomial N/m. On a branch that pads N to
    a multiple of m (`pads`), N mod m, ⌊N/m⌋ and ⌈N/m⌉ are written in one symbol Q = ⌈N/m⌉ (there N mod m =
    N − mQ + m), which `post` turns back into sympy's ceiling(N/m)."""

    def __init__(self, pads: int = 0) -> None:
        super().__init__()
        self.post: dict = {}
        self.pads = pads
        if pads:
            self.post = {_ceil_symbol(pads): sp.ceiling(N / pads)}


def _ceil_symbol(m: int) -> sp.Symbol:
    return sp.Symbol(f"N_ceil_{m}", integer=True, positive=True)


def _on_padding_branch(expr: sp.Expr, m: int) -> sp.Expr:
    """A size on the branch where N is not a multiple of m, in Q = ⌈N/m⌉: there N = mQ − r with 0 < r < m, so
    ⌊(aN + c)/m⌋ = aQ + ⌊(c − ar)/m⌋, written in Q and N wherever that last term is affine in r (⌊N/m⌋ = Q − 1,
    ⌊(N + m − 1)/m⌋ = Q, ⌈N/m⌉ = Q), and x mod m = x − m⌊x/m⌋ (N mod m = N − mQ + m, (−N) mod m = mQ − N)."""
    q = _ceil_symbol(m)

    def floor_of(x: sp.Expr) -> sp.Expr | None:
        poly = sp.Poly(sp.expand(m * x), N) if x.free_symbols == {N} else None
        if poly is None or poly.degree() != 1 or not all(c.is_Integer for c in poly.all_coeffs()):
            return None
        a, c = (int(v) for v in poly.all_coeffs())
        g = [(c - a * r) // m for r in range(1, m)]
        slope = g[1] - g[0] if m > 2 else 0
        if any(g[i] != g[0] + slope * i for i in range(len(g))):
            return None
        return a * q + slope * (m * q - N) + g[0] - slope

    def rewrite(f: sp.Expr) -> sp.Expr:
        if isinstance(f, sp.floor) and (k := floor_of(f.args[0])) is not None:
            return k
        if isinstance(f, sp.ceiling) and (k := floor_of(-f.args[0])) is not None:
            return -k
        if isinstance(f, sp.Mod) and f.args[1] == m and (k := floor_of(f.args[0] / m)) is not None:
            return f.args[0] - m * k
        return f

    return expr.replace(lambda f: isinstance(f, (sp.Mod, sp.ceiling, sp.floor)), rewrite)


def _engine_expr(value: Any, subs: dict[sp.Symbol, sp.Expr]) -> sp.Expr:
    """A size from the exported program or the recorded run in the engine's symbols."""
    if isinstance(value, torch.SymInt):
        expr = value.node.expr
    else:
        return sp.Integer(int(value))
    expr = sp.sympify(expr).xreplace(subs)
    if any(type(f).__name__ in INTEGER_FUNCTIONS for f in sp.preorder_traversal(expr)):
        expr = expr.replace(lambda f: type(f).__name__ in INTEGER_FUNCTIONS, _plain)
        pads = getattr(subs, "pads", 0)
        expr = sp.simplify(_on_padding_branch(expr, pads) if pads else expr)
    post = getattr(subs, "post", None)
    return sp.expand(expr.xreplace(post)) if post else sp.expand(expr)


def where(node: Any) -> tuple[str, str]:
    """The innermost user frame of a node's stack trace: ('file.py:12', 'source line')."""
    trace_text = node.meta.get("stack_trace") or ""
    lines = trace_text.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i].strip()
        if line.startswith('File "'):
            file = line.split('"')[1]
            lineno = line.split(", line ")[1].split(",")[0]
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return f"{file}:{lineno}", code
    return "(unknown location)", ""


def _aten_name(node: Any) -> str:
    target = node.target
    return (
        f"aten.{target.__name__}"
        if isinstance(target, torch._ops.OpOverload)
        else str(getattr(target, "__name__", target))
    )


def _skey(v: Any) -> Any:
    """A hashable identity of an output's storage (fake tensors of torch.export, or a recorded _Meta)."""
    return ("eager", v.storage) if isinstance(v, _Meta) else StorageWeakRef(v.untyped_storage())


def _is_tensor(v: Any) -> bool:
    return isinstance(v, (torch.Tensor, _Meta))


def replay_export(t: Traced, g: Graph, inputs: list[Tensor], program: Any = None) -> Tensor:
    """Write the exported program's ops into an engine graph, starting from `inputs` (q, k, v, or x)."""
    ep = program if program is not None else t.exported.program

    kinds = {spec.arg.name: spec.kind for spec in ep.graph_signature.input_specs}
    targets = {spec.arg.name: spec.target for spec in ep.graph_signature.input_specs}
    subs = _Subs(t.recording.pads)
    env: dict[Any, Any] = {}
    storages: dict[Any, Storage] = {}
    user = iter(inputs)
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta["val"]
        if kinds[node.name] == InputKind.USER_INPUT:
            given = next(user)
            for size, engine in zip(val.shape, given.shape, strict=True):
                if not isinstance(size, torch.SymInt):
                    continue
                expr = size.node.expr
                m = t.recording.divisors.get(str(engine), 1)
                if m > 1 and isinstance(engine, sp.Symbol):  # the code requires N % m == 0, as in the run
                    whole = sp.Symbol(f"{engine}_per_{m}", integer=True, positive=True)
                    subs.post = {**subs.post, whole: engine / m}
                    engine = m * whole
                if isinstance(expr, sp.Symbol):
                    subs.setdefault(expr, engine)
                elif isinstance(expr, sp.Mul) and len(expr.args) == 2 and expr.args[0].is_Integer:
                    subs.setdefault(expr.args[1], engine / expr.args[0])  # N = 4·K exported as a derived dim
            env[node] = given
        else:
            shape = tuple(_engine_expr(s, subs) for s in val.shape)
            name = str(targets[node.name] or node.name)
            if kinds[node.name] == InputKind.PARAMETER:
                env[node] = g.param(name, *shape)
            else:  # a buffer or a constant: exists before the call, owns no activation memory
                env[node] = Tensor(name, shape, Storage(-1, sp.Integer(0), None, -1, name))
        storages[StorageWeakRef(val.untyped_storage())] = env[node].storage
    out = None
    for node in ep.graph.nodes:
        if node.op == "call_function":
            env[node] = _replay_node(t, g, node, env, storages, subs)
            if t.recording.pads:
                _padding(g, node, env[node], env, t.recording.pads)
        elif node.op == "output":
            results = [env.get(a) for a in node.args[0] if a is not None]
            tensors = [r for r in results if isinstance(r, Tensor)]
            if not tensors:
                raise UserError(f"{t.path}:{t.name} returns no tensor")
            out = tensors[0]
    if g.ops:  # the caller holds the arguments: eager PyTorch cannot free them before the call returns
        g.ops[-1].attrs.setdefault("holds", []).extend(inputs)
    return out


def replay_eager(t: Traced, g: Graph, inputs: list[Tensor]) -> Tensor:
    """Write the recorded eager ops into an engine graph; every storage lives until the op after which the
    run saw it die (a Python name holds it), so the engine's liveness walk is the run's."""
    rec = t.recording
    subs = _Subs(rec.pads)
    env: dict[Any, Any] = {}
    storages: dict[Any, Storage] = {}
    inverse = {k: s for s, k in rec.symbols.items()}
    for sid, (kind, label) in rec.leaves.items():
        ref = rec.refs[sid]
        if kind == "input":
            env[ref] = inputs[label]
            storages[("eager", sid)] = env[ref].storage
    dims = CORE_DIMS if t.kind == "core" else LAYER_DIMS
    for k, given in zip(dims, inputs[0].shape if t.kind == "core" else (inputs[0].shape[0], inputs[0].shape[1]),
                        strict=False):  # fmt: skip
        if k in inverse and k in rec.fixed:  # the code fixed it: its value, in the run's sizes too
            subs[inverse[k]] = sp.Integer(rec.fixed[k])
        elif k in inverse:
            m = rec.divisors.get(k, 1)
            if m > 1 and isinstance(given, sp.Symbol):
                whole = sp.Symbol(f"{given}_per_{m}", integer=True, positive=True)
                subs[inverse[k]] = m * whole
                subs.post = {**subs.post, whole: given / m}
            else:
                subs[inverse[k]] = given
    for sid, (kind, label) in rec.leaves.items():
        if kind == "input":
            continue
        ref = rec.refs[sid]
        shape = tuple(_engine_expr(s, subs) for s in rec.shapes[sid])
        if kind == "param":
            env[ref] = g.param(str(label), *shape)
        else:  # a buffer or a constant: exists before the call, owns no activation memory
            env[ref] = Tensor(str(label), shape, Storage(-1, sp.Integer(0), None, -1, str(label)))
        storages[("eager", sid)] = env[ref].storage
    by_sid: dict[int, Storage] = {}
    for i, node in enumerate(rec.nodes):
        result = _replay_node(t, g, node, env, storages, subs)
        if rec.pads:
            _padding(g, node, result, env, rec.pads)
        outs = result if isinstance(result, list) else [result]
        for ref, value in zip(node.outs, outs, strict=False):
            env[ref] = value
        for meta in node.meta["val"] if isinstance(node.meta["val"], list) else [node.meta["val"]]:
            s = storages.get(("eager", meta.storage))
            if s is not None:
                by_sid[meta.storage] = s
        for sid in rec.deaths.get(i, ()):
            s = by_sid.get(sid)
            if s is not None and s.producer >= 0 and g.ops:
                g.ops[-1].attrs.setdefault("holds", []).append(Tensor(s.name, (), s))
    out = env.get(rec.output)
    if not isinstance(out, Tensor):
        raise UserError(f"{t.path}:{t.name} returns no tensor")
    alive = set(by_sid) - {sid for v in rec.deaths.values() for sid in v}
    if g.ops:  # alive at the return (results the caller drops, tuples): through the last op
        g.ops[-1].attrs.setdefault("holds", []).extend(Tensor(by_sid[s].name, (), by_sid[s]) for s in sorted(alive)
                                                       if by_sid[s].producer >= 0)  # fmt: skip
        g.ops[-1].attrs["holds"].extend(inputs)
    return out


def _padding(g: Graph, node: Any, out: Any, env: dict, m: int) -> None:
    """Code that pads a length n up to m·⌈n/m⌉ rows runs only where n is not a multiple of m: elsewhere it goes
    on with the tensor itself (`Graph.padding`). The run shows it as constant_pad_nd (F.pad) of x, torch.cat of x
    and zeros, x copied into the first n rows of a zeros tensor of the padded length (copy_ in the as-written
    run, slice_scatter in the exported graph)."""
    if not isinstance(out, Tensor) or not isinstance(node.target, torch._ops.OpOverload):
        return
    name = node.target.overloadpacket.__name__
    args = [_lookup(a, env) for a in node.args]
    whole, bases = out, []
    if name == "constant_pad_nd":
        sources = args[:1]
    elif name == "cat":
        sources = list(args[0])
    elif name in ("copy_", "slice_scatter") and len(args) > 1:
        sources = [args[1]]
        if name == "copy_" and out.storage.producer >= 0:
            whole = g.ops[out.storage.producer].output  # the tensor written into, as it was made
        elif isinstance(args[0], Tensor) and args[0].shape == out.shape and args[0].storage.producer >= 0:
            bases = [args[0]]  # the zeros tensor the exported graph scatters into
    else:
        return
    for x in sources:
        if not isinstance(x, Tensor) or len(x.shape) != len(whole.shape) or whole.storage.stands_for is not None:
            continue
        grown = [i for i, (a, c) in enumerate(zip(x.shape, whole.shape, strict=True)) if sp.expand(a - c) != 0]
        if len(grown) == 1 and sp.expand(whole.shape[grown[0]] - padded(x.shape[grown[0]], m)) == 0:
            for t in (whole, *bases):
                g.padding(t, x, Pads(x.shape[grown[0]], m))
            return


def _transposed_view(v: Any) -> bool:
    """Whether a view has its last two dimensions swapped against row-major order (a transpose or permute of them),
    read from its strides, as `Tensor.T` marks it: `q @ k.transpose(-2, -1)` is then the catalogue's `Q @ K.T`.
    Only what the strides say for every size counts: no size is specialised to decide it."""

    if isinstance(v, _Meta):
        return v.transposed
    if v.dim() < 2:
        return False
    rows, cols = v.stride(-2), v.stride(-1)
    return statically_known_true(rows == 1) and not statically_known_true(cols == 1)


def _replay_node(t: Traced, g: Graph, node: Any, env: dict, storages: dict, subs: dict) -> Any:
    val = node.meta.get("val")
    target = node.target
    if target is operator.getitem:
        return env[node.args[0]][node.args[1]]
    if not isinstance(target, torch._ops.OpOverload):
        return _Scalar(node.name)  # arithmetic on sizes and scalars (sym_size, sqrt, ...): no tensor work
    base = target.overloadpacket.__name__
    short = base if base.startswith("__") else base.rstrip("_")
    if short in SKIP or base in SKIP:
        return _Scalar(node.name)
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    if not vals or not all(_is_tensor(v) for v in vals):
        return _Scalar(node.name)
    for v in vals:
        if v.dtype != torch.float32 and v.dtype not in FIXED_DTYPES:
            loc, code = where(node)
            raise UserError(
                f"{loc}: {_aten_name(node)} makes a {str(v.dtype).replace('torch.', '')} tensor (in `{code}`): "
                "only floating-point, complex, bool and integer tensors are modelled"
            )
    args = [_lookup(a, env) for a in node.args]
    kwargs = {k: _lookup(a, env) for k, a in node.kwargs.items()}
    outs = []
    first: Tensor | None = None
    for i, v in enumerate(vals):
        shape = tuple(_engine_expr(s, subs) for s in v.shape)
        key = _skey(v)
        label_name = node.name if len(vals) == 1 else f"{node.name}[{i}]"
        known = storages.get(key)
        mutating = target._schema.is_mutable
        if known is not None and not mutating:  # a view, or an op that returned its input (dropout in eval)
            outs.append(Tensor(label_name, shape, known, _transposed_view(v)))
            continue
        dtype = None if v.dtype == torch.float32 else FIXED_DTYPES[v.dtype]
        if i > 0 and first is not None:  # a second output of one kernel: SDPA's log-sum-exp, LayerNorm's stats
            lse = g.ops[-1].attrs.get("lse") if g.ops and g.ops[-1].kind == "fused_attention" else None
            if lse is not None and i == 1:
                storages[key] = lse.storage
                outs.append(lse)
                continue
            side = g.traced("fill", label_name, shape, (), label=f"{label_name} ← {_aten_name(node)}, output {i}",
                            dtype=dtype)  # fmt: skip
            storages[key] = side.storage
            outs.append(side)
            continue
        rule: Rule | None = RULES.get(short)
        if rule is None and short in VIEWS:
            rule = _copy
        if rule is None:
            loc, code = where(node)
            raise UserError(
                f"{loc}: cannot map {_aten_name(node)} onto an engine op kind (in `{code}`); "
                "see docs/tracing.md for the ops attn-cost maps"
            )
        n = _Node(node, args, kwargs, shape)
        try:
            kind, ins, attrs = rule(n)
        except _UnmappedError as e:
            loc, code = where(node)
            raise UserError(f"{loc}: cannot map {_aten_name(node)}: {e} (in `{code}`)") from None
        label = f"{label_name} ← {_aten_name(node)}({', '.join(_arg_label(a, subs) for a in args)})"
        if kind == "fused_attention":
            result = g.fused_attention(label_name, *ins, causal=attrs["causal"], mask=attrs["mask"], label=label)
        elif known is not None:  # in place, or out=: writes into an existing storage
            into = kwargs.get("out") if isinstance(kwargs.get("out"), Tensor) else args[0]
            others = tuple(x for x in ins if x is not into)
            if (kwargs.get("out") is not None and into is not args[0]) or kind in ("fill", "copy"):
                attrs = {**attrs, "overwrite": True}
            result = g.traced(kind, label_name, shape, others, into=Tensor(into.name, shape, known), attrs=attrs,
                              label=label)  # fmt: skip
        else:
            attrs.pop("overwrite", None)
            result = g.traced(kind, label_name, shape, ins, attrs=attrs, label=label, dtype=dtype)
        storages[key] = result.storage
        first = result
        outs.append(result)
    return outs[0] if len(vals) == 1 and not isinstance(val, (tuple, list)) else outs


@dataclass(frozen=True)
class _Scalar:
    """A number computed from sizes (a scale factor): no tensor, no cost."""

    name: str

    def __str__(self) -> str:
        return self.name


def _lookup(a: Any, env: dict) -> Any:
    if isinstance(a, (list, tuple)):
        return [_lookup(x, env) for x in a]
    return env.get(a, a) if hasattr(a, "op") else a


def _arg_label(a: Any, subs: dict | None = None) -> str:
    """An argument in an op's label: a tensor by name, a size-derived number in b, h, N, d (d**0.5, not s40)."""
    if isinstance(a, list):
        return "[" + ", ".join(_arg_label(x, subs) for x in a) + "]"
    if isinstance(a, (torch.SymInt, torch.SymFloat)) and subs is not None:
        try:
            e = sp.sympify(a.node.expr).xreplace(subs)
            return str(e.replace(lambda f: type(f).__name__ in _FLOAT_FUNCTIONS, _float_plain))
        except Exception:
            return str(a)
    return a.name if isinstance(a, Tensor) else str(a)


_FLOAT_FUNCTIONS = ("ToFloat", "FloatPow", "FloatTrueDiv", "PowByNatural", "IntTrueDiv", "OpaqueUnaryFn_sqrt")


def _float_plain(f: Any) -> sp.Expr:
    name, args = type(f).__name__, f.args
    if name == "ToFloat":
        return args[0]
    if name in ("FloatPow", "PowByNatural"):
        return args[0] ** args[1]
    if name == "OpaqueUnaryFn_sqrt":
        return sp.sqrt(args[0])
    return args[0] / args[1]


# -- tracing and registration ---------------------------------------------------------------------------


@dataclass
class Traced:
    """The user's code, built and run with symbolic sizes."""

    name: str
    path: Path
    kind: str
    """'core' (q, k, v) or 'layer' (x)."""
    module: torch.nn.Module
    recording: Recording
    exported: Exported
    example: dict[str, int]
    param_shapes: dict[str, tuple[int, ...]]
    width: int | None = None
    """A layer's embedding width (fixed by its weights)."""
    heads: int | None = None
    """A layer's heads, read from the module (None if it does not say)."""

    @property
    def symbolic(self) -> tuple[str, ...]:
        dims = CORE_DIMS if self.kind == "core" else LAYER_DIMS
        return tuple(k for k in dims if k not in self.recording.fixed)

    @property
    def conditions(self) -> list[str]:
        """What the formulas assume of the sizes: the code's branches, torch.export's asserts."""
        out = list(self.recording.guards)
        out += [a for a in self.exported.asserts if a not in out and not self._padding_guard(a)]
        bounds = {c: int(m.group(3)) - (m.group(2) == "<") for c in out if (m := re.fullmatch(r"(\w) (<=?) (\d+)", c))}
        tightest: dict[str, int] = {}
        for c, top in bounds.items():
            tightest[c[0]] = min(top, tightest.get(c[0], top))
        return [c for c in out if c not in bounds] + [f"{k} <= {v}" for k, v in tightest.items()]

    def _padding_guard(self, condition: str) -> bool:
        """An assert of the exported graph that the padding branch makes (N % m > 0), or that it always meets,
        where the formulas hold at every N."""
        if not self.recording.pads or self.recording.whole is None:
            return False
        try:
            expr = sp.sympify(condition.replace("%", " % "), locals={"N": N, "b": b, "h": h, "d": d})
        except (sp.SympifyError, TypeError, SyntaxError):
            return False
        return _pads_at(expr, self.recording.pads, self.example) is not None or bool(
            re.fullmatch(r"N % \d+ == 0", condition))


_TRACED: dict[str, Traced] = {}
"""Variant name -> its trace (for `trace`'s report and for measuring a traced variant)."""


def trace(spec: str, init: list[str] | None = None, config: Path | None = None, example: str | None = None) -> Traced:
    """Build PATH:NAME and run it with symbolic sizes (as written), then export it (the ideal)."""
    path, name = split_spec(spec)
    _, obj = load_object(path, name)
    kwargs, cfg, chosen = parse_init(init), load_config(config), parse_example(example)
    module = _by_arguments(build(obj, path, name, kwargs, cfg))
    kind = "core" if isinstance(module, _Core) else "layer"
    width = None if kind == "core" else embed_width(module, path, name)
    sizes_for(kind, chosen, EXAMPLE, width, "--example")
    where_ = f"{path}:{name}"
    recording, sizes = _record_at_some_size(module, kind, chosen, width, where_)
    if "N" in recording.fixed:
        raise UserError(
            f"{where_}: the sequence length N cannot stay symbolic: the code fixes it to the example's "
            f"{sizes['N']}{recording.pinned_at.rstrip()} (a Python loop or branch over N, or int(N)): write it with "
            "tensor ops (cumsum, matmul), or describe it with the op DSL (g.loop, docs/variants.md)"
        )
    if recording.pads and recording.whole is not None:
        recording = _padded_or_whole(recording, module, kind, width, path, name, sizes)
    bounds = [int(m.group(2)) - (m.group(1) == "<") for c in recording.guards
              if (m := re.fullmatch(r"N (<=?) (\d+)", c))]  # fmt: skip
    exported = export(module, kind, sizes, width, recording.divisors, min(bounds) if bounds else None)
    params = {k: tuple(p.shape) for k, p in module.named_parameters()}
    heads = None if kind == "core" else heads_of(module)
    return Traced(name, path, kind, module, recording, exported, sizes, params, width, heads)


def _padded_or_whole(rec: Recording, module: torch.nn.Module, kind: str, width: int | None, path: Path, name: str,
                     sizes: dict[str, int]) -> Recording:  # fmt: skip
    """The run that pads N, where its formulas (its padding copies made only where N is not a multiple of m)
    equal the run at multiples of m there, FLOPs and peak at several sizes; else the run at multiples, whose
    formulas hold for multiples of m only (as they say)."""

    def derived(r: Recording) -> Derived:
        t = Traced(name, path, kind, module, r, Exported(), sizes, {}, width)
        g = Graph(name)
        if kind == "core":
            g.output(replay_eager(t, g, [g.input(x, b, h, N, d) for x in ("Q", "K", "V")]))
        else:
            g.output(replay_eager(t, g, [g.input("X", b, N, width)]))
        return Derived(g)

    whole = rec.whole
    assert whole is not None, "a padding run comes with its run at a multiple"
    try:
        padded_run, whole_run = derived(rec), derived(whole)
        flops = (padded_run.flops(MATMUL), whole_run.flops(MATMUL))
        peaks = (padded_run.peak("fp32"), whole_run.peak("fp32"))
        for k, bb, hh in ((1, 2, 3), (2, 3, 2), (3, 2, 5), (7, 5, 3)):
            at = {N: rec.pads * k, b: bb, h: hh, d: sizes["d"]}
            at = {s: sp.Integer(v) for s, v in at.items()}
            if flops[0].xreplace(at) != flops[1].xreplace(at) or peaks[0].at(at)[0] != peaks[1].at(at)[0]:
                return whole
    except Exception:  # a graph the replay cannot build: the run at multiples, as before
        return whole
    rec.guards += [c for c in whole.guards if c not in rec.guards and not re.fullmatch(r"N % \d+ == 0", c)]
    return rec


def _record_at_some_size(
    module: torch.nn.Module, kind: str, chosen: dict[str, int], width: int | None, where_: str
) -> tuple[Recording, dict[str, int]]:
    """Record at the example sizes; when the code rejects them, try other N (and d for a core) unless
    the user chose them with --example."""
    tries = []
    for n in ([chosen["N"]] if "N" in chosen else N_TRIES):
        for dd in ([chosen.get("d", EXAMPLE["d"])] if "d" in chosen or kind != "core" else D_TRIES):
            tries.append({**EXAMPLE, **chosen, "N": n, "d": dd})
    first: BaseException | None = None
    fallback = None
    for sizes in tries:
        try:
            rec = record(module, kind, sizes, width, where_)
        except _RunError as e:
            first = first or e.error
            continue
        if "N" in rec.fixed:  # a loop over the tokens: another N loops as well
            return rec, sizes
        if rec.pads and not _polynomial(rec) and sizes["N"] < rec.pads and "N" not in chosen:
            longer = {**sizes, "N": 2 * rec.pads + 1}  # below one window the code takes its size-1 path
            with suppress(_RunError):
                rec, sizes = record(module, kind, longer, width, where_), longer
        if rec.pads and _polynomial(rec):  # the code pads N: its run at a multiple of m checks the formulas
            m = rec.pads
            try:
                rec.whole = record(module, kind, {**sizes, "N": m * max(2, -(-sizes["N"] // m))}, width, where_)
            except _RunError:
                rec.whole = None
            if rec.whole is not None and _polynomial(rec.whole) and not rec.whole.pads:
                return rec, sizes
        if not rec.pads and _polynomial(rec):
            return rec, sizes
        fallback = fallback or (rec, sizes)  # sizes like ceil(N/4): a multiple of 4 may not need them
    if fallback is not None:
        if fallback[0].pads:  # its padded run could not be written in ⌈N/m⌉ or checked: the run as it is
            fallback[0].unpadded()
        return fallback
    shown = ", ".join(f"{k}={v}" for k, v in tries[0].items() if kind == "core" or k in LAYER_DIMS)
    located = _user_line(first)
    raise UserError(
        f"{where_} raised an error when run at the example sizes {shown}"
        f"{' (and at the other N tried)' if len(tries) > 1 else ''}: {located}{type(first).__name__}: "
        f"{_first_line(first)}; if the sizes are the cause, choose ones it accepts with --example N=...,d=..."
    )


def _polynomial(rec: Recording) -> bool:
    """Every size of the run is a polynomial in the dims (N = 16 pads nothing where N = 13 needs ceil(N/8))."""
    subs = _Subs(rec.pads)
    for s, k in rec.symbols.items():
        m = rec.divisors.get(k, 1)
        whole = sp.Symbol(f"{k}_per_{m}", integer=True, positive=True)
        subs[s] = sp.Integer(rec.fixed[k]) if k in rec.fixed else m * whole if m > 1 else SYMBOLS[k]
        if m > 1:
            subs.post = {**subs.post, whole: SYMBOLS[k] / m}
    sizes = _run_sizes(rec.nodes)
    steps = {v: k for k, v in subs.post.items() if rec.pads}
    for x in sizes:
        e = _engine_expr(x, subs).xreplace(steps)
        if not e.is_polynomial(*SYMBOLS.values(), *steps.values()):
            return False
        if e.has(sp.floor, sp.ceiling, sp.Mod, sp.Max, sp.Min):
            return False
    return True


def _user_line(e: BaseException | None) -> str:
    if e is None:
        return ""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(_HERE)]
    return f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""


def register(spec: str, init: list[str] | None = None, config: Path | None = None, example: str | None = None) -> str:
    """Trace PATH:NAME and register it as a variant named NAME; returns the name."""

    all_variants()
    path, name = split_spec(spec)
    if name in REGISTRY:
        if getattr(REGISTRY[name], "source", "").startswith(f"traced from {path}:{name}") and name in _TRACED:
            return name
        raise UserError(f"traced variant {name!r} clashes with a registered variant: rename {name} in {path}")
    try:
        t = trace(spec, init, config, example)
    except UserError:
        raise
    except Exception as e:  # never a traceback: what attn-cost did not foresee is still one line
        raise UserError(f"{spec}: could not trace it ({type(e).__name__}: {_first_line(e)})") from None
    source = f"traced from {path}:{name} (run with symbolic {', '.join(t.symbolic)}; torch.export for the ideal)"
    fixed = {k: v for k, v in t.recording.fixed.items()}
    if fixed:  # the formulas hold at these sizes only: say so once, on stderr (stdout may be JSON)
        sizes = ", ".join(f"{k} = {v}" for k, v in fixed.items())
        sys.stderr.write(printable(f"attn-cost: note: {path}:{name} fixes {sizes}; its formulas hold at these sizes "
                                   "only", keep="") + "\n")
        source += f"; fixed: {sizes}"
    if t.kind == "core":
        core = lambda g, q, k, v: replay_eager(t, g, [q, k, v])  # noqa: E731
        v = Variant(name, f"{name} as written in {path.name} (traced)", source, "traced", core=core)
    else:
        v = Variant(name, f"{name} as written in {path.name} (traced; d_embed = {t.width})", source, "traced",
                    layer=lambda g, x: _replay_layer(t, g, x, replay_eager))  # fmt: skip
    _add(v)
    try:
        check(v)
        derive(name, t.kind).peak("fp32").expr.free_symbols  # noqa: B018 (polynomial in the sizes?)
        derive(name, t.kind).flops(MATMUL)
    except UserError:
        del REGISTRY[name]
        raise
    except Exception as e:  # sizes the engine cannot hold as polynomials (floor(N/128) of a chunked loop)
        del REGISTRY[name]
        raise UserError(f"{path}:{name}: its costs are not polynomials in the sizes ({type(e).__name__}: "
                        f"{_first_line(e)}); describe it with the op DSL (docs/variants.md)") from None
    _TRACED[name] = t
    return name


def _replay_layer(t: Traced, g: Graph, x: Tensor, how: Callable) -> Tensor:
    """A module's widths are its own: its input is (b, N, d_embed) with the module's d_embed."""
    if x.storage.producer != -1 or x not in g.inputs:
        raise UserError(f"{t.name} is a traced module with a fixed width: it has the layer scope only")
    g.inputs.remove(x)
    own = g.input("X", b, N, t.width)
    return how(t, g, [own])


def traced(name: str) -> Traced | None:
    """The trace behind a registered variant (None if it is not traced)."""
    return _TRACED.get(name)


def exported_peak(t: Traced, dtype: str = "fp32") -> tuple[sp.Expr | None, str]:
    """The exported graph's peak in bytes (every tensor freed after its last use), or None and why not. Where
    the graph keeps an op no rule maps (an einsum of three operands), its ATen decomposition is mapped."""
    if t.exported.program is None:
        return None, f"torch.export could not export it ({t.exported.failure})"
    peak, why = _exported_peak(t, t.exported.program, dtype)
    if peak is None and "cannot map" in why:
        try:
            with user_code("torch.export"), torch.no_grad():
                decomposed = t.exported.program.run_decompositions()
        except Exception:
            return None, why
        peak, _ = _exported_peak(t, decomposed, dtype)
    return peak, why if peak is None else ""


def _exported_peak(t: Traced, program: Any, dtype: str) -> tuple[sp.Expr | None, str]:

    g = Graph(f"{t.name} (exported)")
    try:
        if t.kind == "core":
            q, k, v = (g.input(x, b, h, N, d) for x in ("Q", "K", "V"))
            g.output(replay_export(t, g, [q, k, v], program))
        else:
            g.output(replay_export(t, g, [g.input("X", b, N, t.width)], program))
        return Derived(g).peak(dtype).expr, ""
    except UserError as e:
        return None, str(e)
    except Exception as e:  # sizes that are not polynomials, a node the replay does not expect
        return None, f"its exported graph could not be mapped ({type(e).__name__}: {_first_line(e)})"


# -- checking against the real code --------------------------------------------------------------------


CHECK_FLOPS = 10**12
"""The most FLOPs (matmul convention) one run of `--check` may cost: the real code runs three times, on a CPU."""


def checked(t: Traced, text: str) -> dict[str, Any]:
    """--check N=..,b=..: the formulas and the real code (FlopCounterMode, the live-tensor tracer) at those sizes,
    refused before anything runs where the formulas say the code would need more than half this machine's memory
    or more than CHECK_FLOPS."""

    sizes = sizes_for(t.kind, parse_example(text, "--check"), t.example, t.width, "--check", t.recording.fixed)
    dv = derive(t.name, t.kind)
    at = {BY_NAME[k]: v for k, v in sizes.items()}
    flops, peak = int(dv.flops(MATMUL).xreplace(at)), int(dv.peak("fp32").expr.xreplace(at))
    memory = _memory_bytes() // 2
    if peak > memory or flops > CHECK_FLOPS:
        raise UserError(
            f"--check {_shown(sizes, t.kind)}: by its formulas the code would hold {peak:,} bytes and run {flops:,} "
            f"FLOPs, and --check runs it for real (at most half this machine's memory, {memory:,} bytes, and "
            f"{CHECK_FLOPS:,} FLOPs): choose smaller sizes"
        )
    real = measure(t, sizes)
    return {
        "sizes": {k: v for k, v in sizes.items() if t.kind == "core" or k in LAYER_DIMS},
        "flops_formula": flops,
        "flops_flopcountermode": real["flops"],
        "peak_bytes_formula": peak,
        "peak_bytes_live_tracer": real["peak_bytes"],
    }


def _memory_bytes() -> int:
    """This machine's physical memory (4 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def measure(t: Traced, sizes: dict[str, int]) -> dict[str, int]:
    """Run the real module at concrete sizes: FlopCounterMode's FLOPs (the CPU SDPA kernel mapped to
    PyTorch's own sdpa_flop_count) and the live-tensor tracer's peak, the caller holding the inputs."""


    gen = torch.Generator().manual_seed(1)
    if t.kind == "core":
        shape = tuple(sizes.get(k, t.example[k]) for k in CORE_DIMS)
        inputs = [torch.randn(*shape, generator=gen) for _ in range(3)]
    else:
        inputs = [torch.randn(sizes["b"], sizes["N"], t.width, generator=gen)]
    try:
        with user_code(f"{t.path}:{t.name}"), torch.no_grad():
            t.module(*[x.clone() for x in inputs])
            gc.collect()
            tracer = LiveTensorTracer()
            for x in inputs:
                tracer.track(x)
            with tracer:
                out = t.module(*inputs)
            del out
            with FlopCounterMode(display=False, custom_mapping=CPU_SDPA) as mode:
                t.module(*inputs)
    except UserError:
        raise
    except Exception as e:
        shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
        holds = f" (its formulas hold for: {'; '.join(t.conditions)})" if t.conditions else ""
        raise UserError(f"{_user_line(e) or f'{t.path}:{t.name}: '}raised an error when run at the --check sizes "
                        f"{shown}{holds}: {type(e).__name__}: {_first_line(e)}") from None
    return {"flops": int(mode.get_total_flops()), "peak_bytes": int(tracer.peak)}
