"""Producers with no Python on their side (docs/sql-contract.md): the
`mariadb` client, a trigger, a MariaDB EVENT and Node's mysql2 driver
enqueue jobs (and `psql` on PostgreSQL), and real `runqueue` processes run them. Rows that break the
contract end FAILED alone, or are refused by dbqueue_enqueue(), and the
queue goes on."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from django.db import connection

from django_dbqueue.models import Job
from django_dbqueue.payload import encode_arguments
from tests.conftest import DATABASE, MANAGE, MYSQL_FAMILY, ROOT, Runqueue, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
needs_mysql_family = pytest.mark.skipif(
    DATABASE not in MYSQL_FAMILY, reason="runs with DBQUEUE_DATABASE=mysql or mariadb"
)
needs_sandbox = pytest.mark.skipif(
    DATABASE != "mariadb", reason="runs a private MariaDB server; runs with DBQUEUE_DATABASE=mariadb"
)
needs_postgres = pytest.mark.skipif(
    os.environ.get("DBQUEUE_DATABASE", "sqlite") != "postgres", reason="runs with DBQUEUE_DATABASE=postgres"
)

NODE_PRODUCER = ROOT / "tests" / "producers" / "node"
NOT_RUNNABLE = "django_dbqueue.exceptions.JobNotRunnable"


def mariadb_client(sql: str, **settings: str) -> subprocess.CompletedProcess:
    """Run ``sql`` with the `mariadb` command-line client on the test database."""
    db = {**connection.settings_dict, **settings}
    return subprocess.run(
        [
            shutil.which("mariadb") or "mariadb",
            f"--host={db['HOST']}",
            f"--port={db['PORT']}",
            f"--user={db['USER']}",
            f"--password={db['PASSWORD']}",
            "--batch",
            "--skip-column-names",
            db["NAME"],
        ],
        input=sql,
        capture_output=True,
        text=True,
        timeout=30,
    )


def last_error(job: Job) -> tuple[str, str]:
    error = job.errors[-1]
    return error["exception_class_path"], error["traceback"]


def burst(runqueue) -> str:
    worker = runqueue("--burst", "--processes", "1")
    assert worker.wait(60) == 0, worker.output()[-3000:]
    return worker.output()


@needs_mysql_family
def test_jobs_from_the_mariadb_client_run_and_rows_that_break_the_contract_fail_alone(runqueue):
    client = mariadb_client(
        """
        INSERT INTO django_dbqueue_job (task_path, args) VALUES ('demo.tasks.add', '[2, 3]');
        INSERT INTO django_dbqueue_job (task_path, kwargs, queue_name, priority, max_attempts)
            VALUES ('demo.tasks.add', '{"a": 4, "b": 5}', 'email', 50, 1);
        INSERT INTO django_dbqueue_job (task_path) VALUES ('demo.nothing_here.task');
        INSERT INTO django_dbqueue_job (task_path, args) VALUES ('demo.tasks.add', '{"a": 1}');
        INSERT INTO django_dbqueue_job (task_path, args) VALUES ('demo.tasks.add', '[1, 2, 3]');
        INSERT INTO django_dbqueue_job (task_path, args) VALUES ('os.system', '["touch /tmp/dbqueue-pwned"]');
        CALL dbqueue_enqueue('demo.tasks.add', '[10, 20]', NULL, NULL, NULL, NULL, NULL, @called);
        SELECT @called;
        -- A session five hours ahead of UTC: the procedure still writes UTC...
        SET time_zone = '+05:00';
        CALL dbqueue_enqueue('demo.tasks.add', '[100, 1]', NULL, NULL, NULL, NULL, NULL, @zoned);
        -- ...and the column default does not: this job is due five hours late.
        INSERT INTO django_dbqueue_job (task_path, args) VALUES ('demo.tasks.add', '[0, 0]');
        """
    )
    assert client.returncode == 0, client.stderr
    called = int(client.stdout.split()[0])
    burst(runqueue)  # exits 0: the broken rows stopped nothing

    jobs = list(Job.objects.order_by("pk"))
    assert [(j.task_path, j.status, j.return_value, j.attempts) for j in jobs] == [
        ("demo.tasks.add", "SUCCESSFUL", 5, 1),
        ("demo.tasks.add", "SUCCESSFUL", 9, 1),
        ("demo.nothing_here.task", "FAILED", None, 1),
        ("demo.tasks.add", "FAILED", None, 1),
        ("demo.tasks.add", "FAILED", None, 1),
        ("os.system", "FAILED", None, 1),
        ("demo.tasks.add", "SUCCESSFUL", 30, 1),
        ("demo.tasks.add", "SUCCESSFUL", 101, 1),
        ("demo.tasks.add", "READY", None, 0),
    ]
    assert (jobs[1].queue_name, jobs[1].priority, jobs[1].max_attempts) == ("email", 50, 1)
    assert jobs[6].pk == called
    errors = [last_error(job) for job in jobs[2:6]]
    assert {cls for cls, _ in errors} == {NOT_RUNNABLE}
    assert "The task path 'demo.nothing_here.task' does not import" in errors[0][1]
    assert "args must be a JSON list and its kwargs a JSON object, not dict and dict" in errors[1][1]
    assert "do not fit demo.tasks.add(a: int, b: int) -> int: too many positional arguments" in errors[2][1]
    assert "'os.system' is outside every installed app" in errors[3][1]
    assert not os.path.exists("/tmp/dbqueue-pwned")
    # The row defaulted in a +05:00 session waits five hours, as docs/sql-contract.md says.
    late = (jobs[8].run_after - jobs[7].run_after).total_seconds()
    assert late == pytest.approx(5 * 3600, abs=60)


REFUSED_CALLS = [
    ("'x'", "'[]'", "NULL", "NULL", "NULL", "NULL", "task_path must be a dotted path"),
    ("'demo.tasks.add'", "'[1,'", "NULL", "NULL", "NULL", "NULL", "args is not valid JSON"),
    ("'demo.tasks.add'", "'{}'", "NULL", "NULL", "NULL", "NULL", "args must be a JSON array"),
    ("'demo.tasks.add'", "'[]'", "'[]'", "NULL", "NULL", "NULL", "kwargs must be a JSON object"),
    (
        "'demo.tasks.add'",
        "CONCAT(REPEAT('[', 32), REPEAT(']', 32))",
        "NULL",
        "NULL",
        "NULL",
        "NULL",
        "args is not valid JSON (or is nested more than 31 lists or objects deep).",
    ),
    (
        "'demo.tasks.add'",
        "CONCAT(REPEAT('[', 101), REPEAT(']', 101))",  # past MySQL's JSON limit (error 3157)
        "NULL",
        "NULL",
        "NULL",
        "NULL",
        "args is not valid JSON (or is nested more than 31 lists or objects deep).",
    ),
    (
        "'demo.tasks.add'",
        "CONCAT('[\"', REPEAT('x', 1000000), '\"]')",
        "NULL",
        "NULL",
        "NULL",
        "NULL",
        "args and kwargs take 1000006 bytes as compact JSON, more than the limit of 1000000",
    ),
    (
        "'demo.tasks.add'",
        "'[1, 2]'",
        "NULL",
        "'nope'",
        "NULL",
        "NULL",
        "the queue 'nope' is not one of QUEUES (default, email, slow), so no worker would run the job.",
    ),
    (
        "'demo.tasks.add'",
        "'[1, 2]'",
        "NULL",
        "''",
        "NULL",
        "NULL",
        "the queue name must be 1 to 64 characters long.",
    ),
    # Exact, as QUEUES is (the column's collation would match either case).
    (
        "'demo.tasks.add'",
        "'[1, 2]'",
        "NULL",
        "'Default'",
        "NULL",
        "NULL",
        "the queue 'Default' is not one of QUEUES",
    ),
    ("'demo.tasks.add'", "'[1, 2]'", "NULL", "NULL", "101", "NULL", "priority must be between -100 and 100"),
    ("'demo.tasks.add'", "'[1, 2]'", "NULL", "NULL", "NULL", "0", "max_attempts must be at least 1"),
]


@needs_mysql_family
@pytest.mark.parametrize(
    ("task", "args", "kwargs", "queue", "priority", "attempts", "message"), REFUSED_CALLS
)
def test_the_procedure_refuses_a_call_that_breaks_the_contract(
    task, args, kwargs, queue, priority, attempts, message
):
    if DATABASE == "mysql" and "REPEAT('[', 32)" in args:
        # MySQL's JSON holds 100 levels: the procedure's own nesting check refuses 32.
        message = "args and kwargs may be nested at most 31 lists or objects deep."
    client = mariadb_client(
        f"CALL dbqueue_enqueue({task}, {args}, {kwargs}, {queue}, {priority}, NULL, {attempts}, @id);"
    )
    assert client.returncode != 0
    assert "ERROR 1644 (45000)" in client.stderr
    assert f"dbqueue_enqueue: {message}" in client.stderr
    assert not Job.objects.exists()


@needs_mysql_family
def test_the_procedure_accepts_the_deepest_nesting_python_accepts():
    client = mariadb_client(
        "CALL dbqueue_enqueue('demo.tasks.add', CONCAT(REPEAT('[', 31), REPEAT(']', 31)), "
        "NULL, NULL, NULL, NULL, NULL, @id); SELECT @id;"
    )
    assert client.returncode == 0, client.stderr
    assert Job.objects.get(pk=int(client.stdout)).args == encode_arguments(nested(31), {}, 10_000)[0]


def nested(depth: int) -> list:
    """``depth`` lists inside each other (the args list itself counts)."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@needs_mysql_family
def test_broken_json_in_a_plain_insert_is_refused_by_the_database():
    client = mariadb_client(
        "INSERT INTO django_dbqueue_job (task_path, args) VALUES ('demo.tasks.add', '[1,');"
    )
    assert client.returncode != 0
    if DATABASE == "mysql":  # a JSON column of its own type
        assert "ERROR 3140 (22032)" in client.stderr and "Invalid JSON text" in client.stderr
    else:  # LONGTEXT with a json_valid CHECK
        assert "CONSTRAINT `django_dbqueue_job.args` failed" in client.stderr
    assert not Job.objects.exists()


@needs_mysql_family
def test_a_trigger_enqueues_through_the_procedure_and_a_refusal_rolls_its_statement_back(runqueue):
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE producer_order (id INT PRIMARY KEY, amount INT NOT NULL, queue VARCHAR(64))"
        )
        try:
            cursor.execute(
                """CREATE TRIGGER producer_order_placed AFTER INSERT ON producer_order FOR EACH ROW
                CALL dbqueue_enqueue('demo.tasks.add', JSON_ARRAY(NEW.id, NEW.amount), NULL,
                                     NEW.queue, NULL, NULL, NULL, @dbqueue_job)"""
            )
            placed = mariadb_client(
                "INSERT INTO producer_order VALUES (1, 100, 'default'), (2, 200, 'email');"
                "INSERT INTO producer_order VALUES (3, 300, 'default'), (4, 400, 'nope');"
            )
            assert "dbqueue_enqueue: the queue 'nope' is not one of QUEUES" in placed.stderr
            cursor.execute("SELECT id FROM producer_order ORDER BY id")
            # The refused job took its whole statement with it, order 3 included.
            assert [row[0] for row in cursor.fetchall()] == [1, 2]
        finally:
            cursor.execute("DROP TABLE producer_order")
    burst(runqueue)
    assert sorted(Job.objects.values_list("args", "status", "return_value")) == [
        ([1, 100], "SUCCESSFUL", 101),
        ([2, 200], "SUCCESSFUL", 202),
    ]


@pytest.fixture(scope="module")
def events_mariadb():
    """A private MariaDB with the event scheduler on (the shared server has
    it off, and a test must not switch it on for everybody), migrated."""
    from benchmarks.chaos import environment
    from tests.mariadb_sandbox import SandboxMariaDB, available

    if not available():
        pytest.skip("mariadbd and mariadb-install-db are needed for the EVENT test")
    server = SandboxMariaDB(events=True)
    try:
        server.install()
        server.start()
        server.execute("CREATE DATABASE dbqueue_events CHARACTER SET utf8mb4")
        env = {**environment(server, lease=10), "DBQUEUE_DB_NAME": "dbqueue_events"}
        subprocess.run(
            [sys.executable, str(MANAGE), "migrate", "-v0"],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        yield server, env
    finally:
        server.destroy()


@needs_sandbox
def test_a_mariadb_event_enqueues_jobs_that_runqueue_runs(events_mariadb, tmp_path):
    server, env = events_mariadb

    def query(sql: str) -> list[tuple]:
        return server.execute(sql, database="dbqueue_events")

    assert query("SELECT @@event_scheduler") == [("ON",)]
    query(
        """CREATE EVENT dbqueue_every_second ON SCHEDULE EVERY 1 SECOND
        DO CALL dbqueue_enqueue('demo.tasks.add', '[1, 1]', NULL, NULL, NULL, NULL, NULL, @job)"""
    )
    query(
        """CREATE EVENT dbqueue_once ON SCHEDULE AT CURRENT_TIMESTAMP DO
        INSERT INTO django_dbqueue_job (task_path, args) VALUES
            ('demo.tasks.add', '[20, 22]'), ('demo.nothing_here.task', '[]')"""
    )
    worker = Runqueue(["--processes", "1"], tmp_path / "runqueue.log", env)
    try:

        def outcomes() -> list[tuple]:
            return query("SELECT task_path, args, status, return_value FROM django_dbqueue_job ORDER BY id")

        wait_for(
            lambda: sum(row[1] == "[1, 1]" and row[2] == "SUCCESSFUL" for row in outcomes()) >= 3, timeout=30
        )
        query("DROP EVENT dbqueue_every_second")

        def all_finished() -> list[tuple] | None:
            rows = outcomes()
            return rows if all(row[2] in ("SUCCESSFUL", "FAILED") for row in rows) else None

        # Judged on one snapshot: a run of the event that was under way at
        # the DROP may still add a row afterwards.
        rows = wait_for(all_finished, timeout=30)
        worker.signal(15)
        assert worker.wait(30) == 0
    finally:
        worker.stop()
    assert ("demo.tasks.add", "[20, 22]", "SUCCESSFUL", "42") in rows
    assert {row for row in rows if row[1] == "[1, 1]"} == {("demo.tasks.add", "[1, 1]", "SUCCESSFUL", "2")}
    (failed,) = query("SELECT errors FROM django_dbqueue_job WHERE status = 'FAILED'")
    assert json.loads(failed[0])[-1]["exception_class_path"] == NOT_RUNNABLE


def node_or_fail() -> str:
    """The node binary with the producer's packages installed; without them
    the test is skipped on a developer's machine and fails in CI."""
    node = shutil.which("node")
    missing = (
        "node is not installed"
        if node is None
        else "tests/producers/node/node_modules is missing (./dev test runs npm install there)"
        if not (NODE_PRODUCER / "node_modules" / "mysql2").is_dir()
        else None
    )
    if missing is None:
        return node
    if os.environ.get("CI") == "true":
        pytest.fail(f"The Node producer test cannot run in CI: {missing}.")
    pytest.skip(missing)


@needs_mysql_family
def test_a_node_producer_enqueues_with_mysql2_and_reads_the_outcomes(runqueue):
    node = node_or_fail()
    worker = runqueue("--processes", "2")
    db = connection.settings_dict
    env = {
        **os.environ,
        "DBQUEUE_DB_HOST": db["HOST"],
        "DBQUEUE_DB_PORT": str(db["PORT"]),
        "DBQUEUE_DB_USER": db["USER"],
        "DBQUEUE_DB_PASSWORD": db["PASSWORD"],
        "DBQUEUE_DB_NAME": db["NAME"],
    }
    producer = subprocess.run(
        [node, str(NODE_PRODUCER / "produce.js")], env=env, capture_output=True, text=True, timeout=90
    )
    assert producer.returncode == 0, producer.stderr + worker.output()[-3000:]
    report = json.loads(producer.stdout)
    jobs = {name: (job["status"], job["return_value"], job["error"]) for name, job in report["jobs"].items()}
    assert jobs == {
        "inserted": ("SUCCESSFUL", 42, None),
        "keywords": ("SUCCESSFUL", 3, None),
        "unicode": ("SUCCESSFUL", "node: Grüße ✓", None),
        "called": ("SUCCESSFUL", "welcome mail for user 7", None),
        "unknown_task": ("FAILED", None, NOT_RUNNABLE),
        "wrong_arity": ("FAILED", None, NOT_RUNNABLE),
    }
    assert "does not import" in report["jobs"]["unknown_task"]["traceback_tail"]
    assert "too many positional arguments" in report["jobs"]["wrong_arity"]["traceback_tail"]
    refused = report["refused"]["queue"]
    assert (refused["sqlState"], refused["errno"]) == ("45000", 1644)
    assert "the queue 'nope' is not one of QUEUES" in refused["message"]
    called = Job.objects.get(pk=report["jobs"]["called"]["id"])
    assert (called.queue_name, called.priority, called.max_attempts) == ("email", 10, 3)
    worker.signal(15)
    assert worker.wait(30) == 0


@needs_postgres
def test_jobs_from_psql_run_with_a_due_time_in_any_offset(runqueue):
    db = connection.settings_dict
    psql = [
        shutil.which("psql") or "psql",
        "-h",
        db["HOST"],
        "-p",
        str(db["PORT"]),
        "-U",
        db["USER"],
        db["NAME"],
    ]

    def run(sql: str) -> subprocess.CompletedProcess:
        return subprocess.run([*psql, "-tA", "-c", sql], capture_output=True, text=True, timeout=30)

    inserted = run(
        "INSERT INTO django_dbqueue_job (task_path, args, kwargs, queue_name, priority, run_after) VALUES "
        "('demo.tasks.add', '[2, 3]', '{}', 'default', 0, DEFAULT), "
        # Now as Kolkata's wall time with its offset: the same instant, due at once.
        "('demo.tasks.add', '[]', '{\"a\": 4, \"b\": 5}', 'email', 9, "
        "((now() AT TIME ZONE 'Asia/Kolkata')::text || '+05:30')::timestamptz), "
        "('demo.tasks.add', '[7, 7]', '{}', 'default', 0, now() + interval '1 hour'), "
        "('demo.nothing_here.task', '[]', '{}', 'default', 0, DEFAULT) RETURNING id"
    )
    assert inserted.returncode == 0, inserted.stderr
    ids = [int(line) for line in inserted.stdout.split()[:4]]
    broken = run("INSERT INTO django_dbqueue_job (task_path, args) VALUES ('demo.tasks.add', '[1,')")
    assert "invalid input syntax for type json" in broken.stderr
    burst(runqueue)
    jobs = {job.pk: job for job in Job.objects.all()}
    assert [(jobs[i].status, jobs[i].return_value) for i in ids] == [
        ("SUCCESSFUL", 5),
        ("SUCCESSFUL", 9),
        ("READY", None),  # due in an hour
        ("FAILED", None),
    ]
    assert last_error(jobs[ids[3]])[0] == NOT_RUNNABLE
