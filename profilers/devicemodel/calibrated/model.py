"""The op model as a device model (`CalibratedDevice`): a variant's predicted time at concrete sizes, with a
bootstrap interval, and the curves `device.crossing` crosses (numpy at import, scipy to refit the replicates:
`crossover --device` uses it without torch)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from attn_cost.costmodel.crossover import Setting
from attn_cost.profilers.devicemodel.calibrated.data import BOOTSTRAP, OpModel, pricing
from attn_cost.profilers.devicemodel.device import CALIBRATED, Curve, DeviceModel, Draws, KernelTime, Times, row_dims
from attn_cost.profilers.devicemodel.kernels import family_of
from attn_cost.profilers.devicemodel.opcalls import KernelCalls, kernel_calls


@dataclass
class CalibratedDevice(DeviceModel):
    """The op model of a device as a device model: its kernels timed alone (`attn-cost calibrate`), a variant's
    time the sum of its kernel calls, zero-shot (it never saw a timing of a whole variant); intervals from
    bootstrap replicates of the calibration. It prices inference in the dtype it was calibrated in."""

    kind: ClassVar[str] = CALIBRATED

    model: OpModel
    seed: int = 0
    """Of the bootstrap's random draws."""

    @property
    def name(self) -> str:
        return self.model.slug

    @property
    def dtype(self) -> str:
        return self.model.dtype

    @property
    def answered_by(self) -> str:
        return (
            f"predicted from the op calibration of {self.model.slug}: its kernels timed alone, zero-shot (no timing "
            f"of a whole variant; the interval from {BOOTSTRAP} bootstrap replicates of the calibration)"
        )

    def applies(self, variant: str, setting: Setting, cost: str = "time") -> str | None:
        if cost == "memory":
            return None  # the engine's peak
        if setting.mode != "inference":
            return f"the op calibration of {self.model.slug} prices inference only, not {setting.mode}"
        if setting.dtype != self.model.dtype:
            return f"the op calibration of {self.model.slug} was made in {self.model.dtype}, not {setting.dtype}"
        return None

    def calls(self, variant: str, dims: dict, setting: Setting) -> KernelCalls:
        return kernel_calls(variant, setting.scope, self.model.dtype, dims, setting.counting)

    def seconds(
        self, variant: str, dims: dict, ns: np.ndarray, setting: Setting, replicates: int | None = None
    ) -> Times:
        """Predicted seconds, with the 2.5-97.5 % range of the same variant's time over bootstrap replicates."""
        self.check(variant, setting)
        calls = self.calls(variant, dims, setting)
        ns = np.atleast_1d(np.asarray(ns, dtype=float))
        t = self.model.time(calls, ns)
        drawn = [m.time(calls, ns) for m in self._replicates([calls], replicates)]
        if not drawn:
            return Times(t, t, t)
        return Times(t, np.percentile(drawn, 2.5, axis=0), np.percentile(drawn, 97.5, axis=0))

    def kernel_times(self, variant: str, dims: dict, ns: np.ndarray, setting: Setting) -> list[KernelTime]:
        self.check(variant, setting)
        ns = np.atleast_1d(np.asarray(ns, dtype=float))
        times = self.model.op_times(self.calls(variant, dims, setting), ns)
        return [KernelTime(kernel, family_of(kernel).name, f["repeat"], seconds) for kernel, f, seconds in times]

    def draws(self, a: str, b: str, dims: dict, setting: Setting, replicates: int | None = None) -> Draws:
        """A's and B's predicted times, and both drawn from each bootstrap replicate together (kernels they share
        drawn once): the replicates' crossings are the interval, their spread of tB/tA the tie interval."""
        ca, cb = self.calls(a, dims, setting), self.calls(b, dims, setting)

        def pair(m: OpModel) -> tuple[Curve, Curve]:
            return (lambda n: m.time(ca, n)), (lambda n: m.time(cb, n))

        def extrapolated(xs: np.ndarray) -> tuple[str, ...]:
            return tuple(dict.fromkeys(self.model.extrapolated(ca, xs) + self.model.extrapolated(cb, xs)))

        fa, fb = pair(self.model)
        replicas = (pair(m) for m in self._replicates([ca, cb], replicates))
        return Draws(fa, fb, replicas, sampled=True, extrapolated=extrapolated)

    def _replicates(self, calls: list[KernelCalls], replicates: int | None) -> Iterator[OpModel]:
        """Bootstrap replicates of the calibration, each refitted on a resample of the points of the kernels and
        lines these calls use (`OpModel.resample`), one after another from one seeded generator."""
        used = {name for c in calls for k in c.kernels for name in pricing(k)}
        lines = {line for c in calls for line in c.lines}
        rng = np.random.default_rng(self.seed)
        for _ in range(BOOTSTRAP if replicates is None else replicates):
            yield self.model.resample(rng, used, lines)


def predicted_seconds(
    model: OpModel, variant: str, sizes: dict[str, int], scope: str = "core", dtype: str = "fp32"
) -> float:
    """Predicted seconds of one call of a variant at concrete sizes (keyed by name: N, d, h, b, L, ...); a size
    not given (GQA's h_kv, a window w) takes its default (`row_dims`), as the measurement did."""
    calls = kernel_calls(variant, scope, dtype, row_dims(sizes))
    return float(model.time(calls, np.array([float(sizes["N"])]))[0])
