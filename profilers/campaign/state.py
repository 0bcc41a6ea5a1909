"""The state of one campaign run (`Campaign`): its plan, log, store and outcomes, and how they reach DIR.

Every outcome (a unit's transition points, a skip, an error) is kept here and rewritten into DIR/summary.json and
DIR/measurements.jsonl atomically (`Campaign.checkpoint`); the steps (`steps`) only add to it, and the runner
(`run`) decides when. The time budget is read here too: `check_time` and `notify` raise the errors that end a
unit or the run.
"""

from __future__ import annotations

import gc
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cost.profilers.campaign.plan import STOP_SHARE, Plan, fit_commands
from attn_cost.profilers.devicemodel.calibrated.data import OpModel
from attn_cost.profilers.measure.profile import Measurer
from attn_cost.profilers.store.files import claim, head, is_json_of, write_atomic
from attn_cost.profilers.store.store import is_results_file, select
from attn_cost.profilers.workflow.measuring import longest, measurer_on

if TYPE_CHECKING:  # a type only: the store is opened by the workflow (`open_store`), never here
    from attn_cost.profilers.store.store import ResultStore

SUMMARY_KIND = "attn-cost campaign summary"
LOG_LINE = re.compile(rb"\[ *\d+\.\d s\] ")
"""How every line of DIR/campaign.log starts: a file that starts otherwise is not a campaign's log."""
STICKY = ("illegal memory access", "device-side assert", "unspecified launch failure", "misaligned address",
          "an illegal instruction", "context is destroyed", "cuda error: unknown error")  # fmt: skip
"""Words of CUDA errors after which the process's CUDA context is unusable: the run stops (a rerun continues)."""
CHECKPOINT_S = 30.0
"""Inside a long step (a calibration, a validation sweep) the export is rewritten this often."""


@dataclass(frozen=True)
class Output:
    """A kind of file the campaign writes: its paths for a plan on a device (by the device's slug), how a file of
    that kind is recognised (a file there that is not one is a user's: never written over), and what it is."""

    paths: Callable[[Plan, str], list[Path]]
    recognise: Callable[[Path], bool]
    what: str


def is_campaign_log(path: Path) -> bool:
    """Whether a file is a campaign's log (so a rerun may append to it)."""

    return LOG_LINE.match(head(path)) is not None


LOG = Output(lambda plan, slug: [Path(plan.out) / "campaign.log"], is_campaign_log, "a campaign log")
EXPORT = Output(lambda plan, slug: [Path(plan.out) / "measurements.jsonl"], is_results_file, "a results file")
SUMMARY = Output(lambda plan, slug: [Path(plan.out) / "summary.json"], is_json_of(SUMMARY_KIND), "a campaign summary")


class Log:
    """Progress lines on stderr (or any sink) and in DIR/campaign.log, stamped with seconds since start."""

    def __init__(self, path: Path, sink: Callable[[str], None], spent_s: float = 0.0) -> None:
        claim(path, LOG.recognise, LOG.what)
        self.start = time.monotonic() - spent_s
        self.path = path
        self.sink = sink
        self.file = path.open("a", encoding="utf-8")

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def __call__(self, message: str) -> None:
        line = f"[{self.elapsed:7.1f} s] {message}"
        self.file.write(line + "\n")
        self.file.flush()
        self.sink(line)

    def close(self) -> None:
        self.file.close()


class OutOfTimeError(Exception):
    """Raised from a progress callback when a step's share of the time budget, or all of it, is spent."""


class UnitOutOfTimeError(Exception):
    """Raised from a progress callback when a profiling unit has had its `Plan.unit_s`."""


class BrokenDeviceError(Exception):
    """A CUDA error after which the process cannot use the device: the run stops, a rerun continues."""


class NotStartedError(Exception):
    """Raised by a step for a unit it cannot start (no pair to fit on): skipped, the reason in brackets."""


def settle_garbage() -> None:
    """Collect garbage, then freeze what is alive (imports, sympy's caches, earlier units' results) out of the
    collector's reach: the measuring code collects before every timing, and in a long campaign that walk over
    every object took a tenth of a second a call. Garbage made after the freeze is still collected."""

    gc.collect()
    gc.freeze()


def is_sticky(error: BaseException) -> bool:
    """Whether a CUDA error leaves the device unusable for the rest of the process."""
    text = str(error).lower()
    return any(word in text for word in STICKY)


@dataclass
class Campaign:
    """The state of one campaign run: the plan, the device's store, what was done and skipped."""

    plan: Plan
    log: Log
    device: str
    store: ResultStore
    units: list[dict] = field(default_factory=list)
    validation: dict[str, list[dict]] = field(default_factory=dict)
    profiles: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    """Units and steps that a non-OOM error ended (status `error`, the message kept); the run went on."""
    steps: dict[str, str] = field(default_factory=dict)
    saved_at: float = 0.0
    devices: set[str] = field(default_factory=set)
    """Devices whose records DIR/measurements.jsonl holds: kept in every rewrite of it, not only this one's."""
    opmodel: OpModel | None = None
    """The op model calibrated in this run (validation adds its zero-shot N0)."""
    unit_ends: float | None = None
    """When the profiling unit under way has had its time (seconds since the start), None between units."""
    earlier: set[tuple[str, int, str, str]] = field(default_factory=set)
    """(dtype, d, a, b) of the units an earlier call of this campaign measured (its DIR/summary.json): measured
    again from the store, their cost not counted."""
    costs: dict[str, str] = field(default_factory=dict)
    """Each planned unit's predicted cost, in words (`planning.UnitCost.says`)."""
    op_checks: dict[str, list[dict]] = field(default_factory=dict)
    """The op checks' rows per dtype (`steps.op_check`)."""

    def done(self, dtype: str, d: int, a: str, b: str) -> bool:
        return (dtype, d, a, b) in self.earlier

    @property
    def out(self) -> Path:
        return Path(self.plan.out)

    @property
    def n_max(self) -> int:
        return longest(self.device, self.plan.n_max)

    def over(self, share: float) -> bool:
        return self.log.elapsed > share * 60 * self.plan.minutes

    def skip(self, what: str) -> None:
        self.skipped.append(what)
        self.log(f"skipped: {what}")

    def error(self, step: str, what: str, e: BaseException) -> None:
        """Record a unit or step that an error ended; stop the run if the device is unusable now."""
        message = " ".join(f"{type(e).__name__}: {e}".split())[:500]
        self.errors.append({"step": step, "unit": what, "status": "error", "message": message})
        self.log(f"error: {step} {what}: {message}")
        self.checkpoint()
        if is_sticky(e):
            raise BrokenDeviceError(f"the CUDA device is unusable after: {message}")

    def check_time(self) -> None:
        if self.over(STOP_SHARE):
            raise OutOfTimeError(f"{STOP_SHARE:.0%} of the {self.plan.minutes:g}-minute budget spent")

    def notify(self, message: str) -> None:
        """Progress from inside a step: logged; the export rewritten every CHECKPOINT_S seconds; past
        STOP_SHARE of the budget the run stops (cleanly, before a lease's hard limit kills it)."""
        self.check_time()
        if self.unit_ends is not None and self.log.elapsed > self.unit_ends:
            raise UnitOutOfTimeError(f"over its {self.plan.unit_s:g} s")
        self.log(message)
        if self.log.elapsed - self.saved_at > CHECKPOINT_S:
            self.checkpoint()

    def measurer(self, dtype: str) -> Measurer:
        return measurer_on(self.device, self.store, self.plan.measuring(), "core", dtype, self.notify)

    def summary(self) -> dict:
        return {
            "kind": SUMMARY_KIND,
            "plan": self.plan.as_json(),
            "device": self.store.device,
            "elapsed_s": round(self.log.elapsed, 1),
            "new_records": len(getattr(self.store, "session", {})),
            "steps": self.steps,
            "transitions": self.units,
            "fit_afterwards": [] if self.plan.fit else fit_commands(self.plan),
            "op_checks": self.op_checks,
            "validation": self.validation,
            "profiles": self.profiles,
            "skipped": self.skipped,
            "errors": self.errors,
            "usable": self.usable(),
            "files": sorted(p.name for p in self.out.iterdir() if p.is_file() and not p.name.startswith(".")),
        }

    def usable(self) -> dict:
        """What the run has that a user can use: transition points found, profiles, an op calibration."""
        planned = len(self.plan.units())
        return {
            "units_planned": planned,
            "n0_measured": sum(u.get("measured_n0") is not None for u in self.units),
            "n1_measured": sum(u.get("measured_n1") is not None for u in self.units),
            "profiles": sorted(self.profiles),
            "opmodel": self.opmodel is not None,
        }

    def write(self, name: str, text: str, kind: Output) -> Path:
        """Write DIR/name atomically, unless a file there is not attn-cost's file of that kind (refused in one
        line)."""
        path = self.out / name
        claim(path, kind.recognise, kind.what)
        write_atomic(path, text)
        return path

    def checkpoint(self) -> None:
        """Rewrite DIR/measurements.jsonl and DIR/summary.json (atomically)."""

        records = export_records(self.store, self.devices | {self.store.slug})
        self.write("measurements.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in records), EXPORT)
        self.write("summary.json", json.dumps(self.summary(), indent=1, default=str) + "\n", SUMMARY)
        self.saved_at = self.log.elapsed


def export_records(store: ResultStore, devices: set[str]) -> list[dict]:
    """Every stored record of the given devices (replicate timings included), oldest first."""

    rows = [rec for slug in sorted(devices) for _, rec in select(store.db, {"device": slug})]
    return sorted(rows, key=lambda r: (r.get("at", ""), r.get("key", "")))


@dataclass(frozen=True)
class Unit:
    """One unit of a step's work (a pair at one head dim and dtype, a dtype): what the step's function is given,
    and how the summary names it when it is skipped (`said`) or ends in an error (`where`, after the step's name)."""

    said: str
    where: str
    arg: Any
