"""The user's code: loading PATH:NAME, its --init, --config and --example, building the module, and running it
with its errors and prints kept apart from attn-cost's (`user_code`)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import logging
import math
import os
import re
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.paths import check_input, real
from attn_cost.costmodel.plugins import located, state_kept
from attn_cost.costmodel.symbols import N, b, d, h
from attn_cost.profilers.store.files import DuplicateKeyError, parse_json, read_input, text_of
from attn_cost.profilers.trace.adapters import Core, adapt

EXAMPLE = {"b": 2, "h": 3, "N": 13, "d": 8}


"""Default sizes of the example inputs (distinct, so that no two dims are confused)."""


N_TRIES = (13, 16, 32, 64, 24, 128)


"""Example lengths tried in turn when the code rejects the previous one (a window or block size)."""


D_TRIES = (8, 16, 32, 64)


"""Example head widths tried in turn for a core whose code needs another d."""


SYMBOLS = {"b": b, "h": h, "N": N, "d": d}


CORE_DIMS = ("b", "h", "N", "d")


LAYER_DIMS = ("b", "N")


LIBRARY_DIRS = (str(Path(torch.__file__).parent), str(Path(__file__).resolve().parents[2]))
"""Frames under these folders (torch, attn-cost) are not the user's: an op is located in the frame below."""
PLUMBING = ("/typer/", "/click/", "runpy.py", "<frozen", "/_pytest/", "/pluggy/")
"""Frames of the machinery that runs attn-cost (the CLI, pytest, runpy): not the user's either."""


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
        said = f": {first_line(e)}" if first_line(e) else ""
        raise UserError(f"{user_line(e) or what + ': '}raised {type(e).__name__}{said}") from None
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
        raise UserError(f"--example {sizes_text(sizes, kind)}: each example input would hold {elements:,} elements, "
                        f"at most {EXAMPLE_ELEMENTS:,}: the example only shows the code its shapes (the formulas are "
                        "in symbols), choose smaller sizes")  # fmt: skip
    return sizes


def sizes_text(sizes: dict[str, int], kind: str) -> str:
    """Sizes as the user writes them (`N=64,d=16`): a layer's only where a layer has them."""
    return ",".join(f"{k}={v}" for k, v in sizes.items() if kind == "core" or k in LAYER_DIMS)


def load_config(path: Path | None) -> Any:
    """--config FILE.json: a Hugging Face config (it has 'model_type') or plain keyword arguments."""
    if path is None:
        return None
    raw = text_of(read_input(Path(path), "a --config file"), path, "a --config file")
    try:
        data = parse_json(raw)
    except DuplicateKeyError as e:
        raise UserError(f"--config {path}: {e}") from None
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
        return adapt(obj.eval(), getattr(obj, "config", None))
    if not (isinstance(obj, type) and issubclass(obj, torch.nn.Module)):
        if not callable(obj):
            raise UserError(f"{path}:{name} is neither a function (q, k, v) -> y nor an nn.Module subclass")
        if init or config is not None:
            raise UserError(f"{path}:{name} is a function: --init and --config are for an nn.Module class")
        return Core(obj)
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
        raise UserError(f"{path}:{name}(...) failed: {type(e).__name__}: {first_line(e)}{hint}") from None
    for key, value in attributes.items():  # --init fused_attn=False: an attribute the class sets itself
        if not hasattr(module, key):
            raise UserError(f"--init {key}: {obj.__name__} takes no argument {key!r} and has no such attribute "
                            f"(it takes: {', '.join(sorted(accepted - {'self'})) or 'nothing'})")  # fmt: skip
        setattr(module, key, value)
    module.eval()
    return adapt(module, config)


def _init_params(cls: type[Any]) -> set[str]:
    try:
        return set(inspect.signature(cls.__init__).parameters)
    except (TypeError, ValueError):
        return set()


def _takes_kwargs(cls: type[Any]) -> bool:
    try:
        return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values())
    except (TypeError, ValueError):
        return True


def _required(cls: type[Any]) -> list[str]:
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def first_line(e: BaseException | None) -> str:
    """The line of an error's message that says what went wrong (torch.export's constraint errors: the second)."""
    text = str(e).strip().splitlines()
    lines = [x.strip(" -") for x in text if x.strip() and "For more information" not in x]
    return lines[1] if len(lines) > 1 and lines[0].startswith("Constraints violated") else (lines[0] if lines else "")


def user_line(e: BaseException | None) -> str:
    """'file:line: ' of the user's frame an error was raised in ('' where none is the user's)."""
    if e is None:
        return ""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(LIBRARY_DIRS)]
    return f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
