"""The HTML report: self-contained, consistent with the CLI, and drawn by a real browser."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

PAIRS = ["--pair", "taylorshift-direct:taylorshift-efficient", "--pair", "softmax:linear"]


def _embedded(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    payload = re.search(r"<script type='application/json' id='attn-cost-data'>(.*?)</script>", text, re.S).group(1)
    return json.loads(payload.replace("<\\/", "</"))


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """One report for the module, made in-process with the tests' own device: its profile (tests/data), an op
    calibration (test_opmodel.py's synthetic model) and a few made-up timings and peaks in the results store."""
    from attn_cost.cli.main import main
    from attn_cost.profilers.devicemodel.calibrated.data import OpModel
    from attn_cost.profilers.devicemodel.measured.data import load_profile
    from attn_cost.profilers.store.store import ResultStore
    from conftest import FIXTURE_PROFILE
    from test_opmodel import lean_synthetic_model

    root = tmp_path_factory.mktemp("report")
    home = root / "home"
    (home / "devices").mkdir(parents=True)
    shutil.copy(FIXTURE_PROFILE, home / "devices")
    profile = load_profile(str(FIXTURE_PROFILE))
    OpModel(profile.device, "fp32", lean_synthetic_model().points).save(home / "opmodels")
    store = ResultStore(profile.device, home / "results", shipped=False)
    for v in ("taylorshift-direct", "taylorshift-efficient", "softmax", "linear"):
        for dv in (16, 32):
            for n in (64, 256, 1024):
                t = 1e-6 * n * dv  # made up: the report draws what the store holds
                stats = {"median": t, "q1": t, "q3": t, "min": t, "max": t, "runs": 5, "warmup": 2}
                sizes = {"N": n, "d": dv, "h": 1, "b": 1}
                store.add(
                    {"kind": "time", "key": f"time|{v}|{dv}|{n}", "variant": v, "scope": "core", "dtype": "fp32",
                     "sizes": sizes, "status": "ok", "time": stats}
                )  # fmt: skip
    store.close()
    out = root / "report.html"
    with pytest.MonkeyPatch.context() as m:
        m.setenv("ATTN_COST_HOME", str(home))
        assert main(["report", "--html", str(out), *PAIRS, "--d", "16", "--d", "32", "--device", profile.slug]) == 0
    return out


def test_report_is_self_contained(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert "<script src=" not in text and "<link" not in text  # plotly.js is inlined, nothing is fetched
    figures = len(_embedded(report)["d"]) + 2  # cost curves per d, transition points vs d, heads
    assert text.count("Plotly.newPlot") == figures
    assert "mathjax" not in text.lower().split("</script>", 1)[1]  # no figure asks for MathJax


def test_report_numbers_match_crossover_json(report: Path, cli) -> None:
    data = _embedded(report)
    rows = cli("crossover", *PAIRS, "--d", "16", "--d", "32", "--json").json()["results"]
    keys = ("a", "b", "d", "n0", "n1", "n_traffic")
    assert [{k: r[k] for k in keys} for r in data["transitions"]] == [{k: r[k] for k in keys} for r in rows]


def test_report_carries_formulas_heads_and_devices(report: Path) -> None:
    data = _embedded(report)
    assert set(data["formulas"]) == {"taylorshift-direct", "taylorshift-efficient", "softmax", "linear"}
    assert data["heads"]["d_embed"] == 256 and data["heads"]["results"]
    assert data["devices"] and data["devices"][0]["validation"]
    assert any(points["time"] for points in data["measured"]["32"].values())


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--html", "out.txt"], "ending in .html"),
        (["--html", "no/such/folder/out.html"], "does not exist"),
        (["--html", "out.html", "--device", "no-such-gpu"], "unknown device"),
        (["--html", "out.html", "--variant", "softmx"], "did you mean"),
    ],
)
def test_report_bad_input(cli, args: list[str], needle: str) -> None:
    r = cli("report", *args)
    assert r.code == 2 and len(r.err.splitlines()) == 1 and needle in r.err  # no blank line from a spinner


def test_report_shows_the_op_model_in_its_table_and_against_d(report: Path) -> None:
    data = _embedded(report)
    rows = [r for r in data["transitions"] if r.get("predicted_n0") is not None]
    assert rows, "the device has an op calibration: its predicted N0 is in the table"
    text = report.read_text(encoding="utf-8")
    assert "N0 op model [95 %]" in text
    for r in rows:  # the table cell, as `crossover --device` prints it
        cell = f"{r['predicted_n0']:,} [{r['predicted_n0_low']:,}–{r['predicted_n0_high']:,}]"
        assert f"<td>{cell}</td>" in text
    for item in data["versus_d"]:  # the curve over d: the same point estimates, without their intervals
        assert len(item["predicted_n0"]) == len(item["d"])
        for r in rows:
            if (r["a"], r["b"]) == (item["a"], item["b"]):
                assert item["predicted_n0"][item["d"].index(r["d"])] == r["predicted_n0"]
    assert text.count(", op model") >= len(data["versus_d"])


def test_a_device_report_shows_that_device_alone(report: Path) -> None:
    data = _embedded(report)
    slugs = {row.get("device") for row in data["transitions"]} - {None}
    assert [dev["name"] for dev in data["devices"]] == sorted(slugs)  # no other profile under the same heading
    text = report.read_text(encoding="utf-8")
    for dev in data["devices"]:
        assert f"<h3>{dev['name']}: " in text  # the heading says which profile it is


def test_crossing_labels_name_their_pair_and_never_share_a_height(report: Path) -> None:
    data = _embedded(report)
    text = report.read_text(encoding="utf-8")
    for tag, (a, b) in zip("ab", data["pairs"], strict=False):
        assert f"<b>{tag}</b> = {a} → {b}" in text
    figure = re.search(r'Plotly.newPlot\(\s*"curves-d16",\s*(\[.*?\]),\s*(\{.*?\})\s*,\s*\{"displaylogo', text, re.S)
    layout = json.loads(figure.group(2))
    labels = [a for a in layout["annotations"] if re.match(r"[ab]: N", a.get("text", ""))]
    assert labels, "no crossing labels"
    assert all(a.get("textangle") in (None, 0) for a in labels)  # horizontal, readable
    heights = {}
    for a in labels:
        heights.setdefault(a["xref"], []).append(a["y"])
    assert all(len(ys) == len(set(ys)) for ys in heights.values())  # stacked: none drawn over another
    traces = json.loads(figure.group(1))
    dashes = {t["name"]: t["line"]["dash"] for t in traces if t.get("mode") == "lines" and t.get("showlegend")}
    assert len(set(dashes.values())) == len(dashes)  # equal curves stay visible: each variant its own dash


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.integration  # a real browser
@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian: apt-get install chromium)")
def test_report_renders_in_headless_chromium(report: Path) -> None:
    """Every figure is drawn, the console stays clean, no request leaves the file; a screenshot is kept."""
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    errors: list[str] = []
    requests: list[str] = []
    flags = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=flags)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(report.as_uri())
        figures = len(_embedded(report)["d"]) + 2
        page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {figures}")
        plots = page.evaluate("document.querySelectorAll('.js-plotly-plot').length")
        drawn = page.evaluate(
            "[...document.querySelectorAll('.js-plotly-plot')]"
            ".filter(d => d.querySelectorAll('.main-svg .scatterlayer .trace path').length > 0).length"
        )
        shot = Path(os.environ.get("ATTN_COST_SCREENSHOT", report.with_suffix(".png")))
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert plots == figures and drawn == plots
    assert errors == []
    assert [u for u in requests if not u.startswith("file:")] == []
    assert shot.stat().st_size > 10_000


def test_variants_with_their_own_sizes_are_reported_at_their_defaults() -> None:
    """Window, projected length, features, landmarks, kv heads and chunk take their defaults in the report, as
    in `crossover` (a report of such a variant once stopped with `depends on w: give a value for it`)."""
    from attn_cost.costmodel.conventions import DEFAULT
    from attn_cost.costmodel.crossover import Setting, transition_row
    from attn_cost.costmodel.symbols import DEFAULTS, L
    from attn_cost.profilers.report.gather import gather, report_dims

    pairs = [
        ("softmax-causal", "sliding-window"), ("softmax", "nystromformer"), ("softmax", "gqa"),
        ("softmax", "linformer"), ("softmax", "performer"), ("softmax-fused-causal", "linear-chunked"),
    ]  # fmt: skip
    setting = Setting(DEFAULT, "fp32", "core", "inference")
    data = gather(sorted({v for p in pairs for v in p}), pairs, [16], 64, 256, None, setting)
    expected = [transition_row(a, b, {**report_dims(16), **DEFAULTS}, setting, (L,)).n0 for a, b in pairs]
    assert [row["n0"] for row in data["transitions"]] == expected
