"""Options shared by several commands, and the checks that turn bad values into one-line errors."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any, NamedTuple, Optional, overload

import sympy as sp
import typer
from attn_cost.cli import render
from attn_cost.cli.app import METAVARS, _commands, _type_hints, _type_word, fail, heard, measuring_started, note, typed
from attn_cost.costmodel.conventions import DEFAULT, FULL, get_convention
from attn_cost.costmodel.counting import Counting, F_bwd, F_causal, F_chunk
from attn_cost.costmodel.crossover import Setting, cost_branches
from attn_cost.costmodel.dtypes import dtype_bytes, spelled
from attn_cost.costmodel.plugins import load_file
from attn_cost.costmodel.scopes import DROPOUT_IN_INFERENCE, MODES, SCOPES
from attn_cost.costmodel.symbols import BY_NAME, DEFAULT_DEPTH, DEFAULTS, D, L, b, d, h, r, with_defaults
from attn_cost.costmodel.variants import derive, derive_counted, get_variant
from attn_cost.profilers.measure.sizes import SIZE_FLAGS

D_VALUES = typer.Option(None, "--d", help="Head dimension; repeat for several.")
D_DEFAULT = {
    "crossover": [8, 16, 32, 64, 128],
    "cheapest": [64],
    "decode": [64],
    "profile": [16],
    "measure": [16],
    "io": [64],
}
"""Head dims each command uses when no --d is given (shown in its help)."""


def head_dim_option(command: str) -> Any:
    """--d with the command's own default in its help."""
    default = ",".join(map(str, D_DEFAULT[command]))  # no spaces: help wrapping keeps it whole
    return typer.Option(None, "--d", help="Head dimension; repeat for several.", show_default=default)


HEADS = typer.Option(1, "--h", help="Heads.")
BATCH = typer.Option(1, "--b", help="Batch size.")
EMBED = typer.Option(None, "--d-embed", help="Embedding width; sets d = d_embed / h.")
LATENTS = typer.Option(None, "--L", help="Latte latent states per head (default: L = d).")
RATIO = typer.Option(None, "--r", help="MLP ratio (block and model scopes).", show_default="4")
DEPTH = typer.Option(None, "--depth", help="Encoder depth D (model scope).", show_default=str(DEFAULT_DEPTH))
CONVENTION = typer.Option(DEFAULT, "--convention", help="FLOP convention (see `attn-cost conventions`).")
DTYPE = typer.Option("fp32", "--dtype", help=f"{spelled()}: bytes per element for memory and traffic.")
DEVICE_DTYPE = typer.Option(
    None,
    "--dtype",
    help=f"{spelled()}: bytes per element (default fp32; with --device, what the device prices: bf16 on a datasheet "
    "GPU, else what it was measured in).",
)
"""--dtype of a command that takes --device: `settings.Settings.resolve` reads it."""
SCOPE = typer.Option(
    None,
    "--scope",
    help="core, layer, block, model or decode (default: core, or layer for variants that only exist as layers).",
)
MODE = typer.Option("inference", "--mode", help="inference or training.")
CAUSAL = typer.Option(
    False, "--causal", help="Use each variant's causal form (softmax → softmax-causal, linear → linear-causal, ...)."
)
JSON = typer.Option(False, "--json", help="Print JSON instead of tables.")
LAUNCH = typer.Option(
    None,
    "--launch",
    help="A datasheet GPU: how the code runs, eager (default: eager PyTorch at the launch cost the H200 run measured; "
    "a Triton kernel at flash-linear-attention's) or graphs (CUDA graphs: 15 µs a replay, 0.6 µs a kernel).",
)
KERNEL_NAMES = ("sdpa", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math", "flash-attn-2", "flash-attn-3",
                "fla-chunk", "fla-fused-chunk")
"""`--kernel`'s names, spelled here for the help (the device layer stays off the analytic path); the datasheet
model's `datasheet.kernels.CHOICES` declares each, and a test checks the two agree."""
KERNEL = typer.Option(
    None,
    "--kernel",
    help="A datasheet GPU: the kernel that runs, priced by its own tiles and grid — fused attention: sdpa (default: "
    "the backend PyTorch's SDPA picks, named in the output), sdpa-flash, sdpa-efficient, sdpa-cudnn, sdpa-math, "
    "flash-attn-2, flash-attn-3 (Hopper); chunked linear attention: fla-chunk (default), fla-fused-chunk.",
)
PYTORCH = typer.Option(
    None,
    "--pytorch",
    help="A datasheet GPU: the PyTorch release SDPA is priced as, X.Y (default: a current one, 2.9 or later): "
    "which backend sdpa picks (cuDNN first on Hopper and Blackwell from 2.9, flash before) and whether its math "
    "backend computes fp16/bf16 in fp32 (from 2.5).",
)
LAUNCH_US = typer.Option(
    None,
    "--launch-us",
    help="A datasheet GPU: your host's cost of one kernel launch, µs (default: the --launch setting's).",
)


CAUSAL_COUNT = typer.Option(
    None,
    "--causal-count",
    help="Scores a causal kernel is charged for: dense (default; FlopCounterMode), triangle (exact), "
    "tiles (the blocks a tiled kernel computes, --tile), half (FlashAttention's benchmark).",
)
TILE = typer.Option(
    None, "--tile", help="Tile size T for --causal-count tiles (exact when T divides N).", show_default="128"
)
BACKWARD = typer.Option(
    None,
    "--backward",
    help="Backward of the score products in training: autograd (2x forward, default) or recompute "
    "(2.5x: FlashAttention recomputes QKᵀ).",
)
N_KV = typer.Option(
    None, "--n-kv", help="Key/value length when it differs from the query length N (core scope; N <= N_kv)."
)
ALIGN = typer.Option(
    None,
    "--align",
    help="Causal mask alignment when N differs from N_kv: top-left (default: PyTorch's is_causal, as the causal "
    "variants run it) or bottom-right (FlashAttention >= 2.1: decode, chunked prefill).",
)
BIAS = typer.Option(
    None,
    "--bias",
    help="Projection biases of an attention layer: all (Q, K, V, O), out (output only: the linformer, "
    "performer-pytorch, nystrom-attention packages) or none (Llama-style). Default: each variant's own.",
)
DROPOUT = typer.Option(
    None,
    "--dropout",
    help="Attention dropout probability p (0 <= p < 1) on the attention probabilities, in training (--mode "
    "training): a bool keep mask of their size kept for backward where they are materialised, the draw per score "
    "inside a fused kernel. Not with variants without probabilities (linear attention).",
)
PADDING_MASK = typer.Option(
    False,
    "--padding-mask",
    help="A key padding mask, b×N bool (flash-attention's benchmark, MultiheadAttention's key_padding_mask): "
    "masked_fill of a materialised score matrix, SDPA's attn_mask for a fused kernel.",
)
FEATURE_MAP = typer.Option(
    None,
    "--feature-map",
    help="Feature map φ of the linear attentions (linear, linear-causal(-fused), linear-recurrent, "
    "linear-chunked(-fused)), as flash-linear-attention's LinearAttention names them: elu1 (default: elu + 1, "
    "Katharopoulos et al.), relu or identity (no φ: what fla's chunk_linear_attn runs on its inputs).",
)
NORMALIZE = typer.Option(
    None,
    "--normalize/--no-normalize",
    help="Whether the linear attentions divide by φ(q)·Σφ(k) (default: normalize, the paper's and fla's "
    "chunk_linear_attn default); --no-normalize: the numerator alone (fla's LinearAttention layer, "
    "normalize=False).",
    show_default=False,
)
KV_HEADS = typer.Option(None, "--kv-heads", help="Key/value heads of gqa, a divisor of --h (default 1: multi-query).")
WINDOW = typer.Option(None, "--window", help="Sliding-window width w, keys per query (default 256).")
PROJ_LEN = typer.Option(None, "--proj-len", help="Linformer's projected length k (default 256).")
FEATURES = typer.Option(None, "--features", help="Performer's random features m (default 256).")
LANDMARKS = typer.Option(None, "--landmarks", help="Nyströmformer's landmarks c (default 64).")
CHUNK = typer.Option(
    None,
    "--chunk",
    help="Chunk length C of the chunked linear attentions (linear-chunked(-fused), retention, gla, deltanet, "
    "gated-deltanet, mamba2), tokens per chunk (default 64, fla's own). A C larger than N is one chunk, costed and "
    "run whole: padded to C tokens (linear-chunked), masked (the fused kernels).",
)
VALUE_DIM = typer.Option(
    None,
    "--dv",
    help="Value head dim d_v of retention, gla, deltanet and gated-deltanet (default d; their papers: 2d for "
    "retention and Gated DeltaNet, d_k = d_v/2 for GLA).",
)
STATE = typer.Option(None, "--state", help="Mamba-2's state expansion d_state, the width of B and C (default 128).")
GROUPS = typer.Option(None, "--groups", help="Mamba-2's groups of B and C, a divisor of --h (default 1).")
SIZE_OPTIONS = {
    "h_kv": KV_HEADS, "w": WINDOW, "k": PROJ_LEN, "m": FEATURES, "c": LANDMARKS, "C": CHUNK, "d_v": VALUE_DIM,
    "d_state": STATE, "G": GROUPS,
}  # fmt: skip
"""Sizes only some variants have, by symbol name; `with_sizes` adds them to a command, `sizes` reads them."""
_SIZES: ContextVar[dict | None] = ContextVar("sizes", default=None)
COUNTING_OPTIONS = {
    "causal_count": CAUSAL_COUNT,
    "tile": TILE,
    "backward": BACKWARD,
    "n_kv": N_KV,
    "align": ALIGN,
    "bias": BIAS,
    "dropout": DROPOUT,
    "padding_mask": PADDING_MASK,
    "feature_map": FEATURE_MAP,
    "normalize": NORMALIZE,
}
"""The counting switches `with_counting` adds to a command; `setting` reads what the user chose."""
_COUNTING: ContextVar[dict | None] = ContextVar("counting", default=None)
WHOLE = ("core", "layer", "block", "model")
"""The scopes that take the whole sequence at once (all but a decoding step, whose one query sees every key)."""


class Reach(NamedTuple):
    """Where an option can change a count: the scopes and modes at which some variant of the catalogue takes it,
    and whether the reference implementations run what it describes (`measured`: else a command whose answer is
    measured cannot follow it). tests/test_sizes_and_messages.py derives each from the engine."""

    scopes: tuple[str, ...]
    modes: tuple[str, ...] = tuple(MODES)
    measured: bool = True


COUNTING_REACH = {
    "causal_count": Reach(WHOLE),  # F_causal, F_chunk: a causal mask over a score matrix or a chunk
    "tile": Reach(WHOLE),  # with --causal-count tiles
    "backward": Reach(tuple(SCOPES), ("training",)),  # F_bwd: a backward pass of the score products
    "n_kv": Reach(("core",), measured=False),  # the references take keys and values of length N
    "align": Reach(("core",), measured=False),  # with --n-kv
    "bias": Reach(("layer", "block", "model"), measured=False),  # the references run each variant's own biases
    "dropout": Reach(WHOLE, ("training",), measured=False),  # the references run no dropout
    "padding_mask": Reach(WHOLE, measured=False),  # nor a padding mask
    "feature_map": Reach(tuple(SCOPES), measured=False),  # the linear family's φ; measured runs take each one's own
    "normalize": Reach(tuple(SCOPES), measured=False),  # and its normaliser
}
"""Where each counting switch can change an answer: `with_counting` offers a command the switches that reach what
the command can price."""
SIZE_REACH = {
    "h_kv": tuple(SCOPES), "w": tuple(SCOPES), "k": WHOLE, "m": WHOLE, "c": WHOLE, "C": WHOLE, "d_v": tuple(SCOPES),
    "d_state": tuple(SCOPES), "G": tuple(SCOPES),
}  # fmt: skip
"""The scopes at which some variant is written with each variant-specific size (no decoding step has a projected
length, random features, landmarks or chunks): `with_sizes` offers a command the sizes of the scopes it prices."""


GPU = typer.Option(False, "--gpu", help="Measure on CUDA (an error if there is none).")
CPU = typer.Option(False, "--cpu", help="Measure on the CPU even if CUDA is present.")
THREADS = typer.Option(None, "--threads", help="CPU threads (default: torch's default); recorded with every result.")
REPEATS = typer.Option(7, "--repeats", help="Timed runs per length (after warm-up).")
STORE = typer.Option(
    None,
    "--store",
    help="Results directory or SQLite file (default: $ATTN_COST_HOME/results or ~/.local/share/attn-cost/results).",
)
FRESH = typer.Option(
    False, "--fresh", help="Measure every length again instead of reusing stored (and shipped) results."
)
SDPA_BACKEND = typer.Option(
    None, "--sdpa-backend", help="Kernel of softmax-fused: flash, efficient, cudnn or math (default: PyTorch's choice)."
)
Decorator = Callable[[Callable], Callable]
MEASURING: Any = None
"""The default of a command's `measuring` parameter, which `with_measuring` replaces by the measuring options (a
placeholder: typer reads the options `with_measuring` puts in its place)."""


def with_measuring(
    build: Callable[..., Any], repeats: Any = REPEATS, fresh: bool = True, sdpa: bool = True
) -> Decorator:
    """Give a command the measuring options (--gpu, --cpu, --threads, --repeats, --store, and with `fresh` --fresh,
    with `sdpa` --sdpa-backend), each defined once above, in place of its parameter `measuring`, which receives them
    checked by `build` (`workflow.measuring.measuring`: --gpu with --cpu, an unknown backend) as one `Measuring`.
    `repeats`: the command's own --repeats where its default or meaning differs. The measuring commands pass
    `build`, so that the options module, which every command imports, does not load the measuring workflow."""
    options = {"gpu": (GPU, bool), "cpu": (CPU, bool), "threads": (THREADS, Optional[int])}
    options["repeats"] = (repeats, int if repeats.default is not None else Optional[int])
    options["store"] = (STORE, Optional[Path])
    if fresh:
        options["fresh"] = (FRESH, bool)
    if sdpa:
        options["sdpa_backend"] = (SDPA_BACKEND, Optional[str])
    return grouped("measuring", options, build)


def to_terminal() -> dict[str, Callable[..., Any]]:
    """How a workflow talks to the terminal, as the fields of `workflow.measuring.Events`: lines on stderr, warnings
    on stderr, notes after the output, and every store opened to measure into remembered (what Ctrl-C keeps)."""
    return {"say": render.err.print, "warn": render.warn, "note": note, "opened": measuring_started}


def grouped(name: str, options: dict[str, tuple[Any, Any]], build: Callable[..., Any]) -> Decorator:
    """A decorator that replaces the command's parameter `name` by a group of options (parameter name: (typer
    option, annotation)), in its place, and calls the command with `build(**their values)` in it: options that
    several commands share are declared once, and read into one value. typer cannot: it reads a command's options
    from its function's parameters only (no option groups, no dataclass of options), so the group is spliced into
    the signature typer reads."""

    def decorate(command: Callable) -> Callable:
        sig = inspect.signature(command, eval_str=True)
        params = list(sig.parameters.values())
        at = next(i for i, p in enumerate(params) if p.name == name)
        kind = params[at].kind
        group = [inspect.Parameter(k, kind, default=opt, annotation=hint) for k, (opt, hint) in options.items()]

        @functools.wraps(command)
        def run(*args, **kwargs):
            kwargs[name] = build(**{k: kwargs.pop(k) for k in options})
            return command(*args, **kwargs)

        # typer reads the signature through inspect; the type of a functools.wraps wrapper does not declare it
        run.__signature__ = sig.replace(parameters=[*params[:at], *group, *params[at + 1 :]])  # type: ignore[attr-defined]
        hints = {k: v for k, v in command.__annotations__.items() if k != name}
        run.__annotations__ = {**hints, **{p.name: p.annotation for p in group}}
        return run

    return decorate


LIMITS = {
    "--d": 1 << 16,
    "--fit-d": 1 << 16,
    "--h": 1 << 16,
    "--b": 1 << 20,
    "--L": 1 << 16,
    "--r": 1 << 10,
    "--depth": 10_000,
    "--d-embed": 1 << 24,
    "--n": 1 << 32,
    "--n-kv": 1 << 32,
    "--max-n": 1 << 32,
    "--tile": 1 << 16,
    "--repeats": 10_000,
    "--max-lengths": 1_000,
    "--threads": 4096,
    "--kv-heads": 1 << 16,
    "--window": 1 << 32,
    "--proj-len": 1 << 32,
    "--features": 1 << 24,
    "--landmarks": 1 << 32,
    "--chunk": 1 << 32,
    "--dv": 1 << 16,
    "--state": 1 << 16,
    "--groups": 1 << 16,
    "--sram": 1 << 30,
    "--block-q": 1 << 16,
    "--block-kv": 1 << 16,
    "--timeout-min": 43_200,
}
"""The largest value each size option takes: beyond these no attention layer exists, and exact
answers would only cost time (a head dim of 10^8, a context of 10^12 tokens, a window of 10^30). Every option
named here is checked as it is read, in every command that takes it (`bound_sizes`)."""


@overload
def positive(value: int, flag: str) -> int: ...
@overload
def positive(value: int | None, flag: str) -> int | None: ...
def positive(value: int | None, flag: str) -> int | None:
    """A size option's value, checked: a positive integer no larger than its limit."""
    if value is not None and value < 1:
        fail(f"{flag} must be a positive integer, got {typed(flag, value)}")
    top = LIMITS.get(flag)
    if value is not None and top is not None and value > top:
        fail(f"{flag} {typed(flag, value)} is beyond what attn-cost models (at most {top:,})")
    return value


def bound_sizes(command) -> None:
    """Check every option named in LIMITS, in every command below `command`, as click reads it: a positive integer
    no larger than its limit (each value of a repeated one), so that no command can take a size unchecked. typer's
    `min=`/`max=` (click's IntRange) would give click's wording, not the one line naming the user's text that every
    other refusal gives, and would have to be repeated on every declaration."""

    for sub in _commands(command):
        for param in getattr(sub, "params", []):
            flag = max(param.opts, key=len) if param.param_type_name == "option" and param.opts else None
            if flag in LIMITS:
                param.callback = _checking(flag, param.callback)


def once_each(command) -> None:
    """Every repeatable option of every command below `command` keeps each value once, in the order given, and
    says so (a note after the output): `--n 1024 --n 1024` is one length, not two columns of one key. typer and
    click keep every repeated value as given; a parameter callback on each option is click's hook for this."""

    for sub in _commands(command):
        for param in getattr(sub, "params", []):
            if param.param_type_name == "option" and param.opts and getattr(param, "multiple", False):
                param.callback = _deduplicating(max(param.opts, key=len), param.callback)


def command_flags() -> set[str]:
    """The flags of the command running now (empty outside one): an error names only options its command has.
    Found through the context of the click typer runs on (its own copy in typer >= 0.27, else click)."""
    package = typer.BadParameter.__module__.rsplit(".", 1)[0]
    ctx = sys.modules[f"{package}.globals"].get_current_context(silent=True)
    return {o for p in getattr(getattr(ctx, "command", None), "params", []) for o in getattr(p, "opts", [])}


def given_options(ctx) -> list[str]:
    """The options of a command (its typer.Context) that the command line (or the environment) set, as their flags
    (`--threads`), in the command's order: what a command that ignores some of them refuses (`not_with`)."""
    found = []
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        if param.param_type_name == "option" and getattr(source, "name", "") in ("COMMANDLINE", "ENVIRONMENT"):
            found.append(max(param.opts, key=len))
    return found


def not_with(ctx, flag: str, ignored: list[str], why: str) -> None:
    """Refuse the options among `ignored` that were given with `flag`, which makes them change nothing: one line
    naming them in the order of `ignored` (`calibrate --refit` times nothing: --threads, --quick ... would be taken
    and ignored)."""
    given = set(given_options(ctx))
    extra = [f for f in ignored if f in given]
    if extra:
        fail(f"{flag} {why}: {', '.join(extra)} would change nothing; leave {'it' if len(extra) == 1 else 'them'} out")


def read_words(command, argv: list[str]) -> None:
    """Read the command line word by word as click will, once, before click does: the command's own options, each
    value after its option (or after `=`), nothing after `--`. Every value is kept as typed for the refusals that
    name it (`app.typed`); an empty path is refused (it would read as the current folder, "."); an option that
    takes one value, given twice with different values (`predict --d 32 --d 64`, compared as values: `--launch-us 5
    --launch-us 5.0` is one value), is refused, where click would keep the last without a word; the same value
    twice is used once, with a note. Repeatable options keep each value (`once_each`); flags are not values. typer
    and click cannot: click keeps the last of a repeated single-valued option without a word, and gives a callback
    the value as read (`1.0`), not as typed."""
    args = list(argv)
    while hasattr(command, "commands"):  # a group: the next word that is no option names its command
        name = next((a for a in args if not a.startswith("-")), None)
        if name is None or name not in command.commands:
            return
        args, command = args[args.index(name) + 1 :], command.commands[name]
    options = {o: p for p in command.params if p.param_type_name == "option" for o in p.opts}
    func = getattr(command.callback, "__wrapped__", command.callback) if getattr(command, "callback", None) else None
    hints = _type_hints(func)
    given: dict[str, tuple[Any, list[str]]] = {}
    i = 0
    while i < len(args) and args[i] != "--":
        word, i = args[i], i + 1
        flag, eq, value = word.partition("=") if word.startswith("--") else (word, "", "")
        param = options.get(flag)
        if param is None or getattr(param, "is_flag", False) or getattr(param, "count", False):
            continue
        if not eq and i < len(args):
            value, i = args[i], i + 1
        given.setdefault(max(param.opts, key=len), (param, []))[1].append(value)
    for flag, (param, values) in given.items():
        heard(flag, values)
        kind = "PATH" if METAVARS.get(flag) == "PATH" else _type_word(hints.get(param.name), param)  # --variants too
        if kind == "PATH" and "" in values:
            fail(f"{flag} is given an empty path: give a file or folder name")
        if getattr(param, "multiple", False):
            continue
        read = list(dict.fromkeys(_as_value(v, kind) for v in values))
        if len(read) > 1:
            fail(f"{flag} takes one value here and is given {len(values)}: {', '.join(values)}; give it once")
        if len(values) > 1:
            note(f"attn-cost: note: {flag} {values[0]} is given {len(values)} times: used once")
    paths = [p for p in command.params
             if p.param_type_name == "argument" and _type_word(hints.get(p.name), p) == "PATH"]  # fmt: skip
    if paths and "" in _arguments(args, options):  # a path argument (`results import FILE...`)
        fail(f"{(paths[0].metavar or paths[0].name.upper()).rstrip('.')} is given an empty path: give a file name")


def _arguments(args: list[str], options: dict) -> list[str]:
    """The words of a command line that are no option and no option's value."""
    out: list[str] = []
    i = 0
    while i < len(args):
        word, i = args[i], i + 1
        if word == "--":
            return out + args[i:]
        param = options.get(word.partition("=")[0]) if word.startswith("-") else None
        if param is not None:
            takes = not (getattr(param, "is_flag", False) or getattr(param, "count", False)) and "=" not in word
            i += 1 if takes else 0
        elif not word.startswith("-") or word == "-":
            out.append(word)
    return out


def _as_value(word: str, kind: str) -> object:
    """A word as the value it reads as (INT, FLOAT, PATH; else the text): `5` and `5.0` are one --launch-us, `a`
    and `./a` one path. A word that reads as no value stays text (click refuses it in its own words)."""
    read: Callable[[str], object] = {"INT": int, "FLOAT": float, "PATH": Path}.get(kind, str)
    try:
        return read(word)
    except ValueError:
        return word


def _deduplicating(flag: str, then: Callable | None) -> Callable:
    def callback(ctx, param, value):
        if value:
            kept = once(list(value), lambda v: f"{flag} {v}")
            value = type(value)(kept) if isinstance(value, tuple) else kept
        return then(ctx, param, value) if then is not None else value

    return callback


def once(values: list, said: Callable[[Any], str], why: str = "") -> list:
    """`values` with each kept once, in order; a note for each one repeated (`said(value)` names it, `why` says
    why two spellings are one)."""
    counts: dict = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    for v, k in counts.items():
        if k > 1:
            note(f"attn-cost: note: {said(v)} is given {'twice' if k == 2 else f'{k} times'}{why}: used once")
    return list(counts)


def _checking(flag: str, then: Callable | None) -> Callable:
    def callback(ctx, param, value):
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, int):
                positive(v, flag)
        return then(ctx, param, value) if then is not None else value

    return callback


def head_dims(d_values: list[int] | None, embed: int | None, heads: int, default: list[int]) -> list[int]:
    """Head dims to use: --d values, or d_embed / h when --d-embed is given."""
    positive(heads, "--h")
    if embed is not None:
        positive(embed, "--d-embed")
        if d_values:
            fail("give either --d or --d-embed, not both")
        if embed % heads:
            fail(f"--h {heads} does not divide --d-embed {embed}; choose h among its divisors")
        return [embed // heads]
    for v in d_values or []:
        positive(v, "--d")
    return list(d_values or default)


def sizes(
    dv: int, heads: int, batch: int, latents: int | None, ratio: int | None = None, depth: int | None = None
) -> dict[sp.Symbol, int]:
    """Every dimension except N; L defaults to d, r to 4, D to `symbols.DEFAULT_DEPTH`, the variant-specific sizes
    to `symbols.DEFAULTS` unless the command took them (`with_sizes`)."""
    for value, flag in ((batch, "--b"), (latents, "--L"), (ratio, "--r"), (depth, "--depth")):
        positive(value, flag)
    own = {L: latents or dv, r: 4 if ratio is None else ratio, D: DEFAULT_DEPTH if depth is None else depth}
    return with_defaults({d: dv, h: heads, b: batch, **own, **extra_sizes(heads, given_only=True)})


def extra_sizes(heads: int | None, given_only: bool = False) -> dict[sp.Symbol, int]:
    """--kv-heads, --window, --proj-len, --features, --landmarks, --chunk, --dv, --state, --groups as chosen
    (checked), else their defaults (d_v: none, it follows d: `symbols.with_defaults`); heads: the --h that
    --kv-heads and --groups must divide (None when h varies, as in `heads`)."""
    chosen = {name: v for name, v in (_SIZES.get() or {}).items() if v is not None}
    for name, value in chosen.items():
        positive(value, SIZE_FLAGS[name])
    for name, what in (("h_kv", "--kv-heads"), ("G", "--groups")):
        value = chosen.get(name, DEFAULTS[BY_NAME[name]])
        if heads is not None and heads % value:
            fail(f"{what} {value} does not divide --h {heads}; choose a divisor of the number of heads")
    if given_only:
        return {BY_NAME[name]: v for name, v in chosen.items()}
    return {**DEFAULTS, **{BY_NAME[name]: v for name, v in chosen.items()}}


def given_sizes(heads: int) -> dict[str, int]:
    """The variant-specific sizes the user gave, by symbol name (for `profilers.measure.cases.Sizes`)."""
    return {str(k): v for k, v in extra_sizes(heads, given_only=True).items()}


def with_sizes(scopes: tuple[str, ...] = tuple(SCOPES)) -> Decorator:
    """Give a command the variant-specific sizes (--kv-heads, --window, --proj-len, --features, --landmarks,
    --chunk) that some variant is written with at one of the `scopes` it prices (`SIZE_REACH`).

    Put it under `@app.command()`; `sizes` (and `extra_sizes`) then return what the user chose. --dv, --state and
    --groups too. The options are spliced into the signature typer reads (`grouped` says why)."""
    offered = {name: opt for name, opt in SIZE_OPTIONS.items() if set(SIZE_REACH[name]) & set(scopes)}

    def decorate(command: Callable) -> Callable:
        extra = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=Optional[int])
            for name, opt in offered.items()
        ]
        sig = inspect.signature(command, eval_str=True)

        @functools.wraps(command)
        def run(*args, **kwargs):
            token = _SIZES.set({name: kwargs.pop(name) for name in offered})
            try:
                return command(*args, **kwargs)
            finally:
                _SIZES.reset(token)

        # typer reads the signature through inspect; the type of a functools.wraps wrapper does not declare it
        run.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *extra])  # type: ignore[attr-defined]
        run.__annotations__ = {**command.__annotations__, **{p.name: p.annotation for p in extra}}
        return run

    return decorate


def variant_names(names: list[str], causal: bool, flag: str = "--variant") -> list[str]:
    """Check names against the catalogue; with --causal, swap each for its causal form (each kept once: softmax and
    softmax-causal are one variant then)."""
    out = [_causal_name(name, causal) for name in names]
    return once(out, lambda v: f"{flag} {v}", " (with --causal)") if causal else out


def _causal_name(name: str, causal: bool) -> str:
    v = get_variant(name)
    if causal and not v.causal:
        if v.causal_form is None:
            fail(f"{name} has no causal form in its paper")
        return v.causal_form
    return name


def pairs(texts: list[str] | None, default: list[tuple[str, str]], causal: bool = False) -> list[tuple[str, str]]:
    """--pair values ('softmax:linear') checked against the catalogue, or the default pairs; a variant paired with
    itself is refused (no N is where one becomes cheaper than itself)."""
    out = []
    for text in texts or [":".join(p) for p in default]:
        parts = text.split(":")
        if len(parts) != 2 or not all(parts):
            fail(f"--pair takes A:B (two variant names), got {text!r}")
        first, second = (_causal_name(x, causal) for x in parts)
        if first == second:  # no crossing to find: every N would be an answer
            causal_too = "" if parts[0] == parts[1] else " with --causal"
            fail(f"--pair {text}{causal_too} compares {first} with itself: give two different variants")
        out.append((first, second))
    return once(out, lambda p: f"--pair {':'.join(p)}", " (with --causal)") if causal else out


COUNTING_TYPES = {
    "causal_count": Optional[str],
    "tile": Optional[int],
    "backward": Optional[str],
    "n_kv": Optional[int],
    "align": Optional[str],
    "bias": Optional[str],
    "dropout": Optional[float],
    "padding_mask": bool,
    "feature_map": Optional[str],
    "normalize": Optional[bool],
}
"""The type of each counting switch's value, as the command's signature declares it (`with_counting`)."""


def with_counting(
    scopes: tuple[str, ...] = tuple(SCOPES),
    modes: tuple[str, ...] | None = None,
    measured: bool = False,
    only: tuple[str, ...] | None = None,
) -> Decorator:
    """Give a command the counting switches (--causal-count, --tile, --backward, --n-kv, --align, --bias, --dropout,
    --padding-mask) that can change its answer: those that reach (`COUNTING_REACH`) one of the `scopes` it prices
    in one of its `modes` (default: inference and training for a command with --mode, else inference), and, for a
    command whose answer is `measured`, only those the reference implementations run; `only`: of these, only the
    switches named (`predict`: the linear attentions' feature map and normaliser, which its device models price).

    Put it under `@app.command()`; the command calls `setting` as before and gets them in `Setting.counting`. The
    options are spliced into the signature typer reads (`grouped` says why).
    """

    def decorate(command: Callable) -> Callable:
        sig = inspect.signature(command, eval_str=True)
        priced = modes if modes is not None else tuple(MODES) if "mode" in sig.parameters else ("inference",)
        offered = [
            name
            for name, reach in COUNTING_REACH.items()
            if set(reach.scopes) & set(scopes)
            and set(reach.modes) & set(priced)
            and (reach.measured or not measured)
            and (only is None or name in only)
        ]
        extra = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=COUNTING_OPTIONS[name],
                              annotation=COUNTING_TYPES[name])
            for name in offered
        ]  # fmt: skip

        @functools.wraps(command)
        def run(*args, **kwargs):
            token = _COUNTING.set({name: kwargs.pop(name) for name in offered})
            try:
                return command(*args, **kwargs)
            finally:
                _COUNTING.reset(token)

        # typer reads the signature through inspect; the type of a functools.wraps wrapper does not declare it
        run.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *extra])  # type: ignore[attr-defined]
        run.__annotations__ = {**command.__annotations__, **{p.name: p.annotation for p in extra}}
        return run

    return decorate


def counting(convention: str, scope: str) -> Counting:
    """The counting rules the user chose; a convention may imply some (flash-bench: half, recompute)."""
    chosen = _COUNTING.get() or {}
    implied = getattr(get_convention(convention), "counting", {})
    n_kv = chosen.get("n_kv")
    if n_kv is not None and scope != "core":
        core = " (--scope core)" if "--scope" in command_flags() else ""
        fail(f"--n-kv applies to the attention core{core}, not to the {scope} scope")
    return Counting(
        causal=chosen.get("causal_count") or implied.get("causal", "dense"),
        tile=128 if chosen.get("tile") is None else chosen["tile"],
        backward=chosen.get("backward") or implied.get("backward", "autograd"),
        n_kv=n_kv,
        align=chosen.get("align") or "top-left",
        bias=chosen.get("bias"),
        dropout=None if chosen.get("dropout") is None else typed("--dropout", chosen["dropout"]),  # read exactly
        padding_mask=bool(chosen.get("padding_mask")),
        feature_map=chosen.get("feature_map") or "elu1",
        normalize=chosen.get("normalize") is not False,
    )


def setting(
    convention: str, dtype: str, scope: str | None, mode: str, names: list[str], given: dict | None = None
) -> Setting:
    """Validate the counting options; the scope defaults to the smallest one every variant has. given: the command's
    own size options by flag (--L, --r, --depth: None where not given), refused with the counting switches and the
    variant-specific sizes where they cannot apply (`applies`)."""
    get_convention(convention)
    dtype_bytes(dtype)
    if mode not in MODES:
        fail(f"unknown mode {mode!r} (known: {', '.join(MODES)})")
    if scope is None:
        scope = "core" if all("core" in get_variant(n).scopes for n in names) else "layer"
    elif scope not in SCOPES:
        fail(f"unknown scope {scope!r} (known: {', '.join(SCOPES)})")
    for n in names:
        if scope not in get_variant(n).scopes:
            fail(f"{n} has no {scope} scope (it has: {', '.join(get_variant(n).scopes)})")
    st = Setting(convention, dtype, scope, mode, counting(convention, scope))
    applies(names, st, given or {})
    return st


OWN_SIZES = {"--L": L, "--r": r, "--depth": D}
"""Size options some commands declare themselves, by the symbol each sets."""


def applies(names: list[str], st: Setting, given: dict) -> None:
    """Refuse an option the user gave that changes nothing here, instead of showing it under the table as if it
    had: --causal-count where no variant masks a score matrix, --backward without a backward pass of score products
    (inference), --tile without --causal-count tiles, --align without --n-kv, --bias where no variant has
    projections (the core scope), --dropout in inference (eval: no op) and --dropout or --padding-mask where no
    variant takes it (`graph_options`), --feature-map or --normalize where no variant is a linear attention, a size
    (--window, --kv-heads, --L, --r, --depth ...) that none of the variants is written with. The same rule in every
    command that takes these options."""
    chosen = {k: v for k, v in (_COUNTING.get() or {}).items()
              if v is not None and (v is not False or k == "normalize") and k != "n_kv"}  # fmt: skip
    flags = {SIZE_FLAGS[str(k)]: k for k in extra_sizes(None, given_only=True)}
    flags.update({flag: OWN_SIZES[flag] for flag, value in given.items() if value is not None})
    if not chosen and not flags:
        return
    shown = ", ".join(names)
    if "tile" in chosen and st.counting.causal != "tiles":
        fail("--tile sizes the tiles of --causal-count tiles: give both, or neither")
    if "align" in chosen and st.counting.n_kv is None:
        fail("--align places the causal mask when keys have their own length: give it with --n-kv")
    if st.counting.dropout and st.mode != "training":  # only commands with --mode offer --dropout
        fail(DROPOUT_IN_INFERENCE)
    graph_options(names, st)
    factors: set = set()
    used: set = set()
    for name in names:
        factors |= derive_counted(name, st.scope, st.mode, st.counting).flops(FULL, None).free_symbols
        for cost in ("flops", "memory"):
            used |= {x for e in cost_branches(name, cost, st) for x in e.free_symbols}
    flags_here = command_flags()
    if "causal_count" in chosen and not factors & {F_causal, F_chunk}:
        causal = " (--causal)" if "--causal" in flags_here else ""
        fail(f"--causal-count counts the scores of a causal mask, and none of {shown} masks a score matrix here "
             f"({st.scope} scope): it applies to causal forms such as softmax-causal{causal}")  # fmt: skip
    if "backward" in chosen and F_bwd not in factors:  # only commands with --mode offer --backward
        why = "it applies with --mode training" if st.mode != "training" else "none materialises a score matrix"
        fail(f"--backward counts the backward pass of the score products, and none of {shown} has one in "
             f"{st.mode}: {why}")  # fmt: skip
    if "bias" in chosen and all(_projections(name, st) == 0 for name in names):
        hint = ": give --scope layer, block or model" if "--scope" in flags_here else ""
        fail(f"--bias chooses the biases of the projections, and none of {shown} has projections at the {st.scope} "
             f"scope{hint}")  # fmt: skip
    for flag, symbol in flags.items():
        if symbol not in used:
            fail(f"{flag} sizes none of {shown}: it applies to variants written with it ({st.scope} scope)")


GRAPH_OPTIONS = {
    "dropout": ("--dropout", "drops attention probabilities", "has attention probabilities"),
    "padding": ("--padding-mask", "masks padded keys out of the attention", "is modelled with a key padding mask"),
    "feature_map": ("--feature-map", "chooses a linear attention's feature map φ", "applies a feature map"),
    "normalize": (
        "--normalize",
        "chooses whether a linear attention divides by its normaliser",
        "has a normaliser φ(q)·Σφ(k)",
    ),
}
"""The options a variant's ops take where it has what they act on (`Graph.applied`): what each does, and what a
variant that takes it has."""


def graph_options(names: list[str], st: Setting) -> None:
    """Refuse --dropout or --padding-mask where none of the variants takes it at this scope (the linear-attention
    family has no attention probabilities; a decoding step takes no padding mask); where some do, say which did not
    (a note: their costs are counted without it)."""
    chosen = _COUNTING.get() or {}
    wanted = [key for key, on in (("dropout", bool(st.counting.dropout)), ("padding", st.counting.padding_mask),
                                  ("feature_map", chosen.get("feature_map") is not None),
                                  ("normalize", chosen.get("normalize") is not None)) if on]  # fmt: skip
    if not wanted:
        return
    took = {name: derive_counted(name, st.scope, st.mode, st.counting).graph.applied for name in names}
    for key in wanted:
        flag, does, has = GRAPH_OPTIONS[key]
        flag = "--no-normalize" if key == "normalize" and not st.counting.normalize else flag
        without = [name for name in names if key not in took[name]]
        if len(without) == len(names):
            fail(f"{flag} {does}, and none of {', '.join(names)} {has} at the {st.scope} scope")
        if without:
            note(f"attn-cost: note: {flag} applies to {', '.join(n for n in names if n not in without)}, not to "
                 f"{', '.join(without)} (none of them {has} at the {st.scope} scope): counted without it")  # fmt: skip


def _projections(name: str, st: Setting) -> sp.Expr:
    """The parameters a variant's projection biases add at this scope (0 where it has no projections)."""
    kv = st.counting.n_kv is not None
    every, none = (derive(name, st.scope, st.mode, kv, bias).params for bias in ("all", "none"))
    return sp.expand(every - none)


# -- the options every command takes, and a traced module's own widths ----------------------------------------


def load_variant_files(paths: Optional[list[Path]]) -> None:
    """--variants callback: register the variants of each file (no torch)."""

    for p in paths or []:
        load_file(p)


def load_traces(specs: Optional[list[str]]) -> None:
    """--trace callback: export each PATH:NAME with torch.export and register it as NAME."""
    if not specs:
        return
    from attn_cost.profilers.trace.register import register

    for spec in specs:
        register(spec)


def _user_options(
    variants: Optional[list[Path]] = typer.Option(
        None,
        "--variants",
        help="A Python file of variants written with the op DSL (docs/variants.md); repeatable. "
        "Also: ATTN_COST_VARIANTS=path1:path2 and the `attn_cost.variants` entry points.",
        callback=load_variant_files,
        is_eager=True,
        expose_value=False,
        metavar="PATH",
    ),
    traces: Optional[list[str]] = typer.Option(
        None,
        "--trace",
        help="PATH:NAME: derive a variant named NAME from PyTorch code (see `attn-cost trace`); repeatable.",
        callback=load_traces,
        is_eager=True,
        expose_value=False,
        metavar="PATH:NAME",
    ),
) -> None:
    """Never called: carries the two options that `add_user_options` copies onto every command."""


def add_user_options(command) -> None:
    """Give a command the --variants and --trace options (where it has no option of that name), as eager options
    whose callbacks load the user's files into the registry before the command body runs. typer declares an option
    on the function of one command; these two belong to every command without being a parameter of any."""
    carrier = typer.Typer(add_completion=False)
    carrier.command()(_user_options)
    params = typer.main.get_command(carrier).params
    names = {opt for p in command.params for opt in p.opts}
    command.params.extend(p for p in params if not set(p.opts) & names)


def own_widths(names: list[str], ds: list[int], heads: int) -> tuple[list[int], int]:
    """A traced module keeps its own width and heads (its weights fix them): compare the other variants of a
    crossover at that width, h = the module's heads and d = d_embed / h, and say so on stderr."""

    if "attn_cost.profilers.trace.register" not in sys.modules:  # nothing was traced: no torch import
        return ds, heads
    from attn_cost.profilers.trace.register import traced

    found = [(n, t) for n in names if (t := traced(n)) is not None and t.width is not None]
    if not found:
        return ds, heads
    widths = {(t.width, t.heads) for _, t in found}
    if len(widths) > 1:
        names_found = ", ".join(n for n, _ in found)
        fail(f"traced modules of different widths cannot be compared in one crossover: {names_found}")
    (width, own), name = widths.pop(), found[0][0]
    assert width is not None  # `found` keeps the traced modules with a width
    if own is None or width % own:
        note(f"attn-cost: note: {name} is {width} wide and does not say its heads: the others are compared at "
             f"--h {heads} heads of --d, not at its width")  # fmt: skip
        return ds, heads
    note(f"attn-cost: note: compared at {name}'s own width, read from the module: d_embed = {width} = {own} heads "
         f"× d = {width // own} (--d and --h do not apply to it)")  # fmt: skip
    return [width // own], own
