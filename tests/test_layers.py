"""The layers read top-down: costmodel <- profilers <- cli, nothing up, and no import cycle at module level.

Read from the source (every `import`, at module level or inside a function), not from what happens to be
imported when the tests run, so a lazy import that points upward is caught too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"costmodel": 0, "profilers": 1, "cli": 2}
"""Each layer may import the layers below it, never one above."""


def _modules() -> dict[str, Path]:
    out = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(p for p in parts if p != "__init__")
            out[name] = path
    return out


def _imports(path: Path, top_level_only: bool = False) -> set[str]:
    """The attn_cost modules a file imports (`attn_cost.` stripped), at module level only if asked."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attn_cost."):
            base = node.module.removeprefix("attn_cost.")
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("attn_cost.") for a in node.names if a.name.startswith("attn_cost."))
    return found


MODULES = _modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_layer_above_its_own(module: str) -> None:
    own = LAYERS[module.split(".")[0]]
    upward = sorted(m for m in _imports(MODULES[module]) if LAYERS.get(m.split(".")[0], -1) > own)
    assert not upward, f"{module} imports {', '.join(upward)} from a layer above it"


def test_the_layer_check_sees_an_upward_import(tmp_path) -> None:
    """The check itself: a costmodel file importing the CLI inside a function is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from attn_cost.cli.render import emit\n    return emit\n")
    assert "cli.render" in _imports(bad)


def test_no_import_cycle_at_module_level() -> None:
    """Module-level imports form no cycle (a registry's modules registering themselves aside: variants/__init__
    imports the variant modules that import it)."""
    graph = {
        name: {m for m in _imports(path, top_level_only=True) if m in MODULES and m != name}
        for name, path in MODULES.items()
    }
    registration = {"costmodel.variants"}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt):], nxt]
                if not registration & set(cycle):
                    cycles.append(cycle)
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)
