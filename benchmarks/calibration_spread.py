"""How far the same shape's timing moves from one op calibration to the next (same machine, same code).

    python benchmarks/calibration_spread.py benchmarks/data/calibrations/two-pass-*.json.gz \
        profilers/data/opmodels/cpu-amd-epyc-5155e7.json
    python benchmarks/calibration_spread.py benchmarks/data/calibrations/*.json.gz --top 10

For every shape timed in every calibration given (grid and exact shapes alike), the ratio of its slowest
timing to its fastest; per group (products and SDPA; other kernels whose bytes fit the last-level cache;
other kernels beyond it) how many shapes, and the median and 90th percentile of that ratio; then the shapes
that moved most. No model is fitted: this is the noise a calibration carries into the op model, the floor
under its error on a machine whose speed drifts between calibrations.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

GROUPS = ("products", "in cache", "beyond cache")


def read(path: Path) -> dict:
    """A calibration (`attn-cost calibrate` output), plain or gzipped; UserError if it is not one."""
    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.devicemodel.calibrated.data import read_calibration

    data = read_calibration(path)
    if data.get("kind") != "attn-cost op model" or not isinstance(data.get("points"), list):
        raise UserError(f"{path} is not an attn-cost op calibration")
    return data


def group(kernel: str, nbytes: float, llc: float) -> str:
    if kernel.startswith(("matmul", "sdpa")):
        return "products"
    return "in cache" if nbytes <= llc else "beyond cache"


def spread(calibrations: list[dict]) -> list[tuple[str, str, float]]:
    """(group, shape, slowest / fastest) of every shape timed in every calibration."""
    llc = max((calibrations[0].get("caches") or {"": float("inf")}).values())
    seconds: dict[tuple[str, str], list[float]] = {}
    for data in calibrations:
        mine: dict[tuple[str, str], float] = {}
        for p in data["points"]:
            mine[(p["kernel"], json.dumps(p["dims"], sort_keys=True))] = float(p["seconds"])
        for key, t in mine.items():
            seconds.setdefault(key, []).append(t)
    return [
        (group(kernel, json.loads(dims)["bytes"], llc), f"{kernel} {dims}", max(ts) / min(ts))
        for (kernel, dims), ts in seconds.items()
        if len(ts) == len(calibrations)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("calibration", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=5, help="how many of the shapes that moved most to list")
    opts = parser.parse_args()
    if len(opts.calibration) < 2 or opts.top < 0:
        parser.error("give at least two calibrations, and a --top of 0 or more")
    from attn_cost.costmodel.errors import UserError

    try:
        calibrations = [read(path) for path in opts.calibration]
    except UserError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    rows = spread(calibrations)
    print(f"{len(calibrations)} calibrations, {len(rows)} shapes timed in every one; slowest / fastest:")
    print(f"{'group':<14}{'shapes':>8}{'median':>9}{'90th pct':>10}")
    for name in GROUPS:
        ratios = sorted(r for g, _, r in rows if g == name)
        if ratios:
            p90 = ratios[min(len(ratios) - 1, int(0.9 * len(ratios)))]
            print(f"{name:<14}{len(ratios):>8}{statistics.median(ratios):>9.2f}{p90:>10.2f}")
    for g, shape, r in sorted(rows, key=lambda row: -row[2])[: opts.top]:
        print(f"{r:5.2f}×  {g:<13} {shape}")


if __name__ == "__main__":
    main()
