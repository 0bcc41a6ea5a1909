"""One variant timed whole against its ops timed alone, as `calibrate` times them (CPU, core scope).

    python benchmarks/bench_ops_alone.py taylorshift-efficient --d 8 --n 365
    python benchmarks/bench_ops_alone.py latte --d 48 --n 16 --n 24 --n 45 --rounds 5

What the op model cannot see from ops timed alone in tight loops: per length, the variant's median time (as
`validate` times it, one call per sample), the sum of its ops alone, their ratio and each op's time. The
chain cost of the op model (a fixed cost per dispatched kernel and a share) is meant to cover that ratio.
Every round times everything afresh (a temporary store); the figures are the medians over the rounds.
Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variant")
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--n", type=int, action="append", help="sequence lengths (default 256)")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    if opts.d < 1 or opts.rounds < 1 or any(n < 1 for n in opts.n or []):
        parser.error("--d, --n and --rounds must be positive")

    import numpy as np
    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.devicemodel.calibrated.data import kernel_calls
    from attn_cost.profilers.devicemodel.calibrated.fit import Calibrator, runnable, shape_of
    from attn_cost.profilers.devicemodel.device import row_dims
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.profile import Measurer
    from attn_cost.profilers.measure.sizes import Sizes
    from attn_cost.profilers.store.store import ResultStore

    try:
        calls = kernel_calls(opts.variant, "core", "fp32", row_dims({"d": opts.d}))
    except UserError as e:
        parser.error(str(e))
    device = prepare("cpu")
    for n in opts.n or [256]:
        whole, alone, ops = [], [], []
        for _ in range(opts.rounds):
            with tempfile.TemporaryDirectory() as root:
                store = ResultStore(device, Path(root), shipped=False)
                (stats,) = Measurer("cpu", store).time([opts.variant], Sizes(N=n, d=opts.d))
                calibrator = Calibrator(store, "cpu")
                timed = []
                for kernel, feats in calls.at(np.array([float(n)]))[: len(calls.kernels)]:
                    if runnable(kernel):
                        p = calibrator.point(shape_of(kernel, {k: float(v[0]) for k, v in feats.items()}))
                        timed.append((kernel, p.seconds * float(feats["repeat"][0]) if p else float("nan")))
                store.close()
            whole.append(stats.median if stats else float("nan"))
            alone.append(sum(t for _, t in timed))
            ops.append(timed)
        w, a = statistics.median(whole), statistics.median(alone)
        each = ", ".join(f"{k} {1e6 * statistics.median(r[i][1] for r in ops):.1f}" for i, (k, _) in enumerate(ops[0]))
        print(f"N = {n:,}: whole {1e6 * w:.1f} µs, ops alone {1e6 * a:.1f} µs, ratio {w / a:.3f}  ({each})")


if __name__ == "__main__":
    main()
