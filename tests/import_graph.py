"""The project's real import graph, read from its files the way Python will import them.

pyproject's ``package-dir`` installs ``scheduler/`` as ``hetero.scheduler`` (and likewise
``backends/``, ``compiler/``, ``fault/`` and their subfolders). The links ``hetero/scheduler`` ->
``../scheduler`` (and the others) show tools that read files the same tree; this module follows
the mapping itself, so that it holds whatever the links say (a test checks they agree):

- :func:`modules` maps every module name to its file;
- :func:`imports` lists every ``import`` in a module (module level or inside a function, as
  import-linter counts them) resolved to the project's module names;
- :func:`stage` copies the tree into a folder laid out as Python sees it, where a test may
  change a module and run ``lint-imports`` on the copy (``python tests/import_graph.py`` runs
  it on an unchanged copy; ``make lint-imports`` runs it on the tree itself).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Each installed package name and the folder it comes from (pyproject's package-dir)."""
    setup = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = setup.get("package-dir", {})

    def folder(name: str) -> Path:
        # setuptools: a package not named in package-dir lives under its nearest mapped parent
        head, rest = name, []
        while head and head not in mapping:
            head, _, tail = head.rpartition(".")
            rest.insert(0, tail)
        return root.joinpath(mapping[head] if head else "", *rest)

    return {name: folder(name) for name in setup["packages"]}


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module the wheel installs, by dotted name."""
    found: dict[str, Path] = {}
    for package, folder in package_dirs(root).items():
        for path in sorted(folder.glob("*.py")):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            found[name] = path
    return found


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    lazy: bool  # inside a function or class body, not run when the module is imported
    type_checking: bool  # under ``if TYPE_CHECKING:``


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = importer.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _walk(tree: ast.AST) -> Iterator[tuple[ast.AST, bool, bool]]:
    """Each import node, whether it is lazy, and whether it is under ``if TYPE_CHECKING``."""

    def visit(node: ast.AST, lazy: bool, checking: bool) -> Iterator[tuple[ast.AST, bool, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, lazy, checking
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                yield from visit(child, lazy or not isinstance(child, ast.ClassDef), checking)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), lazy, True)
                for stmt in child.orelse:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), lazy, checking)
            else:
                yield from visit(child, lazy, checking)

    yield from visit(tree, False, False)


def imports(root: Path = ROOT) -> list[Import]:
    """Every import of one project module by another (the nearest project module it names)."""
    known = modules(root)
    edges: list[Import] = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        for node, lazy, checking in _walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, path.stem == "__init__", node)
                targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            seen: set[str] = set()
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                # "from hetero.fault import quarantine" names hetero.fault.quarantine; the package itself
                # (imported too, to reach it) counts only when nothing more precise was named.
                if target and target != name and target not in seen:
                    seen.add(target)
            precise = {t for t in seen if not any(o.startswith(t + ".") for o in seen)}
            for target in sorted(precise):
                edges.append(Import(name, target, node.lineno, lazy, checking))
    return edges


def cycles(edges: list[Import]) -> list[list[str]]:
    """Strongly connected groups of two or more modules in the given graph (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, set()).add(edge.imported)
        graph.setdefault(edge.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return groups


def stage(dest: Path, root: Path = ROOT) -> Path:
    """Copy the installed modules into ``dest`` laid out as their dotted names say; return dest."""
    for name, path in modules(root).items():
        parts = name.split(".")
        target = dest.joinpath(*parts, "__init__.py") if path.stem == "__init__" else (
            dest.joinpath(*parts[:-1], parts[-1] + ".py"))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return dest


def lint_imports(staged: Path, config: Path = ROOT / "pyproject.toml",
                 contracts: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Run import-linter's ``lint-imports`` on a staged tree with the given contracts (all, or
    those ids); the staged tree comes first on the path, ahead of the installed hetero."""
    env = dict(os.environ, PYTHONPATH=str(staged))
    chosen = [arg for contract in contracts for arg in ("--contract", contract)]
    command = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
               "sys.exit(lint_imports_command())", "--no-cache", *chosen, str(config)]
    return subprocess.run(command, cwd=staged, env=env, capture_output=True, text=True, check=False, timeout=300)


def floors(config: Path = ROOT / "pyproject.toml") -> list[list[str]]:
    """The layers contract's floors, top first, each as its module names."""
    contracts = tomllib.loads(config.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "floors")["layers"]
    return [[name.strip() for name in layer.replace("|", ":").split(":")] for layer in layers]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="hetero-imports-") as tmp:
        result = lint_imports(stage(Path(tmp)))
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
