"""What a campaign measures (`Plan`), in what order, and the shares of its time budget each part may use.

The plan is JSON-able (a Slurm job carries it); what it leaves to the device (the shape, the timed runs, whether
the run fits) is set by `resolved` where the campaign runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from attn_cost.profilers.campaign.planning import loaded_shape
from attn_cost.profilers.workflow.measuring import Measuring

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
PROFILE_SHARE, VALIDATE_SHARE, CALIBRATE_SHARE, LATER_SHARE, STOP_SHARE = 0.5, 0.6, 0.78, 0.94, 0.97
"""Fractions of the time budget after which no profiling unit at the fitted head dims starts, no validation
starts, the calibration stops, no unit at the other head dims starts, and the run stops (its measurements saved:
a rerun continues). The calibration comes before the other head dims: a GPU's op calibration is what no other
machine can make, and a quarter of a 9-minute call times about a thousand of its shapes."""
CALL_MINUTES = 9.0
"""The default budget of one call: a run stops by itself within it, and the next call continues (a 30-minute
allocation holds three such calls and their start-ups; a cluster job of any length holds one)."""


@dataclass
class Plan:
    """What a campaign measures and where it writes; JSON-able, so a Slurm job can carry it."""

    out: str
    device: str = "auto"
    """cuda, cpu, or auto (CUDA if present); resolved where the campaign runs."""
    pairs: list[tuple[str, str]] = field(default_factory=lambda: list(PAIRS))
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
    """Re-timings of a found crossover's bracket (each a crossing; their spread is the interval): two on a GPU,
    whose event timer is steady, against `profile`'s four on a CPU."""
    unit_s: float = 40.0
    """The most one unit (a pair at one head dim and dtype) may take in a call: a search of a crossover far out
    (TaylorShift at d = 128 in fp32: calls of a tenth of a second) stops there, its timings stored, and the next
    call continues it; the other units are not held up."""
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

    def shape(self) -> tuple[int, int, int]:
        """The heads, batch and timed runs per length the units measure at: set on the device (`resolved`)."""
        if self.heads is None or self.batch is None or self.repeats is None:
            raise ValueError("a plan's shape is set where it runs (`resolved`)")
        return self.heads, self.batch, self.repeats

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


def fit_commands(plan: Plan) -> list[str]:
    """The commands that fit a GPU run's device afterwards, on any machine, from its records and summary (the
    plan's pairs, head dims and shape come from the summary), one per dtype."""
    out = Path(plan.out)
    records, summary = out / "measurements.jsonl", out / "summary.json"
    return [f"attn-cost validate --records {records} --summary {summary} --dtype {dtype}" for dtype in plan.dtypes]
