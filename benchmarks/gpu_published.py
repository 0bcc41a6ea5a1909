"""The datasheet model against published GPU measurements: fit its efficiencies on one part, judge it on the rest
(`attn_cost.profilers.devicemodel.datasheet.fit`, which says what the published tables are).

    python benchmarks/gpu_published.py                  # predicted against published, errors per table and method
    python benchmarks/gpu_published.py --fit            # refit and write profilers/data/gpumodel.json
    python benchmarks/gpu_published.py --into docs/gpumodel.md   # write the record into a marked block
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docblock.py, beside this script

from attn_cost.profilers.devicemodel.datasheet.fit import (
    BEGIN,
    END,
    FIT_SOURCES,
    Fit,
    all_rows,
    errors,
    fit,
    fit_file,
    record,
)
from attn_cost.profilers.devicemodel.datasheet.model import FIT_FILE, FIT_KIND, fitted
from attn_cost.profilers.store.files import is_json_of
from docblock import check, fill, write_output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help=f"refit and write {FIT_FILE.name}")
    parser.add_argument("--into", type=Path, action="append", default=[], help="write the record into this file")
    args = parser.parse_args()
    check(args.into, BEGIN, END)
    rows = all_rows()
    if args.fit:
        new = fit([r for r in rows if r.source in FIT_SOURCES])
        write_output(FIT_FILE, fit_file(new, errors(rows, new)), is_json_of(FIT_KIND), "a datasheet model fit")
        fitted.cache_clear()
    _, sigma, _ = fitted()
    text = record(rows, Fit.shipped(), sigma)
    print(text)
    fill(dict.fromkeys(args.into, text), BEGIN, END)


if __name__ == "__main__":
    sys.exit(main())
