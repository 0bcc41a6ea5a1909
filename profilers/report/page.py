"""Render the report's data as one self-contained HTML page (plotly.js inlined once, no network)."""

from __future__ import annotations

import html
import json
import math

import plotly.graph_objects as go
import sympy as sp
from attn_cost.costmodel import display
from attn_cost.costmodel.counting import describe
from attn_cost.costmodel.symbols import BY_NAME
from attn_cost.profilers.devicemodel.device import CALIBRATED, LABELS
from attn_cost.profilers.devicemodel.measured.data import VALIDATION_COLUMNS
from attn_cost.profilers.measure.standing import cell, interval, op_model_n0, shown_n0
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]
COST_TITLE = {"flops": "FLOPs", "memory": "peak memory (bytes)", "traffic": "memory traffic (bytes)"}
PAIR_KEY = {"flops": "n0", "memory": "n1", "traffic": "n_traffic"}
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
"""One dash pattern per variant: curves with equal values (softmax and direct TaylorShift in FLOPs) stay visible."""
LABEL_STEP = 0.09
"""Vertical distance, in panel heights, between the stacked labels of a panel's crossings."""
CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
.note { color: #555; font-size: 0.92em; } .bad { color: #b00; } .good { color: #070; }
code { background: #f6f6f6; padding: 0 0.2em; } details { margin: 0.6em 0; }
"""


def render(data: dict) -> str:
    """The whole page."""
    colors = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(data["variants"])}
    st = data["setting"]
    parts = [
        f"<h1>attn-cost report</h1><p class='note'>FLOPs counted with the <code>{st['convention']}</code> "
        f"convention; bytes for <code>{st['dtype']}</code>; scope <code>{st['scope']}</code>, {st['mode']}; "
        "one head, batch 1 unless stated. A transition point N is the smallest sequence length from which B costs "
        "no more than A. "
        + (html.escape(describe(st["counting"])) if "counting" in st else "")
        + "</p>"
        + (
            f"<p class='note'>Device: {html.escape(data['datasheet']['title'])}, not measured: "
            f"{html.escape(data['datasheet']['about'])}</p>"
            if data.get("datasheet")
            else ""
        ),
        _section("Transition points", _transition_table(data)),
        _section("Cost against sequence length", _curves(data, colors)),
        _section("Transition points against head dimension", _versus_d(data)),
        _section("Heads at a fixed embedding width", _heads(data, colors)),
        _section("Predicted against measured, per device", _devices(data, colors)),
        _section("Derived formulas and the ops they come from", _formulas(data)),
        _section("The source papers' efficiency claims, checked", _claims(data)),
    ]
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")  # never closes the script tag
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>attn-cost report</title>"
        f"<style>{CSS}</style><script>{get_plotlyjs()}</script></head><body>"
        + "".join(parts)
        + f"<script type='application/json' id='attn-cost-data'>{payload}</script></body></html>"
    )


def _claims(data: dict) -> str:
    """Every claim: the paper's value, attn-cost's derived value, the verdict and why (`attn-cost claims`)."""
    records = data.get("claims", [])
    mark = {"holds": "good", "does not hold": "bad"}
    rows = [
        [
            html.escape(r["paper"]),
            html.escape(r["claim"]),
            html.escape(r["published"]),
            html.escape(r["derived"]),
            f"<span class='{mark.get(r['verdict'], '')}'>{html.escape(r['verdict'])}</span>",
            f"<span class='note'>{html.escape(r['reason'])}</span>",
        ]
        for r in records
    ]
    intro = (
        "<p class='note'>Every quantitative efficiency claim of the five source papers. The paper's value is "
        "typed from the paper; attn-cost's is derived from the op lists when the report is made "
        "(<code>attn-cost claims --json</code>).</p>"
    )
    return intro + _table(["paper", "claim", "paper's value", "attn-cost", "verdict", "why"], rows, left=6)


def _section(title: str, body: str) -> str:
    return f"<section><h2>{html.escape(title)}</h2>{body}</section>"


def _figure(fig: go.Figure, div_id: str) -> str:
    fig.update_layout(
        template="plotly_white", margin={"l": 60, "r": 20, "t": 60, "b": 50}, legend={"orientation": "h", "y": -0.18}
    )
    return fig.to_html(
        full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False, "responsive": True}
    )


def _n(value) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if isinstance(value, (int, float)) else html.escape(str(value))


def _table(head: list[str], rows: list[list[str]], left: int = 1) -> str:
    """An HTML table of already-escaped cells; the first `left` columns are text, the rest numbers."""

    def cell(tag: str, i: int, value: str) -> str:
        return f"<{tag} class='l'>{value}</{tag}>" if i < left else f"<{tag}>{value}</{tag}>"

    lines = ["<tr>" + "".join(cell("th", i, h) for i, h in enumerate(head)) + "</tr>"]
    lines += ["<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows]
    return "<table>" + "".join(lines) + "</table>"


def _transition_table(data: dict) -> str:
    rows = data["transitions"]
    device = any("corrected_n0" in r for r in rows)
    op_model = any(r.get("predicted_n0") is not None for r in rows)
    by = LABELS[next((r["predicted_by"] for r in rows if r.get("predicted_n0") is not None), CALIBRATED)]
    head = ["A", "B", "d", "N0 (FLOPs)", "N1 (memory)", "N traffic"]
    head += ["N0 corrected"] if device else []
    head += [f"N0 {by} [95 %]"] if op_model else []
    head += ["N0 measured", "N1 measured"] if device else []
    cells = []
    for r in rows:
        numbers = [_n(c) for c in [r["d"], r["n0"], r["n1"], r["n_traffic"]]]
        numbers += [_n(r.get("corrected_n0"))] if device else []
        predicted = (r.get(k) for k in ("predicted_n0", "predicted_n0_low", "predicted_n0_high"))
        numbers += [html.escape(op_model_n0(*predicted))] if op_model else []
        numbers += [_measured_n0(r), _n(r.get("measured_n1"))] if device else []
        cells.append([html.escape(r["a"]), html.escape(r["b"]), *numbers])
    out = [_table(head, cells, left=2)]
    closed = {}
    for r in rows:
        for cost, key in PAIR_KEY.items():
            if r[cost]["exact"]:
                closed[f"{key}({r['a']} → {r['b']})"] = display.text(sp.sympify(r[cost]["exact"], locals=dict(BY_NAME)))
    if closed:
        forms = "; ".join(f"{html.escape(k)} = {html.escape(v)}" for k, v in closed.items())
        out.append(f"<p class='note'>Closed forms of the crossing (before rounding up): {forms}.</p>")
    return "".join(out)


def _measured_n0(row: dict) -> str:
    """A measured N0 as `crossover --device` shows it: with its spread, and why it does not stand beside it; a tie as
    its stretch, `tie 1,306–1,598` (where either is as fast: a tie places no crossing)."""
    value, spread = row.get("measured_n0"), row.get("n0_uncertainty")
    if row.get("n0_verdict") is None and value is None:
        return "—"
    standing, launch = row.get("n0_standing"), row.get("n0_launch_bound")
    return html.escape(cell(value, spread, row.get("n0_verdict"), standing, launch, tie=row.get("n0_tie")))


def _curves(data: dict, colors: dict) -> str:
    out = [
        "<p class='note'>Analytic cost of each variant (lines, log axes). Dashed vertical lines mark the analytic "
        "transition points of each pair on that cost; where a device profile was given, measured points are drawn as "
        "markers, and the time panel marks the measured speed crossover (solid) next to the analytic one "
        "(dashed). In the time panel, thin lines are the op model's prediction (zero-shot: the sum of the variant's "
        "ops, from `attn-cost calibrate`), markers the measured times: where the model bends, an op's working "
        "set left a cache level.</p>"
    ]
    measured = data.get("measured") or {}
    tags = {tuple(p): chr(ord("a") + i) for i, p in enumerate(data["pairs"])}
    out.append(
        "<p class='note'>Crossings are labelled by pair: "
        + "; ".join(f"<b>{t}</b> = {html.escape(a)} → {html.escape(b)}" for (a, b), t in tags.items())
        + ". Variants drawn with the same values (the same maths) lie on one another: each has its own dash "
        "and width.</p>"
    )
    predicted = data.get("predicted") or {}
    if predicted:
        by = html.escape(LABELS[predicted["by"]])
        out.append(
            f"<p class='note'>Time panel: each variant's time predicted by the {by} model "
            f"(lines, {html.escape(predicted['answered_by'])}), its 95 % interval shaded; dotted vertical lines mark "
            "the predicted speed crossover of each pair (the N0 of the table above, as <code>crossover "
            "--device</code> prints it), dashed ones the analytic N0 (FLOPs).</p>"
        )
    for dv in data["d"]:
        key = str(dv)
        slots = [measured.get(key, {}).get(v, {}) for v in data["variants"]]
        bands = predicted.get("curves", {}).get(key, {})
        has_time = any(p.get("time") or p.get("predicted") for p in slots) or bool(bands)
        titles = [COST_TITLE[c] for c in ("flops", "memory", "traffic")] + (["time (s)"] if has_time else [])
        fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles, horizontal_spacing=0.06)
        for i, v in enumerate(data["variants"]):
            width = max(4.5 - 1.2 * i, 1.5)  # an earlier variant drawn wider shows around a later one on top
            style = {"color": colors[v], "dash": DASHES[i % len(DASHES)], "width": width}
            line = {"mode": "lines", "line": style}
            for col, cost in enumerate(("flops", "memory", "traffic"), start=1):
                _trace(fig, col, data["grid"], data["curves"][key][v][cost], v, v, col == 1, **line)
            points = measured.get(key, {}).get(v, {})
            if points.get("memory"):
                n, m = zip(*points["memory"], strict=True)
                dots = {"mode": "markers", "marker": {"color": colors[v], "symbol": "circle-open"}}
                _trace(fig, 2, n, m, f"{v} measured", v, False, **dots)
            if has_time and points.get("time"):
                n, t, lo, hi = zip(*points["time"], strict=True)
                err = {
                    "type": "data",
                    "array": [b - a for a, b in zip(t, hi, strict=True)],
                    "arrayminus": [a - b for a, b in zip(t, lo, strict=True)],
                }
                dots = {"mode": "markers", "marker": {"color": colors[v], "size": 5}, "error_y": err}
                _trace(fig, 4, n, t, f"{v} measured", v, False, **dots)
            if has_time and points.get("predicted"):
                n, t = zip(*points["predicted"], strict=True)
                _trace(fig, 4, n, t, f"{v} op model", v, False, mode="lines", line={"color": colors[v], "width": 1})
            if v in bands:
                _band(fig, 4, data["grid"], bands[v], f"{v} {LABELS[predicted['by']]}", v, style)
        marks: dict[int, list[tuple[float, str, str]]] = {}
        for row in (r for r in data["transitions"] if r["d"] == dv):
            pair = tags[(row["a"], row["b"])]
            for col, cost in enumerate(("flops", "memory", "traffic"), start=1):
                if row[PAIR_KEY[cost]]:
                    label = f"{pair}: {_key_label(PAIR_KEY[cost])} {row[PAIR_KEY[cost]]:,}"
                    marks.setdefault(col, []).append((row[PAIR_KEY[cost]], label, "dash"))
            if bands and row.get("predicted_n0"):
                label = f"{pair}: N0 {LABELS[row.get('predicted_by', predicted['by'])]} {row['predicted_n0']:,}"
                marks.setdefault(4, []).append((row["predicted_n0"], label, "dot"))
            if has_time:
                measured_n0 = shown_n0(row)  # measured at this row's sizes and setting, and it stands
                if measured_n0:
                    label = f"{pair}: N0 measured {measured_n0:,.0f}"
                    marks.setdefault(4, []).append((measured_n0, label, "solid"))
                if row["n0"]:
                    marks.setdefault(4, []).append((row["n0"], "", "dash"))
        span = (math.log10(data["grid"][0]), math.log10(data["grid"][-1]))
        for col, col_marks in marks.items():
            _marks(fig, col, col_marks, span)
        fig.update_xaxes(type="log", title_text="N")
        fig.update_yaxes(type="log")
        fig.update_layout(title=f"d = {dv}", height=420)
        out.append(_figure(fig, f"curves-d{dv}"))
    return "".join(out)


def _trace(fig: go.Figure, col: int, x, y, name: str, group: str, legend: bool, **style) -> None:
    """One trace in subplot `col` of a one-row figure."""
    fig.add_trace(go.Scatter(x=x, y=y, name=name, legendgroup=group, showlegend=legend, **style), row=1, col=col)


def _band(fig: go.Figure, col: int, x, curve: dict, name: str, group: str, line: dict, legend: bool = False) -> None:
    """A predicted time in subplot `col`: its line (`line`: color, dash, width) over its 95 % interval, shaded in
    the line's color."""
    shade = _rgba(line["color"], 0.15)
    edge = {"mode": "lines", "line": {"width": 0, "color": shade}, "hoverinfo": "skip"}
    _trace(fig, col, x, curve["low"], f"{name}, 95 % low", group, False, **edge)
    _trace(fig, col, x, curve["high"], f"{name}, 95 % interval", group, False, fill="tonexty", fillcolor=shade, **edge)
    _trace(fig, col, x, curve["seconds"], name, group, legend, mode="lines", line=line)


def _rgba(color: str, alpha: float) -> str:
    """A #rrggbb color with transparency, as plotly takes it."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _key_label(key: str) -> str:
    """N0, N1 or N traffic, as the tables name them."""
    return {"n0": "N0", "n1": "N1", "n_traffic": "N traffic"}.get(key, key)


def _marks(fig: go.Figure, col: int, marks: list[tuple[float, str, str]], span: tuple[float, float]) -> None:
    """Vertical lines at the crossings of one panel, each labelled horizontally with its pair's tag and value,
    the labels stacked one under another so two close crossings never overlap; a label right of the middle
    ends at its line. Plotly takes the line in data units and the label in log10 units on a log axis, so they
    are added separately."""
    labelled = sorted((m for m in marks if m[1]), key=lambda m: m[0])
    for n, _, dash in marks:
        fig.add_vline(x=n, line_dash=dash, line_color="#888", row=1, col=col)
    for level, (n, text, _) in enumerate(labelled):
        fig.add_annotation(
            x=math.log10(n),
            y=1 - LABEL_STEP * level,
            yref="y domain",
            text=html.escape(text),
            showarrow=False,
            xanchor="left" if math.log10(n) < sum(span) / 2 else "right",
            yanchor="top",
            bgcolor="rgba(255,255,255,0.8)",
            font={"size": 11},
            row=1,
            col=col,
        )


def _versus_d(data: dict) -> str:
    fig = make_subplots(rows=1, cols=2, subplot_titles=["N0 (FLOPs)", "N1 (peak memory)"])
    for i, item in enumerate(data["versus_d"]):
        color = PALETTE[i % len(PALETTE)]
        label = f"{item['a']} → {item['b']}"
        for col, key in ((1, "n0"), (2, "n1")):
            _trace(fig, col, item["d"], item[key], label, label, col == 1, mode="lines+markers", line={"color": color})
        if "corrected_n0" in item:
            dotted = {"mode": "lines", "line": {"color": color, "dash": "dot"}}
            _trace(fig, 1, item["d"], item["corrected_n0"], f"{label}, corrected", label + "c", True, **dotted)
        if "predicted_n0" in item:
            dashed = {"mode": "lines", "line": {"color": color, "dash": "dash"}}
            by = LABELS[item.get("predicted_by", CALIBRATED)]
            _trace(fig, 1, item["d"], item["predicted_n0"], f"{label}, {by}", label + "p", True, **dashed)
        for col, key in ((1, "measured_n0"), (2, "measured_n1")):
            pts = [(dv, value) for dv, value in zip(item["d"], item.get(key) or [], strict=False) if value]
            if pts:
                x, y = zip(*pts, strict=True)
                diamonds = {"mode": "markers", "marker": {"color": color, "symbol": "diamond", "size": 9}}
                _trace(fig, col, x, y, f"{label}, measured", label + "m", col == 1, **diamonds)
    fig.update_xaxes(type="log", title_text="head dimension d")
    fig.update_yaxes(type="log", title_text="N")
    fig.update_layout(height=420)
    return (
        "<p class='note'>Analytic transition points for every d (lines); where a device was given, corrected "
        "(dotted), the op model's zero-shot N0 (dashed; its intervals are in the table above) and measured "
        "(diamonds).</p>" + _figure(fig, "versus-d")
    )


def _heads(data: dict, colors: dict) -> str:
    info = data["heads"]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["FLOPs", "peak memory (bytes)"])
    for item in info["results"]:
        col = 1 if item["cost"] == "flops" else 2
        v = item["variant"]
        hs = [row["h"] for row in item["table"]]
        values = [row["value"] for row in item["table"]]
        _trace(fig, col, hs, values, v, v, col == 1, mode="lines+markers", line={"color": colors.get(v)})
    fig.update_xaxes(type="log", title_text="heads h (d = d_embed / h)")
    fig.update_yaxes(type="log")
    fig.update_layout(height=400)
    note = f"<p class='note'>d_embed = {info['d_embed']}, N = {info['n']:,}; h runs over the divisors of d_embed.</p>"
    return note + _figure(fig, "heads")


def _devices(data: dict, colors: dict) -> str:
    if data.get("twins"):
        return _twins(data, colors)
    if not data["devices"] and data.get("predicted"):
        return (f"<p class='note'>Not measured: no device profile of {html.escape(data['device']['name'])}. The "
                "time panels above are the prediction; a profile of the same GPU (<code>attn-cost validate</code> "
                "on it) would be drawn here beside it.</p>")  # fmt: skip
    if not data["devices"]:
        return "<p class='note'>No device profile: run <code>attn-cost validate</code> on a device to add one.</p>"
    out = []
    for dev in data["devices"]:
        info = dev["device"]
        out.append(
            f"<h3>{html.escape(dev['name'])}: {html.escape(info['name'])} ({html.escape(info['kind'])}, torch "
            f"{html.escape(info['torch'])}, {info['threads']} threads)</h3><p class='note'>Profile "
            f"<code>{html.escape(dev['name'])}</code>, fitted {html.escape(dev['created'])}.</p>"
        )
        head = list(VALIDATION_COLUMNS)
        rows = []
        for r in dev["validation"]:
            row = [html.escape(r["a"]), html.escape(r["b"]), f"{r['d']}{' (held out)' if r.get('held_out') else ''}"]
            for k in ("0", "1"):
                unc = r.get(f"n{k}_uncertainty")
                row += [
                    _with_err(r[f"analytic_n{k}"], r.get(f"analytic_n{k}_error")),
                    _with_err(r[f"corrected_n{k}"], r.get(f"corrected_n{k}_error")),
                    *([_op_model_cell(r)] if k == "0" else []),
                    _measured_n0(r) if k == "0" else _n(r[f"measured_n{k}"]) + (f" ± {unc:,.0f}" if unc else ""),
                ]
            rows.append(row)
        shapes = sorted({(r.get("heads", 1), r.get("batch", 1)) for r in dev["validation"]})
        if shapes and shapes != [(1, 1)]:  # the report's panels are at one head, batch 1: this table is not
            at = "; ".join(f"h = {hv}, b = {bv}" for hv, bv in shapes)
            out.append(f"<p class='note'>Measured and predicted at {at}.</p>")
        out.append(_table(head, rows, left=2))
        fits = [
            [
                html.escape(name),
                f"{fit['launch_s'] * 1e6:.2f}",
                "—" if not fit["flops_per_s"] else f"{fit['flops_per_s'] / 1e9:.0f}",
                "—" if not fit["bytes_per_s"] else f"{fit['bytes_per_s'] / 1e9:.1f}",
                str(fit["points"]),
                f"{100 * fit['median_rel_err']:.1f}%",
            ]
            for name, fit in dev["time"].items()
        ]
        out.append(_table(["variant", "t_launch (µs)", "P (GFLOP/s)", "W (GB/s)", "points", "median |error|"], fits))
        out.append(
            "<p class='note'>Fitted per variant: t = t_launch·K + F/P + B/W (K kernels, F matrix-product FLOPs, "
            "B unfused bytes). Errors in brackets are relative to the measured point; — means the resource never "
            "limited the variant.</p>"
        )
    return "".join(out)


def _twins(data: dict, colors: dict) -> str:
    """A datasheet GPU that was also measured: per size it was measured at, its measured times (markers, the
    interquartile range as error bars) beside the datasheet's predicted times (lines, 95 % interval shaded), with
    each pair's measured N0 (solid) and predicted N0 (dotted)."""
    out = [
        "<p class='note'>The same GPU measured: its device profile's timings (markers, median and interquartile "
        "range) beside the datasheet model's prediction at the sizes measured (lines, 95 % interval shaded). Solid "
        "vertical lines: the measured speed crossover; dotted: the datasheet's.</p>"
    ]
    tags = {tuple(p): chr(ord("a") + i) for i, p in enumerate(data["pairs"])}
    for i, twin in enumerate(data["twins"]):
        sizes = twin["sizes"]
        title = (f"{twin['device']} ({twin['profile']}): d = {sizes['d']}, h = {sizes.get('h', 1)}, "
                 f"b = {sizes.get('b', 1)}")  # fmt: skip
        fig = make_subplots(rows=1, cols=1)
        for j, v in enumerate(v for v in data["variants"] if v in twin["measured"] or v in twin["predicted"]):
            color = colors[v]
            if v in twin["predicted"]:
                style = {"color": color, "dash": DASHES[j % len(DASHES)], "width": 2}
                _band(fig, 1, twin["grid"], twin["predicted"][v], f"{v} datasheet", v, style, legend=True)
            if twin["measured"].get(v):
                n, t, lo, hi = zip(*twin["measured"][v], strict=True)
                err = {"type": "data", "array": [b - a for a, b in zip(t, hi, strict=True)],
                       "arrayminus": [a - b for a, b in zip(t, lo, strict=True)]}  # fmt: skip
                dots = {"mode": "markers", "marker": {"color": color, "size": 5}, "error_y": err}
                _trace(fig, 1, n, t, f"{v} measured", v, True, **dots)
        marks = []
        for m in twin["transitions"]:
            tag = tags.get((m["a"], m["b"]), "?")
            measured_n0 = shown_n0(m)  # measured at the twin's sizes, and it stands
            if measured_n0:
                marks.append((measured_n0, f"{tag}: N0 measured {measured_n0:,.0f}", "solid"))
            if m.get("predicted_n0"):
                marks.append((m["predicted_n0"], f"{tag}: N0 datasheet {m['predicted_n0']:,}", "dot"))
        _marks(fig, 1, marks, (math.log10(twin["grid"][0]), math.log10(twin["grid"][-1])))
        fig.update_xaxes(type="log", title_text="N")
        fig.update_yaxes(type="log", title_text="time (s)")
        fig.update_layout(title=title, height=420)
        out.append(_figure(fig, f"twin-{i}"))
    return "".join(out)


def _op_model_cell(row: dict) -> str:
    cell = _with_err(row.get("predicted_n0"), row.get("predicted_n0_error"))
    low, high = row.get("predicted_n0_low"), row.get("predicted_n0_high")
    shown = row.get("predicted_n0") is not None and (low is not None or high is not None)
    return cell + (f" {html.escape(interval(low, high))}" if shown else "")


def _with_err(value, err) -> str:
    if value is None:
        return "—"
    if err is None:
        return _n(value)
    cls = "good" if abs(err) <= 0.1 else "bad"
    return f"{_n(value)} <span class='{cls}'>({100 * err:+.0f}%)</span>"


def _formulas(data: dict) -> str:
    def fmt(plain: str) -> str:
        return html.escape(display.text(sp.sympify(plain, locals=dict(BY_NAME))))

    out = []
    for name, f in data["formulas"].items():
        peak = f["peak_elements"]
        where = f"{peak['large_n_step']}{', backward' if peak.get('large_n_pass') == 'backward' else ''}"
        large = f"; for large N {fmt(peak['large_n'])} (step {where})" if peak["large_n"] else ""
        body = [
            f"<p>{html.escape(f['summary'])} <span class='note'>({html.escape(f['source'])})</span></p>",
            _table(["FLOPs convention", "count"], [[c, fmt(v)] for c, v in f["flops"].items()], left=2),
            f"<p>Peak memory (elements): {fmt(peak['max'])}{large}</p>",
            f"<p>Memory traffic (bytes, {html.escape(f['dtype'])}): {fmt(f['traffic_bytes'])}. "
            f"Parameters: {fmt(f['params'])}.</p>",
        ]
        for pub in f["published"]:
            mark = (
                "<span class='good'>equal</span>"
                if pub["matches"]
                else f"<span class='bad'>differs</span> ({html.escape(pub['why'])})"
            )
            body.append(
                f"<p class='note'>{html.escape(pub['where'])}: {html.escape(pub['formula'])} — {mark}, "
                f"compared with the derived {html.escape(pub['compare_to'])}.</p>"
            )
        ops = [
            [str(op["step"]), html.escape(op["label"]), op["kind"], fmt(op["flops"]), fmt(op["live_elements"])]
            for op in f["ops"]
        ]
        table = _table(["#", "op", "kind", "FLOPs", "live elements"], ops, left=5)
        body.append(f"<details><summary>Op table</summary>{table}</details>")
        out.append(f"<h3>{html.escape(name)}</h3>" + "".join(body))
    return "".join(out)
