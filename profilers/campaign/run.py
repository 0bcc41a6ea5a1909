"""The one command a user runs on their GPU: profile, op checks, calibrate; on a CPU also validate and report.

A campaign measures, on one device and in one process, fused softmax against flash-linear-attention's fused chunk
kernel and chunked linear attention (causal), plain and fused softmax against linear attention, Latte and
efficient TaylorShift, and the TaylorShift pair (`PAIRS`; a pair whose variant would run a stand-in here, the
fused chunk kernel without fla-core, is left out with a line), at core scope, at a shape that loads the device
(`planning.loaded_shape`: b·h four waves of one-block-per-head kernels over the SMs; b = 32, h = 1 on a CPU). It goes
in the order a short allocation needs: bf16, then fp32, at the plan's first two head dims (64 and 128 by default),
every pair in turn; Latte's softmax in its two layouts (`measure.opchecks`); the op-level calibration on the
shapes its variants run at its sizes (`tunables.GPU_CAMPAIGN` on a GPU); then the other head dims (32). On a GPU
every unit is priced before it starts (`plan_units`, `planning.unit_cost`: the datasheet model's device time over
the lengths its search is expected to time): one over its cap is not started, one past the step's share is left
to the next call, and each says so. Nothing is fitted on a GPU: its summary names the commands that fit it
afterwards from the records on any machine (`validate --records DIR/measurements.jsonl --summary
DIR/summary.json`); a CPU run (`Plan.fit`) fits and validates the corrections in the run, as before. It writes:

    DIR/campaign.log            every progress line, with the seconds since the start
    DIR/measurements.jsonl      every measurement of this device (JSON lines: `attn-cost results import`)
    DIR/summary.json            the plan, the device, measured and predicted transition points, op checks, skipped
    DIR/opmodel-<device>.json   the op calibration (also saved where `validate` looks for it)
    DIR/<device>.json           a fitted device profile, per dtype (`-bf16` ...), where the run fits (a CPU)
    DIR/report-<dtype>.html     the offline HTML report per fitted dtype, where plotly is installed

That is at most 8 files of a few MiB.

It checkpoints as it goes: the measurements and the summary are rewritten (atomically: a
temporary file, then os.replace) after every pair and head dim and every CHECKPOINT_S seconds
inside longer steps, so a run cut off at any moment leaves what it measured in DIR. A rerun with
the same DIR first imports DIR/measurements.jsonl into the store, reads which units DIR/summary.json holds, and
measures only what is missing. A time budget (`minutes`, 9 by default, counted from the process's start) keeps one
call inside a limit: no profiling unit at the fitted head dims starts after 50 % of it, no validation after 60 %,
the calibration stops at 78 %, no unit at the other head dims starts after 94 %, and at 97 % the run stops by
itself, each with a line in the log; the next call continues. A unit that has had `Plan.unit_s` seconds stops, its
timings kept, and the next unit starts. A CUDA error
other than out-of-memory ends its unit (status `error`, the message kept in the summary), not the run,
unless the device is unusable after it (an illegal address): then the run stops and a rerun continues.
"""

from __future__ import annotations

import gc
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from attn_cost.costmodel.conventions import DEFAULT as CONVENTION
from attn_cost.costmodel.crossover import Setting, crossover
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.campaign.planning import WAVES, Price, launch_bound_shape, loaded_shape, unit_cost
from attn_cost.profilers.devicemodel.calibrated.data import OPMODEL_KIND, user_dir
from attn_cost.profilers.devicemodel.calibrated.fit import cache_sizes
from attn_cost.profilers.devicemodel.datasheet.data import for_device
from attn_cost.profilers.devicemodel.datasheet.model import DEVICE_ONLY, GpuModel, fitted
from attn_cost.profilers.devicemodel.device import row_dims
from attn_cost.profilers.devicemodel.kinds import resolve
from attn_cost.profilers.devicemodel.measured.data import PROFILE_KIND, profile_name
from attn_cost.profilers.devicemodel.tunables import DEFAULT, GPU_CAMPAIGN, QUICK
from attn_cost.profilers.measure import gpu_timing
from attn_cost.profilers.measure.gpu_record import record_launch_bound
from attn_cost.profilers.measure.machine import slug
from attn_cost.profilers.measure.opchecks import softmax_axes
from attn_cost.profilers.measure.profile import Measurer
from attn_cost.profilers.measure.references import stand_in
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.report.gather import gather
from attn_cost.profilers.store.files import (
    claim,
    head,
    is_html_report,
    is_json_of,
    make_folder,
    read_input,
    write_atomic,
)
from attn_cost.profilers.store.store import is_results_file, read_jsonl, select
from attn_cost.profilers.workflow.calibrating import calibrate
from attn_cost.profilers.workflow.measuring import (
    Events,
    Measuring,
    check_cases,
    longest,
    measurer_on,
    open_device,
    open_store,
    searched,
)
from attn_cost.profilers.workflow.profiling import profile as profile_pairs
from attn_cost.profilers.workflow.validating import validate_device

PAIRS = (
    ("softmax-fused-causal", "linear-chunked-fused"),
    ("softmax-fused-causal", "linear-chunked"),
    ("softmax-fused", "linear"),
    ("softmax-fused", "latte"),
    ("softmax", "linear"),
    ("softmax", "latte"),
    ("softmax-causal", "linear-chunked"),
    ("taylorshift-direct", "taylorshift-efficient"),
    ("softmax", "taylorshift-efficient"),
    ("softmax-fused", "taylorshift-efficient"),
)
"""The default pairs, the most asked first: the GPU kernels users choose between (fused softmax against
flash-linear-attention's fused chunk kernel, then its eager PyTorch form), what the papers compare (plain
softmax), then TaylorShift, whose efficient form crosses far out on a GPU (long calls: last, so that a cut call
loses the least). A pair whose variant would run a stand-in here (the fused chunk kernel without fla-core, or off
CUDA) is left out of a default plan, with a line saying so (`runnable_pairs`)."""
D_VALUES = (64, 128, 32)
"""Head dims in the order measured: the first two (the corrections are fitted on them) in every dtype first."""
FIT_DS = 2
"""How many of the plan's head dims, from the first, the corrections are fitted on; the rest check them."""
DTYPES = ("bf16", "fp32")
MAX_FILES = 8
MAX_FILE_BYTES = 16 << 20
"""What the device tool brings back from its output folder."""
PROFILE_SHARE, VALIDATE_SHARE, CALIBRATE_SHARE, LATER_SHARE, STOP_SHARE = 0.5, 0.6, 0.78, 0.94, 0.97
"""Fractions of the time budget after which no profiling unit at the fitted head dims starts, no validation
starts, the calibration stops, no unit at the other head dims starts, and the run stops (its measurements saved:
a rerun continues). The calibration comes before the other head dims: a GPU's op calibration is what no other
machine can make, and a quarter of a 9-minute call times about a thousand of its shapes."""
CALL_MINUTES = 9.0
"""The default budget of one call: a run stops by itself within it, and the next call continues (a 30-minute
allocation holds three such calls and their start-ups; a cluster job of any length holds one)."""
STICKY = ("illegal memory access", "device-side assert", "unspecified launch failure", "misaligned address",
          "an illegal instruction", "context is destroyed", "cuda error: unknown error")  # fmt: skip
"""Words of CUDA errors after which the process's CUDA context is unusable: the run stops (a rerun continues)."""
CHECKPOINT_S = 30.0
"""Inside a long step (a calibration, a validation sweep) the export is rewritten this often."""


@dataclass
class Plan:
    """What a campaign measures and where it writes; JSON-able, so a Slurm job can carry it."""

    out: str
    device: str = "auto"
    """cuda, cpu, or auto (CUDA if present); resolved where the campaign runs."""
    pairs: list[tuple[str, str]] = field(default_factory=lambda: [tuple(p) for p in PAIRS])
    ds: list[int] = field(default_factory=lambda: list(D_VALUES))
    dtypes: list[str] = field(default_factory=lambda: list(DTYPES))
    heads: int | None = None
    """Heads (None: on a GPU, `planning.loaded_shape` from its SM count; on a CPU, 1)."""
    batch: int | None = None
    """Batch (None: on a GPU, `planning.loaded_shape`; on a CPU, 32, the TaylorShift authors' timing batch)."""
    repeats: int | None = None
    """Timed runs per length (None: 3 on a GPU, whose graph-replayed runs agree within a per cent at a loaded
    shape; 5 on a CPU)."""
    replicates: int = 2
    unit_s: float = 40.0
    """The most one unit (a pair at one head dim and dtype) may take in a call: a search of a crossover far out
    (TaylorShift at d = 128 in fp32: calls of a tenth of a second) stops there, its timings stored, and the next
    call continues it; the other units are not held up."""
    """Re-timings of a found crossover's bracket (each a crossing; their spread is the interval): two on a GPU,
    whose event timer is steady, against `profile`'s four on a CPU."""
    max_lengths: int = 12
    n_max: int | None = None
    """Longest sequence tried (None: 65536 on CUDA, 16384 on the CPU)."""
    minutes: float = CALL_MINUTES
    spent_s: float = 0.0
    """Seconds of the budget already spent when the campaign starts (the process's start-up: Python, imports)."""
    sdpa_backend: str | None = None
    store: str | None = None
    """Results directory or database (None: the default store)."""
    threads: int | None = None
    quick: bool = False
    calibrate: bool = True
    """Calibrate the op model (`attn-cost calibrate`) after the profiles."""
    fit: bool | None = None
    """Fit the device's corrections from the records at the end (None: on a CPU, not on a GPU, whose time is for
    measuring: fit afterwards, on any machine, from DIR/measurements.jsonl)."""

    @classmethod
    def quick_plan(cls, out: str, **overrides) -> Plan:
        """Small sizes for a rehearsal on the CPU: every step, in seconds rather than minutes."""
        base = {"ds": [4, 8, 12], "batch": 1, "repeats": 3, "max_lengths": 6, "n_max": 1024, "minutes": 10.0}
        return cls(out=out, quick=True, **{**base, **{k: v for k, v in overrides.items() if v is not None}})

    @property
    def fit_d(self) -> list[int]:
        """Head dims the corrections are fitted on: the plan's first two (measured first)."""
        ds = list(dict.fromkeys(self.ds))
        return sorted(ds[:FIT_DS]) if len(ds) >= FIT_DS else []

    @property
    def check_d(self) -> list[int]:
        """Head dims held out of the fit (checked on it)."""
        return [d for d in sorted(set(self.ds)) if d not in self.fit_d]

    def units(self, tier: int | None = None) -> list[tuple[str, int, tuple[str, str]]]:
        """(dtype, d, pair) in the order measured: the fitted head dims in every dtype (tier 0), then the others
        (tier 1); None: both."""
        ds = list(dict.fromkeys(self.ds))
        tiers = [ds[:FIT_DS], ds[FIT_DS:]] if tier is None else [[ds[:FIT_DS], ds[FIT_DS:]][tier]]
        return [(dt, dv, pair) for dims in tiers for dt in self.dtypes for dv in dims for pair in self.pairs]

    def as_json(self) -> dict:
        return {**asdict(self), "pairs": [list(p) for p in self.pairs], "fit_d": self.fit_d, "check_d": self.check_d}

    def measuring(self) -> Measuring:
        """How the campaign measures (`workflow.measuring`): its device, threads, store, timed runs, SDPA backend."""
        store = Path(self.store) if self.store else None
        return Measuring(self.device, self.threads, self.repeats, store, sdpa_backend=self.sdpa_backend)

    @classmethod
    def from_json(cls, data: dict) -> Plan:
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{**data, "pairs": [tuple(p) for p in data.get("pairs", PAIRS)]})


SUMMARY_KIND = "attn-cost campaign summary"
LOG_LINE = re.compile(rb"\[ *\d+\.\d s\] ")
"""How every line of DIR/campaign.log starts: a file that starts otherwise is not a campaign's log."""


def is_campaign_log(path: Path) -> bool:
    """Whether a file is a campaign's log (so a rerun may append to it)."""

    return LOG_LINE.match(head(path)) is not None


class Log:
    """Progress lines on stderr (or any sink) and in DIR/campaign.log, stamped with seconds since start."""

    def __init__(self, path: Path, sink: Callable[[str], None], spent_s: float = 0.0) -> None:
        claim(path, is_campaign_log, "a campaign log")
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


class _OutOfTimeError(Exception):
    """Raised from a progress callback when a step's share of the time budget, or all of it, is spent."""


class _UnitOutOfTimeError(Exception):
    """Raised from a progress callback when a profiling unit has had its `Plan.unit_s`."""


class _BrokenDeviceError(Exception):
    """A CUDA error after which the process cannot use the device: the run stops, a rerun continues."""


def settle_garbage() -> None:
    """Collect garbage, then freeze what is alive (imports, sympy's caches, earlier units' results) out of the
    collector's reach: the measuring code collects before every timing, and in a long campaign that walk over
    every object took a tenth of a second a call. Garbage made after the freeze is still collected."""

    gc.collect()
    gc.freeze()


def process_age() -> float:
    """Seconds since this process started (its Python start-up and imports), from /proc; 0 where unknown."""
    try:
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - started / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


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
    store: object
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
    opmodel: object = None
    """The op model calibrated in this run (validation adds its zero-shot N0)."""
    unit_ends: float | None = None
    """When the profiling unit under way has had its time (seconds since the start), None between units."""
    earlier: set[tuple[str, int, str, str]] = field(default_factory=set)
    """(dtype, d, a, b) of the units an earlier call of this campaign measured (its DIR/summary.json): measured
    again from the store, their cost not counted."""
    costs: dict[str, str] = field(default_factory=dict)
    """Each planned unit's predicted cost, in words (`planning.UnitCost.says`)."""
    op_checks: dict[str, list[dict]] = field(default_factory=dict)
    """The op checks' rows per dtype (`op_check_step`)."""

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
            raise _BrokenDeviceError(f"the CUDA device is unusable after: {message}")

    def check_time(self) -> None:
        if self.over(STOP_SHARE):
            raise _OutOfTimeError(f"{STOP_SHARE:.0%} of the {self.plan.minutes:g}-minute budget spent")

    def notify(self, message: str) -> None:
        """Progress from inside a step: logged; the export rewritten every CHECKPOINT_S seconds; past
        STOP_SHARE of the budget the run stops (cleanly, before a lease's hard limit kills it)."""
        self.check_time()
        if self.unit_ends is not None and self.log.elapsed > self.unit_ends:
            raise _UnitOutOfTimeError(f"over its {self.plan.unit_s:g} s")
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

    def write(self, name: str, text: str, recognise: Callable[[Path], bool], what: str) -> Path:
        """Write DIR/name atomically, unless a file there is not attn-cost's `what` (refused in one line)."""
        path = self.out / name
        claim(path, recognise, what)
        write_atomic(path, text)
        return path

    def checkpoint(self) -> None:
        """Rewrite DIR/measurements.jsonl and DIR/summary.json (atomically)."""

        records = export_records(self.store, self.devices | {self.store.slug})
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
        self.write("measurements.jsonl", text, is_results_file, "a results file")
        summary = json.dumps(self.summary(), indent=1, default=str) + "\n"
        self.write("summary.json", summary, is_json_of(SUMMARY_KIND), "a campaign summary")
        self.saved_at = self.log.elapsed


def export_records(store, devices: set[str]) -> list[dict]:
    """Every stored record of the given devices (replicate timings included), oldest first."""

    rows = [rec for slug in sorted(devices) for _, rec in select(store.db, {"device": slug})]
    return sorted(rows, key=lambda r: (r.get("at", ""), r.get("key", "")))


def resume_from(camp: Campaign, path: Path) -> None:
    """Import an earlier run's DIR/measurements.jsonl, so that a rerun measures only what is missing; the
    devices found there are kept in every later rewrite of the file (an H200 rerun keeps the H100's records)."""
    if not path.exists():
        return

    claim(path, is_results_file, "a results file")
    summary = path.with_name("summary.json")
    if summary.exists() and is_json_of(SUMMARY_KIND)(summary):
        units = json.loads(read_input(summary, "a campaign summary")).get("transitions", [])
        camp.earlier = {(u["dtype"], u["d"], u["a"], u["b"]) for u in units if isinstance(u, dict) and _unit_keys(u)}
    records, _ = read_jsonl(path)
    count = camp.store.db.put_many(records)
    camp.devices |= {r.device for r in records}
    others = sorted(camp.devices - {camp.store.slug})
    kept = f"; records of {', '.join(others)} kept in it" if others else ""
    camp.log(f"resumed: {count} measurements imported from {path}{kept}")


def _unit_keys(unit: dict) -> bool:
    return isinstance(unit.get("d"), int) and all(isinstance(unit.get(k), str) for k in ("dtype", "a", "b"))


def opmodel_file(device_slug: str) -> str:
    return f"opmodel-{device_slug}.json"


def report_file(dtype: str) -> str:
    return f"report-{dtype}.html"


def outputs(plan: Plan, device_slug: str) -> list[tuple[Path, Callable[[Path], bool], str]]:
    """Every file a campaign may write, with the recogniser of its kind and what it is: DIR's log, export,
    summary, profiles, reports and op calibration, and the op calibration where `validate` looks for it."""

    out = Path(plan.out)
    files = [
        (out / "campaign.log", is_campaign_log, "a campaign log"),
        (out / "measurements.jsonl", is_results_file, "a results file"),
        (out / "summary.json", is_json_of(SUMMARY_KIND), "a campaign summary"),
    ]
    for dtype in plan.dtypes:
        files.append((out / f"{profile_name(device_slug, dtype)}.json", is_json_of(PROFILE_KIND), "a device profile"))
        files.append((out / report_file(dtype), is_html_report, "an HTML report"))
    if plan.calibrate:
        files.append((out / opmodel_file(device_slug), is_json_of(OPMODEL_KIND), "an op calibration"))
        files.append((user_dir() / f"{device_slug}.json", is_json_of(OPMODEL_KIND), "an op calibration"))
    return files


def open_campaign(plan: Plan, sink: Callable[[str], None]) -> Campaign:
    """Resolve the device, fix the threads, open DIR, the log and the store (importing an earlier export).
    Every file the campaign may write is checked first: a user's file among them ends the run before anything
    is measured or written."""

    device, fingerprint = open_device(plan.measuring(), plan.dtypes, plan.ds)
    shaped = resolved(plan, device, fingerprint.get("sm_count"))  # the heads and batch the units measure at
    names = sorted({v for pair in plan.pairs for v in pair})
    for dtype in plan.dtypes:  # sizes no unit could run at: one line before anything is written
        template = Sizes(N=1, d=1, h=shaped.heads, b=shaped.batch)
        check_cases(device, "core", dtype, searched(names, template, plan.ds, plan.n_max)(device))
    out = make_folder(Path(plan.out), f"--out {plan.out}")
    for path, recognise, what in outputs(plan, slug(fingerprint)):
        if os.path.lexists(path):  # an absent one (its folder yet to be made) holds nothing to lose
            claim(path, recognise, what)
    warnings: list[str] = []
    store = open_store(fingerprint, plan.measuring(), Events(warn=warnings.append), shipped=False)
    try:
        log = Log(out / "campaign.log", sink, plan.spent_s)
    except OSError as e:
        store.close()
        raise UserError(f"cannot write into --out {out}: {e.strerror or e}") from None
    for w in warnings:
        log(f"warning: {w}")
    pairs, dropped = runnable_pairs(plan, device)
    camp = Campaign(replace(resolved(plan, device, store.device.get("sm_count")), pairs=pairs), log, device, store)
    for line in dropped:
        camp.skip(f"profile {line}")
    info = store.device
    log(f"device: {info['name']} ({device}), torch {info['torch']}, {info['threads']} threads; store {store.path}")
    if device == "cuda":
        log(f"timer: {info.get('timer', 'CUDA events')}")
    resume_from(camp, out / "measurements.jsonl")
    return camp


def runnable_pairs(plan: Plan, device: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The plan's pairs whose variants run their own kernels on this device, and a line for each pair left out
    because one would run a stand-in (`references.stand_in`: linear-chunked-fused without fla-core)."""
    kept, dropped = [], []
    for a, b in plan.pairs:
        others = {v: stand_in(v, Sizes(N=64, d=64), device) for v in (a, b)}
        if all(v == s for v, s in others.items()):
            kept.append((a, b))
        else:
            instead = ", ".join(f"{v} would run {s}'s code" for v, s in others.items() if v != s)
            dropped.append(f"{a} vs {b} ({instead}: flash-linear-attention, fla-core, runs on CUDA; see doctor)")
    return kept, dropped


def resolved(plan: Plan, device: str, sm_count: int | None) -> Plan:
    """The plan with what it left to the device set: the shape (on a GPU, `planning.loaded_shape` from its SM
    count), the timed runs per length, and whether the run fits the corrections (see the Plan's fields)."""
    if device == "cuda":
        heads, batch = loaded_shape(sm_count or 1, plan.heads, plan.batch)
        repeats, fit = 3, False
    else:
        heads, batch, repeats, fit = plan.heads or 1, plan.batch or 32, 5, True
    return replace(
        plan, heads=heads, batch=batch, repeats=plan.repeats or repeats, fit=fit if plan.fit is None else plan.fit
    )


def run_campaign(plan: Plan, sink: Callable[[str], None] = print) -> dict:
    """Run every step of the plan; returns the summary (also in DIR/summary.json)."""
    camp = open_campaign(plan, sink)
    plan = camp.plan
    try:
        camp.log(
            f"plan: {len(plan.pairs)} pairs × d {plan.ds} × {plan.dtypes}, b = {plan.batch}, h = {plan.heads}, "
            f"N up to {camp.n_max:,}, budget {plan.minutes:g} min"
        )
        sms = camp.store.device.get("sm_count")
        if camp.device == "cuda" and sms:
            camp.log(f"shape: {launch_bound_shape(sms, plan.heads, plan.batch) or _loaded_words(sms, plan)}")
        try:
            profile_step(camp, 0, PROFILE_SHARE)
            if plan.fit:
                validate_step(camp)
            op_check_step(camp)
            calibrate_step(camp)
            later = profile_step(camp, 1, LATER_SHARE)
            if plan.fit and (later or camp.opmodel is not None):
                validate_step(camp, again=True)  # the held-out head dims, the op model's zero-shot N0 (lookups)
            if not plan.fit:
                fits = "; ".join(fit_commands(plan))
                camp.steps["validate"] = f"not on the device: fit afterwards, on any machine: {fits}"
                camp.log(f"validation: {camp.steps['validate']}")
        except _OutOfTimeError as e:
            camp.skip(f"the rest ({e}): run the same command again to continue where this one stopped")
        except _BrokenDeviceError as e:
            camp.skip(f"the rest ({e}): run the same command again in a new process to continue")
        camp.checkpoint()
        report_step(camp)
        for problem in check_outputs(camp.out):
            camp.log(f"warning: {problem}")
        camp.checkpoint()
        camp.log(f"done in {camp.log.elapsed:.0f} s")
        return camp.summary()
    finally:
        camp.log.close()


def calibration_runs(plan: Plan, device: str) -> int:
    """Timed runs per calibration shape: 2 on a GPU (graph replays agree within a per cent, and a thousand shapes
    share a quarter of the call), else at most 3 (a shared CPU drifts)."""
    return 2 if device == "cuda" else min(plan.repeats or 3, 3)


def calibrate_step(camp: Campaign) -> None:
    """The op-level calibration of the device (in the first dtype), cut off at its share of the budget.

    Every timed shape is in the store as soon as it is measured, so a cut calibration resumes."""
    plan = camp.plan
    if not plan.calibrate:
        camp.steps["calibrate"] = "not asked for (--no-calibrate)"
        return

    dtype = plan.dtypes[0]
    caches = cache_sizes(camp.device)
    tune = QUICK if plan.quick else GPU_CAMPAIGN if camp.device == "cuda" else DEFAULT
    grid_name = "quick" if plan.quick else "the GPU campaign's" if tune is GPU_CAMPAIGN else "full"
    camp.log(f"calibrate the op model in {dtype} ({grid_name} grid); caches {caches}")
    last = [0.0]

    def step(message: str, done: int, total: int) -> None:
        if camp.over(CALIBRATE_SHARE):
            raise _OutOfTimeError(f"{done} of {total} shapes timed")
        if camp.log.elapsed - last[0] > 30 or done in (0, total):
            last[0] = camp.log.elapsed
            camp.notify(f"  calibration {done}/{total}: {message}")

    variants = sorted({v for pair in plan.pairs for v in pair})
    sizes = [{"d": d, "h": plan.heads, "b": plan.batch} for d in plan.ds]
    try:
        runs = calibration_runs(plan, camp.device)
        done = calibrate(camp.store, camp.device, dtype, repeats=runs, tune=tune, variants=variants, sizes=sizes,
                         glue=False, caches=caches, out=user_dir(), step=step)  # fmt: skip
    except _OutOfTimeError as e:
        camp.skip(f"rest of the calibration (over {CALIBRATE_SHARE:.0%} of the time budget; {e}, kept in the store)")
        camp.steps["calibrate"] = f"cut off: {e}"
        camp.checkpoint()
        return
    except UserError as e:
        camp.skip(f"calibration: {e}")
        return
    except (RuntimeError, ValueError, ArithmeticError) as e:  # a library error in one shape: kept, not fatal
        camp.error("calibrate", f"in {dtype}", e)
        camp.steps["calibrate"] = f"error: {e}"
        return
    model = camp.opmodel = done.model  # saved where validate and crossover --device look for it (user_dir)
    path = camp.write(opmodel_file(model.slug), model.to_text(), is_json_of(OPMODEL_KIND), "an op calibration")
    shapes = f"{done.grid_shapes} grid, {done.exact_shapes} exact and {done.held_out_shapes} held-out shapes"
    camp.steps["calibrate"] = f"{shapes}, {done.measured} timed; {path.name}"
    camp.log(f"  wrote {path.name}; held-out error {model.held_out}")
    camp.checkpoint()


def _loaded_words(sm_count: int, plan: Plan) -> str:
    bh = plan.heads * plan.batch
    return (f"b·h = {bh} heads: {bh / sm_count:.1f} waves over {sm_count} SMs for a kernel with one block per head "
            f"(at least {WAVES} asked for)")  # fmt: skip


def fit_commands(plan: Plan) -> list[str]:
    """The commands that fit a GPU run's device afterwards, on any machine, from its records and summary (the
    plan's pairs, head dims and shape come from the summary), one per dtype."""
    out = Path(plan.out)
    records, summary = out / "measurements.jsonl", out / "summary.json"
    return [f"attn-cost validate --records {records} --summary {summary} --dtype {dtype}" for dtype in plan.dtypes]


def device_pricer(camp: Campaign) -> Callable[[dict, str], Price] | None:
    """On a GPU with a datasheet, a pricing of one call per unit (its dims and dtype): the datasheet model's
    device time, launches left out (the timer's device time is a graph replay); None elsewhere (no plan by cost)."""
    if camp.device != "cuda":
        return None
    sheet = for_device(str(camp.store.device.get("name", "")).removesuffix(" (simulated)"))
    if sheet is None:
        return None
    eff, _, _ = fitted()
    model = GpuModel(sheet, eff, host=DEVICE_ONLY)

    def pricer(dims: dict, dtype: str) -> Price:
        return lambda variant, ns: model.time(variant, dims, ns, "core", dtype)

    return pricer


def plan_units(camp: Campaign, tier: int, share: float) -> list[tuple[str, int, tuple[str, str], int]]:
    """The units of `tier` this call measures, in order, each with the longest length its search may time:
    on a GPU with a datasheet, each unit's device time predicted first (`planning.unit_cost`); a unit over its
    cap is not started, and the units past this step's share of the budget are left to the next call (both
    said). Elsewhere every unit, at the plan's longest length."""
    plan = camp.plan
    pricer = device_pricer(camp)
    units = plan.units(tier)
    if pricer is None:
        return [(dt, dv, pair, camp.n_max) for dt, dv, pair in units]
    left = share * 60 * plan.minutes - camp.log.elapsed
    planned, total, later, fresh = [], 0.0, [], 0
    for dtype, dv, (a, b) in units:
        what = f"{a} vs {b}, d = {dv}, {dtype}"
        dims = row_dims({"d": dv, "h": plan.heads, "b": plan.batch})
        setting = Setting(CONVENTION, dtype, "core", "inference")
        start = crossover(a, b, "flops", dims, setting, exact=False).n or 256
        cost = unit_cost(pricer(dims, dtype), a, b, start, camp.n_max, repeats=plan.repeats,
                         replicates=plan.replicates, run_s=gpu_timing.REP_MS / 1e3)  # fmt: skip
        if camp.done(dtype, dv, a, b):
            planned.append((dtype, dv, (a, b), cost.n_cap))  # its timings are lookups now
        elif cost.seconds > plan.unit_s:
            camp.skip(f"profile {what} (not started: {cost.says()}, over its {plan.unit_s:g} s cap)")
        elif fresh and total + cost.seconds > left:  # the first new unit starts: its timings are kept if it is cut
            later.append(what)
        else:
            fresh += 1
            total += cost.seconds
            planned.append((dtype, dv, (a, b), cost.n_cap))
            camp.costs[what] = cost.says()
    camp.log(f"planned {len(planned)} units: {total:.0f} s of device time predicted, {max(0.0, left):.0f} s left")
    for what in later:
        camp.skip(f"profile {what} (its predicted time is past {share:.0%} of the budget: the next call measures it)")
    return planned


def host_bound(measurer: Measurer, variants: tuple[str, str], sizes: Sizes, lengths: list[int]) -> dict[str, list[int]]:
    """Per variant, the lengths of a unit's search at which its eager time measured the host's launches rather than
    the GPU (`gpu_record.launch_bound`: the eager loop waits on the host; its device time, by graph replay, is still
    the GPU's): where an eager caller's crossover moves with the host."""
    out = {}
    for variant in variants:
        records = (measurer.store.get(measurer.key("time", variant, replace(sizes, N=n))) for n in sorted(set(lengths)))
        out[variant] = [r["sizes"]["N"] for r in records if r is not None and record_launch_bound(r)]
    return out


def op_check_step(camp: Campaign) -> None:
    """Latte's key softmax along the sequence axis against the same softmax along the last axis, at the plan's
    shape and first head dim, in each dtype (`measure.opchecks`): a few seconds, kept in the summary."""
    plan = camp.plan
    if not any("latte" in v for pair in plan.pairs for v in pair):
        return
    lengths = [n for n in (1024, 4096, 16384, 65536) if n <= camp.n_max]
    for dtype in plan.dtypes:
        camp.check_time()
        template = Sizes(N=1, d=plan.ds[0], h=plan.heads, b=plan.batch)
        try:
            rows = softmax_axes(camp.store, camp.device, dtype, template, lengths, repeats=plan.repeats)
        except UserError as e:
            camp.skip(f"op check in {dtype}: {e}")
            continue
        except RuntimeError as e:
            camp.error("op check", f"in {dtype}", e)
            continue
        camp.op_checks[dtype] = [r.as_json() for r in rows]
        for r in rows:
            ratio = f"{r.sequence_axis_s / r.last_axis_s:.2f}×" if r.sequence_axis_s and r.last_axis_s else "—"
            camp.log(f"  softmax along the sequence axis against the last, N = {r.n:,}, {dtype}: {ratio}")
    camp.checkpoint()


def profile_step(camp: Campaign, tier: int, share: float) -> int:
    """Measured N0 and N1 of every pair at the head dims of `tier` (`Plan.units`) in every dtype, the most wanted
    first; no unit starts after `share` of the time budget. Returns how many units were profiled."""
    plan = camp.plan
    measurers = {dt: camp.measurer(dt) for dt in plan.dtypes}
    planned = plan_units(camp, tier, share)
    before = len(camp.units)
    for dtype, dv, (a, b), n_max in planned:
        what = f"{a} vs {b}, d = {dv}, {dtype}"
        camp.check_time()
        if camp.over(share):
            camp.skip(f"profile {what} (over {share:.0%} of the time budget)")
            continue
        camp.log(f"profile {what}" + (f": {camp.costs[what]}" if what in camp.costs else ""))
        sizes = Sizes(N=1, d=dv, h=plan.heads, b=plan.batch)
        setting = Setting(CONVENTION, dtype, "core", "inference")
        settle_garbage()
        camp.unit_ends = camp.log.elapsed + plan.unit_s
        try:
            (p,) = profile_pairs(
                measurers[dtype], [(a, b)], [dv], sizes, setting, max_lengths=plan.max_lengths, n_max=camp.n_max,
                reach=n_max, replicates=plan.replicates,
            ).pairs  # fmt: skip
        except _UnitOutOfTimeError as e:
            camp.skip(f"profile {what} ({e}; its timings are kept: the next call continues it)")
            continue
        except UserError as e:  # a disturbed machine, a backend that cannot run: record, go on
            camp.skip(f"profile {what}: {e}")
            continue
        except RuntimeError as e:  # a CUDA, cuBLAS or cuDNN error other than out-of-memory
            camp.error("profile", what, e)
            continue
        finally:
            camp.unit_ends = None
        row = {k: v for k, v in p.as_json().items() if k not in ("speed", "memory")}
        if camp.device == "cuda":
            row["host_bound"] = host_bound(
                measurers[dtype], (a, b), sizes, [q.n for q in (p.speed.probes if p.speed else [])]
            )
        camp.units.append({"dtype": dtype, **row})
        camp.log(
            f"  N0 analytic {row['analytic_n0']}, measured {row['measured_n0']} ({row['n0_verdict']}); "
            f"N1 analytic {row['analytic_n1']}, measured {row['measured_n1']} ({row['n1_verdict']})"
        )
        camp.checkpoint()
    camp.steps["profile"] = f"{len(camp.units)} of {len(plan.units())} units"
    return len(camp.units) - before


def validate_step(camp: Campaign, again: bool = False) -> None:
    """Fit the corrections on the plan's first two head dims, check them on the others, save the profiles.
    `again`: after the other head dims were profiled (to check the fit on them) or the calibration (to add the op
    model's predictions); every timing is then a lookup, apart from a re-timed spike."""
    plan = camp.plan
    if len(plan.fit_d) < 2:
        camp.steps["validate"] = "needs at least two head dims to fit on"
        camp.log(f"validation: {camp.steps['validate']}")
        return
    done = []
    for dtype in plan.dtypes:
        camp.check_time()
        settle_garbage()
        if not again and camp.over(VALIDATE_SHARE):  # again: lookups, apart from a re-timed spike
            camp.skip(f"validation in {dtype} (over {VALIDATE_SHARE:.0%} of the time budget)")
            continue
        # what was profiled: a pair is fitted where both fitted head dims were, checked on the dims all such were
        profiled = {(u["a"], u["b"], u["d"]) for u in camp.units if u["dtype"] == dtype}
        pairs = [(a, b) for a, b in plan.pairs if all((a, b, dv) in profiled for dv in plan.fit_d)]
        if not pairs:
            camp.skip(f"validation in {dtype} (no pair was profiled at both d = {plan.fit_d})")
            continue
        check = [dv for dv in plan.check_d if all((a, b, dv) in profiled for a, b in pairs)]
        camp.log(f"validate {dtype}: fit on d = {plan.fit_d}, check on d = {check or 'none'}")
        template = Sizes(N=1, d=1, h=plan.heads, b=plan.batch)
        setting = Setting(CONVENTION, dtype, "core", "inference")
        args = (camp.measurer(dtype), pairs, check, plan.fit_d, template, setting)
        kwargs = {"n_max": camp.n_max, "max_lengths": plan.max_lengths, "replicates": plan.replicates}
        try:
            try:
                validated = validate_device(*args, **kwargs, opmodel=camp.opmodel, op_errors=False)
            except (ValueError, ArithmeticError) as e:  # an op-model prediction gone wrong must not cost the fit
                camp.log(f"warning: the op model's prediction failed ({type(e).__name__}: {e}); validating without it")
                validated = validate_device(*args, **kwargs)  # every measurement is stored: lookups only
            profile, rows = validated.profile, validated.rows
        except UserError as e:
            camp.skip(f"validation in {dtype}: {e}")
            continue
        except RuntimeError as e:  # a CUDA, cuBLAS or cuDNN error other than out-of-memory
            camp.error("validate", f"in {dtype}", e)
            continue
        text = json.dumps(profile.as_json(), indent=2) + "\n"
        path = camp.write(f"{profile.name}.json", text, is_json_of(PROFILE_KIND), "a device profile")
        camp.profiles[dtype] = str(path)
        camp.validation[dtype] = rows
        done.append(dtype)
        camp.log(f"  wrote {path.name}")
        camp.checkpoint()
    camp.steps["validate"] = f"profiles for {', '.join(done) or 'no dtype'}"


def report_step(camp: Campaign) -> None:
    """One offline HTML report per fitted dtype; skipped with one line where plotly is missing."""
    try:
        import plotly  # noqa: F401
    except ImportError:
        camp.steps["report"] = "skipped: plotly is not installed (pip install plotly, or carry its wheel)"
        camp.log(f"report: {camp.steps['report']}")
        return
    if camp.profiles and camp.over(STOP_SHARE):
        camp.steps["report"] = (
            "skipped: the time budget is spent (make it with `attn-cost report --device DIR/<profile>`)"
        )
        camp.log(f"report: {camp.steps['report']}")
        return
    from attn_cost.profilers.report.page import render

    written = []
    for dtype, profile in camp.profiles.items():
        variants = list(dict.fromkeys(v for pair in camp.plan.pairs for v in pair))
        setting = Setting(CONVENTION, dtype, "core", "inference")
        try:
            model = resolve(profile)
            data = gather(variants, list(camp.plan.pairs), sorted(set(camp.plan.ds)), 256, 1024, model, setting)
        except UserError as e:  # the measurements and profiles are written already: a report must not cost them
            camp.log(f"report: skipped in {dtype}: {e}")
            continue
        path = camp.write(report_file(dtype), render(data), is_html_report, "an HTML report")
        written.append(path.name)
        camp.log(f"report: wrote {path.name} ({path.stat().st_size / 2**20:.1f} MiB)")
    camp.steps["report"] = ", ".join(written) or "no device profile to report on"


def check_outputs(out: Path) -> list[str]:
    """What the device tool would not bring back: more than MAX_FILES files or one over MAX_FILE_BYTES."""
    files = [p for p in out.iterdir() if p.is_file() and not p.name.startswith(".")]
    problems = [
        f"{p.name} is {p.stat().st_size / 2**20:.1f} MiB (over 16 MiB)"
        for p in files
        if p.stat().st_size > MAX_FILE_BYTES
    ]
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files in {out} (the device tool brings back {MAX_FILES})")
    return problems


def with_overrides(plan: Plan, **overrides) -> Plan:
    """The plan with the given fields replaced (None leaves a field as it is)."""
    return replace(plan, **{k: v for k, v in overrides.items() if v is not None})
