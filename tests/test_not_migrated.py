"""A project that forgot `migrate`: runqueue refuses to start and enqueue()
says what to run, in one line each, on an empty database of each kind."""

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import MANAGE, ROOT, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)

# The queue's own migrations, to count those an upgrade has not applied yet.
MIGRATIONS = ROOT / "django_dbqueue" / "migrations"

# A settings module whose queue lives on a database of its own, "queue".
QUEUE_DATABASE_SETTINGS = """
import os
from testproject.settings import *  # noqa: F403

DATABASES = {**DATABASES, "queue": {**DATABASES["default"], "NAME": os.environ["EMPTY_DATABASE"]}}
TASKS = {"default": {**TASKS["default"], "OPTIONS": {**TASKS["default"]["OPTIONS"], "DATABASE": "queue"}}}
"""


@pytest.fixture
def empty_database(tmp_path: Path) -> Iterator[str]:
    """The name of a database with no table at all (a SQLite file's path)."""
    if connection.vendor == "sqlite":
        yield str(tmp_path / "empty.sqlite3")
        return
    name = f"{connection.settings_dict['NAME']}_empty"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {name}")
        cursor.execute(f"CREATE DATABASE {name}")
    yield name
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {name}")


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    """A manage.py command in a child process; a hang fails the test (TimeoutExpired)."""
    return subprocess.run(
        [sys.executable, str(MANAGE), *args],
        env=subprocess_env(**env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )


def on_empty(database: str) -> dict[str, str]:
    key = "DBQUEUE_SQLITE" if connection.vendor == "sqlite" else "DBQUEUE_DB_NAME"
    return {key: database}


MIGRATE = re.escape("Run 'python manage.py migrate' first.")


@pytest.mark.parametrize("burst", [[], ["--burst"]], ids=["runqueue", "runqueue --burst"])
def test_runqueue_refuses_to_start_before_migrate(empty_database, burst):
    run = manage("runqueue", *burst, **on_empty(empty_database))
    assert run.returncode == 1, run.stderr
    assert re.fullmatch(
        r"CommandError: The queue is not set up: \d+ of django_dbqueue's migrations \(0001_initial, "
        r"0002_admin_indexes, 0003_job_history, \.\.\.\) are not applied to the database 'default'\. "
        rf"{MIGRATE}\n",
        run.stderr,
    ), run.stderr
    assert run.stdout == ""


def test_runqueue_names_the_queue_database_when_the_queue_has_one(empty_database, tmp_path):
    """The project's default database is migrated; its queue database is not."""
    (tmp_path / "queue_settings.py").write_text(QUEUE_DATABASE_SETTINGS)
    env = {
        "EMPTY_DATABASE": empty_database,
        "DJANGO_SETTINGS_MODULE": "queue_settings",
        "PYTHONPATH": f"{tmp_path}:{ROOT / 'testproject'}:{ROOT}",
    }
    run = manage("runqueue", "--burst", **env)
    assert run.returncode == 1, run.stderr
    assert (
        "are not applied to the database 'queue' (OPTIONS[\"DATABASE\"] of the task backend 'default'). "
        "Run 'python manage.py migrate --database queue' first.\n"
    ) in run.stderr
    assert len(run.stderr.splitlines()) == 1, run.stderr


def test_enqueue_before_migrate_says_to_migrate(empty_database):
    script = "from demo import tasks; tasks.add.enqueue(1, 2)"
    run = manage("shell", "-c", script, **on_empty(empty_database))
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"django_dbqueue\.exceptions\.QueueNotMigrated: The queue is not set up: tables that migrate "
        rf"creates are missing or out of date on the database 'default'\. {MIGRATE}",
        last,
    ), run.stderr


@pytest.mark.parametrize("args", [["email"], []], ids=["pause", "list"])
def test_pausequeue_before_migrate_says_to_migrate(empty_database, args):
    run = manage("pausequeue", *args, **on_empty(empty_database))
    assert run.returncode == 1
    assert re.fullmatch(
        r"CommandError: The queue is not set up: tables that migrate creates are missing or out of "
        rf"date on the database 'default'\. {MIGRATE}\n",
        run.stderr,
    ), run.stderr


def test_runqueue_refuses_to_start_after_an_upgrade_without_migrate(empty_database):
    """The tables are there, but not the latest migration's changes."""
    env = on_empty(empty_database)
    assert manage("migrate", "django_dbqueue", "0006", **env).returncode == 0
    run = manage("runqueue", "--burst", **env)
    assert run.returncode == 1, run.stderr
    match = re.fullmatch(
        r"CommandError: The queue is not set up: (\d+) of django_dbqueue's migrations "
        r"\(0007_\w+(, \w+)*(, \.\.\.)?\) "
        rf"(is|are) not applied to the database 'default'\. {MIGRATE}\n",
        run.stderr,
    )
    assert match, run.stderr
    later = sorted(p.name for p in MIGRATIONS.glob("0*.py") if p.name > "0007")
    assert int(match[1]) == len(later), (match[1], later)
    assert bool(match[3]) == (len(later) > 3), run.stderr  # the first three are named, then "..."
