"""`attn-cost doctor`: runs on a CPU-only machine, says what is missing in one line each, --json for machines."""

from __future__ import annotations

import pytest
import torch


def test_doctor_runs_without_a_gpu_and_says_what_is_missing(cli) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = cli("doctor", "--no-profile", "--json")
    assert r.code == 0, r.err
    report = r.json()
    assert report["versions"]["torch"] == torch.__version__ and report["versions"]["typer"]
    assert report["device"]["kind"] == "cpu" and report["profile"] is None
    assert report["memory"]["exact"] is True and report["timer"]["resolution_s"] > 0
    assert any(m.startswith("no CUDA device") for m in report["missing"])
    assert all("\n" not in m for m in report["missing"])
    # PyTorch's CPU dispatcher runs the math and flash kernels, never the CUDA-only ones
    runs = report["sdpa"]["runs"]
    assert runs["math"]["fp32"] == report["sdpa"]["head_dims_tried"] and runs["cudnn"]["bf16"] == []
    kernels = report["kernels"]  # every --kernel name, said to run here or why not
    from attn_cost.cli.options import KERNEL_NAMES

    assert tuple(kernels) == KERNEL_NAMES
    assert kernels["sdpa-math"] == {"here": True, "why": None} and kernels["sdpa"]["here"]
    assert kernels["flash-attn-3"] == {"here": False, "why": "needs a CUDA device"}
    assert not kernels["sdpa-cudnn"]["here"] and "cudnn" in kernels["sdpa-cudnn"]["why"]


def test_doctor_prints_a_readable_report_with_a_mini_profile(cli) -> None:
    r = cli("doctor", env={"COLUMNS": "80"})
    assert r.code == 0, r.err
    for words in ("Versions", "SDPA backends", "Timer (v", "Peak memory", "Mini profile: softmax vs linear"):
        assert words in r.out
    assert max(len(line) for line in r.out.splitlines()) <= 80


def test_doctor_gpu_without_cuda_is_one_line_and_exit_2(cli) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = cli("doctor", "--gpu")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "needs CUDA" in r.err


def test_each_kernel_is_here_where_its_backend_runs_or_its_package_is_installed(monkeypatch) -> None:
    """On a CUDA device where SDPA ran flash and math but not cuDNN or the memory-efficient kernel, flash-attn is
    installed and FlashAttention-3's module is not, and fla-core's kernels do not run: each name says so."""
    import importlib.util

    from attn_cost.profilers.measure import kernel_times

    runs = {"flash": {"bf16": [64, 128]}, "efficient": {"bf16": []}, "cudnn": {"bf16": []}, "math": {"fp32": [64]}}
    fla = {"usable": False, "why": "fla-core is not installed"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda module: object() if module == "flash_attn" else None)
    k = kernel_times.kernels_here("cuda", runs, fla)
    assert [name for name, v in k.items() if v["here"]] == ["sdpa", "sdpa-flash", "sdpa-math", "flash-attn-2"]
    assert k["flash-attn-3"]["why"] == "FlashAttention-3's hopper/ build is not installed (module flash_attn_interface)"
    assert k["fla-chunk"]["why"] == k["fla-fused-chunk"]["why"] == "fla-core is not installed"
    assert k["sdpa-efficient"]["why"] == "PyTorch's SDPA does not run its efficient backend on this CUDA device"
