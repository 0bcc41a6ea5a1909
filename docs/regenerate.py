"""Run every `console` example of the README and docs/ and write its current output into the file.

An example is a fenced block tagged `console` whose first line is `$ attn-cost ...`; the lines after it are the
command's output at 80 columns, in a fresh home (no stored measurements), run from the repository's root. A last
line `[...]` keeps only the first lines of a long output. `tests/test_docs.py` checks that every example still
matches. The README's screenshot of the report (docs/report.png) is made here too, from the command the README
shows beside its link, in headless Chromium (playwright), so that it cannot go stale. After a change to the code or
the shipped data, run

    python docs/regenerate.py

and review the diff.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```console\n(\$ attn-cost [^\n]*)\n(.*?)```", re.S)
MORE = "[...]"
"""The last line of an example that shows only the first lines of its output."""


def run(command: str, home: Path) -> str:
    """The command's stdout as a new user sees it piped at 80 columns (stderr joined: warnings are output too)."""
    argv = shlex.split(command.removeprefix("$ "))
    env = {**os.environ, "COLUMNS": "80", "ATTN_COST_HOME": str(home), "PYTHONIOENCODING": "utf-8"}
    entry = [sys.executable, "-c", "from attn_cost.cli.entry import run; run()"]
    proc = subprocess.run([*entry, *argv[1:]], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    return proc.stdout + proc.stderr


def expected(body: str, output: str) -> str:
    """What the block should hold for this output: all of it, or as many first lines as it shows before `[...]`."""
    lines = body.rstrip("\n").split("\n")
    out = output.rstrip("\n").split("\n")
    if lines and lines[-1] == MORE:
        return "\n".join([*out[: len(lines) - 1], MORE]) + "\n"
    return "\n".join(out) + "\n"


def examples(path: Path) -> list[tuple[str, str]]:
    """(command line, shown output) of every console example of a file."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(path.read_text(encoding="utf-8"))]


def regenerate(path: Path, home: Path) -> bool:
    """Rewrite the examples of one file with the current output; returns whether anything changed."""
    text = path.read_text(encoding="utf-8")

    def fresh(m: re.Match) -> str:
        return f"```console\n{m.group(1)}\n{expected(m.group(2), run(m.group(1), home))}```"

    new = BLOCK.sub(fresh, text)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


SCREENSHOT = ROOT / "docs" / "report.png"
SHOWN = re.compile(r"`(attn-cost report --html report\.html [^`]*)`.{0,200}?\[screenshot\]\(docs/report\.png\)", re.S)
"""The README's report command, next to its link to the screenshot."""


def screenshot(home: Path) -> str:
    """Make the report the README shows, screenshot its top in headless Chromium and write it into
    docs/report.png if it differs; returns what happened."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "skipped (needs playwright: pip install -e '.[test]')"
    if chromium is None:
        return "skipped (needs Chromium: apt-get install chromium)"
    match = SHOWN.search((ROOT / "README.md").read_text(encoding="utf-8"))
    if match is None:
        raise SystemExit("README.md: no `attn-cost report --html report.html ...` beside its [screenshot] link")
    html = home / "report.html"
    command = match.group(1).replace("report.html", str(html), 1)
    output = run(f"$ {command}", home)
    if not html.exists():
        raise SystemExit(f"{command}: no report written\n{output}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 1700})  # the tables and the first curves
        page.goto(html.as_uri())
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
        shot = page.screenshot()
        browser.close()
    if SCREENSHOT.exists() and SCREENSHOT.read_bytes() == shot:
        return "unchanged"
    SCREENSHOT.write_bytes(shot)
    return "updated"


def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        for path in FILES:
            if examples(path):
                print(f"{path.relative_to(ROOT)}: {'updated' if regenerate(path, Path(home)) else 'unchanged'}")
        print(f"{SCREENSHOT.relative_to(ROOT)}: {screenshot(Path(home))}")


if __name__ == "__main__":
    main()
