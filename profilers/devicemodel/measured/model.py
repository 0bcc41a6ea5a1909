"""The measured kind's model: a device profile's fitted time and memory of each variant (`ProfileDevice`), the
corrected crossing points they give, and a measured device (`MeasuredDevice`, in `kinds`' registry: its profile,
and its op calibration for what the profile did not fit). The fit is `measured.fit`, the profile files
`measured.data`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np
import sympy as sp
from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting
from attn_cost.costmodel.crossover import (
    Poly,
    Setting,
    at_sizes,
    cost_branches,
)
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import BY_NAME, DEFAULTS
from attn_cost.costmodel.variants import derive
from attn_cost.profilers.devicemodel.calibrated.data import opmodel_for
from attn_cost.profilers.devicemodel.calibrated.forms import MAD_TO_SIGMA
from attn_cost.profilers.devicemodel.calibrated.model import CalibratedDevice
from attn_cost.profilers.devicemodel.device import (
    MEASURED,
    Z95,
    DeviceModel,
    Draws,
    KernelTime,
    Times,
    at_lengths,
    crossing,
)
from attn_cost.profilers.devicemodel.measured.data import DeviceProfile, MemoryFit, TimeFit, load_profile, measured_here

PERFORMED = Counting(causal="tiles")
"""How the time fit counts a fused causal kernel's FLOPs: by the T×T tiles it computes on and below the diagonal
(`--causal-count tiles`, the engine's T = 128, FlashAttention's and cuDNN's block on sm80/sm90), not the whole
score matrix; a materialised causal softmax multiplies the whole N×N matrix before masking it, so its products
stay dense. A fit of a fused causal kernel on the dense count would rate it at twice the speed it runs."""


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


def value_at(expr: sp.Expr, sizes: dict) -> float:
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


@dataclass
class MeasuredDevice(DeviceModel):
    """A measured device: its profile answers for the variants it fitted, at the setting it was measured at; its op
    calibration, where it has one, for the others (`answering`)."""

    kind: ClassVar[str] = MEASURED

    profile: ProfileDevice
    calibration: CalibratedDevice | None

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
        fitted = ", ".join(sorted(self.profile.profile.time)) or "none"
        if self.calibration is None:
            return f"{self.profile.answered_by}; it fitted {fitted}, and the device has no op calibration"
        return (f"{self.profile.answered_by}, for the variants it fitted ({fitted}); for the others, "
                f"{self.calibration.answered_by}")  # fmt: skip

    def answering(self, variant: str, setting: Setting, cost: str = "time") -> DeviceModel:
        """The profile where it answers for `variant` at `setting`, else the op calibration; one line saying why
        neither does."""
        reasons = []
        for model in (self.profile, self.calibration):
            if model is None:
                continue
            why = model.applies(variant, setting, cost)
            if why is None:
                return model
            reasons.append(why)
        if self.calibration is None:
            reasons.append(f"{self.slug} has no op calibration (`attn-cost calibrate` makes one)")
        raise UserError("; ".join(reasons))

    def applies(self, variant: str, setting: Setting, cost: str = "time") -> str | None:
        try:
            self.answering(variant, setting, cost)
        except UserError as e:
            return str(e)
        return None

    def seconds(
        self, variant: str, dims: dict, ns: np.ndarray, setting: Setting, replicates: int | None = None
    ) -> Times:
        return self.answering(variant, setting).seconds(variant, dims, ns, setting, replicates)

    def peak_bytes(self, variant: str, dims: dict, ns: np.ndarray, setting: Setting) -> np.ndarray:
        return self.profile.peak_bytes(variant, dims, ns, setting)

    def kernel_times(self, variant: str, dims: dict, ns: np.ndarray, setting: Setting) -> list[KernelTime] | None:
        return self.answering(variant, setting).kernel_times(variant, dims, ns, setting)

    def draws(self, a: str, b: str, dims: dict, setting: Setting, replicates: int | None = None) -> Draws:
        """The curves of the model that answers for both variants, the profile first (one model prices both sides
        of a crossing)."""
        for model in (self.profile, self.calibration):
            if model is not None and all(model.applies(v, setting) is None for v in (a, b)):
                return model.draws(a, b, dims, setting, replicates)
        raise UserError(f"{self.name}: no one model of the device answers for both {a} and {b} at this setting")

    def memory_curves(self, variant: str, dims: dict, setting: Setting) -> list:
        return self.profile.memory_curves(variant, dims, setting)


def measured_device(profile: DeviceProfile) -> MeasuredDevice:
    """The measured device of a profile: the profile, and the device's op calibration where it has one."""
    opmodel = opmodel_for(profile.slug)
    return MeasuredDevice(ProfileDevice(profile), CalibratedDevice(opmodel) if opmodel is not None else None)


def load_measured(name: str) -> MeasuredDevice:
    """The measured device a profile's name (or its JSON's path) means."""
    return measured_device(load_profile(name))
