"""The notebooks run top to bottom in a fresh kernel, and are committed with their outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = ["taylorshift_reproduction.ipynb", "tour.ipynb", "bring_your_own.ipynb"]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cell runs without an error (nbclient raises CellExecutionError on the first one)."""
    pytest.importorskip("ipykernel", reason="executing notebooks needs ipykernel (pip install -e '.[test]')")
    nbformat = pytest.importorskip("nbformat", reason="executing notebooks needs nbformat")
    nbclient = pytest.importorskip("nbclient", reason="executing notebooks needs nbclient")
    # the kernel inherits this environment: measurements go to a temporary home, never the user's
    monkeypatch.setenv("ATTN_COST_HOME", str(tmp_path / "home"))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_committed_executed(name: str) -> None:
    """Committed with outputs: every code cell ran, in order, and none failed."""
    nbformat = pytest.importorskip("nbformat", reason="reading notebooks needs nbformat")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert not [o for c in code for o in c.outputs if o.get("output_type") == "error"]
