"""Does an op cost more inside a longer chain of different ops? Chains of the first k of 24 distinct small ops
(64 × 64, rank 4, as `calibrate` builds them), each timed whole as `validate` times a variant (one settled call
per sample, 21 samples) against the sum of its ops timed alone as `calibrate` times them.

    python benchmarks/bench_chain_length.py
    python benchmarks/bench_chain_length.py --size 32 --rounds 5

Per k: the medians over the rounds of the chain's time, its ops' sum, and the excess per dispatched ATen
kernel. The op model's chain cost is one fixed cost per kernel fitted on chains of eight ops; if the excess per
kernel grows with k, a longer variant (efficient TaylorShift runs 21 kernels) pays more per kernel than that
(code and branch history no longer primed by the same op just before). Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

KINDS = ["scale!", "exp!", "add", "div", "softmax", "l2normalize", "sum-axis2", "matmul-NN",
         "poly2", "elu1", "gelu", "sub", "maximum", "layernorm", "max-axis2", "matmul-NT",
         "copy", "add!", "mul!", "div!", "normalize_rows!", "softmax-axis2", "cumsum!", "matmul-TN"]  # fmt: skip
LENGTHS = (4, 8, 16, 24)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=64, help="rows and columns of every op (default 64)")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    if opts.size < 1 or opts.rounds < 1:
        parser.error("--size and --rounds must be positive")

    from attn_cost.profilers.calibrate import Calibrator, _runner, _s, dispatches
    from attn_cost.profilers.cases import Case, Sizes
    from attn_cost.profilers.device import prepare
    from attn_cost.profilers.store import ResultStore
    from attn_cost.profilers.timing import time_cases

    device = prepare("cpu")
    r = opts.size
    shapes = [_s(k, batch=1, m=r, k=r, n=r) if k.startswith("matmul") else _s(k, rows=r, cols=r) for k in KINDS]
    runners = [_runner(shape, "fp32", "cpu") for shape in shapes]
    print(f"{'ops':>4} {'kernels':>8} {'whole µs':>9} {'ops alone µs':>13} {'excess per kernel µs':>21}")
    for k in LENGTHS:
        parts = runners[:k]
        kernels = sum(dispatches(shape) for shape in shapes[:k])

        def chain(box: list, parts: list = parts) -> None:
            for (run, _), inputs in zip(parts, box, strict=True):
                run(inputs)

        def make(parts: list = parts) -> list:
            return [make_one() for _, make_one in parts]

        case = Case(f"chain of {k}", "op", Sizes(N=r, d=r), "fp32", "cpu", chain, make)
        whole, alone = [], []
        for _ in range(opts.rounds):
            (stats,) = time_cases([case], repeats=21, warmup=2)
            whole.append(stats.median)
            with tempfile.TemporaryDirectory() as root:
                store = ResultStore(device, Path(root), shipped=False)
                calibrator = Calibrator(store, "cpu")
                alone.append(sum(calibrator.point(shape).seconds for shape in shapes[:k]))
                store.close()
        w, a = statistics.median(whole), statistics.median(alone)
        print(f"{k:>4} {kernels:>8} {1e6 * w:>9.1f} {1e6 * a:>13.1f} {1e6 * (w - a) / kernels:>21.2f}")


if __name__ == "__main__":
    main()
