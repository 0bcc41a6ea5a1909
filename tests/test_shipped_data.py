"""The measurements, device profiles and op calibrations that ship with attn-cost load and are consistent with each
other and the engine, for every shipped device (no test here depends on one device's numbers)."""

from __future__ import annotations

import json

import pytest
from attn_cost.costmodel.crossover import Setting, crossover
from attn_cost.costmodel.symbols import DEFAULTS, L, b, d, h
from attn_cost.profilers.devicemodel.measured.data import SHIPPED as PROFILES
from attn_cost.profilers.devicemodel.measured.data import load_profile
from attn_cost.profilers.devicemodel.measured.model import corrected_points
from attn_cost.profilers.devicemodel.names import OPMODELS
from attn_cost.profilers.store.store import SHIPPED as RESULTS
from attn_cost.profilers.store.store import ResultStore

PROFILE_FILES = sorted(PROFILES.glob("*.json"))


@pytest.fixture(params=PROFILE_FILES, ids=lambda p: p.stem)
def shipped(request):
    return load_profile(str(request.param))


def test_every_shipped_profile_has_its_measurements(shipped) -> None:
    assert (RESULTS / f"{shipped.slug}.jsonl").exists()


def test_refitting_the_shipped_measurements_gives_the_shipped_constants(shipped, tmp_path) -> None:
    from attn_cost.profilers.measure.profile import Measurer
    from attn_cost.profilers.measure.sizes import Sizes
    from attn_cost.profilers.workflow.validating import fit_profile

    store = ResultStore(shipped.device, tmp_path)  # reads the shipped results for this device
    fit_d = next(iter(shipped.time.values())).fit_d
    first = shipped.validation[0]  # the batch and heads it was measured at (a GPU's campaign: b = 32)
    template = Sizes(N=1, d=1, h=first["heads"], b=first["batch"])
    measurer = Measurer(shipped.device["kind"], store, scope=shipped.scope, dtype=shipped.dtype)
    refit = fit_profile(measurer, sorted(shipped.time), fit_d, template)
    for name, fit in shipped.time.items():
        assert refit.time[name].coefficients() == pytest.approx(fit.coefficients(), rel=1e-9, abs=1e-18)


def _model_is_exact(variant: str, kind: str) -> bool:
    """Whether the engine's peak is the device's, byte for byte. On a CPU always (the live-tensor tracer equals
    it). On CUDA not for fused SDPA (the CPU kernel's logsumexp, b·h·N fp32, that CUDA's keeps only in
    training, is in the model; CUDA's own workspace is a few hundred bytes). A chunked variant, whose code pads N
    to whole chunks, is exact at every N (padded lengths are in the model)."""
    return kind != "cuda" or not variant.startswith("softmax-fused")


def test_measured_memory_crossovers_equal_the_analytic_ones(shipped) -> None:
    exact = [r for r in shipped.validation if all(_model_is_exact(v, shipped.device["kind"]) for v in (r["a"], r["b"]))]
    assert exact
    for row in exact:
        assert row["measured_n1"] == row["analytic_n1"] == row["corrected_n1"]


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.jsonl")), ids=lambda p: p.stem)
def test_measured_peaks_are_the_model_s_where_it_is_exact_and_explained_where_not(path) -> None:
    """Every shipped peak against the engine's at the same sizes: equal, or (CUDA) the known differences."""
    from attn_cost.costmodel.symbols import BY_NAME
    from attn_cost.costmodel.variants import derive
    from attn_cost.profilers.measure.sizes import Sizes

    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["kind"] != "memory" or rec["status"] != "ok" or rec["scope"] != "core":
            continue
        sizes = Sizes(**rec["sizes"]).symbols()  # the variant-specific sizes at their defaults where not given
        model = derive(rec["variant"]).peak(rec["dtype"])

        def peak(n: int, model=model, sizes=sizes) -> int:
            return int(model.at({**sizes, BY_NAME["N"]: n})[0])

        measured, n = rec["memory"]["peak_bytes"], rec["sizes"]["N"]
        if _model_is_exact(rec["variant"], rec["device"]["kind"]):
            assert measured == peak(n), rec["key"]
        else:  # fused SDPA on CUDA: no logsumexp (4·b·h·N bytes), a small workspace
            heads = rec["sizes"]["b"] * rec["sizes"]["h"]
            assert 0 <= peak(n) - measured <= 4 * heads * n, rec["key"]


def test_a_chunked_peak_measured_at_a_padded_length_is_the_model_s() -> None:
    """linear-chunked on an H200 (bf16, b = 32, h = 1, d = 64, C = 64) at N = 257, padded to 320 rows: the
    measured peak, 7,090,176 bytes, is 3 inputs of 257 rows and 3 padded copies of 320 rows, 2 bytes each."""
    from attn_cost.costmodel.symbols import C, N
    from attn_cost.costmodel.variants import derive

    sizes = {N: 257, C: 64, b: 32, h: 1, d: 64}
    assert 2 * 32 * 64 * (3 * 257 + 3 * 320) == 7_090_176
    assert derive("linear-chunked").peak("bf16").at(sizes)[0] == 7_090_176


def test_shipped_validation_rows_match_a_fresh_computation(shipped) -> None:
    for row in shipped.validation:
        dims = {**DEFAULTS, d: row["d"], h: row["heads"], b: row["batch"], L: row["d"]}  # Latte's L defaults to d
        setting = Setting(scope=shipped.scope, dtype=shipped.dtype)
        assert row["analytic_n0"] == crossover(row["a"], row["b"], "flops", dims, setting, exact=False).n
        assert corrected_points(shipped, row["a"], row["b"], dims, setting)[0] == row["corrected_n0"]


def test_crossover_with_the_shipped_device(cli, shipped, monkeypatch) -> None:
    """`crossover --device` prints the profile's own validated points for one of its pairs (whichever it has). The op
    model's bootstrap intervals (tested on the tests' own calibration) are left out: 15 s a device."""
    from attn_cost.profilers.devicemodel.calibrated import model as oppredict

    monkeypatch.setattr(oppredict, "BOOTSTRAP", 0)  # where the draws read it (opmodel only defines it)
    expected = {**shipped.validation[0], **shipped.measured[0]}  # the measured row: what the profile keeps of a unit
    pair = f"{expected['a']}:{expected['b']}"
    name = shipped.slug if shipped.dtype == "fp32" else f"{shipped.slug}-{shipped.dtype}"  # the campaign's names
    r = cli(
        "crossover", "--d", str(expected["d"]), "--b", str(expected["batch"]), "--h", str(expected["heads"]),
        "--dtype", shipped.dtype, "--pair", pair, "--device", name, "--json",
    )  # fmt: skip
    assert r.code == 0, r.err
    (row,) = [x for x in r.json()["results"] if (x["heads"], x["batch"]) == (expected["heads"], expected["batch"])]
    assert row["corrected_n0"] == expected["corrected_n0"] and row["measured_n0"] == expected["measured_n0"]


def test_results_file_lines_are_all_valid_records() -> None:
    for path in RESULTS.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            assert rec["schema"] == 1 and rec["status"] in ("ok", "oom")


@pytest.mark.parametrize("path", sorted(OPMODELS.glob("*.json")), ids=lambda p: p.stem)
def test_every_shipped_op_calibration_loads_its_fitted_parameters_and_predicts(path, monkeypatch) -> None:
    import numpy as np
    from attn_cost.profilers.devicemodel.calibrated import data as om
    from attn_cost.profilers.devicemodel.device import row_dims

    def no_fitting(*args, **kwargs):
        raise AssertionError("a shipped calibration was refitted on loading")

    monkeypatch.setattr(om.Gemm, "fit", no_fitting)
    monkeypatch.setattr(om.Streaming, "fit", no_fitting)
    model = om.load_opmodel(str(path))
    assert model.slug == path.stem
    calls = om.kernel_calls("taylorshift-efficient", "core", "fp32", row_dims({"d": 16}))
    seconds = model.time(calls, np.array([64.0, 4096.0]))
    assert np.all(np.isfinite(seconds)) and 0 < seconds[0] < seconds[1]  # longer sequences take longer


def test_every_shipped_data_file_is_installed() -> None:
    """Every data file of a package (profilers/data/, costmodel's claims.json) matches a glob of pyproject.toml's
    package-data, so `pip install .` (not only an editable install) ships it: gpus.json and gpumodel.json were once
    left out."""
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    root = Path(__file__).parents[1]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    left_out = []
    for package, folder in (("attn_cost.profilers", root / "profilers"), ("attn_cost.costmodel", root / "costmodel")):
        files = [p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")]
        assert files
        left_out += [f"{folder.name}/{f}" for f in files if not any(f.match(g) for g in globs.get(package, []))]
    assert not left_out, f"not in package-data: {left_out}"


def test_no_shipped_profile_rates_a_kernel_faster_than_its_device_s_peak(shipped) -> None:
    """A measured GPU has its datasheet row, and every fitted FLOP rate is at most its peak for the dtype."""
    from attn_cost.profilers.devicemodel.measured.data import device_peak

    peak = device_peak(shipped.device, shipped.dtype)
    assert peak is not None or shipped.device["kind"] != "cuda"
    for name, fit in shipped.time.items():
        if peak is not None:
            assert fit.peak_flops_per_s == peak.flops_per_s, name
            assert fit.flops_per_s is None or fit.flops_per_s <= peak.flops_per_s * (1 + 1e-9), name


def test_corrected_memory_crossovers_are_the_measured_ones(shipped) -> None:
    """Peak memory is deterministic: the fitted memory curves cross where the measured peaks do (softmax-fused →
    latte on the H200 at d = 64 in bf16: 64, where one scale for the whole peak put it at 1,496)."""
    rows = [r for r in shipped.validation if r["measured_n1"] is not None and r["corrected_n1"] is not None]
    assert rows
    assert [(r["a"], r["b"], r["d"], r["corrected_n1"]) for r in rows] == [
        (r["a"], r["b"], r["d"], r["measured_n1"]) for r in rows
    ]


MADE = [p for p in PROFILE_FILES if json.loads(p.read_text()).get("made")]


@pytest.mark.parametrize("path", MADE, ids=lambda p: p.stem)
def test_a_profile_made_from_records_is_what_its_command_makes(cli, path, monkeypatch) -> None:
    """The command a profile says made it, run again here from the shipped records (timing nothing), gives its
    measured rows, standings and fitted constants."""
    import shlex
    from pathlib import Path

    import attn_cost.profilers.measure.profile as prof

    monkeypatch.setattr(prof, "time_cases", None)  # nothing may be timed
    shipped = load_profile(str(path))
    command = shlex.split(shipped.made.split(": ", 1)[0])
    assert command[:2] == ["attn-cost", "validate"] and "--records" in command
    root = Path(__file__).parents[1]  # the command's files are named from the repository's root
    files = [str(root / arg) if flag in ("--records", "--summary") else arg
             for flag, arg in zip(["", *command], command, strict=False)]  # fmt: skip
    r = cli(*files[1:], "--json", "--no-save")
    assert r.code == 0, r.err
    again = r.json()
    assert again["measured"] == shipped.measured
    for name, fit in shipped.time.items():
        assert again["time"][name]["seconds_per_flop"] == pytest.approx(fit.seconds_per_flop, rel=1e-9, abs=1e-30)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _number_and_spread(text: str) -> tuple[int | None, int | None]:
    """`4,038 ± 346` as (4038, 346), `2,834` as (2834, None), words as (None, None)."""
    head = text.split(" (")[0]
    if not head[:1].isdigit():
        return None, None
    value, _, spread = head.partition(" ± ")
    return int(value.replace(",", "")), int(spread.replace(",", "")) if spread else None


def test_every_measured_n0_in_the_readme_is_what_crossover_device_prints(cli, monkeypatch) -> None:
    """The README's GPU tables (benchmarks/gpu_table.py) against `crossover --device <shipped profile> --json`: each
    measured N0, its spread and whether it stands."""
    from pathlib import Path

    from attn_cost.profilers.devicemodel.calibrated import model as oppredict

    monkeypatch.setattr(oppredict, "BOOTSTRAP", 0)  # where the draws read it (opmodel only defines it)
    text = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- gpu-table: begin -->")[1].split("<!-- gpu-table: end -->")[0]
    rows = []
    for line in block.splitlines():
        cells = _cells(line)
        if " → " in cells[0] and len(cells) == 11 and cells[2].isdigit():  # A → B | dtype | d | … | N0 measured | …
            a, b = cells[0].split(" → ")
            rows.append((a, b, cells[1], int(cells[2]), cells[7], cells[8]))
        elif len(cells) == 8 and cells[0].isdigit():  # the TaylorShift table: d | dtype | N0 | N̂0 | stands | …
            rows.append(("taylorshift-direct", "taylorshift-efficient", cells[1], int(cells[0]), cells[3], cells[4]))
    assert len(rows) >= 8
    profiles = {p.dtype: p for p in map(load_profile, map(str, PROFILE_FILES)) if p.device["kind"] == "cuda"}
    for a, b, dtype, dv, measured, stands in rows:
        profile = profiles[dtype]
        unit = next(u for u in profile.measured if (u["a"], u["b"], u["d"]) == (a, b, dv))
        r = cli("crossover", "--pair", f"{a}:{b}", "--d", str(dv), "--b", str(unit["batch"]), "--h",
                str(unit["heads"]), "--dtype", dtype, "--device", profile.name, "--json")  # fmt: skip
        assert r.code == 0, r.err
        (row,) = r.json()["results"]
        value, spread = _number_and_spread(measured)
        shown = (row["measured_n0"], row["n0_uncertainty"])
        assert (value, spread) == tuple(None if x is None else round(x) for x in shown), (a, b, dtype, dv)
        assert stands.startswith("yes") == (row["n0_standing"] == "stands"), (a, b, dtype, dv)
