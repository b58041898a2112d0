"""Every snippet of docs/*.md and README.md, run as pasted in the tutorial's
project (built by following docs/tutorial.md), with the Quickstart's `myapp`
added from README.md. Each page runs in its own copy of that project:

- a Python block headed ``# path.py`` is a file: written (``settings.py`` and
  ``urls.py`` are the project's, and always added at their end), then
  ``manage.py check`` runs, and the page's task modules are imported, which
  must enqueue nothing;
- any other Python block runs in one ``manage.py shell`` per page, in page
  order, as a reader pastes them one after another;
- a console block's ``python manage.py`` commands run, and their output is
  compared with the output shown (``…`` stands for what changes); a
  ``pip install`` line must name this package and its real extras;
- SQL blocks, and Python settings for MySQL, run on MariaDB
  (tests/test_doc_snippets_mariadb.py).

A block that cannot run in that project says why in an HTML comment on the
line before it: ``<!-- snippet: skip (reason) -->``, or ``<!-- snippet:
output differs (reason) -->`` to run it without comparing its output.
docs/tutorial.md and docs/testing.md run in tests/test_tutorial.py, and the
README's Quickstart in tests/test_quickstart.py."""

import importlib.metadata
import json
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_quickstart import argvs, console_steps, for_sqlite, quickstart, sqlite_run_only
from tests.test_tutorial import TutorialProject, follow_tutorial, matches, tutorial_blocks

ELSEWHERE = {"tutorial.md", "testing.md"}
PAGES = [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in ELSEWHERE)]
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>python|sql|console)\n(?P<body>.*?)^(?P=indent)```$", re.M | re.S
)
MARKER = re.compile(r"<!-- snippet: (?P<kind>skip|output differs) \((?P<reason>[^)]+)\) -->\n *\Z")
SETTING = re.compile(r"[A-Z][A-Z_]*(\[.*?\])* [+]?= ")
HEADER = re.compile(r"# (?P<path>[\w/]+\.py)(?P<how>:.*)?\n")
EXTRAS = set(importlib.metadata.metadata("django-dbqueue").get_all("Provides-Extra") or [])


@dataclass
class Snippet:
    where: str  # page:line
    lang: str
    body: str
    marker: str | None

    @property
    def file(self) -> str | None:
        header = HEADER.match(self.body)
        if self.lang != "python":
            return None
        if header:
            return header.group("path")
        # Setting a setting: a settings file, whatever the block says.
        return "settings.py" if SETTING.match(self.body) else None

    @property
    def on_mariadb(self) -> bool:
        return self.lang == "sql" or "django.db.backends.mysql" in self.body


def snippets(page: Path) -> list[Snippet]:
    text = page.read_text()
    if page.name == "README.md":  # the Quickstart runs in tests/test_quickstart.py
        text = text.replace(quickstart()[0], "\n" * quickstart()[0].count("\n"))
    found = []
    for fence in FENCE.finditer(text):
        marker = MARKER.search(text[: fence.start()][-300:])
        body = "\n".join(line.removeprefix(fence["indent"]) for line in fence["body"].splitlines()) + "\n"
        line = text.count("\n", 0, fence.start()) + 1
        found.append(Snippet(f"{page.name}:{line}", fence["lang"], body, marker and marker["kind"]))
    return found


def snippet_project(where: Path) -> tuple[TutorialProject, str]:
    """The tutorial's project plus the Quickstart's myapp, and startproject's settings."""
    where.mkdir()
    project = follow_tutorial(where)
    settings = project.cwd / "mysite" / "settings.py"
    tutorial_settings = next(body for lang, body in tutorial_blocks()[1] if "settings.py" in body)
    pristine = settings.read_text().removesuffix("\n" + tutorial_settings.partition("\n")[2])
    assert "django_dbqueue" not in pristine
    project.run(["python", "manage.py", "startapp", "myapp"])
    for lang, body in quickstart()[1]:
        if lang == "python" and "settings.py" not in body:
            project.write(body)
    return project, pristine


def with_quickstart_settings(pristine: str, quickstart_settings: str) -> str:
    """startproject's settings, the Quickstart's block, and the tutorial's app."""
    return pristine + "\n" + quickstart_settings.partition("\n")[2] + 'INSTALLED_APPS += ["greetings"]\n'


@pytest.fixture(scope="module")
def base_project(tmp_path_factory) -> tuple[Path, str]:
    project, pristine = snippet_project(tmp_path_factory.mktemp("snippets") / "base")
    settings = next(body for lang, body in quickstart()[1] if "settings.py" in body)
    (project.cwd / "mysite" / "settings.py").write_text(
        with_quickstart_settings(pristine, for_sqlite(settings))
    )
    project.run(["python", "manage.py", "check"])
    return project.cwd.parent, pristine


def write(project: TutorialProject, snippet: Snippet, pristine: str) -> None:
    name = Path(snippet.file or "").name
    code = snippet.body.partition("\n")[2] if HEADER.match(snippet.body) else snippet.body
    if name in ("settings.py", "urls.py"):
        target = project.cwd / "mysite" / name
        if re.search(r'^INSTALLED_APPS .*"django_dbqueue"', code, re.M):
            # It sets a project up: on startproject's settings, with the project's own apps.
            target.write_text(f'{pristine}\n{code}INSTALLED_APPS += ["greetings", "myapp"]\n')
        else:
            target.write_text(target.read_text() + "\n" + code)
    else:
        (project.cwd / snippet.file).parent.mkdir(parents=True, exist_ok=True)
        project.write(snippet.body)


RUNNER = """
import importlib, json
from django_dbqueue.models import Job
jobs = Job.objects.count()
for module in {modules!r}:
    importlib.import_module(module)
assert Job.objects.count() == jobs, "defining tasks enqueued a job"
ran = []
namespace = {{"__name__": "__snippet__"}}
for where, code in {blocks!r}:
    exec(compile(code, where, "exec"), namespace)
    ran.append(where)
print(json.dumps(ran))
"""


def run_console(project: TutorialProject, snippet: Snippet) -> list[str]:
    ran = []
    for command, shown in console_steps(snippet.body):
        for argv in argvs(command):
            if argv[:2] == ["pip", "install"]:
                name, _, extras = argv[2].partition("[")
                assert name == "django-dbqueue" and set(extras.rstrip("]").split(",")) - {""} <= EXTRAS, argv
                continue
            assert argv[:2] == ["python", "manage.py"], f"{snippet.where}: {command} needs a snippet marker"
            output = project.run(argv)
            ran.append(shlex.join(argv))
            if shown and snippet.marker != "output differs":
                tail = output.splitlines()[-len(shown) :]
                assert len(tail) == len(shown) and all(map(matches, shown, tail)), f"{command}\n{output}"
    return ran


def runnable(page: Path) -> list[Snippet]:
    """The page's snippets that run in the SQLite project."""
    return [s for s in snippets(page) if s.marker != "skip" and not s.on_mariadb]


def run_shell(project: TutorialProject, modules: list[str], shell: list[Snippet]) -> None:
    """One shell session: import the task modules written so far, then run the blocks."""
    blocks = [(s.where, s.body) for s in shell]
    for where, body in blocks:
        assert "@task" not in body, f"{where}: a task belongs in a module; head the block # myapp/tasks.py"
    code = RUNNER.format(modules=modules, blocks=blocks)
    output = project.run(["python", "manage.py", "shell", "-c", code])
    assert json.loads(output.splitlines()[-1]) == [where for where, _ in blocks]


@sqlite_run_only
@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=lambda page: page.name)
def test_the_pages_snippets_run_as_pasted(page, base_project, tmp_path):
    """The page's blocks in order: files written, Python pasted into a shell
    (one session until a command interrupts it), commands run."""
    base, pristine = base_project
    shutil.copytree(base, tmp_path / "project")
    project = TutorialProject(tmp_path / "project")
    project.cwd = tmp_path / "project" / "mysite"
    modules: list[str] = []
    shell: list[Snippet] = []
    for snippet in runnable(page):
        if snippet.file:
            write(project, snippet, pristine)
            if "/" in snippet.file:
                modules.append(snippet.file.removesuffix(".py").replace("/", "."))
        elif snippet.lang == "python":
            shell.append(snippet)
        else:
            if shell:
                run_shell(project, modules, shell)
                shell = []
            assert run_console(project, snippet) or snippet.body.startswith("$ pip install"), snippet.where
    if shell:
        run_shell(project, modules, shell)
    project.run(["python", "manage.py", "check"])


def test_every_marker_marks_a_snippet_and_few_are_skipped():
    every = [s for page in PAGES for s in snippets(page)]
    markers = sum(len(re.findall(r"^ *<!-- snippet:", page.read_text(), re.M)) for page in PAGES)
    assert markers == len([s for s in every if s.marker]), "a marker must be on the line before its block"
    skipped = [s.where for s in every if s.marker == "skip"]
    # Few, each with its reason on the page; most blocks run.
    assert len(skipped) <= 15 and len(every) - len(skipped) >= 25, (len(every), skipped)
    assert all(HEADER.match(s.body) for s in every if s.lang == "python" and "add at the end" in s.body)
