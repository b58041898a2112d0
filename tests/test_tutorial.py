"""docs/tutorial.md, followed literally: its fenced blocks are read from the
page, the project is built from them in a temporary directory on SQLite,
every command shown is run (with this checkout importable, no pip install),
its output is compared with the output shown, and the admin pages the
tutorial describes are fetched as the superuser it creates. The examples of
docs/testing.md then run in that project, under Django's test runner and
under pytest."""

import html
import json
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from django_dbqueue.tasks_api import BACKPORT
from tests.conftest import ROOT
from tests.test_quickstart import Project, argvs, console_steps, sqlite_run_only

TUTORIAL = ROOT / "docs" / "tutorial.md"
TESTING = ROOT / "docs" / "testing.md"
ADMIN = {"username": "admin", "email": "admin@example.com", "password": "tutorial-pw"}


def tutorial_blocks() -> tuple[str, list[tuple[str, str]]]:
    """The page's text and its fenced blocks (language, body), in order."""
    text = TUTORIAL.read_text()
    return text, re.findall(r"^```(\w+)\n(.*?)^```$", text, flags=re.M | re.S)


def matches(shown: str, line: str) -> bool:
    """Whether an output line is the one the page shows, where ``…`` stands
    for a part that changes from run to run."""
    pattern = ".+?".join(re.escape(part) for part in shown.split("…"))
    return re.fullmatch(pattern, line) is not None


def text_of(page: str, tag: str = " ") -> str:
    """An HTML page's text, with its whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", tag, page)).split())


class TutorialProject(Project):
    """The Quickstart's project runner, with this checkout on PYTHONPATH
    instead of a pip install, and standard error interleaved with standard
    output as a terminal shows them (runqueue logs to standard error)."""

    def __init__(self, where: Path) -> None:
        super().__init__(where, Path(sys.executable))
        self.env["PYTHONPATH"] = str(ROOT)

    def run(self, argv: list[str], **env: str) -> str:
        program, *rest = argv
        if program == "cd":
            return super().run(argv)
        if program == "django-admin":
            argv = [str(self.python), "-m", "django", *rest]
        elif program == "python":
            argv = [str(self.python), *rest]
        done = subprocess.run(
            argv,
            cwd=self.cwd,
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{shlex.join(argv)} failed:\n{done.stdout}"
        return done.stdout


def run_command(project: TutorialProject, argv: list[str]) -> str | None:
    """Run one command of the page; None for one a test cannot run as shown."""
    if argv[:2] == ["pip", "install"]:
        # This checkout is on PYTHONPATH; the page must still name the package.
        assert argv[2:] == ["django-dbqueue"], argv
        return None
    if argv[-1:] == ["runserver"]:
        return None  # runs until stopped; the admin pages are fetched below instead
    if argv[-1:] == ["createsuperuser"]:
        # The questions it asks, answered through its --noinput variables.
        answers = {f"DJANGO_SUPERUSER_{key.upper()}": value for key, value in ADMIN.items()}
        return project.run([*argv, "--noinput"], **answers)
    return project.run(argv)


def follow_tutorial(where: Path) -> TutorialProject:
    """Build the tutorial's project in ``where`` from the page, running every
    command and comparing the output shown."""
    _, blocks = tutorial_blocks()
    project = TutorialProject(where)
    ran, skipped = [], []
    for language, body in blocks:
        if language == "python":
            # Every Python block is a file of the project: none escapes the test.
            assert re.match(r"# [\w/]+\.py(:|\n)", body), body
            project.write(body)
            continue
        assert language == "console", language
        for command, shown in console_steps(body):
            for argv in argvs(command):
                output = run_command(project, argv)
                if output is None:
                    skipped.append(shlex.join(argv))
                    continue
                ran.append(shlex.join(argv))
                if BACKPORT:
                    # The backport logs as django_tasks, which Django's DEBUG
                    # console does not print (the page says so).
                    shown = [line for line in shown if not line.startswith("Task id=")]
                # The page may leave out what comes first (the shell's notice
                # of its automatic imports), never what comes last.
                tail = output.splitlines()[-len(shown) :] if shown else []
                assert len(tail) == len(shown), f"{command}\n{output}"
                assert all(map(matches, shown, tail)), f"{command}: shown {shown}, got\n{output}"

    assert skipped == ["pip install django-dbqueue", "python manage.py runserver"]
    for expected in ("migrate", "shell -c", "runqueue --burst", "createsuperuser"):
        assert any(expected in command for command in ran), expected
    return project


@pytest.fixture(scope="module")
def tutorial_project(tmp_path_factory):
    """The tutorial's project, built once for this module's tests."""
    return follow_tutorial(tmp_path_factory.mktemp("tutorial"))


@sqlite_run_only
def test_the_tutorial_works_as_written(tutorial_project):
    project = tutorial_project
    text = TUTORIAL.read_text()

    # The admin as the tutorial describes it, seen by the superuser it made.
    urls = re.findall(r"`(/admin/django_dbqueue/[\w/]*)`", text)
    assert urls == ["/admin/django_dbqueue/job/", "/admin/django_dbqueue/job/dashboard/"]
    check = textwrap.dedent(
        f"""
        import json

        from django.test import Client
        from django.test.utils import setup_test_environment

        setup_test_environment()
        client = Client()
        assert client.login(username={ADMIN["username"]!r}, password={ADMIN["password"]!r})
        pages = {{}}
        job_pages = ["/admin/django_dbqueue/job/1/change/", "/admin/django_dbqueue/job/2/change/"]
        for url in ["/admin/", *{urls!r}, *job_pages]:
            response = client.get(url)
            pages[url] = [response.status_code, response.content.decode()]
        print(json.dumps(pages))
        """
    )
    pages = json.loads(project.run(["python", "manage.py", "shell", "-c", check]).splitlines()[-1])
    assert {url: status for url, (status, _) in pages.items()} == dict.fromkeys(pages, 200)
    seen = {url: text_of(page) for url, (_, page) in pages.items()}

    assert "Job queue" in seen["/admin/"] and "/admin/django_dbqueue/job/" in pages["/admin/"][1]
    changelist = pages["/admin/django_dbqueue/job/"][1]
    rows = re.findall(r'<tr[^>]*>\s*<td class="action-checkbox">.*?</tr>', changelist, re.S)
    assert len(rows) == 2, "the greeting and the long task, one row each"
    [row] = [row for row in rows if 'value="1"' in row]
    cells = [
        " ".join(re.sub(r"<[^>]+>", "", cell).split())
        for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
    ]
    # id, task path, queue, status and attempts, progress, priority, run after, owner, age
    assert cells[1:7] == ["1", "greetings.tasks.greet", "default", "SUCCESSFUL 1 / 3", "", "0"], cells
    assert cells[8] == "-", cells
    assert "Queue dashboard" in seen["/admin/django_dbqueue/job/"]
    assert "/admin/django_dbqueue/job/dashboard/" in changelist

    job_page = seen["/admin/django_dbqueue/job/1/change/"]
    assert '"Ada"' in job_page and '"Hello, Ada!"' in job_page, job_page
    assert "SUCCESSFUL" in job_page
    assert "default" in seen["/admin/django_dbqueue/job/dashboard/"]
    assert "Running jobs (0)" in seen["/admin/django_dbqueue/job/dashboard/"]

    # The long task's page: its Progress section, with the checkpoint it saved
    # (its first one is written at once; the progress bar depends on timing).
    long_task = pages["/admin/django_dbqueue/job/2/change/"][1]
    assert re.search(r"<h2[^>]*>\s*Progress\s*</h2>", long_task), "a Progress section"
    assert "&quot;cursor&quot;: " in long_task and "SUCCESSFUL" in long_task

    # The facts the page states about that row are the ones just checked.
    for fact in ("`greetings.tasks.greet`", "`1 / 3`", '`["Ada"]`', '`"Hello, Ada!"`', "*Queue dashboard*"):
        assert fact in text, fact


@sqlite_run_only
def test_the_testing_pages_examples_pass_in_the_tutorials_project(tutorial_project):
    """docs/testing.md's files, added to the tutorial's project: its TestCases
    under Django's runner, and everything (the pytest fixture too) under pytest.
    (They run on test databases: the tutorial's own database is not touched.)"""
    project = tutorial_project
    files = [
        body
        for language, body in re.findall(r"^```(\w+)\n(.*?)^```$", TESTING.read_text(), flags=re.M | re.S)
        if language in ("python", "ini")
    ]
    # Every file as written, on every Django: the page's tests run on 5.2's backport too.
    assert all(body.startswith(("# greetings/", "# pytest.ini\n")) for body in files)
    for body in files:
        project.write(body)
    # Django's runner leaves the pytest file alone, so it runs where pytest is not installed.
    no_pytest = project.cwd.parent / "no-pytest"
    no_pytest.mkdir(exist_ok=True)
    (no_pytest / "pytest.py").write_text('raise ImportError("pytest is not installed here")\n')
    tests = project.run(["python", "manage.py", "test", "greetings"], PYTHONPATH=f"{no_pytest}:{ROOT}")
    assert "Ran 4 tests" in tests and "\nOK\n" in tests, tests
    # pytest, set up by the page's pytest.ini alone, collects the pytest file and the test_*.py files.
    pytest_run = project.run(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"])
    assert "4 passed" in pytest_run.splitlines()[-1], pytest_run
    headers = [re.match(r"# ([\w/]+\.py)\n", body) for body in files]
    collected = {header.group(1) for header in headers if header and "test" in header.group(1)}
    assert collected == {
        "greetings/tests.py",
        "greetings/greet_test.py",
        "greetings/test_retries.py",
        "greetings/test_backends.py",
    }
