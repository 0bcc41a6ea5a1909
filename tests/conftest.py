"""Shared helpers: run the installed `attn-cost` script as a new user would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def _script() -> list[str]:
    beside = Path(sys.executable).with_name("attn-cost")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("attn-cost")
    return [found] if found else [sys.executable, "-m", "cli"]


class Result:
    def __init__(self, proc: subprocess.CompletedProcess) -> None:
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def attn_cost(tmp_path):
    """Call the CLI in a fresh process; returns a Result with code, out, err and json()."""

    def run(*args: str, env: dict | None = None, timeout: float = 600) -> Result:
        full_env = {**os.environ, "COLUMNS": "200", "ATTN_COST_HOME": str(tmp_path / "home"), **(env or {})}
        proc = subprocess.run(
            [*_script(), *args], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=tmp_path
        )
        return Result(proc)

    return run


@pytest.fixture(autouse=True)
def _no_disturbance_detection(monkeypatch):
    """Functional tests time real kernels on a machine that other jobs share: the default disturbance
    detector would (rightly) refuse those timings. The detector itself is tested on fed samples
    (tests/test_trustworthy_measurement.py); a test that wants it sets ATTN_COST_DISTURBANCE itself."""
    monkeypatch.setenv("ATTN_COST_DISTURBANCE", "off")


@pytest.fixture
def registry_restored():
    """Variants registered in-process by a test (variant files, traced code) are taken back after it, so later tests
    see the catalogue."""
    from attn_cost.costmodel import plugins
    from attn_cost.costmodel.variants import REGISTRY, all_variants

    all_variants()
    before, loaded = dict(REGISTRY), dict(plugins._loaded)
    yield
    REGISTRY.clear()
    REGISTRY.update(before)
    plugins._loaded.clear()
    plugins._loaded.update(loaded)
