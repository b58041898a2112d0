"""The schedules wing keeps its floors (issue 31): options.py parses the
settings schedules without loading the models, the enqueue side or
operations/; the stored schedules' model imports none of them, not even
inside a function; and the old import paths give the same objects."""

import subprocess
import sys

from tests.conftest import ROOT
from tests.imports import import_graph, within

# What a model module, and the spec below it, must not import.
ABOVE = ("enqueue", "operations", "backend", "worker", "admin")


def test_the_spec_and_the_table_import_nothing_from_above():
    graph = import_graph()
    for module in ("schedules.spec", "schedules.table"):
        imported = graph[f"django_dbqueue.{module}"]
        assert {name for name in imported if within(name, *ABOVE)} == set(), module
    assert not {
        name for name in graph["django_dbqueue.schedules.spec"] if within(name, "models", "schedules.runs")
    }
    assert "django_dbqueue.routing" in graph["django_dbqueue.schedules.table"], (
        "imports inside functions count"
    )


def test_options_load_the_spec_alone():
    code = (
        "import sys, django_dbqueue.options; "
        "print(sorted(m for m in sys.modules if m.startswith('django_dbqueue.')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "django_dbqueue.schedules.spec" in loaded
    for name in ("models", "enqueue", "operations", "schedules.table", "schedules.runs", "backend"):
        assert f"'django_dbqueue.{name}" not in loaded, name


def test_the_old_paths_give_the_same_objects():
    from django_dbqueue import models, stored_schedules
    from django_dbqueue.schedules import table

    assert models.Schedule is stored_schedules.Schedule is table.Schedule
    # Migration 0011 names the field's default by its old path.
    assert stored_schedules.default_timezone is table.default_timezone
    assert table.Schedule._meta.app_label == "django_dbqueue"
    assert table.Schedule._meta.db_table == "django_dbqueue_schedule"
