"""Per-device corrections: fit measured time and memory from the engine's derived quantities.

Time model, per variant (bounded least squares on relative error, scipy's lsq_linear):

    t(N, d, ...) = t_launch · K  +  F / P  +  B / W

K is the number of kernels one call launches (ops × loop repeats), F the matrix-product FLOPs its
kernels perform (the `matmul` convention; a fused causal kernel counted by the tiles it computes,
`PERFORMED`) and B its unfused memory traffic in bytes: all three come from the op list. The
constants mean something: t_launch is the fixed cost of one kernel (dispatch, Python, a CUDA
launch), P the effective FLOP rate of its products, W its effective bandwidth. A constant fitted to
zero means the variant never spent measurable time on that resource. Where the device's datasheet
is known (`datasheet.for_device`), P is bounded by its peak for the dtype (TF32's for fp32 where
TF32 was on): the fit never rates a kernel faster than the device can run, and the profile says
when that bound was active.

Memory model, per variant: measured = Σ scale_k · term_k + offset, one scale per term of the
modelled peak (`memory_terms`). A term the kernel does not allocate (the fp32 row statistics a
fused kernel keeps only for a backward pass) fits to scale 0 and the others stay 1; a scale the
measurements cannot tell apart from another's (one head dim) stays 1. The CPU tracer measures what
the model counts: every scale 1 and the offset 0.

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
from typing import ClassVar, Literal

import numpy as np
import sympy as sp
from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting
from attn_cost.costmodel.crossover import (
    Poly,
    ProfileColumns,
    Setting,
    TransitionRow,
    at_sizes,
    cost_branches,
)
from attn_cost.costmodel.dtypes import DTYPE_BYTES
from attn_cost.costmodel.errors import UserError, unknown
from attn_cost.costmodel.scopes import MODES, SCOPES
from attn_cost.costmodel.symbols import BY_NAME, DEFAULTS
from attn_cost.costmodel.variants import derive
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.calibrated.forms import MAD_TO_SIGMA
from attn_cost.profilers.devicemodel.datasheet.data import for_device
from attn_cost.profilers.devicemodel.device import (
    MEASURED,
    Z95,
    DeviceModel,
    Draws,
    Times,
    at_lengths,
    crossing,
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
PERFORMED = Counting(causal="tiles")
"""How the time fit counts a fused causal kernel's FLOPs: by the T×T tiles it computes on and below the diagonal
(`--causal-count tiles`, the engine's T = 128, FlashAttention's and cuDNN's block on sm80/sm90), not the whole
score matrix; a materialised causal softmax multiplies the whole N×N matrix before masking it, so its products
stay dense. A fit of a fused causal kernel on the dense count would rate it at twice the speed it runs."""
MIN_POINTS = 4
VALIDATION_COLUMNS = (
    "A", "B", "d", "N0 analytic", "N0 fit", "N0 op model", "N0 measured", "N1 analytic", "N1 corrected",
    "N1 measured",
)  # fmt: skip
"""Columns of a predicted-against-measured table, in the terminal and in the report."""


def profile_name(device_slug: str, dtype: str) -> str:
    """A device profile's name in one dtype (`crossover --device NAME`, its file's stem): fp32's is the bare slug."""
    return device_slug if dtype == "fp32" else f"{device_slug}-{dtype}"


def time_features(variant: str, scope: str, dtype: str, flops: str = "performed") -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """(K, F, B) of one call as expressions in the sizes. `flops`: "performed" counts what the kernels compute
    (`PERFORMED` for a fused causal kernel), "dense" every score (how profiles before it were fitted)."""
    derived = derive(variant, scope)
    kernels = sp.expand(sum((op.repeat for op in derived.ops), sp.Integer(0)))
    if flops == "dense":
        return kernels, derived.flops(MATMUL), derived.traffic(dtype)
    performed = sp.Add(
        *(derived.op_flops(op, MATMUL, PERFORMED if op.kind == "fused_attention" else DEFAULT_COUNTING)
          for op in derived.ops)
    )  # fmt: skip
    return kernels, sp.expand(performed), derived.traffic(dtype)


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
        scaled = (sp.Rational(Fraction(self.terms.get(str(m), 1.0))) * c * m for m, c in _monomials(branch))
        return sp.expand(sp.Add(*scaled) + offset)


def fit_time(
    samples: list[tuple[dict, float]], variant: str, scope: str = "core", dtype: str = "fp32", peak: Peak | None = None
) -> TimeFit:
    """Fit t_launch, 1/P, 1/W to (sizes, seconds) samples by bounded least squares on relative residuals
    (`scipy.optimize.lsq_linear`): every constant at least 0, and 1/P at least 1/peak where the device's `peak`
    is known, so no fitted rate exceeds what the device can do; the profile says whether that bound was active."""
    from scipy.optimize import lsq_linear  # scipy fits and finds roots, never loaded by `crossover` alone

    if len(samples) < MIN_POINTS:
        raise UserError(f"need at least {MIN_POINTS} timings of {variant} to fit 3 constants; have {len(samples)}")
    feats = time_features(variant, scope, dtype)
    x = np.array([[_value(f, sizes) for f in feats] for sizes, _ in samples])
    y = np.array([t for _, t in samples])
    if np.any(y <= 0):
        raise UserError(f"timings of {variant} must be positive")
    w = 1 / y
    lower = np.array([0.0, 1 / peak.flops_per_s if peak else 0.0, 0.0])
    fit = lsq_linear(x * w[:, None], y * w, bounds=(lower, np.full(3, np.inf)), method="bvls", tol=1e-12)
    coef = np.maximum(fit.x, lower)
    free = lower == 0  # a term worth less than a nanosecond's share is no term (a bounded one keeps its bound)
    coef[free & ((x * coef).max(axis=0) < 1e-9 * y.min())] = 0.0
    pred = x @ coef
    rel = np.abs(pred - y) / y
    spread = float(np.sum((y - y.mean()) ** 2))
    r2 = 1 - float(np.sum((y - pred) ** 2)) / spread if spread > 0 else 1.0
    fit_d = sorted({int(s["d"]) for s, _ in samples})
    launch, per_flop, per_byte = (float(c) for c in coef)
    at_peak = peak is not None and bool(fit.active_mask[1] == -1 or per_flop <= lower[1] * (1 + 1e-9))
    return TimeFit(
        launch, per_flop, per_byte, len(samples), fit_d, r2, float(np.median(rel)), float(rel.max()),
        flops="performed", peak_flops_per_s=peak.flops_per_s if peak else None,
        peak_source=peak.source if peak else "", bound_active=at_peak,
    )  # fmt: skip


def memory_terms(variant: str, scope: str, dtype: str) -> tuple[sp.Expr, ...]:
    """The branches of a variant's modelled peak in bytes (the peak is their maximum)."""
    return tuple(derive(variant, scope).peak(dtype).branches)


def _monomials(expr: sp.Expr) -> list[tuple[sp.Expr, sp.Expr]]:
    """(monomial in the sizes, its coefficient) of a polynomial."""
    out = []
    for term in sp.Add.make_args(sp.expand(expr)):
        coeff, monomial = term.as_coeff_Mul()
        out.append((monomial, coeff))
    return out


MEMORY_PRIOR = 1e-12
"""Weight that pulls each term's scale towards 1 (as a ridge): a direction the measurements pin (a term of another
shape in N and d than the rest) is fitted; one they cannot tell apart (two terms in a fixed ratio at every size
measured) stays at 1, the model's own count."""


def fit_memory(samples: list[tuple[dict, int]], variant: str, scope: str = "core", dtype: str = "fp32") -> MemoryFit:
    """Each term's scale of the modelled peak and an offset, from (sizes, measured bytes): least squares on relative
    residuals with every scale >= 0 and a weak pull to 1 (`MEMORY_PRIOR`). At each size the branch of the peak that
    the model takes there (the largest) is the one the measurement is compared with."""
    from scipy.optimize import lsq_linear

    if len(samples) < 2:
        raise UserError(f"need at least 2 memory measurements to fit a scale and an offset; have {len(samples)}")
    branches = memory_terms(variant, scope, dtype)
    names = sorted({str(m) for e in branches for m, _ in _monomials(e) if m != 1})
    rows, y = [], []
    for sizes, measured in samples:
        values = [_value(e, sizes) for e in branches]
        active = branches[int(np.argmax(values))]
        row = dict.fromkeys(names, 0.0)
        constant = 0.0
        for m, c in _monomials(active):
            if m == 1:
                constant += float(c)
            else:
                row[str(m)] += float(c) * _value(m, sizes)
        rows.append([*(row[n] for n in names), 1.0])
        y.append(float(measured) - constant)
    x, target = np.array(rows), np.array(y)
    scale_y = np.abs(np.array([float(m) for _, m in samples])) + 1.0
    w = 1 / scale_y
    prior = np.sqrt(MEMORY_PRIOR) * np.eye(len(names), len(names) + 1)
    a = np.vstack([x * w[:, None], prior])
    b = np.concatenate([target * w, np.sqrt(MEMORY_PRIOR) * np.ones(len(names))])
    lower = np.array([0.0] * len(names) + [-np.inf])
    fit = lsq_linear(a, b, bounds=(lower, np.full(len(names) + 1, np.inf)), method="bvls", tol=1e-15)
    scales = [_tidy(v, 1.0) for v in fit.x[:-1]]
    offset = _tidy(float(fit.x[-1]), 0.0, 0.5)
    terms = dict(zip(names, scales, strict=True))
    result = MemoryFit(1.0, offset, 0.0, len(samples), terms)
    result.max_abs_residual_bytes = max(abs(_value(_peak_of(result, branches, s), s) - m) for s, m in samples)
    return result


def _peak_of(fit: MemoryFit, branches: tuple[sp.Expr, ...], sizes: dict) -> sp.Expr:
    """The corrected branch that the model takes at these sizes."""
    return fit.corrected(max(branches, key=lambda e: _value(e, sizes)))


def _tidy(value: float, exact: float, tol: float = 1e-6) -> float:
    """A fitted value within `tol` of the model's own (1 for a scale, 0 for an offset) is that value."""
    return exact if abs(value - exact) < tol else float(value)


def _value(expr: sp.Expr, sizes: dict) -> float:
    """An expression at sizes keyed by name; a variant-specific size not given (Performer's m, a window w) takes
    its default, as the measurement that `sizes` describes did."""

    values = {**DEFAULTS, **{BY_NAME[k]: v for k, v in sizes.items() if k in BY_NAME}}
    return float(expr.xreplace(values))


def corrected_time_curve(fit: TimeFit, variant: str, dims: dict, setting: Setting) -> list[Poly]:
    """The fitted time of a variant as a polynomial in N (exact rational coefficients)."""
    feats = time_features(variant, setting.scope, setting.dtype, fit.flops)
    total = sp.Add(*(sp.Rational(Fraction(c)) * f for c, f in zip(fit.coefficients(), feats, strict=True)))
    return at_sizes((sp.expand(total),), dims, variant)


def corrected_memory_curve(fit: MemoryFit, variant: str, dims: dict, setting: Setting) -> list[Poly]:

    branches = tuple(fit.corrected(e) for e in cost_branches(variant, "memory", setting))
    return at_sizes(branches, dims, variant)


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


def corrected_points(
    profile: DeviceProfile, a: str, b: str, dims: dict, setting: Setting
) -> tuple[int | None, int | None]:
    """Corrected N0 and N1 of one pair (`ProfileDevice`'s exact crossings of its fitted time and memory), None where
    the profile lacks a fit for either variant or was measured at another setting."""
    model = ProfileDevice(profile)
    n0, n1 = (
        crossing(model, a, b, dims, setting, cost=cost).n0
        if all(model.applies(v, setting, cost) is None for v in (a, b))
        else None
        for cost in ("time", "memory")
    )
    return n0, n1


@dataclass
class ProfileDevice(DeviceModel):
    """A device profile as a device model: each variant it fitted priced by its own constants, t = t_launch·K +
    F/P + B/W, and its peak memory by the fitted scales of the modelled peak's terms; exact polynomials in N, so
    crossings are exact. It answers for the variants it fitted, at the setting it was measured at."""

    kind: ClassVar[str] = MEASURED
    label: ClassVar[str] = "profile"

    profile: DeviceProfile

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def slug(self) -> str:
        return self.profile.slug

    @property
    def dtype(self) -> str:
        return self.profile.dtype

    @property
    def answered_by(self) -> str:
        return (
            f"fitted to the device's own timings of each variant (the device profile {self.profile.name}: t = "
            "t_launch·K + F/P + B/W; the interval: the fit's spread on its points), peak memory the modelled peak "
            "with its fitted scales"
        )

    def applies(self, variant: str, setting: Setting, cost: str = "time") -> str | None:
        p = self.profile
        if not measured_here(p, setting):
            return (f"{p.name} was measured at {p.scope} scope, {p.dtype}, {p.mode}, with each variant's own keys and "
                    f"biases: it has no fit at {setting.scope} scope, {setting.dtype}, {setting.mode}")  # fmt: skip
        fits = p.time if cost == "time" else p.memory
        if variant not in fits:
            return f"{p.name} has no {cost} fit of {variant} (it fitted {', '.join(sorted(fits)) or 'none'})"
        return None

    def _setting(self, setting: Setting) -> Setting:
        """The fits' curves: counted by default (the counting options change how FLOPs are counted, not what was
        timed)."""
        return Setting(setting.convention, setting.dtype, setting.scope, setting.mode)

    def seconds(
        self, variant: str, dims: dict, ns: np.ndarray, setting: Setting, replicates: int | None = None
    ) -> Times:
        """The fitted time, with ×/÷ e^(1.96σ): σ the fit's median |relative error| on its own points as a robust
        spread (MAD_TO_SIGMA ×), in-sample and so at the low end of what it misses elsewhere."""
        self.check(variant, setting)
        fit = self.profile.time[variant]
        t = at_lengths(corrected_time_curve(fit, variant, dims, self._setting(setting)), ns)
        spread = math.exp(Z95 * MAD_TO_SIGMA * fit.median_rel_err)
        return Times(t, t / spread, t * spread)

    def peak_bytes(self, variant: str, dims: dict, ns: np.ndarray, setting: Setting) -> np.ndarray:
        """The fitted peak where the profile has a memory fit of the variant at this setting, else the engine's."""
        if self.applies(variant, setting, "memory") is not None:
            return super().peak_bytes(variant, dims, ns, setting)
        return at_lengths(self.memory_curves(variant, dims, setting), ns)

    def draws(self, a: str, b: str, dims: dict, setting: Setting, replicates: int | None = None) -> Draws:
        s = self._setting(setting)
        curves = [corrected_time_curve(self.profile.time[v], v, dims, s) for v in (a, b)]
        return Draws(exact=(curves[0], curves[1]))

    def memory_curves(self, variant: str, dims: dict, setting: Setting) -> list[Poly]:
        if self.applies(variant, setting, "memory") is not None:
            return super().memory_curves(variant, dims, setting)
        return corrected_memory_curve(self.profile.memory[variant], variant, dims, self._setting(setting))


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
