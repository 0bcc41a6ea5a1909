"""Opening a measurer: the device (`--gpu`, `--cpu` or CUDA where present), its threads, its result store and the
SDPA backend, checked in that order, once for every command that measures and for the campaign.

What is checked before torch is imported (`measuring`, `check_measurable`) answers a typo at once; the rest
(`open_device`, `open_store`, `open_measurer`) imports torch inside the function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.devicemodel.measured.data import shipped_elsewhere
from attn_cost.profilers.measure.machine import prepare, select_device
from attn_cost.profilers.measure.sdpa import get_backend, validate_choice
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.store.store import ResultStore

if TYPE_CHECKING:  # torch at the top of the module: imported where a measurer is made
    from attn_cost.profilers.measure.profile import Measurer


Case = tuple[str, Sizes, str]
"""A variant, the largest sizes a command measures it at, and how to name its N (`--n {:d}`, the format of the
option it came from: `cases.check_allocatable`)."""


def _quiet(*_: object) -> None:
    return None


@dataclass
class Events:
    """What a workflow tells its caller while it runs: the CLI shows it (a spinner, stderr, a note after the
    output), the campaign logs it. Each is a no-op unless given."""

    progress: Callable[[str], None] = _quiet
    """The step under way, replaced by the next (a spinner's text, a log line)."""
    say: Callable[[str], None] = _quiet
    """A line the user reads now (on stderr), as the step it announces starts."""
    warn: Callable[[str], None] = _quiet
    """Something the user should know about what is measured (a migrated store, an implausible timing)."""
    note: Callable[[str], None] = _quiet
    """A remark to print once the command has succeeded."""
    opened: Callable[[ResultStore], None] = _quiet
    """A result store this process measures into: what Ctrl-C or an error keeps (`cli.app.kept`)."""


LONGEST = {"cuda": 65536, "cpu": 16384}
"""The longest sequence a search tries by default, per device kind (--max-n)."""


def longest(device: str, n_max: int | None = None) -> int:
    """The longest sequence a search on `device` tries: `n_max` where given, else the device kind's default."""
    return n_max or LONGEST.get(device, LONGEST["cpu"])


@dataclass(frozen=True)
class Measuring:
    """How a command measures: the options every measuring command and the campaign share, checked (`measuring`)."""

    device: str = "auto"
    """cuda (--gpu), cpu (--cpu), or auto: CUDA where present."""
    threads: int | None = None
    """CPU threads (None: torch's default); recorded with every result."""
    repeats: int | None = None
    """Timed runs per length after warm-up (None: the caller's default)."""
    store: Path | None = None
    """Results directory or SQLite file (None: the default store)."""
    fresh: bool = False
    """Measure again instead of reusing stored (and shipped) results."""
    sdpa_backend: str | None = None
    """The kernel softmax-fused runs (None: PyTorch's choice)."""


def measuring(
    gpu: bool = False,
    cpu: bool = False,
    threads: int | None = None,
    repeats: int | None = None,
    store: Path | None = None,
    fresh: bool = False,
    sdpa_backend: str | None = None,
) -> Measuring:
    """The measuring options, checked before torch is imported: --gpu with --cpu, an unknown SDPA backend."""
    if gpu and cpu:
        raise UserError("give --gpu or --cpu, not both")
    if sdpa_backend is not None:
        get_backend(sdpa_backend)
    device = "cuda" if gpu else "cpu" if cpu else "auto"
    return Measuring(device, threads, repeats, store, fresh, sdpa_backend)


def check_measurable(names: list[str], setting: Setting | None = None) -> None:
    """Refuse, before anything is measured, variants without a runnable implementation and counting switches the
    measurements cannot follow (--n-kv: the implementations take keys and values of length N; --bias: they run
    each variant's own biases; --padding-mask, --dropout: they run neither). The measuring commands do not offer
    these (`cli.options.COUNTING_REACH`); this is for every other caller."""
    if setting is not None and setting.counting.n_kv is not None:
        raise UserError("--n-kv is not measured (the reference implementations run keys and values of length N): "
                        "use crossover or formula for N_kv")  # fmt: skip
    if setting is not None and setting.counting.bias is not None:
        raise UserError("--bias is not measured (the reference implementations run each variant's own biases): "
                        "use crossover or formula for other biases")  # fmt: skip
    if setting is not None and (setting.counting.padding_mask or setting.counting.dropout):
        raise UserError("--padding-mask and --dropout are not measured (the reference implementations run neither): "
                        "use crossover or formula for their counts")  # fmt: skip
    from attn_cost.profilers.measure.cases import require_references

    require_references(names)


def choose_device(m: Measuring) -> str:
    """cuda or cpu: the one asked for (`--gpu` without CUDA refused), else CUDA where present."""
    return select_device(m.device == "cuda", m.device == "cpu")


def open_device(m: Measuring, dtypes: list[str], head_dims: list[int]) -> tuple[str, dict]:
    """The device (`choose_device`), a forced SDPA backend checked at every dtype and head dim it will run, the
    threads fixed: (cuda or cpu, its fingerprint)."""
    import torch

    device = choose_device(m)
    validate_choice(m.sdpa_backend, device, dtypes, head_dims)
    if m.threads is not None:
        torch.set_num_threads(m.threads)
    return device, prepare(device)


def open_store(fingerprint: dict, m: Measuring, events: Events, *, shipped: bool = True) -> ResultStore:
    """The device's result store (`shipped`: the measurements shipped with attn-cost are read too); its warnings
    and the store itself told through `events`."""
    store = ResultStore(fingerprint, m.store, shipped=shipped, reuse=not m.fresh)
    for warning in store.warnings:
        events.warn(warning)
    events.opened(store)
    return store


def measurer_on(
    device: str, store: ResultStore, m: Measuring, scope: str, dtype: str, notify: Callable[[str], None] | None = None
) -> Measurer:
    """A measurer of one scope and dtype over an open store (`notify`: its progress lines)."""
    from attn_cost.profilers.measure.profile import Measurer

    made = Measurer(device, store, scope=scope, dtype=dtype, repeats=m.repeats or 7, sdpa_backend=m.sdpa_backend)
    if notify is not None:
        made.notify = notify
    return made


def check_cases(device: str, scope: str, dtype: str, cases: Iterable[Case]) -> None:
    """Refuse, before anything is allocated, sizes at which one of a command's cases could never run here (a tensor
    beyond what PyTorch can allocate: `cases.check_allocatable`), in one line naming the user's options."""
    from attn_cost.profilers.measure.cases import check_allocatable

    for variant, sizes, n_flag in cases:
        check_allocatable(variant, scope, sizes, dtype, device, n_flag)


def searched(
    names: Iterable[str], template: Sizes, ds: Iterable[int], n_max: int | None
) -> Callable[[str], list[Case]]:
    """The cases of a search over N (`profile`, `validate`, a campaign's units): each variant at each head dim at
    the longest length the search may try on the device (`longest`)."""

    def on(device: str) -> list[Case]:
        top = longest(device, n_max)
        said = "--max-n {:d}" if n_max is not None else "N {:,} (the longest a search tries: --max-n)"
        return [(name, replace(template, N=top, d=dv), said) for name in names for dv in ds]

    return on


def open_measurer(
    m: Measuring,
    scope: str,
    dtype: str,
    head_dims: list[int],
    events: Events,
    cases: Callable[[str], Iterable[Case]] | None = None,
) -> Measurer:
    """Pick the device, fix the threads, open the device's result store; refuse an SDPA backend that cannot run here
    at these head dims, and sizes some case cannot run at (`cases`: the command's variants at the largest sizes it
    will measure them at on the device chosen, `check_cases`), in one line, before anything is measured. A note
    where attn-cost ships measurements of a device of this name but another fingerprint."""
    device, fingerprint = open_device(m, [dtype], head_dims)
    if cases is not None:
        check_cases(device, scope, dtype, cases(device))
    elsewhere = shipped_elsewhere(fingerprint)
    if elsewhere is not None:
        events.note(elsewhere)
    return measurer_on(device, open_store(fingerprint, m, events), m, scope, dtype)
