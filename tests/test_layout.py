"""The layout of DESIGN.md §2 holds. When the code is imported: nothing imports the command line or the demo,
the server never imports the SDK, the SDK never imports the server, the core neither, and the testing kit imports
neither the server nor a connector (a connector author installs it beside their plugin alone). In the source: no
import cycle (type-only and function-level imports included), every import in a direction §2 allows, no product
module over 800 lines. (sdk-ts/test/layout.test.ts keeps the TypeScript side free of cycles.)"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from third_party import EXAMPLE_PLUGIN

PRODUCTS = ("agentrein", "agentrein_server", "agentrein_cli", "agentrein_demo")
CONNECTORS = ("agentrein_http", "agentrein_stripe", "agentrein_github")


def imported_with(module: str) -> set[str]:
    """Every module loaded in a fresh interpreter by importing ``module``."""
    script = f"import importlib, json, sys; importlib.import_module({module!r}); print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("agentrein_server.app", ("agentrein", "agentrein_cli", "agentrein_demo")),
        ("agentrein", ("agentrein_server", "agentrein_cli", "agentrein_demo")),
        ("agentrein_core.engine", PRODUCTS + CONNECTORS),
        ("agentrein_demo.run", ("agentrein_cli",)),
        ("agentrein_testing", ("agentrein_server", "agentrein_cli", "agentrein_demo", *CONNECTORS)),
    ],
)
def test_a_distribution_imports_none_of_those_it_may_not_depend_on(module: str, forbidden: tuple[str, ...]) -> None:
    loaded = imported_with(module)
    assert sorted(m for m in loaded if m.split(".")[0] in forbidden) == []


# The source, read without importing it: every import counts, at module level, under `if TYPE_CHECKING:` and
# inside functions, since a cycle of any of them means two modules that cannot be understood apart.

ROOT = Path(__file__).resolve().parent.parent
CONNECTOR_ROOTS = sorted((ROOT / "connectors").glob("*/src"))
SOURCE_ROOTS = (
    ROOT / "agentrein_core" / "src",
    ROOT / "sdk" / "src",
    ROOT / "server" / "src",
    ROOT / "cli" / "src",
    ROOT / "demo" / "src",
    ROOT / "testing" / "src",
    *CONNECTOR_ROOTS,
)
CONNECTOR_PACKAGES = frozenset(p.name for root in CONNECTOR_ROOTS for p in root.iterdir() if p.is_dir())
#: DESIGN §2, each distribution and those it may import (the core is under every one of them).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "connector": frozenset({"core"}),
    "sdk": frozenset({"core"}),
    "server": frozenset({"core"}),
    "testing": frozenset({"sdk", "core"}),
    "cli": frozenset({"sdk", "server", "core"}),
    "demo": frozenset({"sdk", "connector", "testing", "core"}),
}
DISTRIBUTIONS = {
    "agentrein_core": "core",
    "agentrein": "sdk",
    "agentrein_server": "server",
    "agentrein_testing": "testing",
    "agentrein_cli": "cli",
    "agentrein_demo": "demo",
}
MAX_LINES = 800


def distribution(module: str) -> str:
    package = module.split(".")[0]
    return "connector" if package in CONNECTOR_PACKAGES else DISTRIBUTIONS[package]


def modules_in(roots: Sequence[Path]) -> dict[str, Path]:
    """Dotted module name -> its file, for every ``.py`` file under ``roots`` (a package is its ``__init__``)."""
    found: dict[str, Path] = {}
    for root in roots:
        for file in sorted(root.rglob("*.py")):
            parts = file.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``modules`` it imports. ``from p import x`` imports ``p.x`` when that is a module,
    else ``p``; importing ``p.q.r`` runs the ``__init__`` of ``p`` and ``p.q`` too, except those of the importer's
    own packages, already being imported: a cycle through a package's ``__init__`` is found, a module importing
    its siblings is not one."""

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, file in modules.items():
        package = module if file.name == "__init__.py" else module.rpartition(".")[0]
        named: set[str | None] = set()
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), str(file))):
            if isinstance(node, ast.Import):
                named.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, *([base] if base else [])])
                for alias in node.names:
                    named.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else known(base))
        own = {".".join(module.split(".")[:n]) for n in range(1, module.count(".") + 2)}
        imported = {name for name in named if name is not None}
        for name in list(imported):
            parts = name.split(".")
            imported.update(p for n in range(1, len(parts)) if (p := ".".join(parts[:n])) in modules and p not in own)
        graph[module] = imported - {module}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """One cycle through each strongly connected group of modules (Tarjan), as ``a -> b -> a``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = [stack.pop()]
            while group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(" -> ".join(cycle_through(graph, group)) for group in groups)


def cycle_through(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """The shortest path from the group's first module back to it, inside the group."""
    start = group[0]
    came_from: dict[str, str] = {}
    queue = [start]
    while queue:
        module = queue.pop(0)
        for other in sorted(graph[module]):
            if other == start:
                path = [module]
                while path[0] != start:
                    path.insert(0, came_from[path[0]])
                return [*path, start]
            if other in group and other not in came_from:
                came_from[other] = module
                queue.append(other)
    return group  # unreachable: a strongly connected group has a cycle through each member


MODULES = modules_in(SOURCE_ROOTS)
GRAPH = import_graph(MODULES)


def test_there_is_no_import_cycle_type_only_and_function_level_imports_included() -> None:
    assert "agentrein_core.engine" in GRAPH and "agentrein_stripe" in GRAPH
    cycles = import_cycles(GRAPH)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_every_import_follows_the_dependency_directions_of_design() -> None:
    wrong = sorted(
        f"{module} imports {other}"
        for module, imported in GRAPH.items()
        for other in imported
        if distribution(other) != distribution(module) and distribution(other) not in MAY_IMPORT[distribution(module)]
    )
    assert not wrong, "imports DESIGN §2 does not allow:\n" + "\n".join(wrong)


#: The one module of the core a connector imports from (DESIGN §2): the plugin contract.
PLUGIN_CONTRACT = "agentrein_core.connector"


def test_a_connector_imports_nothing_of_the_core_but_the_plugin_contract() -> None:
    # The built-in connectors are written as a third party's would be, so what they need is what any plugin needs;
    # the guide's worked example (tests/plugins/todo) is held to it beside them.
    example = modules_in([EXAMPLE_PLUGIN / "src"])
    wrong = sorted(
        f"{module} imports {other}"
        for module, imported in import_graph(MODULES | example).items()
        if module in example or distribution(module) == "connector"
        for other in imported - example.keys()
        if distribution(other) == "core" and other != PLUGIN_CONTRACT
    )
    assert not wrong, f"imports of the core other than {PLUGIN_CONTRACT}:\n" + "\n".join(wrong)


def test_no_product_module_is_over_eight_hundred_lines() -> None:
    long = {module: n for module, file in MODULES.items() if (n := len(file.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_cycle_finder_names_a_cycle_through_a_package_init_a_type_only_and_a_function_import(
    tmp_path: Path,
) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("from .one import One\n")
    (tmp_path / "pkg" / "sub" / "one.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.two import Two\nclass One: ...\n"
    )
    (tmp_path / "pkg" / "two.py").write_text("def make():\n    from pkg.sub import One\n\nclass Two: ...\n")
    (tmp_path / "pkg" / "leaf.py").write_text("import pkg.sub.one\n")
    graph = import_graph(modules_in([tmp_path]))
    assert import_cycles(graph) == ["pkg.sub -> pkg.sub.one -> pkg.two -> pkg.sub"]


def test_the_command_line_imports_the_server_for_serve_alone() -> None:
    importers = sorted(
        module
        for module, imported in GRAPH.items()
        if distribution(module) == "cli" and any(distribution(other) == "server" for other in imported)
    )
    assert importers == ["agentrein_cli.server"]


#: The engine's use cases that do a background duty's work: only the core's supervisor calls them.
DUTIES = frozenset({"maintain", "run_rollback", "run_next_rollback", "verify_next", "dispatch_events", "run_one"})


def test_nothing_outside_the_core_runs_a_background_duty_itself() -> None:
    called = sorted(
        f"{module} calls {node.func.attr}"
        for module, file in MODULES.items()
        if distribution(module) != "core"
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DUTIES
    )
    assert called == []


def test_every_module_of_the_sdk_but_its_package_is_private() -> None:
    public = sorted(m for m in MODULES if m.startswith("agentrein.") and not m.split(".")[-1].startswith("_"))
    assert public == []


def test_the_products_built_on_the_sdk_import_it_through_its_package() -> None:
    """What a user imports is what the testing kit and the demo import: the command line alone, part of the
    product, drives the SDK's modes directly."""
    through_internals = sorted(
        f"{module} imports {other}"
        for module, imported in GRAPH.items()
        if distribution(module) in ("testing", "demo")
        for other in imported
        if other.startswith("agentrein.")
    )
    assert through_internals == []
