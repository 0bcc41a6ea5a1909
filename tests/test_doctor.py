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
