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
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import numpy as np
import sympy as sp
from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.crossover import Poly, Setting, at_sizes, compare
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.variants import derive

SCHEMA = 1
SHIPPED = Path(__file__).parent / "data" / "devices"
TIME_MODEL = "t = t_launch·K + F/P + B/W  (K kernels, F matmul FLOPs, B unfused bytes; fitted per variant)"
MEMORY_MODEL = "measured = scale · modelled + offset"
MIN_POINTS = 4
VALIDATION_COLUMNS = (
    "A", "B", "d", "N0 analytic", "N0 corrected", "N0 measured", "N1 analytic", "N1 corrected", "N1 measured",
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

    launch_s: float
    seconds_per_flop: float
    seconds_per_byte: float
    points: int
    fit_d: list[int]
    r2: float
    median_rel_err: float
    max_rel_err: float

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
    scale: float
    offset_bytes: float
    max_abs_residual_bytes: float
    points: int

    def as_json(self) -> dict:
        return asdict(self)


def fit_time(samples: list[tuple[dict, float]], variant: str, scope: str = "core", dtype: str = "fp32") -> TimeFit:
    """Fit t_launch, 1/P, 1/W to (sizes, seconds) samples by NNLS on relative residuals."""
    from scipy.optimize import nnls

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
    return TimeFit(*(float(c) for c in coef), len(samples), fit_d, r2, float(np.median(rel)), float(rel.max()))


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
    from attn_cost.costmodel.symbols import BY_NAME

    return float(expr.xreplace({BY_NAME[k]: v for k, v in sizes.items() if k in BY_NAME}))


def corrected_time_curve(fit: TimeFit, variant: str, dims: dict, setting: Setting) -> list[Poly]:
    """The fitted time of a variant as a polynomial in N (exact rational coefficients)."""
    feats = time_features(variant, setting.scope, setting.dtype)
    total = sp.Add(*(sp.Rational(Fraction(c)) * f for c, f in zip(fit.coefficients(), feats, strict=True)))
    return at_sizes((sp.expand(total),), dims, variant)


def corrected_memory_curve(fit: MemoryFit, variant: str, dims: dict, setting: Setting) -> list[Poly]:
    from attn_cost.costmodel.crossover import cost_branches

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

    @property
    def slug(self) -> str:
        from attn_cost.profilers.device import slug

        return slug(self.device)

    def as_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "slug": self.slug,
            "device": self.device,
            "created": self.created or datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "scope": self.scope,
            "dtype": self.dtype,
            "time_model": TIME_MODEL,
            "memory_model": MEMORY_MODEL,
            "time": {k: v.as_json() for k, v in self.time.items()},
            "memory": {k: v.as_json() for k, v in self.memory.items()},
            "measured": self.measured,
            "validation": self.validation,
        }

    @classmethod
    def from_json(cls, data: dict, where: str) -> DeviceProfile:
        try:
            if data.get("schema") != SCHEMA:
                raise KeyError("schema")
            time_fields = {f for f in TimeFit.__dataclass_fields__}
            return cls(
                device=data["device"],
                scope=data["scope"],
                dtype=data["dtype"],
                time={k: TimeFit(**{f: v[f] for f in time_fields}) for k, v in data["time"].items()},
                memory={k: MemoryFit(**v) for k, v in data["memory"].items()},
                measured=list(data.get("measured", [])),
                validation=list(data.get("validation", [])),
                created=data.get("created", ""),
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise UserError(f"{where} is not an attn-cost device profile (missing or bad {e})") from None

    def save(self, root: Path) -> Path:
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{self.slug}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.as_json(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path


def user_profiles_dir() -> Path:
    from attn_cost.profilers.store import default_root

    return default_root().parent / "devices"


def known_profiles() -> dict[str, Path]:
    """Device profiles by name: shipped ones, overridden by the user's own."""
    found: dict[str, Path] = {}
    for root in (SHIPPED, user_profiles_dir()):
        if root.is_dir():
            found.update({p.stem: p for p in sorted(root.glob("*.json"))})
    return found


def load_profile(name: str) -> DeviceProfile:
    """A device profile by name (see `attn-cost devices`) or by path to its JSON file."""
    from attn_cost.costmodel.conventions import unknown

    path = Path(name)
    if not (path.suffix == ".json" and path.exists()):
        profiles = known_profiles()
        if name not in profiles:
            raise UserError(unknown("device", name, profiles or ["(none yet: run `attn-cost validate`)"]))
        path = profiles[name]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path} is not a readable device profile ({e.__class__.__name__})") from None
    return DeviceProfile.from_json(data, str(path))


def add_device_columns(rows: list[dict], name: str) -> None:
    """Add corrected_n0/n1 and measured_n0/n1 of a device profile to crossover table rows."""
    from attn_cost.costmodel.symbols import BY_NAME

    profile = load_profile(name)
    for row in rows:
        row["device"] = profile.slug
        dims = {BY_NAME["d"]: row["d"], BY_NAME["h"]: row["heads"], BY_NAME["b"]: row["batch"]}
        dims.update({BY_NAME[k]: row[k] for k in ("L", "r", "D") if k in row})
        setting = Setting(row["convention"], row["dtype"], row["scope"], row["mode"])
        row.update(corrected_points(profile, row["a"], row["b"], dims, setting))
        row.update(measured_points(profile, row))


def corrected_points(profile: DeviceProfile, a: str, b: str, dims: dict, setting: Setting) -> dict:
    """Corrected N0 and N1 of one pair, None where the profile lacks a fit for either variant."""
    out: dict[str, float | None] = {"corrected_n0": None, "corrected_n1": None}
    if (setting.scope, setting.dtype) != (profile.scope, profile.dtype):
        return out
    if a in profile.time and b in profile.time:
        out["corrected_n0"] = _ceil(
            corrected_n(
                corrected_time_curve(profile.time[a], a, dims, setting),
                corrected_time_curve(profile.time[b], b, dims, setting),
            )
        )
    if a in profile.memory and b in profile.memory:
        out["corrected_n1"] = _ceil(
            corrected_n(
                corrected_memory_curve(profile.memory[a], a, dims, setting),
                corrected_memory_curve(profile.memory[b], b, dims, setting),
            )
        )
    return out


def measured_points(profile: DeviceProfile, row: dict) -> dict:
    for m in profile.measured:
        if (m["a"], m["b"], m["d"], m["heads"], m["batch"]) == (
            row["a"],
            row["b"],
            row["d"],
            row["heads"],
            row["batch"],
        ):
            return {k: m.get(k) for k in ("measured_n0", "n0_uncertainty", "measured_n1", "n1_uncertainty")}
    return {"measured_n0": None, "measured_n1": None}


def _ceil(x: float | None) -> int | None:
    return None if x is None else math.ceil(x - 1e-9)
