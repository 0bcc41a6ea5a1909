"""Refit and re-judge each shipped GPU profile from its shipped records and the campaign summaries kept beside them,
timing nothing: what `attn-cost validate --records FILE --summary ...` does, written where attn-cost ships profiles.

    python benchmarks/gpu_reread.py            # every kept GPU campaign (benchmarks/data/gpu-*)
    python benchmarks/gpu_reread.py --dry-run  # print the commands and each profile's tally; write nothing

For each campaign folder and dtype: the pairs and head dims are its plans' (fitted on the plan's fit_d, checked on
the others), the records are profilers/data/results/<device>.jsonl, and the profile says the command that makes it
(its `made` field). Its rows are every unit the campaign measured to an end, each judged by the rules of
profilers/measure/standing.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAMPAIGNS = sorted(p for p in (ROOT / "benchmarks/data").glob("gpu-*") if p.is_dir())


def plan_of(summaries: list[Path]) -> dict:
    """The union of the campaign calls' plans: pairs, head dims, fit head dims, dtypes, batch and heads."""
    plans = [json.loads(p.read_text(encoding="utf-8"))["plan"] for p in summaries]
    pairs = list(dict.fromkeys(tuple(pair) for plan in plans for pair in plan["pairs"]))
    return {
        "pairs": pairs,
        "ds": sorted({d for plan in plans for d in plan["ds"]}),
        "fit_d": plans[0]["fit_d"],
        "dtypes": list(dict.fromkeys(dt for plan in plans for dt in plan["dtypes"])),
        "batch": plans[0]["batch"],
        "heads": plans[0]["heads"],
    }


def command(records: Path, summaries: list[Path], plan: dict, dtype: str) -> list[str]:
    """The `attn-cost validate` arguments that refit one dtype's profile from the records alone."""
    args = ["validate", "--records", str(records.relative_to(ROOT))]
    for path in summaries:
        args += ["--summary", str(path.relative_to(ROOT))]
    for a, b in plan["pairs"]:
        args += ["--pair", f"{a}:{b}"]
    for d in plan["fit_d"]:
        args += ["--fit-d", str(d)]
    for d in plan["ds"]:
        if d not in plan["fit_d"]:
            args += ["--d", str(d)]
    return [*args, "--b", str(plan["batch"]), "--h", str(plan["heads"]), "--dtype", dtype]


def main() -> None:
    from attn_cost.costmodel.crossover import Setting
    from attn_cost.profilers.devicemodel.measured.data import SHIPPED
    from attn_cost.profilers.measure.machine import slug
    from attn_cost.profilers.measure.sizes import Sizes
    from attn_cost.profilers.measure.standing import tally
    from attn_cost.profilers.store.store import SHIPPED as RESULTS
    from attn_cost.profilers.workflow.validating import refit

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the commands and tallies; write nothing")
    args = parser.parse_args()
    for folder in CAMPAIGNS:
        summaries = sorted(folder.glob("run*/summary.json"))
        device = json.loads(summaries[0].read_text(encoding="utf-8"))["device"]
        records = RESULTS / f"{slug(device)}.jsonl"
        plan = plan_of(summaries)
        for dtype in plan["dtypes"]:
            argv = command(records, summaries, plan, dtype)
            made = f"attn-cost {' '.join(argv)}: fitted and validated from the shipped records alone, nothing timed"
            fit = [d for d in plan["ds"] if d in plan["fit_d"]]
            check = [d for d in plan["ds"] if d not in plan["fit_d"]]
            template = Sizes(N=1, d=1, h=plan["heads"], b=plan["batch"])
            profile, rows, notes = refit(
                records, None, plan["pairs"], check, fit, template, Setting(dtype=dtype), summaries=summaries,
                made=made,
            )  # fmt: skip
            print(f"{profile.name}: {tally(rows)}")
            for line in notes:
                print(f"  {line}")
            if not args.dry_run:
                print(f"  wrote {profile.save(SHIPPED)}")


if __name__ == "__main__":
    main()
