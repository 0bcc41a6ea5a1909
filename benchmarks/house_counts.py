"""Counts a new engineer meets in the house, per layer: functions over 80 lines, imports inside functions, and the
import loops (modules that import each other, at module level or inside a function).

    python benchmarks/house_counts.py          # this checkout
    python benchmarks/house_counts.py DIR      # another one (a `git archive` of an older commit)

Read from the source with `ast`, as tests/test_layers.py reads it; nothing is imported.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("costmodel", "profilers", "cli")
LONG = 80
"""A function longer than this many lines (decorators and docstring included) is counted."""


def modules(root: Path) -> dict[str, Path]:
    """Every module of the three layers by its name under `attn_cost` (`cli.app`, `profilers.trace`)."""
    out = {}
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(p for p in parts if p != "__init__")] = path
    return out


def own_imports(node: ast.AST) -> set[str]:
    """The attn_cost modules (and the names imported from them) of one import statement."""
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attn_cost."):
        base = node.module.removeprefix("attn_cost.")
        return {base, *(f"{base}.{a.name}" for a in node.names)}
    if isinstance(node, ast.Import):
        return {a.name.removeprefix("attn_cost.") for a in node.names if a.name.startswith("attn_cost.")}
    return set()


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found, key=len, reverse=True)


def counts(root: Path) -> dict:
    mods = modules(root)
    long: dict[str, list[str]] = {layer: [] for layer in LAYERS}
    inside: dict[str, list[str]] = {layer: [] for layer in LAYERS}
    inside_own: dict[str, list[str]] = {layer: [] for layer in LAYERS}
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        layer = name.split(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = {m for n in ast.walk(tree) for m in own_imports(n) if m in mods and m != name}
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([n.lineno, *(d.lineno for d in n.decorator_list)])
                if n.end_lineno is not None and n.end_lineno - start + 1 > LONG:
                    long[layer].append(f"{name}.{n.name} ({n.end_lineno - start + 1} lines)")

        def walk(node: ast.AST, in_function: bool, name: str = name, layer: str = layer) -> None:
            for child in ast.iter_child_nodes(node):
                if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                    inside[layer].append(f"{name}:{child.lineno}")
                    if own_imports(child) or (isinstance(child, ast.ImportFrom) and child.module == "attn_cost"):
                        inside_own[layer].append(f"{name}:{child.lineno}")
                walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

        walk(tree, False)
    return {"long": long, "inside": inside, "inside_own": inside_own, "loops": loops(graph)}


def main() -> None:
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    found = counts(root)

    def per_layer(what: dict[str, list[str]]) -> str:
        return f"{sum(map(len, what.values()))} ({', '.join(f'{k} {len(v)}' for k, v in what.items())})"

    print(f"functions over {LONG} lines: {per_layer(found['long'])}")
    for layer in LAYERS:
        for item in found["long"][layer]:
            print(f"    {item}")
    print(f"imports inside functions: {per_layer(found['inside'])}")
    print(f"  of them of attn-cost's own modules: {per_layer(found['inside_own'])}")
    for loop in found["loops"]:
        print(f"import loop of {len(loop)} modules: {', '.join(loop)}")


if __name__ == "__main__":
    main()
