"""`attn-cost claims`: every quantitative efficiency claim of the five source papers, checked.

No torch, no plotly: the derived values come from the symbolic engine at run time.
"""

from __future__ import annotations

import textwrap

import typer
from attn_cost.cli import options as o
from attn_cost.cli.app import app
from attn_cost.costmodel.claims import VERDICTS, claims

SHORT = {
    "TaylorShift (Nauen et al., arXiv v1)": "TaylorShift",
    "TaylorShift (ICPR)": "TaylorShift ICPR",
    "Cost-Effective Attention (Hosseini et al.)": "Hosseini",
    "Transformers are RNNs (Katharopoulos et al.)": "Katharopoulos",
    "Latte (Dolga et al.)": "Latte",
}
"""Paper names short enough for a table column."""

WIDTH = 80
LABEL = 11


def blocks(records: list[dict], width: int = WIDTH) -> str:
    """One block per claim, grouped by paper; every line fits `width` and breaks only between words."""
    out: list[str] = []
    paper = None
    papers = list(dict.fromkeys(r["paper"] for r in records))
    for rec in sorted(records, key=lambda r: papers.index(r["paper"])):
        if rec["paper"] != paper:
            paper = rec["paper"]
            out += ["", paper, "=" * min(len(paper), width)]
        out += ["", *_wrap(rec["claim"], "  ", "  ", width)]
        for key, label in (("published", "paper"), ("derived", "attn-cost"), ("verdict", "verdict"), ("reason", "why")):
            first = f"    {label + ':':<{LABEL}}"
            out += _wrap(rec[key], first, " " * len(first), width)
    counts = {v: sum(r["verdict"] == v for r in records) for v in VERDICTS}
    out += ["", f"{len(records)} claims: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + "."]
    return "\n".join(out).lstrip("\n")


def _wrap(text: str, first: str, rest: str, width: int) -> list[str]:
    return textwrap.wrap(
        text, width, initial_indent=first, subsequent_indent=rest, break_long_words=False, break_on_hyphens=False
    )


def markdown(records: list[dict]) -> str:
    """The README's table of claims."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| paper | claim | paper's value | attn-cost | verdict |", "|---|---|---|---|---|"]
    for r in records:
        row = [SHORT.get(r["paper"], r["paper"]), r["claim"], r["published"], r["derived"], r["verdict"]]
        lines.append("| " + " | ".join(cell(x) for x in row) + " |")
    return "\n".join(lines)


@app.command("claims")
def claims_command(
    as_json: bool = o.JSON,
    as_markdown: bool = typer.Option(False, "--markdown", help="Print the claims as the README's Markdown table."),
) -> None:
    """Every quantitative efficiency claim of the five source papers: the paper's value, attn-cost's, a verdict."""
    import json

    records = claims()
    if as_json:
        print(json.dumps({"claims": records}, indent=2, ensure_ascii=False))
    elif as_markdown:
        print(markdown(records))
    else:
        print(blocks(records))
