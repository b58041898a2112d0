"""The README's Quickstart, followed literally: its code blocks are read from
README.md, a fresh project is built from them in a temporary directory on
SQLite, and every command shown is run and its output shown compared. Its
`pip install` runs too, from this checkout, in a fresh virtualenv that
already has this run's Django (and the backport on 5.2): it must keep that
Django. ./dev runs it once per Django of the matrix."""

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import django
import pytest

from django_dbqueue.tasks_api import BACKPORT
from tests.conftest import ROOT

sqlite_run_only = pytest.mark.skipif(
    os.environ.get("DBQUEUE_DATABASE", "sqlite") != "sqlite",
    reason="uses its own SQLite database whatever the test database; runs once, with the SQLite suite",
)


def quickstart() -> tuple[str, list[tuple[str, str]]]:
    """The Quickstart section's text and its fenced blocks (language, body), in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    return section, re.findall(r"^```(\w+)\n(.*?)^```$", section, flags=re.M | re.S)


# The Quickstart's MySQL/MariaDB DATABASES statement, which it says to leave out for SQLite.
MYSQL_DATABASES = re.compile(r"^DATABASES = \{  # MySQL or MariaDB\b.*?^\}\n", flags=re.M | re.S)


def for_sqlite(settings: str) -> str:
    """The Quickstart's settings block as a SQLite user keeps it."""
    kept, found = MYSQL_DATABASES.subn("", settings)
    assert found == 1, settings
    return kept


def console_steps(body: str) -> list[tuple[str, list[str]]]:
    """``$ command`` lines, each with the output lines the README shows under it."""
    steps: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif line.strip():
            steps[-1][1].append(line)
    return steps


def argvs(command: str) -> list[list[str]]:
    words = shlex.split(command, comments=True)
    commands, current = [], []
    for word in words:
        if word == "&&":
            commands.append(current)
            current = []
        else:
            current.append(word)
    return [*commands, current]


def fresh_venv(where: Path) -> Path:
    """A virtualenv with this run's Django (and the backport, if this run
    uses it) and nothing else: a site before it installs django-dbqueue."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    site = [f"Django=={django.__version__}"]
    if BACKPORT:
        site.append(f"django-tasks=={importlib.metadata.version('django-tasks')}")
    pip(python, "install", *site)
    return python


def pip(python: Path, *args: str) -> str:
    done = subprocess.run(
        [str(python), "-m", "pip", "-q", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def installed(python: Path, name: str) -> str:
    return subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


class Project:
    def __init__(self, where: Path, python: Path) -> None:
        self.cwd = where
        self.python = python
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DBQUEUE_"))}
        self.env.pop("PYTHONPATH", None)  # the package under test comes from pip install
        self.env.update(PYTHONUNBUFFERED="1", PATH=f"{python.parent}:{os.environ.get('PATH', '')}")

    def run(self, argv: list[str]) -> str:
        program, *rest = argv
        if program == "cd":
            self.cwd = self.cwd / rest[0]
            return ""
        if program == "django-admin":
            argv = [str(self.python), "-m", "django", *rest]
        elif program == "python":
            argv = [str(self.python), *rest]
        elif program == "pip":
            # The package is this checkout: pip builds and installs it as from PyPI.
            argv = [
                str(self.python),
                "-m",
                "pip",
                "-q",
                *(w.replace("django-dbqueue", str(ROOT)) for w in rest),
            ]
        done = subprocess.run(argv, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{shlex.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def write(self, body: str) -> None:
        header, _, code = body.partition("\n")
        path, _, how = header.removeprefix("# ").partition(":")
        target = self.cwd / path.strip()
        if "add at the end" in how:
            target.write_text(target.read_text() + "\n" + code)
        else:
            target.write_text(code)


@sqlite_run_only
def test_the_quickstart_works_as_written(tmp_path):
    section, blocks = quickstart()
    python = fresh_venv(tmp_path / "venv")
    project = Project(tmp_path, python)
    ran = []
    for language, body in blocks:
        if language == "python":
            project.write(for_sqlite(body) if "DATABASES" in body else body)
            continue
        for command, shown in console_steps(body):
            for argv in argvs(command):
                if "runqueue" in argv and "--burst" not in argv:
                    continue  # runs until stopped
                output = project.run(argv)
                ran.append(shlex.join(argv))
                if shown:
                    # After Django's own notice of the shell's automatic imports.
                    assert output.splitlines()[-len(shown) :] == shown, command
    # pip kept the site's Django (and backport), and installed this checkout.
    assert installed(python, "Django") == django.__version__
    if BACKPORT:
        assert installed(python, "django-tasks") == importlib.metadata.version("django-tasks")
    assert installed(python, "django-dbqueue") == importlib.metadata.version("django-dbqueue")
    assert any(command.startswith("pip install") for command in ran)
    assert any("runqueue --burst" in command for command in ran)
    assert any("migrate" in command for command in ran)

    # The view, at the URL the Quickstart routes, enqueues a due job and a
    # reminder a day later; the admin pages the Quickstart names answer.
    urls = re.findall(r"`(/admin/django_dbqueue/[\w/]*)`", section)
    assert urls == ["/admin/django_dbqueue/job/", "/admin/django_dbqueue/dashboard/"]
    check = textwrap.dedent(
        f"""
        import json
        from datetime import timedelta

        from django.contrib.auth.models import User
        from django.test import Client
        from django.test.utils import setup_test_environment

        from django_dbqueue.models import Job

        setup_test_environment()
        client = Client()
        response = client.get("/welcome/7/")
        job, reminder = Job.objects.order_by("-pk")[:2][::-1]
        client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
        print(json.dumps({{
            "response": [response.status_code, json.loads(response.content)],
            "job": [job.pk, job.status, job.args, job.run_after == job.enqueued_at],
            "reminder": [reminder.status, reminder.run_after - reminder.enqueued_at > timedelta(hours=23)],
            "pages": [client.get(url, follow=True).status_code for url in {urls!r}],
        }}))
        """
    )
    seen = json.loads(project.run(["python", "manage.py", "shell", "-c", check]).splitlines()[-1])
    assert seen == {
        "response": [200, {"job": str(seen["job"][0])}],
        "job": [seen["job"][0], "READY", [7], True],
        "reminder": ["READY", True],
        "pages": [200, 200],
    }


def test_the_quickstart_grows_no_longer():
    # Its 99 lines when issue 18 added the MySQL DATABASES, the view's URL and
    # mysqlclient's build needs: each fix replaces text rather than adding it.
    section, _ = quickstart()
    assert len(section.splitlines()) <= 99


def test_the_demos_closing_hint_names_the_interpreter_that_ran_it():
    from demo.management.commands.demo import admin_hint

    inside = admin_hint(str(ROOT / ".venv" / "bin" / "python"), ROOT)
    assert "`.venv/bin/python testproject/manage.py createsuperuser`" in inside
    assert "then `.venv/bin/python testproject/manage.py runserver`" in inside
    assert "http://127.0.0.1:8000/admin/django_dbqueue/dashboard/" in inside
    outside = admin_hint("/opt/py/bin/python3", ROOT)
    assert "`/opt/py/bin/python3 testproject/manage.py createsuperuser`" in outside


@sqlite_run_only
def test_the_demo_ends_with_a_hint_that_works_from_where_it_ran(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DBQUEUE_"))}
    env.update(PYTHONPATH=str(ROOT), DBQUEUE_SQLITE=str(tmp_path / "demo.sqlite3"))
    done = subprocess.run(
        [sys.executable, "testproject/manage.py", "demo", "--jobs", "10", "--processes", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    python = (
        os.path.relpath(sys.executable, ROOT) if Path(sys.executable).is_relative_to(ROOT) else sys.executable
    )
    assert f"`{python} testproject/manage.py createsuperuser`" in done.stdout
