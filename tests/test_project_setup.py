"""Projects laid out unlike the test project, each in a subprocess of its own
settings on the test database: tasks defined while apps load, and the
backend configured without the app installed."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.test import override_settings

from django_dbqueue.models import Job
from django_dbqueue.tasks_api import task_backends
from tests.conftest import ROOT, subprocess_env

NOT_INSTALLED = (
    "The task backend 'default' is a django_dbqueue DatabaseBackend, but 'django_dbqueue' is not "
    "in INSTALLED_APPS, so its job table is neither migrated nor usable."
)


def write(base: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def run(base: Path, *args: str) -> subprocess.CompletedProcess:
    env = subprocess_env(
        DJANGO_SETTINGS_MODULE="site_settings",
        PYTHONPATH=f"{base}:{ROOT / 'testproject'}:{ROOT}",
    )
    return subprocess.run(
        [sys.executable, *args], cwd=base, env=env, capture_output=True, text=True, timeout=60
    )


# -- @task while apps load ---------------------------------------------------

EARLY_APPS = {
    "site_settings.py": """
        from testproject.settings import *  # the test database
        INSTALLED_APPS = [*INSTALLED_APPS, "oneapp", "earlyapp.apps.EarlyConfig"]
    """,
    # A single-module app: its tasks live in the module Django imports first.
    "oneapp.py": """
        from django_dbqueue.tasks_api import task

        import outside  # a task module of no installed app, imported as apps load

        @task
        def shout(word):
            return word.upper()
    """,
    "outside.py": """
        from django_dbqueue.tasks_api import task

        @task
        def stray():
            return None
    """,
    # An apps.py that imports its tasks at the top.
    "earlyapp/__init__.py": "",
    "earlyapp/apps.py": """
        from django.apps import AppConfig

        from . import tasks  # noqa: F401

        class EarlyConfig(AppConfig):
            name = "earlyapp"
    """,
    "earlyapp/tasks.py": """
        from django_dbqueue.tasks_api import task

        @task(priority=3)
        def early(n):
            return n
    """,
    "produce.py": """
        import django

        django.setup()

        from django_dbqueue.tasks_api import InvalidTask

        import oneapp, outside
        from earlyapp.tasks import early

        print("ids", oneapp.shout.enqueue("hi").id, early.enqueue(7).id)
        try:
            outside.stray.enqueue()
        except InvalidTask as exc:
            print("refused:", exc)
    """,
}


@pytest.mark.django_db(transaction=True)
def test_tasks_defined_while_apps_load_are_checked_at_enqueue(tmp_path):
    write(tmp_path, EARLY_APPS)

    done = run(tmp_path, "produce.py")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ids ")
    ids = [int(pk) for pk in lines[0].split()[1:]]
    jobs = {job.task_path: job for job in Job.objects.filter(pk__in=ids)}
    assert sorted(jobs) == ["earlyapp.tasks.early", "oneapp.shout"]
    assert (jobs["oneapp.shout"].args, jobs["earlyapp.tasks.early"].priority) == (["hi"], 3)
    # The installed-app rule still holds: only its moment moved.
    assert lines[1] == (
        "refused: The task outside.stray is defined in outside, which is not the module of an "
        "installed app nor in OPTIONS ALLOWED_TASK_MODULES, so no worker would run it."
    )
    assert Job.objects.count() == 2


# -- the backend without the app ---------------------------------------------

WITHOUT_THE_APP = {
    "site_settings.py": """
        from testproject.settings import *
        INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "plain"]
        ROOT_URLCONF = "plain.urls"
    """,
    "plain/urls.py": "urlpatterns = []",
    # django.tasks' checks, ours among them, run only if django.tasks was
    # imported before the checks were collected: here by an app that loads
    # its tasks with its models, as apps whose signal handlers enqueue do.
    "plain/models.py": """
        from . import tasks  # noqa: F401
    """,
    "plain/__init__.py": "",
    "plain/tasks.py": """
        from django_dbqueue.tasks_api import task

        @task
        def ping():
            return "pong"
    """,
    "produce.py": """
        import django

        django.setup()

        from plain.tasks import ping

        ping.enqueue()
    """,
}


def test_the_backend_without_the_app_installed_is_a_check_error():
    with override_settings(INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"]):
        messages = task_backends["default"].check()
    assert [m.id for m in messages] == ["django_dbqueue.E004"]
    assert messages[0].msg == NOT_INSTALLED
    assert messages[0].hint == "Add 'django_dbqueue' to INSTALLED_APPS and run manage.py migrate."


def test_without_the_app_manage_py_check_fails_and_enqueue_says_why(tmp_path):
    write(tmp_path, WITHOUT_THE_APP)

    check = run(tmp_path, "-m", "django", "check")
    assert check.returncode == 1
    assert f"?: (django_dbqueue.E004) {NOT_INSTALLED}" in check.stderr

    enqueue = run(tmp_path, "produce.py")
    assert enqueue.returncode == 1
    assert f"django.core.exceptions.ImproperlyConfigured: {NOT_INSTALLED}" in enqueue.stderr
