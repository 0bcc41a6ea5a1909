"""A variant's formulas as plain data: what `formula --json` prints and the report embeds."""

from __future__ import annotations

import dataclasses

from attn_cost.costmodel import display
from attn_cost.costmodel.conventions import CONVENTIONS, FULL, op_convention
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting
from attn_cost.costmodel.published import compare_published
from attn_cost.costmodel.variants import derive_counted, get_variant


def own_counting(conv, counting: Counting) -> Counting:
    """The counting a convention implies (flash-bench: half, recompute), the other choices kept."""
    implied = getattr(conv, "counting", {})
    return dataclasses.replace(counting, **implied) if implied else counting


def formula_data(
    name: str,
    convention: str,
    dtype: str,
    scope: str = "core",
    mode: str = "inference",
    counting: Counting = DEFAULT_COUNTING,
) -> dict:
    """Everything `formula --json` prints, as plain data."""

    derived = derive_counted(name, scope, mode, counting)
    conv = op_convention(convention)
    copied = display.copied_lengths(*_costs(derived, conv, counting, dtype))
    peak = derived.peak()
    step = peak.dominant_step()
    v = get_variant(name)
    return {
        "variant": name,
        "summary": v.summary,
        "source": v.source,
        "scope": scope,
        "mode": mode,
        "convention": conv.name,
        "counting": counting.as_json(),
        "flops": {c: display.plain(derived.flops(CONVENTIONS[c], counting)) for c in CONVENTIONS},
        "flops_counting": counting.caption(),
        "flops_own_counting": {
            c: {"flops": display.plain(derived.flops(CONVENTIONS[c], own)), "counting": own.as_json()}
            for c in CONVENTIONS
            if (own := own_counting(CONVENTIONS[c], counting)) != counting
        },
        "flops_named": display.plain(derived.flops(conv, None)),
        "factors": {str(k): display.plain(v) for k, v in counting.values().items()},
        "left_out": {
            c: display.plain(derived.left_out(CONVENTIONS[c], counting))
            for c in CONVENTIONS
            if CONVENTIONS[c] is not FULL
        },
        "peak_elements": {
            "max": display.plain(peak.expr),
            "branches": [display.plain(x) for x in peak.branches],
            "large_n": display.plain(peak.dominant) if peak.dominant is not None else None,
            "large_n_step": step.op.index + 1 if step is not None else None,
            "large_n_pass": ("backward" if step.backward else "forward") if step is not None else None,
        },
        "peak_bytes": display.plain(derived.peak(dtype).expr),
        "traffic_bytes": display.plain(derived.traffic(dtype, counting)),
        "dtype": dtype,
        "params": display.plain(derived.params),
        "padded_to": [
            {"multiple": display.plain(m), "meaning": display.step_legend([m], copied)[0]}
            for m in _padded(derived, conv, counting, dtype)
        ],
        "ops": [
            {
                "step": s.op.index + 1,
                "label": s.op.label,
                "kind": s.op.kind,
                "inplace": s.op.inplace,
                "runs": display.plain(s.op.repeat),
                "shape": [display.plain(x) for x in s.op.output.shape],
                "flops": display.plain(conv.op_flops(s.op)),
                "left_out": display.plain(conv.left_out(s.op)),
                "live_elements": display.plain(live),
                "workspace": display.plain(s.op.workspace),
            }
            for s, live in peak.forward()
        ],
        "published": compare_published(name) if (scope, mode) == ("core", "inference") or v.layer else [],
    }


def _costs(derived, conv, counting: Counting, dtype: str) -> tuple:
    """FLOPs, peak bytes, traffic and parameters of a derived variant."""
    return derived.flops(conv, counting), derived.peak(dtype).expr, derived.traffic(dtype, counting), derived.params


def _padded(derived, conv, counting: Counting, dtype: str) -> list:
    """The multiples N is padded to in a variant's costs (none for code that never pads)."""
    return display.padded_lengths(*_costs(derived, conv, counting, dtype))
