"""Every `console` example in the README and docs/ is what its command prints now (`docs/regenerate.py`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
_spec = importlib.util.spec_from_file_location("regenerate", ROOT / "docs" / "regenerate.py")
regenerate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regenerate)

EXAMPLES = [
    (path, command, shown) for path in regenerate.FILES for command, shown in regenerate.examples(path)
]


def test_the_readme_shows_its_main_command() -> None:
    commands = [c for p, c, _ in EXAMPLES if p.name == "README.md"]
    assert "$ attn-cost crossover --d 64" in commands


@pytest.mark.integration  # each example runs the console script
@pytest.mark.parametrize(
    ("path", "command", "shown"),
    [
        pytest.param(p, c, s, id=f"{p.relative_to(ROOT)}: {c}", marks=[pytest.mark.slow] if "--device" in c else [])
        for p, c, s in EXAMPLES
    ],
)  # an example with --device predicts with a shipped op calibration, bootstrap intervals and all: 30 s or more
def test_an_example_is_the_current_output(path: Path, command: str, shown: str, tmp_path: Path) -> None:
    output = regenerate.run(command, tmp_path / "home")
    assert shown == regenerate.expected(shown, output), f"run `python docs/regenerate.py` ({path.name})"
    assert shown.strip() and shown.strip() != regenerate.MORE  # an example shows something


def test_a_stale_example_is_caught() -> None:
    assert regenerate.expected("old line\n", "new line\n") != "old line\n"
    assert regenerate.expected("same\n[...]\n", "same\nmore\n") == "same\n[...]\n"
    assert regenerate.expected("other\n[...]\n", "same\nmore\n") != "other\n[...]\n"


def _validation_script():
    spec = importlib.util.spec_from_file_location("opmodel_validation", ROOT / "benchmarks" / "opmodel_validation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["docs/opmodel.md"])
def test_the_op_model_record_is_generated_from_a_kept_validation(name: str) -> None:
    """The op model's record in the README and docs/opmodel.md is what the benchmark writes from the validation
    it names (kept in benchmarks/data/), not typed: `python benchmarks/opmodel_validation.py FILE --into ...`."""
    import json
    import re

    script = _validation_script()
    text = (ROOT / name).read_text(encoding="utf-8")
    block = text.split(script.BEGIN + "\n", 1)[1].split(script.END, 1)[0]
    head, tail = script.SOURCE.split("{}")
    source = re.match(re.escape(head) + "(.+?)" + re.escape(tail), block)
    assert source, f"{name}: the block does not say which validation it was written from"
    path = ROOT / source.group(1)
    assert block == script.generated_block(Path(source.group(1)), json.loads(path.read_text(encoding="utf-8")))
