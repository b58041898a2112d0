"""The package's import graph, read from its syntax trees: an import
inside a function counts (it runs when the function does); one under
``if TYPE_CHECKING:`` counts only when asked for (it never runs). The
layering tests (test_layering.py, test_worker_structure.py,
test_schedules_wing.py, test_backend_imports.py) read it."""

from __future__ import annotations

import ast
from pathlib import Path

import django_dbqueue

PACKAGE = Path(django_dbqueue.__file__).parent
NAME = "django_dbqueue"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(path): path
    for path in PACKAGE.rglob("*.py")
    if "migrations" not in path.relative_to(PACKAGE).parts
}


class Imports(ast.NodeVisitor):
    """The package's modules one module imports, at any depth of its code."""

    def __init__(self, name: str, is_package: bool, type_checking: bool = False) -> None:
        self.name, self.is_package, self.type_checking = name, is_package, type_checking
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test) and not self.type_checking:
            for statement in node.orelse:
                self.visit(statement)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parts = self.name.split(".")
            if not self.is_package:
                parts = parts[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        for alias in node.names:
            name = f"{base}.{alias.name}"
            self.add(name if name in MODULES else base)

    def add(self, name: str) -> None:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != self.name:
            self.found.add(name)


def import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports."""
    graph = {}
    for name, path in MODULES.items():
        visitor = Imports(name, path.name == "__init__.py", type_checking)
        visitor.visit(ast.parse(path.read_text(), str(path)))
        graph[name] = visitor.found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def within(name: str, *rooms: str) -> bool:
    """Whether module ``name`` is one of ``rooms`` (dotted, below the package) or inside one."""
    return any(name == f"{NAME}.{room}" or name.startswith(f"{NAME}.{room}.") for room in rooms)
