"""The house's layering rules (the Layout in the design notes), on the
package's import graph (tests/imports.py: imports inside functions count,
those under ``if TYPE_CHECKING:`` do not, as they never run):

- no import cycle between any two modules of the package;
- ``models.py`` and ``transitions/`` import nothing from ``enqueue/``,
  ``operations/``, ``worker/``, ``admin/`` or ``backend.py``;
- only the public entry points import ``backend.py`` (the rest ask ``routing``);
- ``worker/`` and ``admin/`` are imported by nothing below them.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterable

import pytest

from tests.imports import PACKAGE, Imports, cycles, import_graph, within

GRAPH = import_graph()


def importers(target: str, graph: dict[str, set[str]]) -> Iterable[str]:
    return sorted(name for name, imported in graph.items() if any(within(i, target) for i in imported))


def test_the_package_has_no_import_cycle():
    found = cycles(GRAPH)
    assert not found, "import cycles (imports inside functions counted): " + "; ".join(
        " <-> ".join(group) for group in found
    )


@pytest.mark.parametrize("low", ["models", "transitions", "status", "fields", "jsonfield", "clock", "db"])
def test_the_low_rooms_import_nothing_above_them(low):
    above = ("enqueue", "operations", "worker", "admin", "backend")
    wrong = {
        name: sorted(i for i in imported if within(i, *above))
        for name, imported in GRAPH.items()
        if within(name, low)
    }
    assert not {name: i for name, i in wrong.items() if i}


ENTRY_POINTS = ("django_dbqueue", "django_dbqueue.testing", "django_dbqueue.pytest_plugin")


def entry_point(name: str) -> bool:
    return name in ENTRY_POINTS or within(name, "management")


def test_only_the_public_entry_points_import_the_backend():
    assert [name for name in importers("backend", GRAPH) if not entry_point(name)] == []


@pytest.mark.parametrize("room", ["worker", "admin"])
def test_the_worker_and_the_admin_are_imported_by_nothing_below_them(room):
    outside = [name for name in importers(room, GRAPH) if not within(name, room)]
    assert [name for name in outside if not entry_point(name)] == []


def test_the_checks_find_what_they_look_for():
    """The walk sees imports inside functions and skips TYPE_CHECKING ones,
    and a cycle of three modules is found."""
    assert within("django_dbqueue.backend", "backend") and not within("django_dbqueue.backends", "backend")
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    code = "def f():\n    from .backend import X\nif TYPE_CHECKING:\n    from .admin import Y\n"
    visitor = Imports("django_dbqueue.routing", False)
    visitor.visit(ast.parse(code))
    assert visitor.found == {"django_dbqueue.backend"}


ROOT = PACKAGE.parent
DOTTED = re.compile(r"\bdjango_dbqueue(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
FROM_IMPORT = re.compile(r"^\s*from (django_dbqueue[\w.]*) import ([\w, ]+)$", re.MULTILINE)
# Dotted names in the docs that are not Python: check ids and permissions.
NOT_PYTHON = re.compile(
    r"^django_dbqueue\.(?:[EW]\d*|(?:view|add|change|delete|cancel|requeue|retry|run|pause)_\w+)$"
)


def documented_paths() -> set[str]:
    """Every ``django_dbqueue...`` dotted path, and every name imported
    ``from django_dbqueue...``, in README.md and docs/."""
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found: set[str] = set()
    for path in texts:
        text = path.read_text()
        found.update(name for name in DOTTED.findall(text) if not NOT_PYTHON.match(name))
        for module, names in FROM_IMPORT.findall(text):
            found.update(f"{module}.{name.strip()}" for name in names.split(",") if name.strip())
    return found


def resolve(path: str) -> object:
    """Import the longest importable prefix of ``path``, then read the rest as attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(path)


def test_the_docs_name_import_paths():
    """The next test has something to check: the pages name the public paths."""
    paths = documented_paths()
    assert {"django_dbqueue.moderation.ClaimQuerySetMixin", "django_dbqueue.models.Schedule"} <= paths
    assert "django_dbqueue.E001" not in paths


@pytest.mark.parametrize("path", sorted(documented_paths()))
def test_each_import_path_the_docs_name_still_imports(path):
    assert resolve(path) is not None


def test_the_pytest_plugin_entry_point_imports():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and newer
    with open(ROOT / "pyproject.toml", "rb") as file:
        plugins = tomllib.load(file)["project"]["entry-points"]["pytest11"]
    for module in plugins.values():
        importlib.import_module(module)
