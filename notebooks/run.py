"""Execute the notebooks in place, in fresh kernels, exactly as `tests/test_notebooks.py` does.

    python notebooks/run.py                 # every notebook in this folder
    python notebooks/run.py tour.ipynb      # one

Each notebook runs top to bottom with `ATTN_COST_HOME` in a temporary folder (measurements never reach the
user's home) and with shell cells that fail like Python cells: a `!command` that exits non-zero raises
`CalledProcessError` (IPython's `system_raise_on_error`), as `%%bash` cells already do. The first failing
cell stops the run and nothing is written. Plots need Chromium (kaleido renders their static PNG).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

NOTEBOOKS = Path(__file__).resolve().parent
NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))

# Run silently in the kernel before the first cell. IPython before 9 has no such setting: a missing one must
# fail loudly, not leave `!false` passing.
SHELL_FAILS = """\
_ip = get_ipython()
if not _ip.has_trait("system_raise_on_error"):
    raise RuntimeError("IPython >= 9 is needed to make a failing `!command` fail its cell")
_ip.system_raise_on_error = True
del _ip
"""


def kernel_env(home: Path, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment: this one, with `home` as ATTN_COST_HOME, this interpreter's scripts
    (`attn-cost`) first on PATH, so `!attn-cost` runs the installation under test, and `extra_env`."""
    env = dict(os.environ)
    env["ATTN_COST_HOME"] = str(home)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for name in ("FORCE_COLOR", "CLICOLOR_FORCE", "PY_COLORS"):
        env.pop(name, None)
    env.update(extra_env or {})
    return env


def execute(nb: Any, home: Path, timeout: int = 600, extra_env: dict[str, str] | None = None) -> Any:
    """Execute notebook `nb` (an nbformat node, changed in place and returned) in a fresh kernel started in
    this folder. Raises nbclient's CellExecutionError on the first failing cell, shell cells included."""
    from nbclient import NotebookClient

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )

    async def shell_fails(notebook: Any) -> None:
        msg_id = client.kc.execute(SHELL_FAILS, silent=True, store_history=False)
        reply = await client.async_wait_for_reply(msg_id)
        content = reply["content"] if reply else {"status": "no reply", "evalue": "the kernel did not answer"}
        if content["status"] != "ok":
            raise RuntimeError(f"kernel set-up failed: {content.get('evalue', content['status'])}")

    client.on_notebook_start = shell_fails
    return client.execute(env=kernel_env(home, extra_env))


def main(argv: list[str]) -> int:
    """Execute the named notebooks (default: all) and write each back with its outputs."""
    import nbformat

    for name in argv or NAMES:
        path = NOTEBOOKS / Path(name).name
        nb = nbformat.read(path, as_version=4)
        with tempfile.TemporaryDirectory(prefix="attn-cost-notebook-") as home:
            execute(nb, Path(home))
        nbformat.write(nb, path)
        print(f"executed {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
