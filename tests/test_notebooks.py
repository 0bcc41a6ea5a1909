"""The notebooks run top to bottom in a fresh kernel, fail on a failing cell (shell cells included), and are
committed with outputs that show offline and on a code host.

Executing the notebooks is `slow` (three kernels, live profiling, CLI subprocesses); the checks of the
committed files and of the failure path are fast. `python notebooks/run.py` re-executes them in place with the
same code as these tests.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
PLOTLY = "application/vnd.plotly.v1+json"
STATIC = ("image/png", "image/svg+xml")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _runner() -> ModuleType:
    """notebooks/run.py, the executor the tests and the regeneration share."""
    spec = importlib.util.spec_from_file_location("notebooks_run", NOTEBOOKS / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(name: str) -> Any:
    nbformat = pytest.importorskip("nbformat", reason="reading notebooks needs nbformat")
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def _needs_kernel() -> None:
    pytest.importorskip("ipykernel", reason="executing notebooks needs ipykernel (pip install -e '.[test]')")
    pytest.importorskip("nbclient", reason="executing notebooks needs nbclient")
    pytest.importorskip("IPython", minversion="9", reason="a failing `!command` raises only from IPython 9")


def _uses_plots(nb: Any) -> bool:
    return any("plotly" in c.source for c in nb.cells if c.cell_type == "code")


def test_every_notebook_is_listed() -> None:
    """The glob finds the three notebooks the README points to (an empty list would test nothing)."""
    assert {"tour.ipynb", "taylorshift_reproduction.ipynb", "bring_your_own.ipynb"} <= set(NAMES)


@pytest.mark.integration  # a Jupyter kernel
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name: str, tmp_path: Path) -> None:
    """Every cell runs without an error in a fresh kernel; the first failing cell (a `!command` that exits
    non-zero included) raises CellExecutionError. Timing runs without the disturbance detector: no cell asserts
    a timed value, and a busy machine must not fail the notebook (the committed outputs come from a quiet run)."""
    _needs_kernel()
    nb = _read(name)
    if _uses_plots(nb) and CHROMIUM is None:
        pytest.skip("the notebook's static plot images need Chromium (Debian: apt-get install chromium)")
    _runner().execute(nb, tmp_path / "home", extra_env={"ATTN_COST_DISTURBANCE": "off"})
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    _check_plot_outputs(nb)


def _run_cells(tmp_path: Path, *sources: str) -> Any:
    nbformat = pytest.importorskip("nbformat", reason="building notebooks needs nbformat")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return _runner().execute(nb, tmp_path / "home", timeout=120)


@pytest.mark.integration  # a Jupyter kernel
def test_a_failing_shell_cell_fails_the_notebook(tmp_path: Path) -> None:
    """A `!command` that exits non-zero stops execution with an error, as a Python exception does; the cells
    after it never run. The status is the CLI's usage error (2), not the shell's "not found" (127): `!attn-cost`
    resolves to this installation's console script."""
    _needs_kernel()
    from nbclient.exceptions import CellExecutionError

    with pytest.raises(CellExecutionError) as failed:
        _run_cells(tmp_path, "!true", "!attn-cost no-such-command", "print('after')")
    assert failed.value.ename == "CalledProcessError"
    assert "'attn-cost no-such-command' returned non-zero exit status 2" in str(failed.value)


@pytest.mark.integration  # a Jupyter kernel
@pytest.mark.slow
@pytest.mark.parametrize(
    "source",
    [
        "!exit 3",
        "for n in (0, 4):\n    !exit {n}",
        "%%bash\nset -e\nfalse\necho not reached",
        "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'raise SystemExit(2)'], check=True)",
    ],
    ids=["shell-line", "shell-in-loop", "bash-cell", "subprocess-check"],
)
def test_every_way_to_fail_a_command_fails_the_notebook(source: str, tmp_path: Path) -> None:
    """The other forms a notebook runs commands in: a `!` inside a loop (with a variable expanded), a `%%bash`
    cell and `subprocess.run(check=True)`; and a passing `!` before it does not fail."""
    _needs_kernel()
    from nbclient.exceptions import CellExecutionError

    with pytest.raises(CellExecutionError) as failed:
        _run_cells(tmp_path, "!true", source)
    assert failed.value.ename == "CalledProcessError"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_committed_executed(name: str) -> None:
    """Committed with outputs: every code cell ran, in order, in one kernel, and none failed or left a
    traceback on stderr."""
    nb = _read(name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "a notebook without code cells"
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert all(c.outputs for c in code if c.source.lstrip().startswith("!")), "a shell cell without output"
    for c in code:
        for o in c.outputs:
            assert o.get("output_type") != "error", c.source
            assert "Traceback (most recent call last)" not in "".join(o.get("text", "")), c.source


def _check_plot_outputs(nb: Any) -> None:
    """Each plot carries a static image beside its interactive form, and nothing loads from the network."""
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    plots = [o for o in outputs if PLOTLY in o.get("data", {})]
    if _uses_plots(nb):
        assert plots, "a notebook that imports plotly shows no plot"
    for o in plots:
        assert any(m in o["data"] for m in STATIC), "a plot without a static image"
        assert "text/html" not in o["data"], "text/html would hide the static image on a code host"
    for o in outputs:
        html = "".join(o.get("data", {}).get("text/html", ""))
        assert not re.search(r"<script[^>]+src=[\"']https?:", html), "an output loads a script from the network"


@pytest.mark.parametrize("name", NAMES)
def test_committed_plots_show_offline_and_on_a_code_host(name: str) -> None:
    """A code host (GitHub, nbviewer) renders image/png but not plotly's JSON, and runs no script; JupyterLab
    and VS Code render the JSON from their local plotly extension. So every plot keeps both."""
    nb = _read(name)
    _check_plot_outputs(nb)


@pytest.mark.parametrize("name", NAMES)
def test_notebook_imports_the_installed_package(name: str) -> None:
    """Code reaches attn-cost by its installed names: `attn_cost` and the console script `attn-cost`, never
    the source tree's top-level folders (`python -m cli` fails once installed)."""
    nb = _read(name)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not re.search(r"^\s*(from|import)\s+(cli|costmodel|profilers)\b", source, re.MULTILINE)
    assert not re.search(r"-m\s+(cli|costmodel|profilers)\b", source)
