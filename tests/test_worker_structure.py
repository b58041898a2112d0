"""The worker's rooms stay apart: no import cycle inside django_dbqueue/worker,
counting imports inside functions and for type checking (issue 21), neither
between its modules nor between its folders (process/, housekeeping/,
supervisor/ and the modules at its top), and no module over 300 lines
(MAX_LINES)."""

import ast
from pathlib import Path

from tests.imports import import_graph, within

WORKER = Path(__file__).resolve().parent.parent / "django_dbqueue" / "worker"
MAX_LINES = 300


def module_name(path: Path) -> str:
    """``process.loop`` for worker/process/loop.py, ``process`` for its __init__."""
    parts = path.relative_to(WORKER).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_within_worker() -> dict[str, set[str]]:
    """The package's import graph (tests/imports.py), imports for type
    checking counted too, between worker/'s modules, named below worker/."""
    graph = import_graph(type_checking=True)
    prefix = "django_dbqueue.worker"

    def short(name: str) -> str:
        return name[len(prefix) + 1 :]

    inside = {name for name in graph if within(name, "worker")}
    return {short(name): {short(i) for i in graph[name] if i in inside} - {short(name)} for name in inside}


def folders(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between worker/'s folders, each top-level module its own node;
    the package's own __init__ (its re-exports, the map) is left out."""

    def room(module: str) -> str:
        return module.split(".")[0]

    rooms: dict[str, set[str]] = {}
    for module, imported in graph.items():
        if not module:
            continue
        own = room(module)
        rooms.setdefault(own, set()).update(room(i) for i in imported if i and room(i) != own)
    return rooms


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    def visit(module: str, path: list[str]) -> list[str] | None:
        for imported in sorted(graph.get(module, ())):
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
    assert "process.execution" in graph["process.loop"], "the walk sees the worker's imports"
    assert "process.savepoints" in graph["process.atomic"], "and 'from . import module'"
    assert "shared" in graph["process.loop"], "and those of the top's modules"
    found = cycle(graph)
    assert found is None, " -> ".join(found or [])


def test_no_import_cycle_between_the_worker_folders():
    rooms = folders(imports_within_worker())
    assert {"process", "housekeeping", "supervisor", "shared"} <= set(rooms)
    assert "process" in rooms["supervisor"], "the walk sees the folders' imports"
    found = cycle(rooms)
    assert found is None, " -> ".join(found or [])


def test_a_cycle_is_found_when_there_is_one():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_the_walk_reaches_the_subfolders():
    graph = imports_within_worker()
    assert {"process.loop", "supervisor.supervisor", "housekeeping.heartbeat"} <= set(graph)


def test_no_worker_module_is_past_about_300_lines():
    sizes = {
        module_name(path) or "__init__": len(path.read_text().splitlines()) for path in WORKER.rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_each_housekeeping_chore_is_a_service_the_heartbeat_starts():
    """River's queue maintainer as the model: one file per chore, each with
    a run_once() (or a start and a stop), all started by heartbeat.py."""
    folder = WORKER / "housekeeping"
    starter = (folder / "heartbeat.py").read_text()
    chores = sorted(p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "heartbeat"))
    assert chores == ["cancel_relay", "leases", "pruning", "rescuer", "roster", "scheduler"]
    for chore in chores:
        tree = ast.parse((folder / f"{chore}.py").read_text())
        methods = {
            node.name
            for cls in tree.body
            if isinstance(cls, ast.ClassDef)
            for node in cls.body
            if isinstance(node, ast.FunctionDef)
        }
        assert "run_once" in methods or "stop" in methods, chore
        assert f".{chore} import" in starter, f"heartbeat.py does not start {chore}"
