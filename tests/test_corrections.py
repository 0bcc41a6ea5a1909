"""Fitting per-device corrections: known constants are recovered, bad inputs are refused."""

from __future__ import annotations

import json
import random

import pytest
from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.devicemodel.device import exact_crossing
from attn_cost.profilers.devicemodel.measured.data import DeviceProfile, MemoryFit, load_profile
from attn_cost.profilers.devicemodel.measured.fit import fit_memory, fit_time
from attn_cost.profilers.devicemodel.measured.model import corrected_time_curve, time_features, value_at
from scipy.optimize import brentq

TRUE = {"launch_s": 5e-6, "seconds_per_flop": 1 / 50e9, "seconds_per_byte": 1 / 10e9}


def synthetic(variant: str, noise: float, seed: int = 0) -> list[tuple[dict, float]]:
    """Timings a device with the TRUE constants would produce, with multiplicative noise."""
    rng = random.Random(seed)
    feats = time_features(variant, "core", "fp32")
    out = []
    for d in (8, 16, 32):
        for n in (64, 128, 256, 512, 1024, 2048, 4096):
            sizes = {"N": n, "d": d, "h": 1, "b": 1, "L": d}
            k, f, b = (value_at(e, sizes) for e in feats)
            t = TRUE["launch_s"] * k + TRUE["seconds_per_flop"] * f + TRUE["seconds_per_byte"] * b
            out.append((sizes, t * (1 + rng.gauss(0, noise))))
    return out


@pytest.mark.parametrize("variant", ["taylorshift-efficient", "taylorshift-direct", "softmax", "linear-recurrent"])
def test_known_constants_are_recovered_from_exact_timings(variant: str) -> None:
    exact = fit_time(synthetic(variant, 0.0), variant)
    for name, true in TRUE.items():
        assert getattr(exact, name) == pytest.approx(true, rel=1e-6)


@pytest.mark.parametrize("variant", ["taylorshift-efficient", "taylorshift-direct", "softmax"])
def test_known_constants_are_recovered_from_noisy_timings(variant: str) -> None:
    """1% noise; variants where every term carries a visible share of the time."""
    noisy = fit_time(synthetic(variant, 0.01), variant)
    for name, true in TRUE.items():
        assert getattr(noisy, name) == pytest.approx(true, rel=0.1)
    assert noisy.median_rel_err < 0.02 and noisy.r2 > 0.99
    assert noisy.flops_per_s == pytest.approx(50e9, rel=0.1) and noisy.bytes_per_s == pytest.approx(10e9, rel=0.1)


def test_a_constant_the_data_does_not_need_fits_to_zero() -> None:
    """Non-negative least squares: no negative 'speed', and unused resources come out as zero."""
    samples = [
        (s, 2e-6 * value_at(time_features("softmax", "core", "fp32")[0], s)) for s, _ in synthetic("softmax", 0.0)
    ]
    fit = fit_time(samples, "softmax")
    assert fit.launch_s == pytest.approx(2e-6) and fit.seconds_per_flop == 0 and fit.flops_per_s is None


def test_corrected_crossover_is_where_the_fitted_curves_cross() -> None:
    setting = Setting()
    fits = {v: fit_time(synthetic(v, 0.0), v) for v in ("taylorshift-direct", "taylorshift-efficient")}
    from attn_cost.costmodel.symbols import b, d, h

    dims = {d: 24, h: 1, b: 1}
    curves = {v: corrected_time_curve(f, v, dims, setting) for v, f in fits.items()}
    n = exact_crossing(curves["taylorshift-direct"], curves["taylorshift-efficient"])

    def gap(x: float) -> float:  # the same constants evaluated independently, at real N
        sizes = {"N": x, "d": 24, "h": 1, "b": 1, "L": 24}
        t = {}
        for v in fits:
            k, f, bb = (value_at(e, sizes) for e in time_features(v, "core", "fp32"))
            t[v] = TRUE["launch_s"] * k + TRUE["seconds_per_flop"] * f + TRUE["seconds_per_byte"] * bb
        return t["taylorshift-direct"] - t["taylorshift-efficient"]

    assert n == pytest.approx(brentq(gap, 2, 10**5), rel=1e-6)


def fused_memory(without_stats: bool) -> list[tuple[dict, int]]:
    """Peak bytes of softmax-fused in bf16 at b = 32 as a kernel that keeps Q, K, V and the output (8·N·b·d·h bytes)
    and, unless `without_stats`, the fp32 row statistics (4·N·b·h), plus a 272-byte workspace: what the H200's
    cuDNN kernel asked the allocator for in inference (measured = modelled − 4·N·b·h + 272)."""
    out = []
    for d in (64, 128):
        for n in (8, 64, 256, 1279, 4351, 65536):
            stats = 0 if without_stats else 4 * n * 32
            out.append(({"N": n, "d": d, "h": 1, "b": 32, "L": d}, 8 * n * 32 * d + stats + 272))
    return out


def test_memory_terms_the_kernel_does_not_allocate_fit_to_zero() -> None:
    fit = fit_memory(fused_memory(without_stats=True), "softmax-fused", "core", "bf16")
    assert fit.terms["N*b*d*h"] == pytest.approx(1, abs=1e-5) and fit.terms["N*b*h"] == pytest.approx(0, abs=1e-3)
    assert fit.offset_bytes == pytest.approx(272, abs=1) and fit.max_abs_residual_bytes < 400
    exact = fit_memory(fused_memory(without_stats=False), "softmax-fused", "core", "bf16")
    assert exact.terms == {"N*b*d*h": 1.0, "N*b*h": 1.0} and exact.offset_bytes == pytest.approx(272, abs=1)


def test_corrected_memory_crossover_is_where_the_measured_memories_cross() -> None:
    """softmax-fused (16,384·N + 272 bytes at d = 64, b = 32, bf16, without its statistics) against Latte (the larger of
    16,384·N and 12,288·N + 262,144: its op list, which the CPU tracer and CUDA agree with byte for byte): B is no
    larger from (262,144 − 272) / 4,096 = 63.93, so N1 = 64. One scale for the whole peak (the fit before per-term
    scales) put it at 1,496."""
    from attn_cost.profilers.devicemodel.measured.model import corrected_memory_curve
    from attn_cost.profilers.measure.sizes import Sizes

    setting = Setting(dtype="bf16")
    fits = {"softmax-fused": fit_memory(fused_memory(without_stats=True), "softmax-fused", "core", "bf16"),
            "latte": MemoryFit(1.0, 0.0, 0.0, 2)}  # fmt: skip
    dims = Sizes(N=1, d=64, h=1, b=32).symbols()
    curves = {v: corrected_memory_curve(f, v, dims, setting) for v, f in fits.items()}
    assert exact_crossing(curves["softmax-fused"], curves["latte"]) == pytest.approx((262_144 - 272) / 4_096, rel=1e-3)


def test_memory_terms_one_head_dim_cannot_tell_apart_keep_the_models_ratio() -> None:
    """At one head dim 8·N·b·d·h and 4·N·b·h are in a fixed ratio: the fit moves both scales the least that explains
    the bytes (the projection of (1, 1) onto 512·s1 + 4·s2 = 512 at d = 64), not one of them to zero."""
    samples = [(s, m) for s, m in fused_memory(without_stats=True) if s["d"] == 64]
    fit = fit_memory(samples, "softmax-fused", "core", "bf16")
    along = 4 / (512**2 + 4**2)
    assert fit.terms["N*b*d*h"] == pytest.approx(1 - 512 * along, abs=1e-5)
    assert fit.terms["N*b*h"] == pytest.approx(1 - 4 * along, abs=1e-5)


def test_too_few_points_is_an_error() -> None:
    with pytest.raises(UserError, match="at least 4 timings"):
        fit_time(synthetic("softmax", 0.0)[:3], "softmax")
    with pytest.raises(UserError, match="at least 2 memory"):
        fit_memory([({"N": 8, "d": 8, "h": 1, "b": 1}, 10)], "softmax")


def test_a_rate_above_the_peak_comes_back_at_the_peak_and_the_other_constants_refit() -> None:
    """Timings of a device whose products run at 50 GFLOP/s, fitted with a peak of 25: P is the peak (the bound
    active) and t_launch and 1/W are the least squares of what is left, t − F/25e9, on K and B with weights 1/t."""
    import numpy as np
    from attn_cost.profilers.devicemodel.measured.data import Peak

    samples = synthetic("softmax", 0.0)
    fit = fit_time(samples, "softmax", peak=Peak(25e9, "a test peak"))
    assert fit.flops_per_s == pytest.approx(25e9, rel=1e-9) and fit.bound_active and "a test peak" in fit.bound
    rows, rest = [], []
    for sizes, t in samples:
        k, f, b = (value_at(e, sizes) for e in time_features("softmax", "core", "fp32"))
        rows.append([k / t, b / t])
        rest.append((t - f / 25e9) / t)
    (launch, per_byte), *_ = np.linalg.lstsq(np.array(rows), np.array(rest), rcond=None)
    assert launch > 0 and per_byte > 0  # the unconstrained optimum is inside the bounds: it is the bounded fit's
    assert fit.launch_s == pytest.approx(launch, rel=1e-6) and fit.seconds_per_byte == pytest.approx(per_byte, rel=1e-6)
    assert fit.launch_s != pytest.approx(TRUE["launch_s"], rel=1e-3)  # refitted, not kept


def test_a_rate_under_the_peak_is_left_alone() -> None:
    from attn_cost.profilers.devicemodel.measured.data import Peak

    fit = fit_time(synthetic("softmax", 0.0), "softmax", peak=Peak(100e9, "a test peak"))
    assert fit.flops_per_s == pytest.approx(50e9, rel=1e-6) and not fit.bound_active and fit.bound is None


@pytest.mark.parametrize("n", [1024, 4096])
def test_a_fused_causal_kernel_is_rated_by_the_tiles_it_computes(n: int) -> None:
    """FlashAttention computes the 128×128 tiles on and below the diagonal: N(N + 128)/2 scores of the N² (the
    engine's `--causal-count tiles`), two products of 2·d FLOPs per score; a materialised causal softmax multiplies the
    whole matrices (2·2·N²·d) and masks afterwards. Counted dense, the fused kernel's rate doubled (1,109 TFLOP/s on
    the H200, above its 989 peak)."""
    sizes, d = {"N": n, "d": 64, "h": 1, "b": 1, "L": 64}, 64
    fused = value_at(time_features("softmax-fused-causal", "core", "bf16")[1], sizes)
    assert fused == 2 * 2 * d * n * (n + 128) / 2
    assert value_at(time_features("softmax-fused-causal", "core", "bf16", "dense")[1], sizes) == 2 * 2 * d * n * n
    assert value_at(time_features("softmax-causal", "core", "bf16")[1], sizes) == 2 * 2 * d * n * n


def test_a_profile_rating_a_kernel_above_its_peak_is_refused_in_one_line(cli, tmp_path) -> None:
    """The bf16 H200 profile as first shipped: softmax-fused-causal at 1,109 TFLOP/s, above the datasheet's 989."""
    fits = {v: fit_time(synthetic(v, 0.0), v) for v in ("softmax-fused-causal", "linear-chunked")}
    fits["softmax-fused-causal"].seconds_per_flop = 1 / 1.109e15
    device = {"kind": "cuda", "name": "NVIDIA H200", "torch": "2.11.0", "threads": 16, "timer_version": 2}
    prof = DeviceProfile(device, "core", "bf16", time=fits, memory={v: MemoryFit(1.0, 0.0, 0.0, 2) for v in fits})
    path = str(prof.save(tmp_path))
    with pytest.raises(UserError, match=r"rates softmax-fused-causal at 1,109 TFLOP/s, above the h200-sxm-141gb"):
        load_profile(path)
    r = cli("crossover", "--d", "64", "--pair", "softmax-fused-causal:linear-chunked", "--dtype", "bf16",
            "--device", path)  # fmt: skip
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "refit it from its records" in r.err
    fits["softmax-fused-causal"].seconds_per_flop = 1 / 0.9e15
    ok = DeviceProfile(device, "core", "bf16", time=fits, memory=prof.memory)
    assert load_profile(str(ok.save(tmp_path / "ok"))).time["softmax-fused-causal"].flops_per_s == pytest.approx(9e14)


def test_unknown_device_name_gets_a_suggestion() -> None:
    with pytest.raises(UserError, match="unknown device"):
        load_profile("cpu-nonexistent-device")


def test_a_broken_profile_file_is_an_error(tmp_path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not a readable device profile"):
        load_profile(str(bad))
    bad.write_text(json.dumps({"schema": 1, "device": {}}))
    with pytest.raises(UserError, match="not an attn-cost device profile"):
        load_profile(str(bad))


def _profile_file(tmp_path, device_name: str = "Synthetic CPU") -> str:
    fits = {v: fit_time(synthetic(v, 0.0), v) for v in ("softmax", "linear")}
    device = {"kind": "cpu", "name": device_name, "torch": "2.13.0", "threads": 2}
    prof = DeviceProfile(device, "core", "fp32", time=fits, memory={v: MemoryFit(1.0, 0.0, 0.0, 2) for v in fits})
    prof.measured = [
        {
            "a": "softmax",
            "b": "linear",
            "d": 32,
            "heads": 1,
            "batch": 1,
            "measured_n0": 123.0,
            "n0_uncertainty": 4.0,
            "measured_n1": 32.0,
            "n1_uncertainty": 0.0,
        }
    ]
    return str(prof.save(tmp_path))


def test_crossover_with_a_device_profile(cli, tmp_path) -> None:
    path = _profile_file(tmp_path)
    r = cli("crossover", "--d", "32", "--pair", "softmax:linear", "--device", path, "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    assert row["corrected_n0"] is not None and row["measured_n0"] == 123.0 and row["corrected_n1"] == row["n1"]
    shown = cli("crossover", "--d", "32", "--pair", "softmax:linear", "--device", path)
    assert shown.code == 0 and "corrected" in shown.out and "N0 time" in shown.out
    n0_line = next(line for line in shown.out.splitlines() if "N0 time" in line)
    assert n0_line.endswith("123 ± 4")  # the profile's measured N0 and its spread, in the measured column


def test_crossover_with_an_unknown_device_is_one_line(cli) -> None:
    r = cli("crossover", "--d", "64", "--device", "no-such-gpu")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "unknown device" in r.err


def test_validating_a_profile_of_another_device_is_refused(cli, tmp_path) -> None:
    path = _profile_file(tmp_path, "Some Other CPU")
    r = cli("validate", "--pair", "softmax:linear", "--profile", path, "--cpu")
    assert r.code == 2 and "fitted on Some Other CPU" in r.err and len(r.err.strip().splitlines()) == 1


@pytest.mark.slow  # a whole validation on the CPU: about 40 s
def test_validate_fits_on_some_head_dims_and_checks_another(cli) -> None:
    r = cli(
        "validate",
        "--pair",
        "softmax:linear",
        "--fit-d",
        "8",
        "--fit-d",
        "16",
        "--d",
        "12",
        "--repeats",
        "3",
        "--cpu",
        "--fresh",
        "--json",
    )
    assert r.code == 0, r.err
    data = r.json()
    rows = {x["d"]: x for x in data["results"]}
    assert rows[12]["held_out"] and not rows[8]["held_out"]
    for key in ("analytic_n0", "corrected_n0", "measured_n0", "analytic_n1", "corrected_n1", "measured_n1"):
        assert key in rows[12]
    assert rows[12]["measured_n1"] == rows[12]["analytic_n1"] == rows[12]["corrected_n1"]
    assert set(data["time"]) == {"softmax", "linear"} and data["saved_to"]
    listed = cli("devices", "--json")
    assert any(p["name"] == data["slug"] for p in listed.json())


def test_validate_needs_two_fit_dims(cli) -> None:
    r = cli("validate", "--fit-d", "16")
    assert r.code == 2 and "at least two head dims" in r.err


def test_the_catalogue_pairs_cover_every_timed_variant_against_softmax_of_its_causality() -> None:
    from attn_cost.costmodel.variants import all_variants
    from attn_cost.profilers.measure.references import REFERENCES
    from attn_cost.profilers.workflow.validating import catalogue_pairs

    pairs = catalogue_pairs()
    causal = {v.name: v.causal for v in all_variants()}
    timed = {n for n, r in REFERENCES.items() if r.core is not None}
    assert {n for p in pairs for n in p} == timed  # the layer-only Hosseini variants have no core to time
    for name in timed - {"softmax", "softmax-causal"}:
        baseline = "softmax-causal" if causal[name] else "softmax"
        assert (baseline, name) in pairs
    assert all(causal[a] == causal[b] for a, b in pairs)  # a causal variant is never judged against a bidirectional one
    for family_pair in [
        ("taylorshift-direct", "taylorshift-efficient"),
        ("linear", "performer"),
        ("linformer", "nystromformer"),
        ("sliding-window", "sliding-window-fused"),
    ]:
        assert family_pair in pairs
    assert len(pairs) == len(set(pairs))


def test_catalogue_and_pair_together_are_refused(cli) -> None:
    r = cli("validate", "--catalogue", "--pair", "softmax:linear", "--cpu")
    assert r.code == 2 and "give one" in r.err and len(r.err.strip().splitlines()) == 1
