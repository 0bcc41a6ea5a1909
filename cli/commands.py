"""The commands, registered lazily: `attn-cost crossover` imports the module of `crossover` and no other.

A command's module registers it on `cli.app.app` when imported (`@app.command()`); importing every module at start-up
made `crossover --d 64` load the device models, the store and the report's gather. `COMMANDS` names each command's
module and carries the first paragraph of its help, so that `attn-cost --help` lists every command without importing
one (tests/test_layers.py checks the table against the commands themselves); `LazyGroup` imports a command's module
only when that command runs or its help is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from types import ModuleType
from typing import Any, NamedTuple

import typer
import typer.core


class Listed(NamedTuple):
    """A command as `attn-cost --help` lists it: the module (under `attn_cost.cli`) that registers it, and the first
    paragraph of its help."""

    module: str
    summary: str


COMMANDS: dict[str, Listed] = {
    "profile": Listed("measure", "Measure where B overtakes A in time (N0) and peak memory (N1), starting from the "
                      "analytic prediction."),
    "measure": Listed("measure", "Time and peak memory of variants at given lengths (a sweep for plots and fits), "
                      "with the model's prediction."),
    "check-flops": Listed("measure", "Count FLOPs of every reference implementation with PyTorch's FlopCounterMode "
                          "over a grid of\n(N, d, h, b) and compare with the engine's `matmul` convention. Exit code 1 "
                          "on any mismatch."),
    "validate": Listed("measure", "Fit per-device corrections on some head dims; print analytic, fitted, op-model "
                       "(zero-shot, from\n`attn-cost calibrate`) and measured N0/N1 side by side, and the op model's "
                       "error on every timed point.\nA stored timing much slower than its neighbours' trend along N is "
                       "timed again, and the faster one kept.\nWith --records or --from-store nothing is timed: every "
                       "point comes from the records (a missing timing is left\nout with a line), and each measured "
                       "crossover is judged (does it stand: docs/measuring.md)."),
    "devices": Listed("measure", "List the devices, each name once with its kind: measured (a device profile, shipped "
                      "or fitted here by\n`attn-cost validate`), calibrated (an op calibration alone, `attn-cost "
                      "calibrate`) and datasheet GPUs (predicted\nfrom their datasheets). Every --device takes every "
                      "one (`predict`, `crossover`, `report`)."),
    "trace": Listed("trace", "Derive a variant from PyTorch code run with symbolic N: its FLOPs, peak memory, traffic "
                    "and ops."),
    "crossover": Listed("analytic", "From which sequence length N variant B is no more expensive than A: N0 (FLOPs), "
                        "N1 (peak memory), traffic."),
    "cheapest": Listed("analytic", "Which of several variants is cheapest on each interval of N (a many-way "
                       "crossover)."),
    "decode": Listed("analytic", "Cost of generating token N+1: a KV cache (softmax) against a recurrent state "
                     "(linear, Latte); with --device,\nits predicted time on that device."),
    "formula": Listed("analytic", "The derived FLOPs, peak memory, traffic and parameters of a variant, and the ops "
                      "they come from."),
    "heads": Listed("analytic", "The head trade-off at fixed d_embed: cost of every divisor h, and the continuous "
                    "optimum."),
    "variants": Listed("analytic", "List the variants the engine knows, one line each."),
    "conventions": Listed("analytic", "List the FLOP conventions, the op kinds, the scopes and the modes."),
    "calibrate": Listed("calibrate", "Time every op kind the engine emits (products, element-wise, reductions, outer "
                        "products, SDPA, loop\nsteps) from launch-bound sizes to beyond the last-level cache, and each "
                        "variant's ops at their exact\nshapes along N; fit the per-op time model that `validate`, "
                        "`crossover --device` and `report` use to\npredict any variant's time from its op list."),
    "campaign": Listed("campaign", "Profile the TaylorShift pair and softmax against linear, Latte and efficient "
                       "TaylorShift at several d and\ndtypes, fit and check the device's corrections, and write the "
                       "measurements, profiles, report and log to --out."),
    "claims": Listed("claims", "Every quantitative efficiency claim of the source papers: the paper's value, "
                     "attn-cost's, a verdict."),
    "doctor": Listed("doctor", "Check this machine before measuring: versions, device, SDPA backends, timer, peak "
                     "memory, TF32, a mini\nprofile. Run it first on a new machine; --gpu makes a missing GPU an "
                     "error."),
    "kernels": Listed("kerneltimes", "Time the kernels `--kernel` names that run on this machine (SDPA's backends, "
                      "flash-attn, FlashAttention-3,\nfla's chunk kernels) at FlashAttention-2's benchmark shapes, "
                      "forward and forward + backward, into a table in\nthe published tables' format: `python "
                      "benchmarks/gpu_kernels.py --measured FILE` judges the datasheet model on\nit."),
    "io": Listed("iotraffic", "Traffic of tiled fused attention (fa2: K, V re-read per query block, Θ(N²d/B_r); fa1: "
                 "Q, O re-read per\nK/V block, Θ(N²d²/M)) and the N from which it moves more bytes than a linear-time "
                 "variant."),
    "predict": Listed("predict", "Predicted seconds (with a 95 % interval) and peak bytes of variants on a device, per "
                      "variant and N, and which\nmodel answered."),
    "report": Listed("report", "Write an offline HTML report: cost curves, crossovers vs d, heads, formulas, predicted "
                     "vs measured."),
    "results": Listed("results", "Inspect, drop, export and import stored measurements (one SQLite database; JSON "
                      "lines to share)."),
}  # fmt: skip
"""Every command, in the order `attn-cost --help` lists them."""


class Commands(MutableMapping[str, Any]):
    """A group's commands by name: every name of `COMMANDS` is listed, and a command is built (`LazyGroup.load`) the
    first time it is looked up. click and typer reach a group's commands through this mapping (`get_command`, the
    close matches of a mistyped name), so none of them imports a module to list the names."""

    def __init__(self, load: Callable[[str], Any]) -> None:
        self._load = load
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = self._load(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter([*COMMANDS, *(name for name in self._built if name not in COMMANDS)])

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._built))


class LazyGroup(typer.core.TyperGroup):
    """The `attn-cost` group (`typer.Typer(cls=LazyGroup)`): its commands are `COMMANDS`, each built when it runs or
    its help is asked for. typer builds every registered command when it builds the group, and can only register a
    command whose module has been imported: the group's own listing and lookup are the click hooks for laziness
    (`list_commands`, `get_command` through `Commands`, `format_commands`).

    `registered` holds the commands typer built with the group (those whose modules were imported); `load` builds
    one by name, set by `cli.main.command_line`, which knows what every command gets."""

    load: Callable[[str], Any] | None = None

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.registered: dict[str, Any] = dict(self.commands)
        self.commands = Commands(self._build)

    def _build(self, name: str) -> Any:
        if self.load is None:
            raise KeyError(name)
        return self.load(name)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The Commands section of `attn-cost --help`, from `COMMANDS`: the listing click would write, shortened as
        click shortens a command's help, without importing any command's module."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        shorten = click_module("utils").make_default_short_help  # what click's Command.get_short_help_str calls
        rows = [(name, shorten(listed.summary, limit).strip()) for name, listed in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def click_module(name: str) -> ModuleType:
    """Module `name` of the click that typer runs on: typer's own copy (typer >= 0.27) or click. `typer.BadParameter`
    is public in every typer and lives in its exceptions module."""
    return importlib.import_module(f"{typer.BadParameter.__module__.rsplit('.', 1)[0]}.{name}")
