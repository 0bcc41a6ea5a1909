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
