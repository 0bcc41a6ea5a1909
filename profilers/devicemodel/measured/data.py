"""The measured kind's data: a device profile (JSON) holds the fitted constants of every variant measured on one
device (`measured.fit`) and the transition points measured there, so `attn-cost crossover --device NAME` can print
corrected and measured points without torch; where profiles are found (shipped, the user's folder) and how they
are read and written."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Literal

import sympy as sp
from attn_cost.costmodel.crossover import (
    ProfileColumns,
    Setting,
    TransitionRow,
)
from attn_cost.costmodel.dtypes import DTYPE_BYTES
from attn_cost.costmodel.errors import UserError, unknown
from attn_cost.costmodel.scopes import MODES, SCOPES
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.datasheet.data import for_device
from attn_cost.profilers.devicemodel.device import (
    measured_at,
)
from attn_cost.profilers.devicemodel.names import known_profiles
from attn_cost.profilers.measure.machine import CPU_TIMER, IDENTITY, slug
from attn_cost.profilers.store.files import claim, json_data, make_folder, read_json, regular_files, write_atomic
from attn_cost.profilers.store.schema import Fingerprint, SchemaError, check, load_error, rule
from attn_cost.profilers.store.store import user_data_dir

SCHEMA = 1
SHIPPED = DATA / "devices"
TIME_MODEL = (
    "t = t_launch·K + F/P + B/W  (K kernels, F matmul FLOPs performed, B unfused bytes; fitted per variant, "
    "P at most the datasheet's peak)"
)
MEMORY_MODEL = "measured = Σ scale_k · term_k + offset  (a scale per term of the modelled peak)"
VALIDATION_COLUMNS = (
    "A", "B", "d", "N0 analytic", "N0 fit", "N0 op model", "N0 measured", "N1 analytic", "N1 corrected",
    "N1 measured",
)  # fmt: skip
"""Columns of a predicted-against-measured table, in the terminal and in the report."""


def profile_name(device_slug: str, dtype: str) -> str:
    """A device profile's name in one dtype (`crossover --device NAME`, its file's stem): fp32's is the bare slug."""
    return device_slug if dtype == "fp32" else f"{device_slug}-{dtype}"


@dataclass(frozen=True)
class Peak:
    """The most FLOP/s a device's matrix products reach in one dtype, and where the figure comes from."""

    flops_per_s: float
    source: str


def device_peak(device: dict, dtype: str) -> Peak | None:
    """The datasheet peak of a measured GPU for `dtype` (None where no datasheet row names it): TF32's for fp32
    where the measurements ran with TF32 matrix products (`tf32_matmul` in the fingerprint)."""
    if device.get("kind") != "cuda":
        return None
    sheet = for_device(str(device.get("name", "")))
    if sheet is None or dtype not in ("fp32", "bf16", "fp16"):
        return None
    tf32 = dtype == "fp32" and bool(device.get("tf32_matmul"))
    which = "tf32" if tf32 else dtype
    peak = sheet.peak(dtype, tf32=tf32)
    return Peak(peak, f"{sheet.name} datasheet, dense {which} peak {peak / 1e12:g} TFLOP/s")


@dataclass
class TimeFit:
    """Fitted time constants of one variant on one device."""

    launch_s: float = field(metadata=rule(minimum=0, maximum=1e3))
    seconds_per_flop: float = field(metadata=rule(minimum=0, maximum=1))
    seconds_per_byte: float = field(metadata=rule(minimum=0, maximum=1))
    points: int = field(metadata=rule(minimum=0, maximum=1 << 31))
    fit_d: list[int] = field(metadata=rule(minimum=1, maximum=1 << 16))
    """The head dims the fit was made on."""
    r2: float = field(metadata=rule(minimum=-1e12, maximum=1))
    median_rel_err: float = field(metadata=rule(minimum=0, maximum=1e12))
    max_rel_err: float = field(metadata=rule(minimum=0, maximum=1e12))
    flops: str = field(default="dense", metadata=rule(choices=("dense", "performed")))
    """How F counts a fused causal kernel: "performed" (its tiles, `PERFORMED`) or "dense" (profiles fitted before
    the count was the kernel's)."""
    peak_flops_per_s: float | None = field(default=None, metadata=rule(above=0, maximum=1e18))
    """The bound on P: the device's datasheet peak for the dtype (None: no datasheet, P unbounded)."""
    peak_source: str = field(default="", metadata=rule(blank=True))
    bound_active: bool = False
    """The fit sits at the peak: the timings asked for a faster rate than the device has, so P is the peak and
    t_launch and W were fitted with it."""

    @property
    def flops_per_s(self) -> float | None:
        return 1 / self.seconds_per_flop if self.seconds_per_flop > 0 else None

    @property
    def bytes_per_s(self) -> float | None:
        return 1 / self.seconds_per_byte if self.seconds_per_byte > 0 else None

    @property
    def bound(self) -> str | None:
        """One line on the active bound (None where the fit did not reach it)."""
        if not self.bound_active or self.peak_flops_per_s is None:
            return None
        return f"P at the peak: {self.peak_source}"

    def coefficients(self) -> tuple[float, float, float]:
        return self.launch_s, self.seconds_per_flop, self.seconds_per_byte

    def as_json(self) -> dict:
        return {**asdict(self), "flops_per_s": self.flops_per_s, "bytes_per_s": self.bytes_per_s}


@dataclass
class MemoryFit:
    """Fitted memory correction of one variant on one device: measured = Σ scale_k · term_k + offset, `terms`
    holding each term's scale (`memory_terms`); a profile fitted before per-term scales has `terms` empty and one
    `scale` for the whole modelled peak."""

    scale: float = field(metadata=rule(above=0, maximum=1e6))
    offset_bytes: float = field(metadata=rule(minimum=-(2.0**62), maximum=2.0**62))
    max_abs_residual_bytes: float = field(metadata=rule(minimum=0, maximum=2.0**62))
    points: int = field(metadata=rule(minimum=0, maximum=1 << 31))
    terms: dict[str, float] = field(default_factory=dict, metadata=rule(minimum=0, maximum=1e6))

    def as_json(self) -> dict:
        return asdict(self)

    def shown(self) -> str:
        """The scales as a table shows them: `1` where the model's count holds, else the terms it does not
        (`N*b*h ×0`), or the one scale of a profile before per-term scales."""
        if not self.terms:
            return f"{self.scale:.4f}"
        off = [f"{term} ×{scale:.3g}" for term, scale in self.terms.items() if scale != 1.0]
        return ", ".join(off) or "1"

    def corrected(self, branch: sp.Expr) -> sp.Expr:
        """A branch of the modelled peak (bytes) with this fit's scales and offset."""
        offset = sp.Rational(Fraction(self.offset_bytes))
        if not self.terms:
            return sp.expand(sp.Rational(Fraction(self.scale)) * branch + offset)
        scaled = (sp.Rational(Fraction(self.terms.get(str(m), 1.0))) * c * m for m, c in monomials(branch))
        return sp.expand(sp.Add(*scaled) + offset)


def monomials(expr: sp.Expr) -> list[tuple[sp.Expr, sp.Expr]]:
    """(monomial in the sizes, its coefficient) of a polynomial."""
    out = []
    for term in sp.Add.make_args(sp.expand(expr)):
        coeff, monomial = term.as_coeff_Mul()
        out.append((monomial, coeff))
    return out


PROFILE_KIND = "attn-cost device profile"
"""The `kind` field that marks a JSON file as a device profile."""


# -- device profiles ---------------------------------------------------------------------------


@dataclass
class DeviceProfile:
    """Fitted corrections and measured transition points of one device."""

    device: dict
    scope: str
    dtype: str
    time: dict[str, TimeFit] = field(default_factory=dict)
    memory: dict[str, MemoryFit] = field(default_factory=dict)
    measured: list[dict] = field(default_factory=list)
    """Transition points measured on the device: {a, b, d, heads, batch, measured_n0, ...}."""
    validation: list[dict] = field(default_factory=list)
    created: str = ""
    mode: str = "inference"
    """The mode every measurement was taken in (`validate` measures inference)."""
    made: str = ""
    """How the profile was made (the command, and whether its timings were taken then or read from records)."""

    @property
    def slug(self) -> str:

        return slug(self.device)

    @property
    def name(self) -> str:
        """The profile's name (`crossover --device NAME`, its file's stem): the device's slug, with the dtype where
        it is not fp32 (`cuda-nvidia-h200-12fde9-bf16`), as a campaign names its files."""
        return profile_name(self.slug, self.dtype)

    def as_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "kind": PROFILE_KIND,
            "slug": self.slug,
            "device": self.device,
            "created": self.created or datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "scope": self.scope,
            "dtype": self.dtype,
            "mode": self.mode,
            "made": self.made,
            "time_model": TIME_MODEL,
            "memory_model": MEMORY_MODEL,
            "time": {k: v.as_json() for k, v in self.time.items()},
            "memory": {k: v.as_json() for k, v in self.memory.items()},
            "measured": self.measured,
            "validation": self.validation,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> DeviceProfile:
        """A profile from parsed JSON, checked field by field against the schema (one clear line if not)."""
        try:
            check(data, ProfileFile)
            assert isinstance(data, dict)  # as `check` found it
            for name, fit in data["time"].items():
                if not any(fit[k] for k in ("launch_s", "seconds_per_flop", "seconds_per_byte")):
                    raise SchemaError(f"time.{name}", "a fit that takes some time (its three constants are 0)", 0)
        except SchemaError as e:
            raise load_error(where, "device profile", e) from None
        time_fields, memory_fields = set(TimeFit.__dataclass_fields__), set(MemoryFit.__dataclass_fields__)
        profile = cls(
            device=data["device"],
            scope=data["scope"],
            dtype=data["dtype"],
            time={k: TimeFit(**{f: v[f] for f in time_fields if f in v}) for k, v in data["time"].items()},
            memory={k: MemoryFit(**{f: v[f] for f in memory_fields if f in v}) for k, v in data["memory"].items()},
            measured=list(data.get("measured", [])),
            validation=list(data.get("validation", [])),
            created=data.get("created", ""),
            mode=data.get("mode", "inference"),
            made=data.get("made", ""),
        )
        profile.check_rates(where)
        return profile

    def check_rates(self, where: str) -> None:
        """Refuse, in one line, a profile that rates a variant faster than its device's datasheet peak: it was
        fitted without the bound (or edited), and its corrected points rest on an impossible rate."""
        peak = device_peak(self.device, self.dtype)
        if peak is None:
            return
        for variant, fit in self.time.items():
            rate = fit.flops_per_s
            if rate is not None and rate > peak.flops_per_s * (1 + 1e-6):
                raise UserError(
                    f"{where} rates {variant} at {rate / 1e12:,.0f} TFLOP/s, above the {peak.source}: it was fitted "
                    f"without the bound; refit it from its records (`attn-cost validate --from-store --device "
                    f"{self.slug} --dtype {self.dtype}`)"
                )

    def save(self, root: Path) -> Path:
        """Write the profile as root/<name>.json (atomically; never over a file that is not a profile)."""

        make_folder(root, f"the folder {root}")
        path = root / f"{self.name}.json"
        claim(path, is_profile_file, "a device profile")
        write_atomic(path, json.dumps(self.as_json(), indent=2) + "\n")
        return path


def is_profile_file(path: Path) -> bool:
    """Whether a file is a device profile attn-cost wrote (profiles before `kind` was written: by their fields)."""

    data = json_data(path)
    if not isinstance(data, dict):
        return False
    return data.get("kind") == PROFILE_KIND or {"schema", "slug", "device", "time", "memory"} <= data.keys()


# -- the profile file's schema ---------------------------------------------------------------------


@dataclass
class MeasuredPoint:
    """A transition point measured on the device (a profile's `measured` and `validation` rows)."""

    a: str
    b: str
    d: int = field(metadata=rule(minimum=1, maximum=1 << 16))
    heads: int = field(metadata=rule(minimum=1, maximum=1 << 16))
    batch: int = field(metadata=rule(minimum=1, maximum=1 << 20))
    measured_n0: float | None = field(default=None, metadata=rule(minimum=1, maximum=1 << 32))
    n0_uncertainty: float | None = field(default=None, metadata=rule(minimum=0, maximum=1 << 32))
    measured_n1: float | None = field(default=None, metadata=rule(minimum=1, maximum=1 << 32))
    n1_uncertainty: float | None = field(default=None, metadata=rule(minimum=0, maximum=1 << 32))
    n0_tie: list[float] | None = field(default=None, metadata=rule(minimum=1, maximum=1 << 32))
    """A tie's stretch [first, last length] (`search.tie_of`); read as a pair (`standing.span`)."""
    n0_regret: float | None = field(default=None, metadata=rule(minimum=0))
    n0_range: list[float] | None = field(default=None, metadata=rule(minimum=1, maximum=1 << 32))


@dataclass
class ProfileFile:
    """A device profile's JSON, as `DeviceProfile.from_json` checks it: every field the tool reads, so a hand-edited
    or truncated file ends as one line (`time.linear.launch_s must be a finite number >= 0, got 'fast'`) instead of
    a traceback later."""

    schema: Literal[1]  # SCHEMA
    device: Fingerprint
    scope: str = field(metadata=rule(choices=tuple(SCOPES)))
    dtype: str = field(metadata=rule(choices=tuple(DTYPE_BYTES)))
    time: dict[str, TimeFit]
    memory: dict[str, MemoryFit]
    mode: str = field(default="inference", metadata=rule(choices=tuple(MODES)))
    created: str = field(default="", metadata=rule(blank=True))
    made: str = field(default="", metadata=rule(blank=True))
    measured: list[MeasuredPoint] = field(default_factory=list)
    validation: list[MeasuredPoint] = field(default_factory=list)


def user_profiles_dir() -> Path:

    return user_data_dir("devices")


def shipped_elsewhere(fingerprint: dict) -> str | None:
    """A note when attn-cost ships measurements of a device with this one's name but another
    fingerprint (another CPU model or core count sold under the same name): they are not reused
    for this device, and the note says so once and points at them as a reference."""

    mine = slug(fingerprint)
    if not SHIPPED.is_dir() or (SHIPPED / f"{mine}.json").exists():
        return None
    others = []  # (fields that differ, slug, detail) of every shipped device sold under this name
    for path in regular_files(SHIPPED, "*.json"):
        data = json_data(path)
        device = data.get("device") if isinstance(data, dict) else None
        if not isinstance(device, dict):
            continue
        if (device.get("kind"), device.get("name")) != (fingerprint.get("kind"), fingerprint.get("name")):
            continue
        differ = [k for k in (*IDENTITY, CPU_TIMER, "torch") if str(device.get(k)) != str(fingerprint.get(k))]
        detail = ", ".join(f"{k} {device.get(k)} there, {fingerprint.get(k)} here" for k in differ[:3])
        others.append((len(differ), path.stem, detail))
    if not others:
        return None
    closest = min(others)[1]
    listed = "; ".join(f"{stem}: {detail}" for _, stem, detail in sorted(others, key=lambda o: o[1]))
    return (
        f"note: attn-cost ships measurements of {fingerprint.get('name')} with another fingerprint ({listed}), "
        f"so they are not reused here; see them as a reference with `attn-cost crossover --device {closest}`"
    )


def load_profile(name: str) -> DeviceProfile:
    """A device profile by name (see `attn-cost devices`) or by path to its JSON file."""

    path = Path(name)
    if not (path.suffix == ".json" and os.path.lexists(path)):
        profiles = known_profiles()
        if name not in profiles:
            raise UserError(unknown("device", name, profiles or ["(none yet: run `attn-cost validate`)"]))
        path = profiles[name]
    return DeviceProfile.from_json(read_json(path, "a readable device profile"), str(path))


def measured_here(profile: DeviceProfile, setting: Setting) -> bool:
    """Whether the profile's measurements were taken at this setting: what runs under it is what ran when they were
    (`Setting.timed`: the same scope, element type and mode, keys as long as queries, each variant's own projection
    biases, no dropout, no padding mask, and any switch that changes what runs). A fit or a point from another
    setting would answer another question: the corrected and measured columns are then empty (—, said in the
    caption). (The FLOP convention and the causal and backward counts change how FLOPs are counted, not what was
    timed.)"""
    return setting.timed() == Setting(dtype=profile.dtype, scope=profile.scope, mode=profile.mode).timed()


def measured_point(profile: DeviceProfile, row: TransitionRow) -> dict | None:
    """The profile's measured unit of the row's pair taken under everything the row asks (None where none was): its
    setting (`measured_here`) and every size the row names (d, h, b and each size the pair's costs depend on: L,
    the chunk, a window, ...), each compared with the unit's own, or where the unit names none, with the default it
    was measured at (`measured_at`: L = d, the chunk 64, ...). The one rule for whether a measured value belongs under
    a row's heading (`crossover --device`, the report's tables and panels); whether it stands is the unit's
    `n0_standing` (`standing.shown_n0`)."""
    if not measured_here(profile, row.setting):
        return None
    asked = row.dims()
    for m in profile.measured:
        if (m["a"], m["b"]) == (row.a, row.b) and measured_at(_sizes_of(m), asked):
            return m
    return None


def _sizes_of(unit: dict) -> dict:
    """A measured unit's sizes by name ("a" and "b" name its variants, "batch" its batch)."""
    return {k: v for k, v in unit.items() if k not in ("a", "b")}


def measured_points(profile: DeviceProfile, row: TransitionRow) -> ProfileColumns:
    """The measured N0/N1 of the row's pair at exactly the row's sizes and setting (`measured_point`; empty where
    not measured)."""
    m = measured_point(profile, row)
    if m is None:
        return ProfileColumns()
    return ProfileColumns(
        measured_n0=m.get("measured_n0"),
        n0_uncertainty=m.get("n0_uncertainty"),
        measured_n1=m.get("measured_n1"),
        n1_uncertainty=m.get("n1_uncertainty"),
        n0_verdict=m.get("n0_verdict"),
        n0_standing=m.get("n0_standing"),
        n0_launch_bound=m.get("n0_launch_bound"),
        n0_tie=m.get("n0_tie"),
        n0_regret=m.get("n0_regret"),
        n0_range=m.get("n0_range"),
        n1_verdict=m.get("n1_verdict"),
    )
