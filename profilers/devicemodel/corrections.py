"""Per-device corrections: fit measured time and memory from the engine's derived quantities.

Time model, per variant (non-negative least squares on relative error):

    t(N, d, ...) = t_launch · K  +  F / P  +  B / W

K is the number of kernels one call launches (ops × loop repeats), F its matrix-product FLOPs
(the `matmul` convention) and B its unfused memory traffic in bytes: all three come from the op
list. The constants mean something: t_launch is the fixed cost of one kernel (dispatch, Python,
a CUDA launch), P the effective FLOP rate of its products, W its effective bandwidth. A constant
fitted to zero means the variant never spent measurable time on that resource.

Memory model, per variant: measured = scale · modelled + offset (the allocator's rounding and
workspace on CUDA; exactly 1 and 0 with the CPU tracer, which measures what the model counts).

A device profile (JSON) holds the fitted constants of every variant measured on one device and
the transition points measured there, so `attn-cost crossover --device NAME` can print corrected
and measured points without torch.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Literal

import numpy as np
import sympy as sp
from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.crossover import (
    DeviceColumns,
    Poly,
    ProfileColumns,
    Setting,
    TransitionRow,
    at_sizes,
    compare,
    cost_branches,
)
from attn_cost.costmodel.derive import DTYPE_BYTES
from attn_cost.costmodel.errors import UserError, unknown
from attn_cost.costmodel.scopes import MODES, SCOPES
from attn_cost.costmodel.symbols import BY_NAME, DEFAULTS
from attn_cost.costmodel.variants import derive
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.devices import CALIBRATED, DATASHEET, resolve
from attn_cost.profilers.devicemodel.gpumodel import add_datasheet_columns
from attn_cost.profilers.devicemodel.names import known_profiles
from attn_cost.profilers.devicemodel.opmodel import BOOTSTRAP
from attn_cost.profilers.devicemodel.oppredict import add_predicted_columns
from attn_cost.profilers.measure.device import CPU_TIMER, IDENTITY, slug
from attn_cost.profilers.store.files import claim, json_data, read_json, regular_files, write_atomic
from attn_cost.profilers.store.schema import Fingerprint, SchemaError, check, load_error, rule
from attn_cost.profilers.store.store import user_data_dir
from scipy.optimize import nnls

SCHEMA = 1
SHIPPED = DATA / "devices"
TIME_MODEL = "t = t_launch·K + F/P + B/W  (K kernels, F matmul FLOPs, B unfused bytes; fitted per variant)"
MEMORY_MODEL = "measured = scale · modelled + offset"
MIN_POINTS = 4
VALIDATION_COLUMNS = (
    "A", "B", "d", "N0 analytic", "N0 fit", "N0 op model", "N0 measured", "N1 analytic", "N1 corrected",
    "N1 measured",
)  # fmt: skip
"""Columns of a predicted-against-measured table, in the terminal and in the report."""


def time_features(variant: str, scope: str, dtype: str) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """(K, F, B) of one call as expressions in the sizes."""
    derived = derive(variant, scope)
    kernels = sp.expand(sum((op.repeat for op in derived.ops), sp.Integer(0)))
    return kernels, derived.flops(MATMUL), derived.traffic(dtype)


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

    @property
    def flops_per_s(self) -> float | None:
        return 1 / self.seconds_per_flop if self.seconds_per_flop > 0 else None

    @property
    def bytes_per_s(self) -> float | None:
        return 1 / self.seconds_per_byte if self.seconds_per_byte > 0 else None

    def coefficients(self) -> tuple[float, float, float]:
        return self.launch_s, self.seconds_per_flop, self.seconds_per_byte

    def as_json(self) -> dict:
        return {**asdict(self), "flops_per_s": self.flops_per_s, "bytes_per_s": self.bytes_per_s}


@dataclass
class MemoryFit:
    """Fitted memory correction of one variant on one device: measured = scale · modelled + offset."""

    scale: float = field(metadata=rule(above=0, maximum=1e6))
    offset_bytes: float = field(metadata=rule(minimum=-(2.0**62), maximum=2.0**62))
    max_abs_residual_bytes: float = field(metadata=rule(minimum=0, maximum=2.0**62))
    points: int = field(metadata=rule(minimum=0, maximum=1 << 31))

    def as_json(self) -> dict:
        return asdict(self)


def fit_time(samples: list[tuple[dict, float]], variant: str, scope: str = "core", dtype: str = "fp32") -> TimeFit:
    """Fit t_launch, 1/P, 1/W to (sizes, seconds) samples by NNLS on relative residuals."""

    if len(samples) < MIN_POINTS:
        raise UserError(f"need at least {MIN_POINTS} timings of {variant} to fit 3 constants; have {len(samples)}")
    feats = time_features(variant, scope, dtype)
    x = np.array([[_value(f, sizes) for f in feats] for sizes, _ in samples])
    y = np.array([t for _, t in samples])
    if np.any(y <= 0):
        raise UserError(f"timings of {variant} must be positive")
    w = 1 / y
    coef, _ = nnls(x * w[:, None], y * w)
    coef[(x * coef).max(axis=0) < 1e-9 * y.min()] = 0.0  # a term worth less than a nanosecond's share is no term
    pred = x @ coef
    rel = np.abs(pred - y) / y
    spread = float(np.sum((y - y.mean()) ** 2))
    r2 = 1 - float(np.sum((y - pred) ** 2)) / spread if spread > 0 else 1.0
    fit_d = sorted({int(s["d"]) for s, _ in samples})
    launch, per_flop, per_byte = (float(c) for c in coef)
    return TimeFit(launch, per_flop, per_byte, len(samples), fit_d, r2, float(np.median(rel)), float(rel.max()))


def fit_memory(samples: list[tuple[int, int]]) -> MemoryFit:
    """Least-squares scale and offset from (modelled, measured) byte pairs."""
    if len(samples) < 2:
        raise UserError(f"need at least 2 memory measurements to fit a scale and an offset; have {len(samples)}")
    x = np.array([m for m, _ in samples], dtype=float)
    y = np.array([v for _, v in samples], dtype=float)
    if np.ptp(x) == 0:
        scale, offset = 1.0, float(np.mean(y - x))
    else:
        scale, offset = (float(v) for v in np.polyfit(x, y, 1))
    if abs(scale - 1) < 1e-12 and abs(offset) < 1e-6:
        scale, offset = 1.0, 0.0
    resid = np.abs(scale * x + offset - y)
    return MemoryFit(scale, offset, float(resid.max()), len(samples))


def _value(expr: sp.Expr, sizes: dict) -> float:
    """An expression at sizes keyed by name; a variant-specific size not given (Performer's m, a window w) takes
    its default, as the measurement that `sizes` describes did."""

    values = {**DEFAULTS, **{BY_NAME[k]: v for k, v in sizes.items() if k in BY_NAME}}
    return float(expr.xreplace(values))


def corrected_time_curve(fit: TimeFit, variant: str, dims: dict, setting: Setting) -> list[Poly]:
    """The fitted time of a variant as a polynomial in N (exact rational coefficients)."""
    feats = time_features(variant, setting.scope, setting.dtype)
    total = sp.Add(*(sp.Rational(Fraction(c)) * f for c, f in zip(fit.coefficients(), feats, strict=True)))
    return at_sizes((sp.expand(total),), dims, variant)


def corrected_memory_curve(fit: MemoryFit, variant: str, dims: dict, setting: Setting) -> list[Poly]:

    scale, offset = sp.Rational(Fraction(fit.scale)), sp.Rational(Fraction(fit.offset_bytes))
    branches = tuple(sp.expand(scale * e + offset) for e in cost_branches(variant, "memory", setting))
    return at_sizes(branches, dims, variant)


def corrected_n(pa: list[Poly], pb: list[Poly]) -> float | None:
    """Where B becomes no more expensive than A on the corrected curves (None if never)."""
    result = compare(pa, pb)
    return (
        result.get("root")
        if result["verdict"] in ("crosses", "multiple")
        else (1.0 if result["verdict"] in ("always", "equal") else None)
    )


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

    @property
    def slug(self) -> str:

        return slug(self.device)

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
        return cls(
            device=data["device"],
            scope=data["scope"],
            dtype=data["dtype"],
            time={k: TimeFit(**{f: v[f] for f in time_fields}) for k, v in data["time"].items()},
            memory={k: MemoryFit(**{f: v[f] for f in memory_fields}) for k, v in data["memory"].items()},
            measured=list(data.get("measured", [])),
            validation=list(data.get("validation", [])),
            created=data.get("created", ""),
            mode=data.get("mode", "inference"),
        )

    def save(self, root: Path) -> Path:
        """Write the profile as root/<slug>.json (atomically; never over a file that is not a profile)."""

        make_folder(root)
        path = root / f"{self.slug}.json"
        claim(path, is_profile_file, "a device profile")
        write_atomic(path, json.dumps(self.as_json(), indent=2) + "\n")
        return path


def is_profile_file(path: Path) -> bool:
    """Whether a file is a device profile attn-cost wrote (profiles before `kind` was written: by their fields)."""

    data = json_data(path)
    if not isinstance(data, dict):
        return False
    return data.get("kind") == PROFILE_KIND or {"schema", "slug", "device", "time", "memory"} <= data.keys()


def make_folder(root: Path) -> None:
    """Create a folder attn-cost writes into, or say in one line why it cannot."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the folder {root}: {e.strerror or e}") from None


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


def add_device_columns(rows: list[TransitionRow], name: str, replicates: int | None = None) -> None:
    """Give crossover table rows a device's columns: corrected and measured N0/N1 of its profile, and the op
    model's predicted_n0 with its interval (from `replicates` bootstrap replicates; default: the op model's own)
    where the device has an op calibration (`attn-cost calibrate`). A device with an op calibration and no profile
    gets the op model's columns alone; a datasheet GPU (`profilers.devicemodel.datasheet`) the datasheet model's N0."""

    kind = resolve(name)
    if kind == DATASHEET:
        add_datasheet_columns(rows, name)
        return
    replicates = BOOTSTRAP if replicates is None else replicates
    if kind == CALIBRATED:
        add_predicted_columns(rows, name, replicates=replicates)
        return
    profile = load_profile(name)
    for row in rows:
        n0, n1 = corrected_points(profile, row.a, row.b, row.dims(), row.setting)
        columns = measured_points(profile, row)
        columns.corrected_n0, columns.corrected_n1 = n0, n1
        row.device = DeviceColumns(profile.slug, columns)
    add_predicted_columns(rows, profile.slug, required=False, replicates=replicates)


def corrected_points(
    profile: DeviceProfile, a: str, b: str, dims: dict, setting: Setting
) -> tuple[int | None, int | None]:
    """Corrected N0 and N1 of one pair, None where the profile lacks a fit for either variant."""
    n0 = n1 = None
    if not measured_here(profile, setting):
        return n0, n1
    s = setting
    setting = Setting(s.convention, s.dtype, s.scope, s.mode)  # the fits' curves: the default counting
    if a in profile.time and b in profile.time:
        n0 = _ceil(
            corrected_n(
                corrected_time_curve(profile.time[a], a, dims, setting),
                corrected_time_curve(profile.time[b], b, dims, setting),
            )
        )
    if a in profile.memory and b in profile.memory:
        n1 = _ceil(
            corrected_n(
                corrected_memory_curve(profile.memory[a], a, dims, setting),
                corrected_memory_curve(profile.memory[b], b, dims, setting),
            )
        )
    return n0, n1


def measured_here(profile: DeviceProfile, setting: Setting) -> bool:
    """Whether the profile's measurements were taken at this setting: same scope, element type and
    mode, keys as long as queries, each variant's own projection biases. A fit or a point from another setting
    would answer another question: the corrected and measured columns are then empty (—, said in the caption).
    (The FLOP convention and causal counting change how FLOPs are counted, not what was timed.)"""
    here = (setting.scope, setting.dtype, setting.mode)
    own = setting.counting.n_kv is None and setting.counting.bias is None
    return here == (profile.scope, profile.dtype, profile.mode) and own


def measured_points(profile: DeviceProfile, row: TransitionRow) -> ProfileColumns:
    """The measured N0/N1 of the row's pair at exactly the row's sizes and setting (None where not measured)."""
    if not measured_here(profile, row.setting):
        return ProfileColumns()
    latents = row.sizes.get("L", row.d)  # profiles measure Latte with L = d
    here = (row.a, row.b, row.d, row.heads, row.batch)
    for m in profile.measured:
        if tuple(m[k] for k in ("a", "b", "d", "heads", "batch")) == here and m.get("L", m["d"]) == latents:
            return ProfileColumns(
                measured_n0=m.get("measured_n0"),
                n0_uncertainty=m.get("n0_uncertainty"),
                measured_n1=m.get("measured_n1"),
                n1_uncertainty=m.get("n1_uncertainty"),
            )
    return ProfileColumns()


def _ceil(x: float | None) -> int | None:
    return None if x is None else math.ceil(x - 1e-9)
