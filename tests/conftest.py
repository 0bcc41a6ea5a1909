"""Shared helpers: run the CLI in this process (`cli`, unit tests) or the installed `attn-cost` script in a new
process as a new user would (`attn_cost`, integration tests only); a small device profile of the tests' own
(`fixture_device`) instead of the shipped measurements of one CPU."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
os.environ.setdefault("ATTN_COST_CACHE", tempfile.mkdtemp(prefix="attn-cost-tests-cache-"))
"""The derivations the tests' processes keep between them (costmodel/memo.py) go to a folder of this run's, never to
the user's cache; every CLI process the tests start inherits it."""
FIXTURE_PROFILE = min((DATA / "devices").glob("*.json"))
FIXTURE_DEVICE = FIXTURE_PROFILE.stem
"""The device profile in tests/data/devices (a made-up CPU, made-up constants and measured points: see
tests/data/make_device.py, which wrote it); its measured N0 of the TaylorShift pair at d = 16 is 4321 ± 6."""


def _script() -> list[str]:
    beside = Path(sys.executable).with_name("attn-cost")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("attn-cost")
    return [found] if found else [sys.executable, "-m", "cli"]


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code = code
        self.out = out
        self.err = err

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def attn_cost(tmp_path, request):
    """Call the installed `attn-cost` script in a fresh process; returns a Result with code, out, err and json().

    Only for what needs a new process (the console script itself, environment read at start-up, a package on
    PYTHONPATH): such a test is an integration test and must be marked so. Anything else uses `cli`."""
    if request.node.get_closest_marker("integration") is None:
        pytest.fail("this test starts attn-cost in a new process: mark it `integration` (or use the `cli` fixture)")

    def run(*args: str, env: dict | None = None, timeout: float = 600) -> Result:
        full_env = {**os.environ, "COLUMNS": "200", "ATTN_COST_HOME": str(tmp_path / "home"), **(env or {})}
        proc = subprocess.run(
            [*_script(), *args], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=tmp_path
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """Call the CLI in this process (`cli.main.main`, then `exits.finish` as the console script does), with the
    arguments, environment (COLUMNS=200, ATTN_COST_HOME=tmp_path/home, `env`), working folder (tmp_path) and Result
    of `attn_cost`: no interpreter start-up and imports per call. As after a process, variants a call registers
    (--variants, --trace) are gone after it, and torch's thread count (--threads) is set back after the test."""
    from attn_cost.cli.exits import finish
    from attn_cost.cli.main import main

    threads = sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None

    def run(*args: str, env: dict | None = None, timeout: float | None = None) -> Result:
        with monkeypatch.context() as m, _registrations_taken_back():
            for key, value in {"COLUMNS": "200", "ATTN_COST_HOME": str(tmp_path / "home"), **(env or {})}.items():
                m.setenv(key, value)
            m.chdir(tmp_path)
            capsys.readouterr()
            try:
                code = finish(main(list(args)))
            except SystemExit as e:  # a command that ends the process itself (check-flops on a mismatch)
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            out, err = capsys.readouterr()
        return Result(code, out, err)

    yield run
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.set_num_threads(threads or torch.get_num_threads())


@pytest.fixture
def few_replicates(monkeypatch) -> None:
    """An op calibration's crossing and times drawn from 3 bootstrap replicates instead of 100: the same path (each
    replicate refitted, the interval and the tie from their spread) for tests that check which model answered or
    its point estimate, not the interval's width (a hundred refits made one crossover on a calibrated CPU 10-20 s)."""
    from attn_cost.profilers.devicemodel.calibrated import model as oppredict

    monkeypatch.setattr(oppredict, "BOOTSTRAP", 3)


@pytest.fixture
def fixture_device(tmp_path, monkeypatch) -> str:
    """ATTN_COST_HOME holds the tests' own device profile (tests/data/devices); returns its name."""
    home = tmp_path / "home"
    shutil.copytree(DATA / "devices", home / "devices")
    monkeypatch.setenv("ATTN_COST_HOME", str(home))
    return FIXTURE_DEVICE


@pytest.fixture(autouse=True)
def _no_disturbance_detection(monkeypatch, tmp_path):
    """Functional tests time real kernels on a machine that other jobs share: the default disturbance
    detector would (rightly) refuse those timings. The detector itself is tested on fed samples
    (tests/test_trustworthy_measurement.py); a test that wants it sets ATTN_COST_DISTURBANCE itself.
    Every test gets its own ATTN_COST_HOME (tmp_path/home, created only when written): no test reads or writes the
    user's own measurements, profiles or calibrations of this machine."""
    monkeypatch.setenv("ATTN_COST_DISTURBANCE", "off")
    monkeypatch.setenv("ATTN_COST_HOME", str(tmp_path / "home"))


@contextlib.contextmanager
def _registrations_taken_back():
    """Variants registered inside (variant files, traced code) are taken back after it, and any derivation cached
    under a name that a later call may give another variant is dropped."""
    from attn_cost.costmodel import plugins
    from attn_cost.costmodel.variants import REGISTRY, all_variants, derive

    all_variants()
    before, loaded = dict(REGISTRY), dict(plugins._loaded)
    try:
        yield
    finally:
        changed = before != REGISTRY
        REGISTRY.clear()
        REGISTRY.update(before)
        plugins._loaded.clear()
        plugins._loaded.update(loaded)
        if changed:
            derive.cache_clear()


@pytest.fixture
def registry_restored():
    """Variants registered in-process by a test (variant files, traced code) are taken back after it, so later tests
    see the catalogue."""
    with _registrations_taken_back():
        yield


@pytest.fixture(scope="module", autouse=True)
def _registrations_kept_in_their_module():
    """What a test module registers (traced code, variant files) is taken back when it ends: a later module in the
    same worker (the catalogue's tests, the README's table) sees the catalogue, whatever order xdist chose."""
    with _registrations_taken_back():
        yield


@pytest.fixture(scope="module", autouse=True)
def _older_objects_frozen():
    """At each module's start, garbage is collected and what is still alive (imports, sympy's caches, earlier modules'
    fixtures) is frozen out of the collector's reach (gc.freeze). The measuring code runs gc.collect() before every
    timing and trace; in a long-lived test worker that walked every object (a fifth of a second a call), now only
    the objects made since. Nothing is measured differently: garbage made after the freeze is still collected."""
    gc.collect()
    gc.freeze()
    yield
