"""Analytic commands: crossover, formula, heads, variants. No torch, no plotly on this path."""

from __future__ import annotations

import json
from typing import Optional

import sympy as sp
import typer
from rich.console import Console
from rich.table import Table

from cli.app import app, fail
from costmodel import display
from costmodel.conventions import CONVENTIONS, DEFAULT, FULL, get_convention
from costmodel.crossover import DEFAULT_PAIRS, TABLE_COSTS, transition_row
from costmodel.derive import dtype_bytes, multihead
from costmodel.heads import heads as head_tradeoff
from costmodel.symbols import N, b, d, d_embed, h
from costmodel.variants import all_variants, derive, get_variant

console = Console(highlight=False)

# -- shared option parsing ---------------------------------------------------------------------


def positive(value: int | None, flag: str) -> int | None:
    if value is not None and value < 1:
        fail(f"{flag} must be a positive integer, got {value}")
    return value


def parse_pair(text: str) -> tuple[str, str]:
    """'softmax:linear' -> ('softmax', 'linear'), both checked against the catalogue."""
    parts = text.split(":")
    if len(parts) != 2 or not all(parts):
        fail(f"--pair takes A:B (two variant names), got {text!r}")
    for name in parts:
        get_variant(name)
    return parts[0], parts[1]


def head_dims(d_values: list[int], embed: int | None, heads: int) -> list[int]:
    """Head dims to use: --d values, or d_embed / h when --d-embed is given."""
    if embed is not None:
        if d_values:
            fail("give either --d or --d-embed, not both")
        if embed % heads:
            fail(f"--h {heads} does not divide --d-embed {embed}; choose h among its divisors")
        return [embed // heads]
    for v in d_values:
        positive(v, "--d")
    return d_values


def check_dtype(dtype: str) -> str:
    dtype_bytes(dtype)
    return dtype


# -- crossover -----------------------------------------------------------------------------------


@app.command()
def crossover(
    d_values: Optional[list[int]] = typer.Option(None, "--d", help="Head dimension; repeat for several. Default: 8 16 32 64 128."),
    pair: Optional[list[str]] = typer.Option(None, "--pair", help="A:B, repeatable. Default: the TaylorShift pair and softmax:taylorshift-efficient."),
    convention: str = typer.Option(DEFAULT, "--convention", help="FLOP convention for N0 (see `attn-cost formula`)."),
    heads: int = typer.Option(1, "--h", help="Heads (TaylorShift Table 2 uses 1)."),
    batch: int = typer.Option(1, "--b", help="Batch size."),
    embed: Optional[int] = typer.Option(None, "--d-embed", help="Embedding width; sets d = d_embed / h."),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32, bf16 or fp16: bytes per element for memory and traffic."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """From which sequence length N variant B is cheaper than A: N0 (FLOPs), N1 (peak memory), traffic."""
    positive(heads, "--h"), positive(batch, "--b"), positive(embed, "--d-embed")
    ds = head_dims(list(d_values or []), embed, heads) or [8, 16, 32, 64, 128]
    pairs = [parse_pair(p) for p in pair] if pair else list(DEFAULT_PAIRS)
    get_convention(convention), check_dtype(dtype)
    rows = [
        transition_row(a, bb, {d: dv, h: heads, b: batch}, convention=convention, dtype=dtype)
        for a, bb in pairs
        for dv in ds
    ]
    if as_json:
        print(json.dumps({"results": rows}, indent=2))
        return
    _crossover_table(rows, convention, dtype, heads, batch)


def _crossover_table(rows: list[dict], convention: str, dtype: str, heads: int, batch: int) -> None:
    table = Table(
        title=f"Transition points: B is no more expensive than A from N = … (h={heads}, b={batch})",
        caption=f"N0: FLOPs under {convention}. N1: peak memory, {dtype}. Traffic: bytes moved, unfused.",
    )
    for col in ("A", "B", "d", "N0 (FLOPs)", "N1 (memory)", "N traffic"):
        table.add_column(col, justify="right" if col[0] in "dN" else "left")
    notes: dict[str, str] = {}
    for row in rows:
        cells = []
        for cost in TABLE_COSTS:
            info = row[cost]
            cells.append(_cell(info))
            if info["exact"] and info["verdict"] in ("crosses", "multiple"):
                key = {"flops": "N0", "memory": "N1", "traffic": "N traffic"}[cost]
                notes[f"{key}({row['a']} → {row['b']})"] = display.text(sp.sympify(info["exact"], locals={"d": d}))
            elif info["verdict"] not in ("crosses",):
                notes[f"{cost}: {row['a']} → {row['b']}, d={row['d']}"] = info["summary"]
        table.add_row(row["a"], row["b"], str(row["d"]), *cells)
    console.print(table)
    for key, value in notes.items():
        console.print(f"  {key} = {value}" if "→" in key and "," not in key else f"  {key}: {value}")


def _cell(info: dict) -> str:
    if info["n"] is None:
        return "never"
    mark = {"always": " (always)", "equal": " (equal)", "multiple": " (*)"}.get(info["verdict"], "")
    return f"{info['n']:,}{mark}"


# -- formula -------------------------------------------------------------------------------------


@app.command()
def formula(
    variant: str = typer.Argument(..., help="Variant name (see `attn-cost variants`)."),
    convention: str = typer.Option(DEFAULT, "--convention", help="Convention for the per-op FLOPs column and the 'left out' list."),
    dtype: str = typer.Option("fp32", "--dtype", help="Bytes per element for peak bytes and traffic."),
    embed: bool = typer.Option(False, "--multihead", help="Also write the totals with d = d_embed / h (batch 1)."),
    latex: bool = typer.Option(False, "--latex", help="Print the formulas as LaTeX."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The derived FLOPs, peak memory, traffic and parameters of a variant, and the ops they come from."""
    v = get_variant(variant)
    conv = get_convention(convention)
    check_dtype(dtype)
    derived = derive(v.name)
    data = formula_data(v.name, conv.name, dtype)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    fmt = display.latex if latex else display.text
    console.print(f"[bold]{v.name}[/] — {v.summary}\n  source: {v.source}")
    ops = Table(title=f"Ops (FLOPs under {conv.name}; live = elements alive while the op runs)")
    for col in ("#", "op", "kind", "shape", "FLOPs", "left out", "live"):
        ops.add_column(col)
    for step, row in zip(derived.steps, data["ops"], strict=True):
        op = step.op
        ops.add_row(
            str(op.index + 1),
            op.label,
            op.kind + (" (in place)" if op.inplace else ""),
            "×".join(_dim(s) for s in op.output.shape),
            fmt(conv.op_flops(op)),
            "" if conv.left_out(op) == 0 else fmt(conv.left_out(op)),
            fmt(step.elements()),
        )
    console.print(ops)
    console.print("[bold]FLOPs[/]")
    for name, c in CONVENTIONS.items():
        console.print(f"  {name:<17} {fmt(derived.flops(c))}")
    lost = derived.left_out(conv)
    if lost != 0:
        kinds = sorted({op.kind for op in derived.ops if conv.left_out(op) != 0})
        console.print(f"  {conv.name} leaves out {fmt(lost)} (counted by full: {', '.join(kinds)})")
    peak = derived.peak()
    console.print("[bold]Peak memory[/] (elements)")
    console.print(f"  {fmt(peak.expr)}")
    if peak.dominant is not None:
        console.print(f"  for large N: {fmt(peak.dominant)}, at step {peak.dominant_step().op.index + 1} ({peak.dominant_step().op.label})")
    console.print(f"  bytes ({dtype}): {fmt(derived.peak(dtype).dominant or derived.peak(dtype).expr)}")
    console.print(f"[bold]Traffic[/] (bytes, {dtype}, unfused): {fmt(derived.traffic(dtype))}")
    console.print(f"[bold]Parameters[/]: {fmt(derived.params)}")
    if embed:
        one = {b: 1}
        console.print(f"[bold]Multi-head[/] (d = d_embed/h, b = 1): FLOPs {fmt(multihead(derived.flops(conv).xreplace(one)))}")
        if peak.dominant is not None:
            console.print(f"  peak (large N): {fmt(multihead(peak.dominant.xreplace(one)))}")
    for pub in data["published"]:
        mark = "✓ equal" if pub["matches"] else f"✗ differs by {pub['difference']}"
        console.print(f"[bold]Paper[/] {pub['where']}: {pub['formula']} — {mark} to the derived {pub['compare_to']}")


def formula_data(name: str, convention: str, dtype: str) -> dict:
    """Everything `formula --json` prints, as plain data."""
    from costmodel.published import compare_published

    derived = derive(name)
    conv = get_convention(convention)
    peak = derived.peak()
    step = peak.dominant_step()
    return {
        "variant": name,
        "summary": get_variant(name).summary,
        "source": get_variant(name).source,
        "symbols": {"N": "sequence length", "d": "head dim", "h": "heads", "b": "batch"},
        "flops": {c: display.plain(derived.flops(CONVENTIONS[c])) for c in CONVENTIONS},
        "left_out": {
            c: display.plain(derived.left_out(CONVENTIONS[c])) for c in CONVENTIONS if CONVENTIONS[c] is not FULL
        },
        "peak_elements": {
            "max": display.plain(peak.expr),
            "branches": [display.plain(x) for x in peak.branches],
            "large_n": display.plain(peak.dominant) if peak.dominant is not None else None,
            "large_n_step": step.op.index + 1 if step is not None else None,
        },
        "peak_bytes": display.plain(derived.peak(dtype).expr),
        "traffic_bytes": display.plain(derived.traffic(dtype)),
        "dtype": dtype,
        "params": display.plain(derived.params),
        "ops": [
            {
                "step": s.op.index + 1,
                "label": s.op.label,
                "kind": s.op.kind,
                "inplace": s.op.inplace,
                "shape": [display.plain(x) for x in s.op.output.shape],
                "flops": display.plain(conv.op_flops(s.op)),
                "left_out": display.plain(conv.left_out(s.op)),
                "live_elements": display.plain(s.elements()),
                "workspace": display.plain(s.op.workspace),
            }
            for s in derived.steps
        ],
        "convention": conv.name,
        "published": compare_published(name),
    }


# -- heads ---------------------------------------------------------------------------------------


@app.command()
def heads(
    embed: int = typer.Option(..., "--d-embed", help="Embedding width; h runs over its divisors."),
    n: int = typer.Option(1024, "--n", help="Sequence length (memory depends on it)."),
    variant: Optional[list[str]] = typer.Option(None, "--variant", help="Repeatable. Default: both TaylorShift forms."),
    convention: str = typer.Option(DEFAULT, "--convention"),
    batch: int = typer.Option(1, "--b"),
    dtype: str = typer.Option("fp32", "--dtype"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The head trade-off at fixed d_embed: cost of every divisor h, and the continuous optimum."""
    positive(embed, "--d-embed"), positive(n, "--n"), positive(batch, "--b")
    get_convention(convention), check_dtype(dtype)
    names = [get_variant(x).name for x in (variant or ["taylorshift-direct", "taylorshift-efficient"])]
    results = [
        head_tradeoff(x, cost, embed, n=n, batch=batch, convention=convention, dtype=dtype)
        for x in names
        for cost in ("flops", "memory")
    ]
    if as_json:
        print(json.dumps({"d_embed": embed, "n": n, "batch": batch, "results": [_heads_json(r) for r in results]}, indent=2))
        return
    for cost in ("flops", "memory"):
        rs = [r for r in results if r.cost == cost]
        unit = f"FLOPs ({convention})" if cost == "flops" else f"peak bytes ({dtype})"
        table = Table(title=f"{unit} vs heads, d_embed = {embed}, N = {n}, b = {batch}")
        table.add_column("h", justify="right")
        table.add_column("d", justify="right")
        for r in rs:
            table.add_column(r.variant, justify="right")
        for i, (hv, dv, _) in enumerate(rs[0].table):
            table.add_row(str(hv), str(dv), *(_best(r, i) for r in rs))
        console.print(table)
        for r in rs:
            console.print(f"  {r.variant}: {_heads_sentence(r)}")


def _best(r, i: int) -> str:
    hv, _, value = r.table[i]
    return f"[bold]{value:,}[/]" if hv == r.best_h else f"{value:,}"


def _heads_sentence(r) -> str:
    s = f"{r.cost} {r.trend} over the divisors; best h = {r.best_h} (d = {r.d_embed // r.best_h})."
    if r.condition is not None and r.d_star:
        opt = ", ".join(f"d ≈ {x:.3g} (h ≈ {r.d_embed / x:.4g})" for x in r.d_star)
        where = "outside 1..d_embed" if all(not 1 <= hv <= r.d_embed for hv in r.h_star) else "inside the range"
        s += f" Continuous optimum where {display.text(r.condition)} = 0: {opt}, {where}."
    elif r.condition is None:
        s += " No interior optimum: the cost is monotone in h."
    return s


def _heads_json(r) -> dict:
    return {
        "variant": r.variant,
        "cost": r.cost,
        "table": [{"h": hv, "d": dv, "value": value} for hv, dv, value in r.table],
        "best_h": r.best_h,
        "trend": r.trend,
        "condition": display.plain(r.condition) if r.condition is not None else None,
        "d_star": r.d_star,
        "h_star": r.h_star,
    }


# -- variants ------------------------------------------------------------------------------------


@app.command()
def variants(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the variants the engine knows, one line each."""
    vs = all_variants()
    if as_json:
        print(json.dumps([{"name": v.name, "family": v.family, "summary": v.summary, "source": v.source} for v in vs], indent=2))
        return
    table = Table(title="Attention variants")
    table.add_column("name")
    table.add_column("family")
    table.add_column("what")
    for v in vs:
        table.add_row(v.name, v.family, v.summary)
    console.print(table)


def _dim(size: sp.Expr) -> str:
    s = display.text(size)
    return f"({s})" if len(sp.Add.make_args(size)) > 1 else s
