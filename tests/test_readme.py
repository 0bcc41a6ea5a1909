"""The README and docs/design.md tell the truth about the code: catalogue, conventions, commands, set-up lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
DESIGN = (Path(__file__).parents[1] / "docs" / "design.md").read_text(encoding="utf-8")


def _table_names(heading: str, text: str = DESIGN) -> list[str]:
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z0-9-]+)`", section, flags=re.M)


def test_catalogue_table_lists_exactly_the_registered_variants() -> None:
    from attn_cost.costmodel.variants import all_variants

    listed = _table_names("## The variant catalogue")
    assert sorted(listed) == sorted(v.name for v in all_variants())
    for v in all_variants():
        row = next(line for line in DESIGN.splitlines() if line.startswith(f"| `{v.name}` |"))
        assert row.rstrip(" |").endswith(", ".join(v.scopes))


def test_commands_table_lists_exactly_the_cli_commands() -> None:
    from attn_cost.cli.main import command_line

    section = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    listed = {
        name for cell in re.findall(r"^\| ([^|]+) \|", section, flags=re.M) for name in re.findall(r"`([a-z-]+)`", cell)
    }
    registered = set(command_line().commands)  # command groups too: `results ls|rm|export|import`
    assert listed == registered


def test_conventions_table_lists_exactly_the_conventions() -> None:
    from attn_cost.costmodel.conventions import CONVENTIONS, PUBLISHED_CONVENTIONS

    listed = _table_names("## FLOP conventions")
    assert sorted(listed) == sorted([*CONVENTIONS, *PUBLISHED_CONVENTIONS])


def test_the_first_lines_are_the_two_set_up_commands_ci_runs() -> None:
    block = README.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert block[0] == "# install and run the main job" and block[1].endswith("attn-cost crossover --d 64")
    assert block[2] == "# install and run the tests" and block[3].endswith('&& pytest -m "not slow" -n 2')
    ci = (Path(__file__).parents[1] / ".ci" / "run").read_text()
    assert "# install and run the tests" in ci


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_test_command_installs_every_test_dependency_from_the_lock() -> None:
    """A new release of a dependency cannot change what the README's test command installs: it takes
    requirements/test.lock as constraints, and the lock pins (==) every package that the `test` and
    `trace-test` extras and the project's own dependencies name, torch excepted (the command pins it)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    root = Path(__file__).parents[1]
    command = README.split("# install and run the tests\n", 1)[1].splitlines()[0]
    assert re.search(r"pip install torch==[0-9.]+ -c requirements/test\.lock -e '\.\[test,trace-test\]'", command)
    lines = [x.strip() for x in (root / "requirements" / "test.lock").read_text().splitlines()]
    pins = [x for x in lines if x and not x.startswith("#")]
    assert pins and all(re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][A-Za-z0-9.+!-]*", x) for x in pins), pins
    pinned = {_canonical(x.split("==")[0]) for x in pins}
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    named = [*project["dependencies"], *project["optional-dependencies"]["test"],
             *project["optional-dependencies"]["trace-test"]]  # fmt: skip
    wanted = {_canonical(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in named}
    assert "torch" not in pinned
    assert wanted - {"torch"} <= pinned, sorted(wanted - {"torch"} - pinned)
