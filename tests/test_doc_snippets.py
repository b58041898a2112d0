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

import ast
import functools
import importlib.metadata
import importlib.util
import json
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_quickstart import argvs, console_steps, for_sqlite, quickstart, sqlite_run_only
from tests.test_tutorial import TUTORIAL, TutorialProject, follow_tutorial, matches, tutorial_blocks

# Pages whose blocks another test runs or checks: statements.md's SQL is what
# the transitions send, compared with the code by tests/test_statements.py.
ELSEWHERE = {"tutorial.md", "testing.md", "statements.md"}
PAGES = [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in ELSEWHERE)]
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>python|sql|console)\n(?P<body>.*?)^(?P=indent)```$", re.M | re.S
)
MARKER = re.compile(r"<!-- snippet: (?P<kind>skip|output differs|sets up) \((?P<reason>[^)]+)\) -->\n *\Z")
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


def snippet_project(where: Path, tutorial: Path | None = None) -> tuple[TutorialProject, str]:
    """The tutorial's project plus the Quickstart's myapp, and startproject's
    settings; from a copy of ``tutorial``, a finished tutorial's project, if given."""
    if tutorial is None:
        where.mkdir()
        project = follow_tutorial(where)
    else:
        project = copied(tutorial, where)
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


def copied(tutorial: Path, where: Path) -> TutorialProject:
    shutil.copytree(tutorial, where)
    project = TutorialProject(where)
    project.cwd = where / "mysite"
    return project


@pytest.fixture(scope="module")
def tutorial_done(tmp_path_factory) -> Path:
    """The tutorial's project, followed once for this module's tests."""
    where = tmp_path_factory.mktemp("snippets") / "tutorial"
    where.mkdir()
    follow_tutorial(where)
    return where


@pytest.fixture(scope="module")
def base_project(tmp_path_factory, tutorial_done) -> tuple[Path, str]:
    project, pristine = snippet_project(tmp_path_factory.mktemp("snippets") / "base", tutorial_done)
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
        # Two pages that add a task of one name to one module: the second replaces the first.
        tree = ast.parse((project.cwd / snippet.file).read_text())
        names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
        twice = sorted({name for name in names if names.count(name) > 1})
        assert not twice, f"{snippet.where}: {snippet.file} defines {', '.join(twice)} a second time"


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


def run_console(project: TutorialProject, snippet: Snippet, compare: bool = True) -> list[str]:
    ran = []
    for command, shown in console_steps(snippet.body):
        for argv in argvs(command):
            if argv[:2] == ["pip", "install"]:
                for requirement in argv[2:]:
                    name, _, extras = requirement.partition("[")
                    if name == "django-dbqueue":
                        assert set(extras.rstrip("]").split(",")) - {""} <= EXTRAS, argv
                    else:  # a package the page needs beside this one: a real one, installed here
                        importlib.metadata.distribution(name)
                continue
            assert argv[:2] == ["python", "manage.py"], f"{snippet.where}: {command} needs a snippet marker"
            output = project.run(argv)
            ran.append(shlex.join(argv))
            if shown and compare and snippet.marker != "output differs":
                tail = output.splitlines()[-len(shown) :]
                assert len(tail) == len(shown) and all(map(matches, shown, tail)), f"{command}\n{output}"
    return ran


def runnable(page: Path, *, setup: bool = False) -> list[Snippet]:
    """The page's snippets that run in the SQLite project; with ``setup``,
    those that set the examples' project up too (the base project has them)."""
    left_out = {"skip"} if setup else {"skip", "sets up"}
    return [s for s in snippets(page) if s.marker not in left_out and not s.on_mariadb]


def run_shell(project: TutorialProject, modules: list[str], shell: list[Snippet]) -> None:
    """One shell session: import the task modules written so far, then run the blocks."""
    blocks = [(s.where, s.body) for s in shell]
    for where, body in blocks:
        assert "@task" not in body, f"{where}: a task belongs in a module; head the block # myapp/tasks.py"
    code = RUNNER.format(modules=modules, blocks=blocks)
    output = project.run(["python", "manage.py", "shell", "-c", code])
    assert json.loads(output.splitlines()[-1]) == [where for where, _ in blocks]


def follow_page(
    project: TutorialProject, page: Path, pristine: str, modules: list[str], *, setup: bool = False
) -> None:
    """The page's blocks in order: files written, Python pasted into a shell
    (one session until a command interrupts it), commands run. ``modules``:
    the task modules written so far, which grows with the page's. With
    ``setup`` (the reading order), a command's output is not compared: it
    counts what the pages before left in the queue too."""
    shell: list[Snippet] = []
    for snippet in runnable(page, setup=setup):
        if snippet.file:
            write(project, snippet, pristine)
            module = snippet.file.removesuffix(".py").replace("/", ".")
            if "/" in snippet.file and module not in modules:
                modules.append(module)
        elif snippet.lang == "python":
            shell.append(snippet)
        else:
            if shell:
                run_shell(project, modules, shell)
                shell = []
            assert run_console(project, snippet, compare=not setup) or snippet.body.startswith(
                "$ pip install"
            ), snippet.where
    if shell:
        run_shell(project, modules, shell)
    # Followed as written, a page leaves no warning that every command would print.
    checked = project.run(["python", "manage.py", "check"])
    assert "System check identified no issues" in checked, f"{page.name}:\n{checked}"


@sqlite_run_only
@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=lambda page: page.name)
def test_the_pages_snippets_run_as_pasted(page, base_project, tmp_path):
    """Each page on its own, in a copy of the tutorial's project with the Quickstart's myapp."""
    base, pristine = base_project
    shutil.copytree(base, tmp_path / "project")
    project = TutorialProject(tmp_path / "project")
    project.cwd = tmp_path / "project" / "mysite"
    follow_page(project, page, pristine, [])


def reading_order() -> list[Path]:
    """The pages in the order of docs/index.md's tables of contents."""
    toctrees = re.findall(
        r"^```\{toctree\}\n(.*?)^```$", (ROOT / "docs" / "index.md").read_text(), re.M | re.S
    )
    names = [line for tree in toctrees for line in tree.splitlines() if line and not line.startswith(":")]
    return [ROOT / "docs" / f"{name}.md" for name in names]


def installed_by(requirements: list[str]) -> set[str]:
    """The distributions that installing ``requirements`` brings, by their
    canonical names, as far as this environment has them."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        wanted = todo.pop()
        key = (canonicalize_name(wanted.name), frozenset(wanted.extras))
        if key in found:
            continue
        found.add(key)
        try:
            needs = importlib.metadata.requires(wanted.name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for need in map(Requirement, needs):
            if need.marker is None or any(need.marker.evaluate({"extra": e}) for e in wanted.extras or {""}):
                todo.append(need)
    return {name for name, _ in found}


@functools.cache
def owners() -> dict[str, str]:
    """Each installed file's distribution (canonical name), by its absolute path."""
    from packaging.utils import canonicalize_name

    return {
        str(dist.locate_file(file).resolve()): canonicalize_name(dist.metadata["Name"])
        for dist in importlib.metadata.distributions()
        for file in dist.files or []
    }


def distribution_of(module: str, project: Path) -> str | None:
    """The distribution ``module`` comes from; None for Python's own and the project's."""
    top = module.partition(".")[0]
    if top in sys.stdlib_module_names or (project / top).exists():
        return None
    if top == "django_dbqueue":
        return "django-dbqueue"  # this checkout, on PYTHONPATH
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"no module {module} here"
    return owners().get(str(Path(spec.origin).resolve()), f"(no distribution owns {spec.origin})")


def imported(snippet: Snippet) -> list[str]:
    """The modules a Python block imports at its top level (a nested import
    is one the block says it needs only sometimes)."""
    names = []
    for node in ast.parse(snippet.body).body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                whole = f"{node.module}.{alias.name}"
                names.append(whole if _is_module(node.module) and _is_module(whole) else node.module)
    return names


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def pip_installed(snippet: Snippet) -> list[str]:
    """What a console block's ``pip install`` lines install."""
    return [
        word
        for command, _ in console_steps(snippet.body)
        for argv in argvs(command)
        if argv[:2] == ["pip", "install"]
        for word in argv[2:]
        if not word.startswith("-")
    ]


@sqlite_run_only
@pytest.mark.timeout(900)  # every page, one after another: about 80 s on a quiet machine
def test_the_pages_run_in_reading_order_in_one_project(tutorial_done, tmp_path):
    """A new user's path: the tutorial's project, then every page after it in
    the order of the tables of contents, all in that one project, each page
    starting where the one before left it (a task module or a setting that
    two pages define differently collides here). Every module a block
    imports must come with what the pages' ``pip install`` lines installed
    so far. (Installation comes first but has no project yet; the tutorial
    makes one, from the same steps.)"""
    pages = reading_order()
    assert pages[:2] == [ROOT / "docs" / "installation.md", TUTORIAL] and set(pages) >= {
        p for p in PAGES[1:] if runnable(p, setup=True)
    }
    project = copied(tutorial_done, tmp_path / "project")
    installed = installed_by(["django-dbqueue"])  # the tutorial's pip install
    modules: list[str] = []
    for page in pages[2:]:
        follow_page(project, page, "", modules, setup=True)
        for snippet in runnable(page, setup=True):
            if snippet.lang == "console":
                installed |= installed_by(pip_installed(snippet))
            elif snippet.lang == "python":
                for module in imported(snippet):
                    source = distribution_of(module, project.cwd)
                    assert source is None or source in installed, (
                        f"{snippet.where} imports {module}, from {source}, which no pip install of "
                        f"the pages so far installed"
                    )


def test_every_marker_marks_a_snippet_and_few_are_skipped():
    every = [s for page in PAGES for s in snippets(page)]
    markers = sum(len(re.findall(r"^ *<!-- snippet:", page.read_text(), re.M)) for page in PAGES)
    assert markers == len([s for s in every if s.marker]), "a marker must be on the line before its block"
    skipped = [s.where for s in every if s.marker == "skip"]
    # Few, each with its reason on the page; most blocks run.
    assert len(skipped) <= 15 and len(every) - len(skipped) >= 25, (len(every), skipped)
    assert all(HEADER.match(s.body) for s in every if s.lang == "python" and "add at the end" in s.body)
