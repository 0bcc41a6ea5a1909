"""What a short CPU call pays for what came just before it: a variant timed as `profile` times it (one call
per sample, straight after the disturbance detector's reads of /proc) against the same with an untimed call
of the variant between the reads and the timed call (`timing.time_cases`, `settle_s`).

    python benchmarks/bench_settle.py
    python benchmarks/bench_settle.py --case softmax:8:23 --case taylorshift-efficient:8:365 --rounds 5

Per case (variant:d:N, core scope, fp32): the median over the rounds of each way's median of 21 calls, and
their difference. The two ways alternate round by round, so drift hits both alike. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics

DEFAULT = ["softmax:8:23", "softmax:8:181", "latte:48:24", "taylorshift-direct:8:128", "taylorshift-direct:8:365",
           "taylorshift-efficient:8:128", "taylorshift-efficient:8:365"]  # fmt: skip


def _case(text: str) -> tuple[str, int, int]:
    variant, d, n = text.rsplit(":", 2)
    if not (d.isdigit() and n.isdigit()) or int(d) < 1 or int(n) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not VARIANT:D:N with positive D and N")
    return variant, int(d), int(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", type=_case, action="append", help="VARIANT:D:N (default: seven small cases)")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    if opts.rounds < 1:
        parser.error("--rounds must be positive")

    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.measure.cases import build_case
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.sizes import Sizes
    from attn_cost.profilers.measure.timing import SETTLE_S, time_cases

    prepare("cpu")  # the allocator settings `profile` measures with
    print(f"{'case':<32} {'straight µs':>12} {'settled µs':>11} {'difference':>11}")
    for variant, d, n in opts.case or [_case(c) for c in DEFAULT]:
        try:
            case = build_case(variant, "core", Sizes(N=n, d=d))
        except UserError as e:
            parser.error(str(e))
        ways: dict[float, list[float]] = {0.0: [], SETTLE_S: []}
        for _ in range(opts.rounds):
            for settle_s, medians in ways.items():
                (stats,) = time_cases([case], repeats=21, warmup=2, settle_s=settle_s)
                medians.append(stats.median)
        straight, settled = (1e6 * statistics.median(ways[k]) for k in (0.0, SETTLE_S))
        print(f"{f'{variant} d={d} N={n}':<32} {straight:>12.1f} {settled:>11.1f} {straight - settled:>+11.1f}")


if __name__ == "__main__":
    main()
