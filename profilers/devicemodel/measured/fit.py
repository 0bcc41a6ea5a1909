"""The measured kind's fit (offline: `validate` and the tests import it, never a prediction): a device profile's
time and memory of each variant fitted to its measurements, from the engine's derived quantities.

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
"""

from __future__ import annotations

import numpy as np
import sympy as sp
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.variants import derive
from attn_cost.profilers.devicemodel.measured.data import MemoryFit, Peak, TimeFit, monomials
from attn_cost.profilers.devicemodel.measured.model import time_features, value_at

MIN_POINTS = 4


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
    x = np.array([[value_at(f, sizes) for f in feats] for sizes, _ in samples])
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
    names = sorted({str(m) for e in branches for m, _ in monomials(e) if m != 1})
    rows, y = [], []
    for sizes, measured in samples:
        values = [value_at(e, sizes) for e in branches]
        active = branches[int(np.argmax(values))]
        row = dict.fromkeys(names, 0.0)
        constant = 0.0
        for m, c in monomials(active):
            if m == 1:
                constant += float(c)
            else:
                row[str(m)] += float(c) * value_at(m, sizes)
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
    result.max_abs_residual_bytes = max(abs(value_at(_peak_of(result, branches, s), s) - m) for s, m in samples)
    return result


def _peak_of(fit: MemoryFit, branches: tuple[sp.Expr, ...], sizes: dict) -> sp.Expr:
    """The corrected branch that the model takes at these sizes."""
    return fit.corrected(max(branches, key=lambda e: value_at(e, sizes)))


def _tidy(value: float, exact: float, tol: float = 1e-6) -> float:
    """A fitted value within `tol` of the model's own (1 for a scale, 0 for an offset) is that value."""
    return exact if abs(value - exact) < tol else float(value)
