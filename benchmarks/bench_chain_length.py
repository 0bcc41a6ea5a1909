"""Does an op cost more inside a longer chain of different ops? `calibrate`'s op-sequence points with the first
k of its 24 chain kinds (`calibrate.CHAIN_KINDS`, all r × r), each timed whole and against its ops timed alone,
exactly as the calibration times its chains of 8.

    python benchmarks/bench_chain_length.py
    python benchmarks/bench_chain_length.py --size 16 --rounds 5

Per k: the medians over the rounds of the chain's time, its ops' sum, and the excess per dispatched ATen
kernel. The op model's chain cost is one fixed cost per kernel fitted on chains of eight ops; if the excess per
kernel grows with k, a longer variant (efficient TaylorShift runs 21 kernels) pays more per kernel than that
(code and branch history no longer primed by the same op just before). Every round times afresh (a temporary
store). Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

LENGTHS = (4, 8, 16, 24)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=64, help="rows and columns of every op (default 64)")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    if opts.size < 1 or opts.rounds < 1:
        parser.error("--size and --rounds must be positive")

    from attn_cost.profilers.devicemodel.calibrated.data import SEQUENCE
    from attn_cost.profilers.devicemodel.calibrated.fit import Calibrator, Shape
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.store.store import ResultStore

    device = prepare("cpu")
    print(f"{'ops':>4} {'kernels':>8} {'whole µs':>9} {'ops alone µs':>13} {'excess per kernel µs':>21}")
    for k in LENGTHS:
        shape = Shape(SEQUENCE, (("kinds", k), ("rows", opts.size)))
        points = []
        for _ in range(opts.rounds):
            with tempfile.TemporaryDirectory() as root:
                store = ResultStore(device, Path(root), shipped=False)
                points.append(Calibrator(store, "cpu").point(shape))
                store.close()
        kernels = points[0].dims["dispatches"]
        w = statistics.median(p.seconds for p in points)
        a = statistics.median(p.dims["isolated_s"] for p in points)
        print(f"{k:>4} {kernels:>8.0f} {1e6 * w:>9.1f} {1e6 * a:>13.1f} {1e6 * (w - a) / kernels:>21.2f}")


if __name__ == "__main__":
    main()
