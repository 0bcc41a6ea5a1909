"""The commands that answer for a device one does not own (issue 43, items 4 and 5): `decode --device` (time per
generated token) and `report --device` (each variant's predicted time against N, its band and its crossings), on a
synthetic datasheet GPU whose figures make the arithmetic checkable by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from attn_cost.profilers.devicemodel.datasheet.data import SHIPPED
from attn_cost.profilers.devicemodel.datasheet.model import GpuModel

SLOW = "slow-gpu"
"""A synthetic GPU: the H100's peaks, SMs and clock, 10 GB/s of memory bandwidth, so that a KV cache of megabytes
takes milliseconds to read and every other cost (products, exponentials, launches) is far below it."""
BANDWIDTH = 10e9


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """ATTN_COST_HOME with a user's datasheet table holding the synthetic GPU (and a tiny-memory copy of it)."""
    from attn_cost.profilers.devicemodel.datasheet import data as datasheet

    home = tmp_path / "home"
    h100 = next(g for g in json.loads(SHIPPED.read_text())["gpus"] if g["name"] == "h100-sxm5-80gb")
    rows = [
        {**h100, "name": SLOW, "title": "Slow GPU", "device_names": [], "bandwidth_gbs": BANDWIDTH / 1e9},
        {**h100, "name": "tiny-gpu", "title": "Tiny GPU", "device_names": [], "memory_gb": 0.1},
    ]
    (home / "gpus").mkdir(parents=True)
    (home / "gpus" / "mine.json").write_text(
        json.dumps({"kind": "attn-cost datasheet GPUs", "schema": 1, "gpus": rows})
    )
    monkeypatch.setenv("ATTN_COST_HOME", str(home))
    datasheet._load.cache_clear()
    yield home
    datasheet._load.cache_clear()


def _decode(cli, *args: str) -> dict:
    r = cli("decode", *args, "--json")
    assert r.code == 0, r.err
    return r.json()


def _times(data: dict) -> dict[str, dict]:
    return {row["variant"]: row["time"] for row in data["results"]}


# -- decode --device --------------------------------------------------------------------------------------


def test_a_kv_cache_is_read_at_the_bandwidth(cli, home) -> None:
    """Fused attention's decode step reads the K and V caches: 2 tensors × N × d × h × b elements of 2 bytes (bf16).
    On the synthetic GPU that read is the step's time (its products and launches are microseconds, the read
    milliseconds), so one more token of context costs 4·d·h·b bytes at the bandwidth the model streams at
    (its fitted share of the datasheet's), whatever the launches cost: they do not grow with N."""
    d, h, b, n1, n2 = 64, 8, 4, 16384, 32768
    data = _decode(cli, "--device", SLOW, "--variant", "softmax-fused-causal", "--d", str(d), "--h", str(h),
                   "--b", str(b), "--n", str(n1), "--n", str(n2))  # fmt: skip
    assert data["dtype"] == "bf16" and data["device"]["predicted_by"] == "datasheet"
    t = _times(data)["softmax-fused-causal"]["per_token_s"]
    stream = BANDWIDTH * GpuModel.named(SLOW).eff.stream
    cache_bytes_per_token = 2 * d * h * b * 2  # K and V, one row each per token of context, bf16
    assert t[str(n2)] - t[str(n1)] == pytest.approx(cache_bytes_per_token * (n2 - n1) / stream, rel=1e-6)
    # and the read is the time: at 32k tokens the cache is 268 MB, 27 ms at 10 GB/s before efficiency
    assert t[str(n2)] == pytest.approx(cache_bytes_per_token * n2 / stream, rel=0.02)


def test_a_recurrent_state_costs_the_same_at_every_context(cli, home) -> None:
    """Linear attention's step reads and writes its d×d state, whatever the context: the same time at 1k and 64k
    tokens, growth 1.000, where the KV cache's time doubles with the context (bandwidth-bound: its growth
    ×(2N)/(N) tends to 2)."""
    data = _decode(cli, "--device", SLOW, "--variant", "linear-recurrent", "--variant", "softmax-fused-causal",
                   "--d", "64", "--h", "8", "--b", "4", "--n", "1024", "--n", "65536")  # fmt: skip
    times = _times(data)
    rec = times["linear-recurrent"]
    assert rec["per_token_s"]["1024"] == rec["per_token_s"]["65536"] and rec["growth_when_context_doubles"] == 1.0
    assert times["softmax-fused-causal"]["growth_when_context_doubles"] == pytest.approx(2.0, abs=0.01)
    for t in times.values():  # the interval holds the prediction, and the kernels it launches are counted
        for k, s in t["per_token_s"].items():
            assert t["low_s"][k] < s < t["high_s"][k]
        assert t["kernel_launches"] >= 1


def test_decode_on_a_device_reads_in_80_columns_and_says_what_answered(cli, home) -> None:
    r = cli("decode", "--device", SLOW, "--n", "1024", "--n", "4096", "--n", "16384", "--n", "65536",
            env={"COLUMNS": "80"})  # fmt: skip
    assert r.code == 0, r.err
    assert max(len(x) for x in r.out.splitlines()) <= 80
    assert "Per generated token on Slow GPU: time" in r.out and "datasheet figures" in r.out
    for name in ("softmax-causal", "softmax-fused-causal", "linear-recurrent", "latte-recurrent"):
        assert name in r.out


def test_a_cache_beyond_the_gpus_memory_is_marked(cli, home) -> None:
    """32 heads of d = 128, batch 8, bf16: the KV cache at 64k tokens is 2·65,536·128·256·2 bytes = 8.6 GB, more
    than the 0.1 GB of the tiny GPU; at 1k tokens it is 134 MB, also more; a recurrent state of 256 × 128² × 2 bytes
    (8.4 MB) fits."""
    args = ("--device", "tiny-gpu", "--variant", "softmax-fused-causal", "--variant", "linear-recurrent",
            "--d", "128", "--h", "32", "--b", "8", "--n", "64", "--n", "65536")  # fmt: skip
    times = _times(_decode(cli, *args))
    assert times["softmax-fused-causal"]["fits_in_memory"] == {"64": True, "65536": False}
    assert times["linear-recurrent"]["fits_in_memory"] == {"64": True, "65536": True}
    r = cli("decode", *args)
    assert r.code == 0 and "†" in r.out and "does not fit" in " ".join(r.out.split())


def test_decode_on_a_calibrated_device_is_answered_by_its_op_model(cli) -> None:
    """A measured CPU with an op calibration: its profile was fitted at core scope, so the op model answers the
    decode step, and says so; the CLI's dtype defaults to what it was calibrated in."""
    data = _decode(cli, "--device", "cpu-amd-epyc-5155e7", "--variant", "linear-recurrent", "--n", "1024")
    assert data["device"]["predicted_by"] == "calibrated" and data["dtype"] == "fp32"
    assert "op calibration" in data["device"]["answered_by"]["calibrated"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--device", "cuda-nvidia-h200-12fde9-bf16"], "no fit at decode scope"),
        (["--device", "cpu-amd-epyc-5155e7", "--dtype", "bf16"], "was made in fp32, not bf16"),
        (["--device", "no-such-gpu"], "unknown device"),
    ],
)
def test_a_device_that_cannot_price_a_decode_step_is_one_line(cli, args, says) -> None:
    r = cli("decode", *args)
    assert r.code == 2 and r.out == ""
    assert len(r.err.strip().splitlines()) == 1 and says in r.err, r.err


# -- report --device on a GPU one does not own -----------------------------------------------------------------


def _figure(text: str, div: str) -> tuple[list[dict], dict]:
    """The traces and layout of one plotly figure of the page."""
    found = re.search(rf'Plotly.newPlot\(\s*"{div}",\s*(\[.*?\]),\s*(\{{.*?\}})\s*,\s*\{{"displaylogo', text, re.S)
    assert found, f"no figure {div}"
    return json.loads(found.group(1)), json.loads(found.group(2))


def _report(cli, tmp_path: Path, *args: str) -> tuple[str, dict]:
    out = tmp_path / "r.html"
    r = cli("report", "--html", str(out), *args)
    assert r.code == 0, r.err
    text = out.read_text(encoding="utf-8")
    payload = re.search(r"<script type='application/json' id='attn-cost-data'>(.*?)</script>", text, re.S)
    return text, json.loads(payload.group(1).replace("<\\/", "</"))


def test_a_datasheet_gpus_report_draws_each_variants_time_its_band_and_the_crossing(cli, tmp_path) -> None:
    """`report --device` on a GPU that was never measured (the H100 SXM5: no profile ships for it): a time panel
    with one predicted curve per variant over its shaded 95 % interval, and each pair's crossing marked at the N0
    that `crossover --device` prints (both pairs cross on it; on the slow GPU fused attention stays cheaper)."""
    gpu = "h100-sxm5-80gb"
    pairs = [("softmax-fused", "linear"), ("softmax-fused", "latte")]
    args = [x for a, b in pairs for x in ("--pair", f"{a}:{b}")] + ["--d", "64", "--dtype", "bf16"]
    text, data = _report(cli, tmp_path, "--device", gpu, *args)
    traces, layout = _figure(text, "curves-d64")
    time_axis = next(k for k, v in layout.items() if k.startswith("xaxis") and v.get("anchor") == "y4")
    x4 = "x" + time_axis.removeprefix("xaxis")
    panel = [t for t in traces if t.get("xaxis") == x4]
    lines = {t["name"] for t in panel if t.get("mode") == "lines" and not t.get("fill") and "95 %" not in t["name"]}
    assert lines == {f"{v} datasheet" for v in ("softmax-fused", "linear", "latte")}
    bands = [t for t in panel if t.get("fill") == "tonexty"]
    assert len(bands) == 3
    for v, curve in data["predicted"]["curves"]["64"].items():
        assert all(lo < s < hi for lo, s, hi in zip(curve["low"], curve["seconds"], curve["high"], strict=True)), v
    for a, b in pairs:
        cross = cli("crossover", "--device", gpu, "--pair", f"{a}:{b}", "--d", "64", "--dtype", "bf16", "--json")
        (row,) = cross.json()["results"]
        n0 = row["predicted_n0"]
        assert n0 is not None and data["grid"][0] < n0 < data["grid"][-1]  # the panel reaches the crossing
        labels = [x["text"] for x in layout["annotations"] if x.get("xref") == x4 + " domain" or x.get("xref") == x4]
        assert any(t.endswith(f"N0 datasheet {n0:,}") for t in labels), labels
        assert any(s.get("x0") == n0 and s.get("line", {}).get("dash") == "dot" for s in layout["shapes"])
    assert f"Not measured: no device profile of {gpu}" in text and "No device profile: run" not in text


def test_a_measured_gpus_datasheet_report_shows_its_measured_times_beside_the_curves(cli, tmp_path) -> None:
    """The H200 has a datasheet row and shipped profiles: `report --device h200-sxm-141gb` draws, at the sizes
    it was measured at, its measured times beside the datasheet's curves, with both crossings; the datasheet's
    is what `crossover --device h200-sxm-141gb` prints at those sizes, the measured one what its profile does,
    drawn only where it stands (softmax-fused → latte at d = 64 stands; → linear does not: its replicates
    disagree, and `crossover` marks it ✗)."""
    pairs = ("softmax-fused:linear", "softmax-fused:latte")
    args = [x for p in pairs for x in ("--pair", p)]
    text, data = _report(cli, tmp_path, "--device", "h200-sxm-141gb", *args, "--d", "64", "--dtype", "bf16")
    twin = next(t for t in data["twins"] if t["sizes"]["d"] == 64)
    assert twin["profile"] == "cuda-nvidia-h200-12fde9-bf16" and (twin["sizes"]["b"], twin["sizes"]["h"]) == (32, 1)
    assert set(twin["measured"]) == set(twin["predicted"]) == {"softmax-fused", "linear", "latte"}
    size = ("--d", "64", "--b", "32", "--dtype", "bf16", *args, "--json")
    sheet = cli("crossover", "--device", "h200-sxm-141gb", *size).json()["results"]
    measured = cli("crossover", "--device", "cuda-nvidia-h200-12fde9-bf16", *size).json()["results"]
    assert [m["n0_standing"] != "stands" for m in measured] == [True, False]  # linear's does not stand, latte's does
    i = data["twins"].index(twin)
    traces, layout = _figure(text, f"twin-{i}")
    names = {t["name"] for t in traces}
    assert {"softmax-fused measured", "linear measured", "softmax-fused datasheet", "linear datasheet"} <= names
    labels = {x["text"] for x in layout["annotations"]}
    for tag, mark, s, m in zip("ab", twin["transitions"], sheet, measured, strict=True):
        assert mark["predicted_n0"] == s["predicted_n0"] and f"{tag}: N0 datasheet {s['predicted_n0']:,}" in labels
        assert (mark["measured_n0"], mark["n0_standing"]) == (m["measured_n0"], m["n0_standing"])
        drawn = f"{tag}: N0 measured {m['measured_n0']:,.0f}" in labels
        assert drawn == (m["n0_standing"] == "stands"), (tag, labels)


@pytest.mark.parametrize(
    ("device", "dtype"),
    [("cuda-nvidia-h200-12fde9-bf16", "bf16"), ("cuda-nvidia-h200-12fde9", "fp32"), ("h100-sxm5-80gb", "bf16"),
     ("cpu-amd-epyc-5155e7", "fp32")],
)  # fmt: skip
def test_crossover_and_decode_on_a_device_compare_at_its_own_dtype_unless_told(cli, device: str, dtype: str) -> None:
    """`--device NAME` alone compares at the dtype the device has numbers for (the H200's bf16 profile was fitted
    on bf16 timings: at fp32 its corrected column would be empty); --dtype given wins."""
    pair = ["--pair", "softmax-fused:linear", "--d", "64", "--device", device, "--json"]
    rows = cli("crossover", *pair).json()["results"]
    assert {r["dtype"] for r in rows} == {dtype}
    if device.startswith("cuda"):
        assert all(r["corrected_n0"] is not None for r in rows)
    assert {r["dtype"] for r in cli("crossover", *pair, "--dtype", "fp16").json()["results"]} == {"fp16"}
    bare = cli("crossover", "--pair", "softmax:linear", "--d", "64", "--json").json()["results"]
    assert {r["dtype"] for r in bare} == {"fp32"}  # no device: fp32, as before
