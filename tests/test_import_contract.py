"""The floors hold: import-linter's contracts pass on the real tree (as Python lays it out, see
tests/import_graph.py), would fail on an upward import, and no module imports itself back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import import_graph as graph

pytest.importorskip("importlinter", reason="import-linter is a dev dependency: pip install --group dev")

#: Package inits the contract cannot name as a floor (they contain floors): what each may import.
UNLISTED: dict[str, str | None] = {"hetero": None, "hetero.__main__": "hetero.cli"}  # None: the roof, anything; python -m hetero is the hetero command


def test_the_contracts_are_kept(tmp_path: Path) -> None:
    for tree in (graph.ROOT, graph.stage(tmp_path)):  # the tree itself (through its links), and as mapped
        result = graph.lint_imports(tree, config=graph.ROOT / "pyproject.toml")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "2 kept, 0 broken" in result.stdout


def test_the_links_in_hetero_show_the_installed_layout() -> None:
    # hetero/scheduler -> ../scheduler and so on: what file-reading tools (import-linter, mypy) see.
    for package, folder in graph.package_dirs().items():
        parts = package.split(".")
        if len(parts) == 2 and folder != graph.ROOT / "hetero" / parts[1]:  # a real subpackage (hetero/compat) needs none
            link = graph.ROOT / "hetero" / parts[1]
            assert link.is_symlink() and link.resolve() == folder.resolve(), (
                f"hetero/{parts[1]} must link to {folder.relative_to(graph.ROOT)} (pyproject package-dir): "
                f"ln -s ../{folder.name} hetero/{parts[1]}")


def _floor_of(module: str, floors: list[list[str]]) -> list[int]:
    return [i for i, floor in enumerate(floors) for name in floor if module == name or module.startswith(name + ".")]


def test_every_module_is_on_exactly_one_floor() -> None:
    floors = graph.floors()
    for module in graph.modules():
        if module in UNLISTED:
            continue
        assert len(_floor_of(module, floors)) == 1, (
            f"{module} is on {len(_floor_of(module, floors))} floors of [tool.importlinter] in pyproject.toml; "
            "put its room on the one it belongs to (docs/architecture.md)")


def test_the_unlisted_package_inits_import_only_their_floor() -> None:
    floors = graph.floors()
    for edge in graph.imports():
        anchor = UNLISTED.get(edge.importer)
        if edge.importer in UNLISTED and anchor is not None:
            assert _floor_of(edge.imported, floors) == _floor_of(anchor, floors), (
                f"{edge.importer} (line {edge.line}) imports {edge.imported}, which is not on its floor")


def test_the_floors_contract_fails_when_the_registry_imports_the_scheduler_again(tmp_path: Path) -> None:
    staged = graph.stage(tmp_path)
    registry = staged / "hetero" / "core" / "registry.py"
    registry.write_text(registry.read_text() + "\n\ndef _auto():\n    from hetero.scheduler import placement\n")
    result = graph.lint_imports(staged, contracts=("floors",))
    assert result.returncode != 0
    assert "BROKEN" in result.stdout and "hetero.core.registry -> hetero.scheduler.placement" in result.stdout


def test_the_scheduler_contract_fails_when_it_imports_a_vendor_library(tmp_path: Path) -> None:
    staged = graph.stage(tmp_path)
    policies = staged / "hetero" / "scheduler" / "policies.py"
    policies.write_text(policies.read_text() + "\n\ndef _gpu():\n    import torch\n")
    result = graph.lint_imports(staged, contracts=("scheduler-policy",))
    assert result.returncode != 0
    assert "hetero.scheduler.policies -> torch" in result.stdout


def test_no_module_imports_itself_back() -> None:
    running = [edge for edge in graph.imports() if not edge.type_checking]  # `if TYPE_CHECKING:` never runs
    found = graph.cycles(running)
    assert not found, "import cycles (module-level or inside functions): " + "; ".join(" <-> ".join(c) for c in found)


def test_the_graph_follows_the_package_dir_mapping() -> None:
    modules = graph.modules()
    assert modules["hetero.scheduler.placement"].parent.name == "scheduler"
    assert modules["hetero.fault.quarantine"].parent.name == "fault"
    assert modules["hetero.compiler.build.pipeline"].parent.parent.name == "compiler"
    edges = {(e.importer, e.imported) for e in graph.imports()}
    assert ("hetero.launcher.assign", "hetero.scheduler.failover") in edges  # hetero/launcher -> scheduler/
    assert ("hetero.scheduler.placement", "hetero.core.registry") in edges  # scheduler/ -> hetero/


def test_the_cycle_finder_sees_a_cycle_through_a_lazy_import() -> None:
    edges = [graph.Import("a", "b", 1, lazy=False, type_checking=False),
             graph.Import("b", "c", 1, lazy=True, type_checking=False),
             graph.Import("c", "a", 1, lazy=True, type_checking=False),
             graph.Import("c", "d", 1, lazy=False, type_checking=False)]
    assert graph.cycles(edges) == [["a", "b", "c"]]


def test_no_module_imports_another_modules_private_names() -> None:
    # A name with a leading underscore is its module's own; one another module needs is made public there.
    found = []
    for module, path in graph.modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("hetero"):
                found += [f"{module} imports {node.module}.{alias.name} (line {node.lineno})" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not found, "; ".join(found)
