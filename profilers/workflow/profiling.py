"""Profiling pairs: where B overtakes A in time (N0) and in peak memory (N1), measured from the analytic prediction
(`measure.profile.profile_pair`), at each head dim; `attn-cost profile` and the campaign's units call `profile`.
`sweep`: the time and peak memory of variants at given lengths, beside the model's (`attn-cost measure`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.variants import derive
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.workflow.measuring import longest

if TYPE_CHECKING:  # torch at the top of the module: imported where a pair is profiled
    from attn_cost.profilers.measure.profile import Measurer, PairProfile


@dataclass
class Profiled:
    """Measured transition points of each pair at each head dim, in the order asked, and the longest length tried."""

    pairs: list[PairProfile]
    n_max: int

    def rows(self) -> list[dict]:
        """Each pair's JSON row (`PairProfile.as_json`)."""
        return [p.as_json() for p in self.pairs]


def profile(
    measurer: Measurer,
    pairs: list[tuple[str, str]],
    ds: list[int],
    template: Sizes,
    setting: Setting,
    *,
    costs: tuple[str, ...] = ("time", "memory"),
    max_lengths: int = 15,
    n_max: int | None = None,
    reach: int | None = None,
    replicates: int = 4,
) -> Profiled:
    """Every pair at every head dim (the other sizes from `template`), pair by pair: the crossovers measured through
    the measurer's store (a rerun reuses every stored length). `n_max`: the longest length (default per device,
    `longest`); `reach`: the longest the speed search may time (a campaign's plan), `replicates`: re-timings of a
    found crossover's bracket (`profile_pair`)."""
    from attn_cost.profilers.measure.profile import profile_pair

    top = longest(measurer.device, n_max)
    found = []
    for a, b in pairs:
        for dv in ds:
            sizes = replace(template, N=1, d=dv)
            found.append(profile_pair(a, b, sizes, measurer, setting, costs=costs, max_lengths=max_lengths,
                                      n_max=top, reach=reach, replicates=replicates))  # fmt: skip
    return Profiled(found, top)


def sweep(measurer: Measurer, names: list[str], lengths: list[int], ds: list[int], template: Sizes) -> list[dict]:
    """Time and peak memory of each variant at each head dim and length (the other sizes from `template`), through
    the measurer's store, each beside the modelled peak and the matmul FLOPs at the measurer's scope and dtype."""
    rows = []
    for dv in ds:
        for length in lengths:
            sizes = replace(template, N=length, d=dv)
            times = measurer.time(names, sizes)
            for name, t in zip(names, times, strict=True):
                derived = derive(name, measurer.scope)
                syms = sizes.symbols()
                rows.append(
                    {
                        "variant": name,
                        **sizes.as_dict(),
                        "seconds": t.median if t else None,
                        "seconds_iqr": t.iqr if t else None,
                        "peak_bytes": measurer.memory(name, sizes),
                        "predicted_peak_bytes": int(derived.peak(measurer.dtype).at(syms)[0]),
                        "flops_matmul": int(derived.flops(MATMUL).xreplace(syms)),
                    }
                )
    return rows
