"""Database faults: an outage of the server (a private MySQL in the MySQL
suite, MariaDB otherwise: tests/conftest.py's sandbox_server) under running workers, connections
killed in the middle of a claim or of recording an outcome, and producers
that cannot reach the database."""

import re
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager

import MySQLdb
import pytest
from django.db import OperationalError, connection, transaction

from benchmarks.chaos import DATABASE, environment, prepare
from demo import tasks
from demo.models import Execution
from django_dbqueue.db import is_outage
from django_dbqueue.models import Job
from django_dbqueue.worker import Worker
from tests.conftest import MANAGE, ROOT, Runqueue, needs_sandbox, wait_for

pytestmark = needs_sandbox


def admin_connection() -> MySQLdb.Connection:
    settings = connection.settings_dict
    return MySQLdb.connect(
        host=settings["HOST"], port=int(settings["PORT"]), user=settings["USER"], passwd=settings["PASSWORD"]
    )


@contextmanager
def kill_connection_before(*matchers):
    """KILL this process's own database connection (from a second one) just
    before the next statement that the first matcher accepts, then before
    the next one the second accepts, and so on."""
    killed: list[str] = []

    def hook(execute, sql, params, many, context):
        if len(killed) < len(matchers) and matchers[len(killed)](sql):
            thread_id = context["connection"].connection.thread_id()
            admin = admin_connection()
            admin.cursor().execute(f"KILL CONNECTION {int(thread_id)}")
            admin.close()
            killed.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(hook):
        yield killed


def is_claim_mark(sql: str) -> bool:
    """The claim's UPDATE: an owner and a lease (a release has a CASE, the
    heartbeat's extension names no owner but in its WHERE)."""
    assignments = sql.split(" WHERE ")[0]
    return (
        sql.startswith("UPDATE")
        and "`lease_expires_at` = " in assignments
        and "`owner` = " in assignments
        and "CASE" not in sql
        and "`return_value`" not in sql
    )


def is_outcome(sql: str) -> bool:
    return sql.startswith("UPDATE") and "`return_value`" in sql


def run_worker_in_burst(**options) -> Worker:
    from django_dbqueue.tasks_api import task_backends

    worker = Worker(task_backends["default"], ["default"], burst=True, **options)
    assert worker.run() == 0
    return worker


@pytest.mark.django_db(transaction=True)
def test_a_connection_killed_in_the_middle_of_a_claim_rolls_the_claim_back():
    jobs = [tasks.record.enqueue(f"k{i}") for i in range(5)]
    with kill_connection_before(is_claim_mark) as killed, pytest.raises(OperationalError) as failure:
        Job.objects.claim("w1", limit=10)
    assert killed, "the claim never reached its UPDATE"
    assert is_outage(failure.value, "default")
    connection.close()
    assert set(Job.objects.values_list("status", "owner", "attempts")) == {("READY", None, 0)}
    assert Job.objects.count() == len(jobs)


@pytest.mark.django_db(transaction=True)
def test_a_connection_killed_in_the_middle_of_a_rate_claim_spends_no_slot_and_claims_nothing():
    from django_dbqueue.models import RateSlot

    Job.objects.bulk_create(
        [Job(task_path="demo.tasks.noop", rate_key="k", rate_limit="2/h") for _ in range(3)]
    )

    def moves_a_slot(sql: str) -> bool:
        return sql.startswith("UPDATE") and "rateslot" in sql and "`free_at` = " in sql

    with kill_connection_before(moves_a_slot) as killed, pytest.raises(OperationalError):
        Job.objects.claim_rated("w1", ["default"], "k", room=10)
    assert killed, "the rate claim never reached its slots' UPDATE"
    connection.close()
    # The jobs' mark and the slots' move were one transaction: neither happened.
    assert set(Job.objects.values_list("status", "owner", "attempts")) == {("READY", None, 0)}
    assert Job.objects.claim_rated("w2", ["default"], "k", room=10)[0] != [], "the slots are free"
    assert Job.objects.filter(status="RUNNING", owner="w2").count() == 1, "a tenth of the slots, at least one"
    assert RateSlot.objects.filter(key="k").count() == 2, "the slot it took, and one left free"


@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_connection_is_killed_mid_claim_and_mid_outcome_loses_nothing(caplog):
    keys = [f"k{i}" for i in range(30)]
    for key in keys:
        tasks.record.enqueue(key)
    caplog.set_level("WARNING", logger="django_dbqueue")

    with kill_connection_before(is_claim_mark, is_outcome, is_claim_mark, is_outcome) as killed:
        run_worker_in_burst(batch=7)

    assert len(killed) == 4
    assert Job.objects.filter(status="SUCCESSFUL").count() == len(keys)
    # The outcome was kept in memory and recorded after reconnecting: each job ran once.
    assert Counter(Execution.objects.values_list("key", flat=True)) == Counter(keys)
    assert "lost the database connection" in caplog.text
    assert "is back after" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_on_a_dead_connection_raises_instead_of_dropping_the_job():
    with kill_connection_before(lambda sql: sql.startswith("INSERT")):
        with pytest.raises(OperationalError):
            tasks.record.enqueue("lost?")
    connection.close()
    assert not Job.objects.exists()
    # Inside the caller's transaction too: the caller sees the failure.
    with pytest.raises(OperationalError):
        with kill_connection_before(lambda sql: sql.startswith("INSERT")), transaction.atomic():
            tasks.record.enqueue("lost too?")
    connection.close()
    assert not Job.objects.exists()


def sandbox_counts(server) -> dict[str, int]:
    return dict(
        server.execute("SELECT status, COUNT(*) FROM django_dbqueue_job GROUP BY status", database=DATABASE)
    )


def test_workers_ride_out_a_database_outage_and_record_what_they_held(sandbox_server, tmp_path):
    server = sandbox_server
    env = environment(server, lease=10)
    prepare(server, 600, env)
    # Jobs that are in the middle of running when the server goes away.
    server.execute(
        "INSERT INTO django_dbqueue_job (task_path, queue_name, args) VALUES "
        + ", ".join(f"('demo.tasks.sleep', 'slow', '[1.5, \"slow-{i}\"]')" for i in range(4)),
        database=DATABASE,
    )
    worker = Runqueue(["--processes", "2", "--batch", "5"], tmp_path / "runqueue.log", env)
    try:
        wait_for(lambda: sandbox_counts(server).get("SUCCESSFUL", 0) >= 50, timeout=60)
        wait_for(
            lambda: (
                server.execute(
                    "SELECT COUNT(*) FROM demo_execution WHERE `key` LIKE 'slow-%%'", database=DATABASE
                )[0][0]
                >= 2
            ),
            timeout=60,
        )
        server.stop()  # a clean shutdown: every connection drops
        time.sleep(4)
        server.start()
        up = time.monotonic()
        before = sandbox_counts(server).get("SUCCESSFUL", 0)
        wait_for(lambda: sandbox_counts(server).get("SUCCESSFUL", 0) > before, timeout=30, interval=0.05)
        recovery = time.monotonic() - up
        wait_for(lambda: sandbox_counts(server) == {"SUCCESSFUL": 604}, timeout=90, interval=0.5)
    finally:
        worker.signal(15)
        code = worker.wait(60)
        worker.stop()
    log = worker.output()
    print(f"recovered {recovery:.2f}s after the server accepted connections again")
    assert code == 0
    assert "exited with code" not in log, "a worker crashed instead of riding the outage out"
    # A task whose own query met the outage fails that attempt, and its
    # traceback is logged under it; nothing else may print one.
    records = re.split(r"\n(?=\d{4}-\d\d-\d\d )", log)
    failed_job = re.compile(r" Job \d+ \(.*\) failed on attempt")
    crashes = [r for r in records if "Traceback" in r and not failed_job.search(r)]
    assert not crashes, crashes[0]
    lost = Counter(re.findall(r" (\d+) WARNING \S+ Worker \S+ lost the database connection", log))
    assert len(lost) == 2 and set(lost.values()) == {1}, lost  # one message per worker
    # The status line's count of the backlog (every 2 s here) says it once too.
    assert log.count("Could not count the backlog") == 1, log
    assert log.count("is back after") >= 2
    # Each slow job ran exactly once: its outcome waited in memory for the server.
    runs = Counter(k for (k,) in server.execute("SELECT `key` FROM demo_execution", database=DATABASE))
    assert max(runs.values()) == 1 and len(runs) == 604
    assert recovery < 10


def test_an_enqueue_with_the_database_down_fails_loudly(sandbox_server):
    server = sandbox_server
    env = environment(server, lease=10)
    prepare(server, 0, env)
    server.stop()
    try:
        producer = subprocess.run(
            [
                sys.executable,
                str(MANAGE),
                "shell",
                "-c",
                "from demo.tasks import record; record.enqueue('x')",
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.start()
    assert producer.returncode != 0
    assert "OperationalError" in producer.stderr and "Can't connect" in producer.stderr
    assert server.execute("SELECT COUNT(*) FROM django_dbqueue_job", database=DATABASE)[0][0] == 0
