"""The documentation's MariaDB snippets, run as pasted (the rest run in
tests/test_doc_snippets.py): databases.md's database and user, the
Quickstart's DATABASES, and the pages' SQL as a producer sends it, in the
tutorial's project with the Quickstart's myapp. The pages' ``mysite`` and
``secret`` stand for this run's database, user and password, and their
``localhost`` (the server's socket) for the suite's server's socket: MariaDB's
or MySQL's (tests/mysql_server.py), whichever the suite runs on."""

import os
import re

import pytest

from tests.conftest import DATABASE, MYSQL_FAMILY, ROOT
from tests.test_doc_snippets import PAGES, snippet_project, snippets, with_quickstart_settings
from tests.test_quickstart import quickstart


def sql_statements(block: str) -> list[str]:
    """A block's statements, each without its trailing ``;`` and comments."""
    code = re.sub(r"--[^\n]*", "", block)
    return [statement.strip() for statement in code.split(";") if statement.strip()]


def databases_of(settings: str) -> dict:
    namespace: dict = {"INSTALLED_APPS": []}
    exec(settings, namespace)
    return namespace["DATABASES"]


def mariadb_root():
    """A connection as the test suite's MariaDB user, who may create databases and users."""
    import MySQLdb
    from django.conf import settings

    suite = settings.DATABASES["default"]
    return MySQLdb.connect(
        host=suite["HOST"],
        user=suite["USER"],
        passwd=suite["PASSWORD"],
        port=int(suite["PORT"] or 3306),
        autocommit=True,
    )


def server_socket() -> str:
    with mariadb_root() as root:
        cursor = root.cursor()
        cursor.execute("SELECT @@socket")
        return cursor.fetchone()[0]


@pytest.fixture
def site_database():
    """The name and password the pages' `mysite` and `secret` stand for here."""
    name, password = f"{os.environ.get('DBQUEUE_DB_NAME', 'dbqueue')}_snippets", "snippets-pw"
    yield name, password
    with mariadb_root() as root:
        root.cursor().execute(f"DROP DATABASE IF EXISTS {name}")
        root.cursor().execute(f"DROP USER IF EXISTS '{name}'@'localhost'")


@pytest.mark.skipif(DATABASE not in MYSQL_FAMILY, reason="runs with the MySQL and MariaDB suites")
@pytest.mark.skipif(
    os.environ.get("DBQUEUE_DB_HOST", "127.0.0.1") not in ("127.0.0.1", "localhost"),
    reason="the pages' user connects through the local server's socket",
)
def test_the_mariadb_snippets_run_as_pasted(site_database, tmp_path):
    """databases.md's setup, the Quickstart's DATABASES, and the SQL of the pages
    as a producer runs it; the jobs it enqueues then run to their success."""
    name, password = site_database
    ours = lambda text: text.replace("mysite", name).replace("secret", password)  # noqa: E731
    every = {s.where: s for page in PAGES for s in snippets(page) if s.on_mariadb and s.marker != "skip"}
    [setup] = [s for s in every.values() if s.body.startswith("CREATE DATABASE")]
    with mariadb_root() as root:
        root.cursor().execute(f"DROP USER IF EXISTS '{name}'@'localhost'")
        root.cursor().execute(f"DROP DATABASE IF EXISTS {name}")
        for statement in sql_statements(ours(setup.body)):
            root.cursor().execute(statement)

    project, pristine = snippet_project(tmp_path / "project")
    readme = next(body for lang, body in quickstart()[1] if "settings.py" in body)
    [documented] = [s for s in every.values() if s.lang == "python"]
    assert "DATABASES = {" in readme and documented.file == "settings.py"
    assert databases_of(readme) == databases_of(documented.body), "the Quickstart's is databases.md's"
    socket = server_socket()
    here = ours(readme).replace('"HOST": "localhost"', f'"HOST": "{socket}"')  # Django: a path is a socket
    assert socket.startswith("/") and here != ours(readme), "the Quickstart's HOST is no longer localhost"
    settings = project.cwd / "mysite" / "settings.py"
    settings.write_text(with_quickstart_settings(pristine, here))
    project.run(["python", "manage.py", "migrate"])

    import MySQLdb

    producer = MySQLdb.connect(unix_socket=socket, user=name, passwd=password, db=name, autocommit=True)
    answers: dict[str, list[tuple]] = {}
    job_ids = []
    for where, snippet in every.items():
        if snippet.lang != "sql" or snippet is setup:
            continue
        cursor = producer.cursor()
        for statement in sql_statements(snippet.body):
            # A driver's placeholder, for the job the page enqueued last.
            cursor.execute(statement.replace("?", "%s"), [job_ids[-1]] if "?" in statement else None)
            answers[where] = list(cursor.fetchall() or [])
            if re.match(r"SELECT (LAST_INSERT_ID\(\)|@job_id)$", statement):
                job_ids.append(answers[where][0][0])
    assert len(job_ids) == 2, answers
    answer = {every[where].body.split()[1]: rows for where, rows in answers.items()}
    assert answer["status,"][0][:1] == ("READY",), answers

    # Ten minutes later (the INSERT's job is due then), a worker runs both.
    producer.cursor().execute("UPDATE django_dbqueue_job SET run_after = UTC_TIMESTAMP(6)")
    project.run(["python", "manage.py", "runqueue", "--burst"])
    cursor = producer.cursor()
    cursor.execute("SELECT id, status, CAST(return_value AS CHAR) FROM django_dbqueue_job ORDER BY id")
    assert cursor.fetchall() == tuple((job_id, "SUCCESSFUL", '"Welcome, user 42!"') for job_id in job_ids)

    # The procedure's version, as the page states it: one row, this database's.
    [version] = re.findall(
        r"\*\*Contract version: (\d+)\*\*", (ROOT / "docs" / "sql-contract.md").read_text()
    )
    assert answer["routine_comment"] == [(f"django-dbqueue SQL contract {version}",)]
