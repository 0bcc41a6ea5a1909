"""The layers read top-down: costmodel <- profilers <- profilers.workflow <- profilers.campaign <- cli, nothing up,
and no import cycle at module level.

Read from the source (every `import`, at module level or inside a function), not from what happens to be
imported when the tests run, so a lazy import that points upward is caught too."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"costmodel": 0, "profilers": 1, "profilers.workflow": 2, "profilers.campaign": 3, "cli": 4}
"""Each layer may import the layers below it, never one above: the workflows (opening a measurer, profiling,
calibrating, validating) sit on the rest of `profilers`, the campaign on the workflows, the CLI on all of them."""


def layer_of(module: str) -> int:
    """The layer of a module (`profilers.workflow.validating`: the workflows'), by the longest prefix in LAYERS; -1
    for a module outside them."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return LAYERS[".".join(parts[:n])]
    return -1


def _modules() -> dict[str, Path]:
    out = {}
    for layer in ("costmodel", "profilers", "cli"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(p for p in parts if p != "__init__")
            out[name] = path
    return out


def _imports(path: Path, top_level_only: bool = False) -> set[str]:
    """The attn_cost modules a file imports (`attn_cost.` stripped), at module level only if asked."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    return set().union(*(_imports_of(node) for node in nodes))


def _imports_of(node: ast.AST) -> set[str]:
    """The attn_cost modules one statement imports (`from attn_cost import __version__`: `attn_cost`)."""
    if isinstance(node, ast.ImportFrom) and node.module == "attn_cost":
        return {"attn_cost"}
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attn_cost."):
        base = node.module.removeprefix("attn_cost.")
        return {base, *(f"{base}.{a.name}" for a in node.names)}
    if isinstance(node, ast.Import):
        return {a.name.removeprefix("attn_cost.") for a in node.names if a.name.startswith("attn_cost.")}
    return set()


MODULES = _modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_layer_above_its_own(module: str) -> None:
    own = layer_of(module)
    upward = sorted(m for m in _imports(MODULES[module]) if layer_of(m) > own)
    assert not upward, f"{module} imports {', '.join(upward)} from a layer above it"


def test_the_layer_check_sees_an_upward_import(tmp_path) -> None:
    """The check itself: a costmodel file importing the CLI inside a function is caught, and so is a measuring
    module importing a workflow, or a workflow the campaign."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from attn_cost.cli.render import emit\n    return emit\n")
    assert "cli.render" in _imports(bad)
    assert (
        layer_of("profilers.measure.profile")
        < layer_of("profilers.workflow.validating")
        < layer_of("profilers.campaign.run")
        < layer_of("cli.measure")
    )
    assert layer_of("profilers.workflow") == layer_of("profilers.workflow.measuring")
    assert layer_of("profilers.workflows") == layer_of("profilers")  # a prefix of a name is not its package


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
                cycle = [*stack[stack.index(nxt) :], nxt]
                if not registration & set(cycle):
                    cycles.append(cycle)
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


# -- imports at the top, except at the torch and plotly boundary -----------------------------------------------------

CORE_PACKAGES = {"sympy", "numpy", "scipy", "typer", "click", "rich", "torch"}
"""attn-cost's declared dependencies (pyproject.toml); any other package is an optional extra (plotly, submitit,
pynvml, transformers) and is imported where it is used, inside a function, so attn-cost runs without it."""
HEAVY = {"torch", "plotly", "scipy"}
"""What the analytic path never loads: torch and plotly (seconds to import), scipy (half a second: the device models
import it where they fit or find a root)."""
CYCLES = {
    ("costmodel.plugins", "costmodel.variants"): "the registry checks a user's variants; it loads them in turn",
    ("profilers.devicemodel.calibrated.data", "profilers.devicemodel.measured.data"): "both save to one device folder",
    ("profilers.measure.timing", "profilers.measure.gpu_timing"): "the CUDA timer returns the CPU timer's stats",
}
"""Function-level imports that break a module-level cycle, each with why the two modules need each other."""
ELSEWHERE = {"attn_cost": "`__version__` reads the installed metadata only when asked"}
DEVICE_LAYER = ("profilers.devicemodel", "profilers.store", "profilers.report")
"""What an analytic command never loads: the device models, the result store, the report's gather (`cli.commands`
registers commands lazily; `cli.settings` reaches the device layer only for a --device)."""
DEVICE_BOUNDARY = {"cli.settings": "the CLI's one call site of the device layer, reached when a --device is named"}
"""Modules that import the device layer inside a function, so that the analytic path does not load it."""
STARTUP = {"cli.entry"}
"""The console script's entry: it installs its Ctrl-C handler before importing anything of attn-cost's."""


def _function_imports(path: Path) -> list[tuple[int, set[str], set[str]]]:
    """(line, attn_cost modules, other top-level packages) of every import inside a function."""
    out = []

    def walk(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                own = {m for m in _imports_of(child) if m in MODULES or m == "attn_cost"}
                names = [child.module or ""] if isinstance(child, ast.ImportFrom) else [a.name for a in child.names]
                other = {n.split(".")[0] for n in names if not n.startswith("attn_cost")}
                out.append((child.lineno, own, other))
            walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    walk(ast.parse(path.read_text(encoding="utf-8")), False)
    return out


def _module_level_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in tree.body:
        for n in ast.walk(node) if isinstance(node, (ast.Import, ast.ImportFrom, ast.Try, ast.If)) else ():
            if isinstance(n, ast.ImportFrom) and n.module and not n.level:
                found.add(n.module.split(".")[0])
            elif isinstance(n, ast.Import):
                found.update(a.name.split(".")[0] for a in n.names)
    return found


def _heavy_modules() -> set[str]:
    """The modules that import torch or plotly at module level, themselves or through another module."""
    heavy = {name for name, path in MODULES.items() if _module_level_packages(path) & HEAVY}
    graph = {name: _imports(path, top_level_only=True) & set(MODULES) for name, path in MODULES.items()}
    grew = True
    while grew:
        grew = False
        for name, deps in graph.items():
            if name not in heavy and deps & heavy:
                heavy.add(name)
                grew = True
    return heavy


def test_imports_are_at_the_top_except_at_the_torch_and_plotly_boundary() -> None:
    """An import sits inside a function only where a torch-free module reaches torch, plotly, an optional package
    or a module that imports them (the boundary that keeps `crossover` and `predict` light), where it breaks a
    cycle listed in CYCLES, where the CLI reaches the device layer (DEVICE_BOUNDARY), or in the console script's
    entry. Everywhere else it is at the top of the module, so that a module's imports say what it depends on."""
    heavy = _heavy_modules()
    plotly = {name for name, path in MODULES.items() if "plotly" in _module_level_packages(path)}
    wrong = []
    for name, path in MODULES.items():
        if name in STARTUP:
            continue
        for line, own, other in _function_imports(path):
            own = {m for m in own if not any(o.startswith(f"{m}.") for o in own)}  # `from pkg import module`
            optional = other - CORE_PACKAGES - set(sys.stdlib_module_names) or own & plotly
            boundary = name not in heavy and bool(other & HEAVY or own & heavy)
            registration = own and all(m.startswith(f"{name}.") for m in own)  # a registry loading its modules
            excused = own and all((name, m) in CYCLES or m in ELSEWHERE for m in own)
            device = name in DEVICE_BOUNDARY and own and all(m.startswith(DEVICE_LAYER) for m in own)
            if optional or boundary or registration or excused or device:
                continue
            wrong.append(f"{path.relative_to(ROOT)}:{line}")
    assert not wrong, "imports that belong at the top of their module: " + ", ".join(wrong)


def test_the_import_check_sees_an_import_inside_a_function(tmp_path) -> None:
    """The check itself: a light import inside a function is seen, with what it imports."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\ndef f():\n    import json\n    from attn_cost.costmodel.symbols import N\n")
    assert [(line, other) for line, _, other in _function_imports(bad)] == [(4, {"json"}), (5, set())]
    assert _function_imports(bad)[1][1] == {"costmodel.symbols"}


def test_costmodel_never_imports_torch_or_plotly() -> None:
    """The engine is symbolic: no module of costmodel imports torch or plotly, at module level or inside a
    function."""
    users = []
    for name, path in MODULES.items():
        if name.startswith("costmodel"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for n in ast.walk(tree):
                names = (
                    [n.module or ""]
                    if isinstance(n, ast.ImportFrom)
                    else ([a.name for a in n.names] if isinstance(n, ast.Import) else [])
                )
                if {x.split(".")[0] for x in names} & HEAVY:
                    users.append(name)
    assert not users


ANALYTIC = [
    ["crossover", "--d", "64"],
    ["formula", "taylorshift-efficient"],
    ["claims"],
    ["heads", "--d-embed", "256"],
    ["variants"],
    ["conventions"],
    ["io", "--d", "64"],
    ["decode", "--n", "4096"],
    ["cheapest", "--d", "64"],
]
"""The analytic commands: no torch, no plotly, no scipy."""
DEVICE = [
    ["crossover", "--device", "h100-sxm5-80gb"],
    ["crossover", "--device", "cuda-nvidia-h200-12fde9-bf16", "--pair", "softmax:linear", "--dtype", "bf16"],
    ["predict", "--device", "l4", "--variant", "softmax", "--n", "64"],
    ["predict", "--device", "cpu-amd-epyc-5155e7", "--variant", "linear", "--n", "64"],
    ["devices"],
]
"""Commands that price on a device: no torch, no plotly (scipy finds their crossings and bootstrap intervals)."""


def _loaded(commands: list[list[str]], home: Path) -> tuple[list[int], list[str]]:
    """Exit codes of the commands run in turn in one new process, and which of torch, plotly and scipy it loaded."""
    code = (
        "import contextlib, io, json, sys\n"
        "from attn_cost.cli.main import main\n"
        "codes = []\n"
        "for args in json.loads(sys.argv[1]):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        codes.append(main(args))\n"
        "print(json.dumps([codes, sorted(m for m in ('torch', 'plotly', 'scipy') if m in sys.modules)]))\n"
    )
    env = {**os.environ, "ATTN_COST_HOME": str(home)}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(commands)], capture_output=True, text=True,
                         env=env, timeout=300, check=True)  # fmt: skip
    codes, loaded = json.loads(out.stdout.splitlines()[-1])
    return codes, loaded


@pytest.mark.integration
def test_the_analytic_commands_import_no_torch_no_plotly_and_no_scipy(tmp_path) -> None:
    """The analytic path, run as a user runs it (a new process, each command in turn), loads neither torch, plotly
    nor scipy: the commands answer in a fraction of a second on a machine where importing torch takes several."""
    codes, loaded = _loaded(ANALYTIC, tmp_path)
    assert codes == [0] * len(ANALYTIC)
    assert loaded == []


@pytest.mark.integration
def test_the_device_commands_import_no_torch_and_no_plotly(tmp_path) -> None:
    codes, loaded = _loaded(DEVICE, tmp_path)
    assert codes == [0] * len(DEVICE)
    assert set(loaded) <= {"scipy"}


# -- the analytic path keeps the device layer off ---------------------------------------------------------------------

WITHOUT_DEVICE = [args for args in ANALYTIC if args[0] != "io"]
"""The analytic commands without a device: `io` reads a datasheet GPU's shared memory (`--gpu`)."""


def _loaded_modules(commands: list[list[str]], home: Path) -> tuple[list[int], list[str]]:
    """Exit codes of the commands run in turn in one new process, and the attn-cost modules it loaded."""
    code = (
        "import contextlib, io, json, sys\n"
        "from attn_cost.cli.main import main\n"
        "codes = []\n"
        "for args in json.loads(sys.argv[1]):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        codes.append(main(args))\n"
        "print(json.dumps([codes, sorted(m for m in sys.modules if m.startswith('attn_cost.'))]))\n"
    )
    env = {**os.environ, "ATTN_COST_HOME": str(home)}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(commands)], capture_output=True, text=True,
                         env=env, timeout=300, check=True)  # fmt: skip
    codes, loaded = json.loads(out.stdout.splitlines()[-1])
    return codes, [m.removeprefix("attn_cost.") for m in loaded]


@pytest.mark.integration
@pytest.mark.parametrize("args", WITHOUT_DEVICE, ids=" ".join)
def test_an_analytic_command_loads_no_device_model_no_store_and_no_report(args: list[str], tmp_path) -> None:
    """`crossover --d 64` and the other analytic commands, run without --device, import none of the device models,
    the store or the report: the commands register lazily, and the device layer is reached through
    `cli.settings` only when a device is named."""
    codes, loaded = _loaded_modules([args], tmp_path)
    assert codes == [0]
    device = [m for m in loaded if m.startswith(DEVICE_LAYER)]
    assert not device, f"attn-cost {' '.join(args)} loads {', '.join(device)}"


@pytest.mark.integration
def test_a_device_is_loaded_when_one_is_named(tmp_path) -> None:
    """The check itself: `crossover --device` loads the device models (the same probe sees them)."""
    codes, loaded = _loaded_modules([["crossover", "--device", "h100-sxm5-80gb"]], tmp_path)
    assert codes == [0]
    assert any(m.startswith("profilers.devicemodel") for m in loaded)


def test_the_listing_of_commands_is_the_commands_themselves() -> None:
    """`attn-cost --help` lists the commands from a table (`cli.commands.COMMANDS`), so as not to import them:
    every registered command is in it, under the module that registers it, with the first paragraph of its help."""
    import importlib

    import typer
    from attn_cost.cli.app import app
    from attn_cost.cli.commands import COMMANDS

    for listed in COMMANDS.values():
        importlib.import_module(f"attn_cost.cli.{listed.module}")
    built = typer.main.get_command(app).registered
    assert set(built) == set(COMMANDS)
    for name, command in built.items():
        function = getattr(command.callback, "__wrapped__", command.callback)
        assert function.__module__ == f"attn_cost.cli.{COMMANDS[name].module}", name
        assert (command.help or "").split("\n\n")[0] == COMMANDS[name].summary, name


def test_the_device_kind_the_settings_name_is_the_device_layers() -> None:
    from attn_cost.cli.settings import DATASHEET
    from attn_cost.profilers.devicemodel.device import DATASHEET as KIND

    assert DATASHEET == KIND
