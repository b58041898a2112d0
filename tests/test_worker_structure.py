"""The worker's rooms stay apart: no import cycle inside django_dbqueue/worker,
counting imports inside functions and for type checking (issue 21), and no
module over 300 lines (MAX_LINES)."""

import ast
from pathlib import Path

WORKER = Path(__file__).resolve().parent.parent / "django_dbqueue" / "worker"
MAX_LINES = 300


def imports_within_worker() -> dict[str, set[str]]:
    modules = {path.stem for path in WORKER.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in WORKER.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                found.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
        graph[path.stem] = found & modules
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    def visit(module: str, path: list[str]) -> list[str] | None:
        for imported in sorted(graph[module]):
            if imported in path:
                return [*path[path.index(imported) :], imported]
            found = visit(imported, [*path, imported])
            if found:
                return found
        return None

    for module in sorted(graph):
        found = visit(module, [module])
        if found:
            return found
    return None


def test_no_import_cycle_inside_the_worker():
    graph = imports_within_worker()
    assert "loop" in graph and "execution" in graph["loop"], "the walk sees the worker's imports"
    found = cycle(graph)
    assert found is None, " -> ".join(found or [])


def test_a_cycle_is_found_when_there_is_one():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_no_worker_module_is_past_about_300_lines():
    sizes = {path.name: len(path.read_text().splitlines()) for path in WORKER.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
