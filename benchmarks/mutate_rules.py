"""Does a test fail when a FLOP rule changes? Make each small change to the rules in turn, run the focused tests
(tests/test_flop_rules.py) against it, and list the changes that no test notices: there must be none.

    python benchmarks/mutate_rules.py                  # every mutant, 2 at a time
    python benchmarks/mutate_rules.py --list           # what it would change, without running anything
    python benchmarks/mutate_rules.py --only l2normalize --jobs 1 tests/test_flop_rules.py tests/test_engine.py

The changes (mutants):
- in costmodel/conventions.py, and in costmodel/counting.py where it sets the causal shares and the backward
  factor (`Counting.scores`, `chunk_share`, `values`, `causal_factor`, `BACKWARD_FACTOR`): every integer constant
  one more and one fewer (so per_out(k) → per_out(k±1)); every condition negated (a branch of `backward_factor` or
  `_gain_size` taken for the wrong ops, an accumulating GEMM's add charged to the others); each op kind dropped from
  a tuple of kinds; each entry dropped from a dict of counting.py or of published formulas; every number in a
  published formula ±1. The input position of `in_numel(0)` is not a count and is left alone; so are the module's
  import-time guard and its look-up functions (get_convention, op_convention).
- in each convention's rule table, for every entry: the entry dropped, and one more and one fewer operation per
  output element (per input element for a per_in rule); `count_gains` flipped; each counting switch a convention
  implies dropped.

Each mutant runs in a new process: the mutated module is loaded under its own name before pytest imports anything,
or the live tables are patched in place, then pytest runs the tests (-x). A mutant is killed when the run fails.
Exit status 1 when a mutant survives, 2 when the unmutated tests fail.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/test_flop_rules.py"]
SOURCES = {
    # file: (module name, what is mutated: None for the whole module, else the names of functions and assignments)
    "costmodel/conventions.py": ("attn_cost.costmodel.conventions", None),
    "costmodel/counting.py": (
        "attn_cost.costmodel.counting",
        {"scores", "chunk_share", "values", "causal_factor", "BACKWARD_FACTOR"},
    ),
}
LEFT_ALONE = {"get_convention", "op_convention"}
"""Functions of conventions.py that look conventions up by name: no FLOP rule in them."""

BOOT = r"""
import importlib, importlib.util, json, sys
spec = json.loads(sys.argv[1])
if "path" in spec:  # a mutated source file, loaded as the real module
    found = importlib.util.spec_from_file_location(spec["module"], spec["path"])
    module = importlib.util.module_from_spec(found)
    sys.modules[spec["module"]] = module
    try:
        found.loader.exec_module(module)
    except Exception:
        sys.exit(98)  # the mutated module does not import
    parent, _, leaf = spec["module"].rpartition(".")
    setattr(importlib.import_module(parent), leaf, module)
else:  # a change to one convention's live table
    from attn_cost.costmodel.conventions import CONVENTIONS
    conv = CONVENTIONS[spec["convention"]]
    what = spec["change"]
    if what == "drop":
        del conv.rules[spec["kind"]]
    elif what in ("plus", "minus"):
        rule, sign = conv.rules[spec["kind"]], 1 if what == "plus" else -1
        if rule.__qualname__.startswith("per_in."):
            conv.rules[spec["kind"]] = lambda op: rule(op) + sign * op.in_numel(0)
        else:
            conv.rules[spec["kind"]] = lambda op: rule(op) + sign * op.out_numel
    elif what == "gains":
        object.__setattr__(conv, "count_gains", not conv.count_gains)
    elif what == "counting":
        object.__setattr__(conv, "counting", {k: v for k, v in conv.counting.items() if k != spec["key"]})
import pytest
code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *sys.argv[2:]])
if "path" in spec and sys.modules[spec["module"]].__file__ != spec["path"]:
    sys.exit(99)  # something imported the module afresh: the tests ran on the unmutated rules
sys.exit(code)
"""


@dataclass(frozen=True)
class Mutant:
    where: str
    """File and line with the function, or the convention's table entry."""
    change: str
    spec: dict
    """What the bootstrap applies: a module and its mutated source, or a table change."""


# -- source mutants ---------------------------------------------------------------------------------------------


def _offsets(text: str) -> list[int]:
    """Byte offset of each line's start (ast's columns count UTF-8 bytes)."""
    starts, total = [0], 0
    for line in text.encode().splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def _span(node: ast.expr, starts: list[int]) -> tuple[int, int]:
    """Where a node's text starts and ends, in bytes of the file."""
    return starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]


def _owners(tree: ast.Module) -> dict[ast.AST, str]:
    """The function or module-level name each node belongs to (the innermost function; else the assignment)."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = node.name
        owner[node] = name
        for child in ast.iter_child_nodes(node):
            visit(child, name)

    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
            name = target.id if isinstance(target, ast.Name) else ""
        elif isinstance(stmt, ast.If):
            name = "<import-time guard>"
        else:
            name = getattr(stmt, "name", "")
        visit(stmt, name)
    return owner


def _in_numel_argument(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    call = parents.get(node)
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "in_numel"


def _formulas(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """The dict of a `formulas=` argument: a paper's closed forms in sympy syntax."""
    up = parents.get(node)
    return isinstance(node, ast.Dict) and isinstance(up, ast.keyword) and up.arg == "formulas"


def source_mutants(relpath: str, workdir: Path) -> Iterator[Mutant]:
    module, scope = SOURCES[relpath]
    text = (ROOT / relpath).read_text()
    raw = text.encode()
    starts = _offsets(text)
    tree = ast.parse(text)
    owner = _owners(tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    name = Path(relpath).name
    ids = itertools.count()

    def keep(node: ast.AST) -> bool:
        where = owner.get(node, "")
        if where in LEFT_ALONE or where == "<import-time guard>":
            return False
        return scope is None or where in scope

    def mutant(node: ast.expr, replacement: str, change: str) -> Mutant:
        start, end = _span(node, starts)
        path = workdir / f"{Path(relpath).stem}-{next(ids)}" / name
        path.parent.mkdir()
        path.write_bytes(raw[:start] + replacement.encode() + raw[end:])
        where = f"{name}:{node.lineno} {owner.get(node, '')}"
        return Mutant(where, change, {"module": module, "path": str(path)})

    for node in ast.walk(tree):
        if not keep(node):
            continue
        if isinstance(node, ast.Constant) and type(node.value) is int and not _in_numel_argument(node, parents):
            for value in (node.value + 1, node.value - 1):
                yield mutant(node, str(value), f"{node.value} → {value}")
        elif isinstance(node, (ast.If, ast.IfExp)):
            test = ast.get_source_segment(text, node.test)
            yield mutant(node.test, f"(not ({test}))", f"`{test}` negated")
        elif (
            isinstance(node, ast.Tuple)
            and len(node.elts) > 1
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
        ):
            kinds = [ast.literal_eval(e) for e in node.elts]
            for i, kind in enumerate(kinds):
                rest = [repr(k) for j, k in enumerate(kinds) if j != i]
                yield mutant(node, "(" + ", ".join(rest) + ",)", f"{kind!r} dropped from the tuple")
        elif isinstance(node, ast.Dict) and (scope is not None or _formulas(node, parents)):
            entries = [
                (ast.get_source_segment(text, k), ast.get_source_segment(text, v))  # type: ignore[arg-type]
                for k, v in zip(node.keys, node.values, strict=True)
            ]
            for i, (key, _) in enumerate(entries):
                rest = [f"{k}: {v}" for j, (k, v) in enumerate(entries) if j != i]
                yield mutant(node, "{" + ", ".join(rest) + "}", f"entry {key} dropped")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _formulas(up := parents[node], parents)
            and node in up.values  # type: ignore[attr-defined]
        ):
            for m in re.finditer(r"\d+", node.value):
                for value in (int(m.group()) + 1, int(m.group()) - 1):
                    formula = node.value[: m.start()] + str(value) + node.value[m.end() :]
                    yield mutant(node, repr(formula), f"{node.value!r} → {formula!r}")


def _place(m: Mutant) -> tuple[str, int]:
    file, _, rest = m.where.partition(":")
    return file, int(rest.split()[0])


# -- table mutants ----------------------------------------------------------------------------------------------


def table_mutants() -> Iterator[Mutant]:
    from attn_cost.costmodel.conventions import CONVENTIONS

    for conv in CONVENTIONS.values():
        for kind, rule in conv.rules.items():
            unit = "input" if rule.__qualname__.startswith("per_in.") else "output"
            for change, label in (
                ("drop", "dropped"),
                ("plus", f"one more op per {unit} element"),
                ("minus", f"one fewer op per {unit} element"),
            ):
                yield Mutant(f"{conv.name}[{kind}]", label, {"convention": conv.name, "kind": kind, "change": change})
        yield Mutant(
            f"{conv.name}", f"count_gains → {not conv.count_gains}", {"convention": conv.name, "change": "gains"}
        )
        for key in conv.counting:
            yield Mutant(
                f"{conv.name}", f"implied --{key} dropped", {"convention": conv.name, "change": "counting", "key": key}
            )


# -- running ----------------------------------------------------------------------------------------------------


def run(spec: dict, tests: list[str], timeout: float) -> tuple[str, float]:
    """'survived' or how the mutant was killed (a test failed, it does not import, ...), and the seconds it took."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", BOOT, json.dumps(spec), *tests],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return "killed (timeout)", time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    if proc.returncode == 0:
        return "survived", seconds
    if proc.returncode == 1:
        return "killed", seconds
    if proc.returncode == 98:
        return "killed (import)", seconds
    if proc.returncode in (4, 5, 99):  # usage error, no tests collected, mutant not in effect: no answer
        raise SystemExit(
            f"the tests did not run on the mutant ({proc.returncode}): {proc.stdout[-500:]}{proc.stderr[-500:]}"
        )
    return f"killed (pytest status {proc.returncode})", seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tests", nargs="*", default=TESTS, help="test files or node ids (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--only", default="", help="only the mutants whose place or change contains this text")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one mutant's tests may take")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    opts = parser.parse_args()
    if opts.jobs < 1 or opts.timeout <= 0:
        parser.error("--jobs and --timeout must be positive")

    with tempfile.TemporaryDirectory(prefix="mutate-rules-") as tmp:
        found = [m for rel in SOURCES for m in source_mutants(rel, Path(tmp))]
        mutants = sorted(found, key=_place) + list(table_mutants())
        mutants = [m for m in mutants if opts.only in m.where or opts.only in m.change]
        if not mutants:
            parser.error(f"no mutant's place or change contains {opts.only!r} (--list shows them)")
        if opts.list:
            for m in mutants:
                print(f"{m.where:<40} {m.change}")
            print(f"{len(mutants)} mutants")
            return
        baseline, seconds = run({"convention": "full", "change": "none"}, opts.tests, opts.timeout)
        if baseline != "survived":
            print(f"the tests fail without any change ({baseline}): fix them first", file=sys.stderr)
            sys.exit(2)
        if not opts.json:
            print(
                f"{len(mutants)} mutants of the FLOP rules, tests: {' '.join(opts.tests)} ({seconds:.1f} s unmutated)"
            )
        t0 = time.perf_counter()
        with ThreadPoolExecutor(opts.jobs) as pool:
            outcomes = list(pool.map(lambda m: run(m.spec, opts.tests, opts.timeout)[0], mutants))
        elapsed = time.perf_counter() - t0

    survivors = [m for m, o in zip(mutants, outcomes, strict=True) if o == "survived"]
    tally = Counter(outcomes)
    if opts.json:
        print(json.dumps({
            "tests": opts.tests,
            "mutants": len(mutants),
            "outcomes": tally,
            "survivors": [{"where": m.where, "change": m.change} for m in survivors],
            "seconds": round(elapsed, 1),
        }, indent=2))  # fmt: skip
    else:
        for outcome, count in sorted(tally.items()):
            print(f"  {outcome:<18} {count:>5}")
        for m in survivors:
            print(f"SURVIVED  {m.where}: {m.change}")
        print(f"{len(survivors)} of {len(mutants)} mutants survived ({elapsed:.0f} s)")
    sys.exit(1 if survivors else 0)


if __name__ == "__main__":
    main()
