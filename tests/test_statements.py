"""docs/statements.md: every statement the state machine sends to the job
table, named after its transition, captured from the code on MySQL.

The page is what a reviewer reads to see every lock and every status change
side by side; this test keeps it true. On the MySQL suite it runs each
transition on a few rows, captures the SQL sent (literals replaced by ``?``)
and compares it with the page. After a change to a transition, rewrite the
page with:

    DBQUEUE_DATABASE=mysql DBQUEUE_WRITE_STATEMENTS=1 pytest tests/test_statements.py
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from django_dbqueue.models import Job
from django_dbqueue.transitions import Finished
from tests.conftest import DATABASE

PAGE = Path(__file__).resolve().parent.parent / "docs" / "statements.md"
WRITE = os.environ.get("DBQUEUE_WRITE_STATEMENTS") == "1"

pytestmark = [
    pytest.mark.skipif(
        DATABASE != "mysql", reason="the page shows MySQL's statements: runs in the MySQL suite"
    ),
    pytest.mark.django_db(transaction=True),
]

HEAD = """# The job table's statements

Every statement the state machine (`django_dbqueue/transitions/`) sends for
each transition of a job, in the order it sends them, as MySQL receives
them (values shown as `?`; a list of ids as `(?, ...)`). Locks are the
`FOR UPDATE` reads. A status changes only in an `UPDATE` whose `WHERE`
names the status it leaves (and, for a running job, the owner that must
still hold it), or of rows the same transaction has just locked `FOR
UPDATE` and read in that status: a transition that lost its row to
another changes nothing.

This page is written from the code by `tests/test_statements.py`, which
fails when the two differ; after changing a transition, rewrite it with
`DBQUEUE_DATABASE=mysql DBQUEUE_WRITE_STATEMENTS=1 pytest tests/test_statements.py`.
Transactions and savepoints are not shown: the method named says which
statements share one.
"""


@dataclass
class Transition:
    title: str  # the method called, as a reader would look it up
    what: str  # one line: what it does to a job
    run: Callable[[list[Job]], object]  # the transition, its statements captured
    prepare: Callable[[list[Job]], list[Job]] = lambda jobs: jobs  # the rows' state before, not captured
    rows: int = 3


def ids(jobs: list[Job]) -> list[int]:
    return [job.pk for job in jobs]


def held(jobs: list[Job], owner: str = "w1") -> list[Job]:
    """The rows, claimed by ``owner`` and started."""
    Job.objects.filter(pk__in=ids(jobs)).update(
        status="RUNNING", owner=owner, lease_expires_at=timezone.now() + timedelta(minutes=5), attempts=1
    )
    return list(Job.objects.filter(pk__in=ids(jobs)).order_by("pk"))


def expired(jobs: list[Job]) -> list[Job]:
    """The rows, held by a worker whose leases ran out an hour ago."""
    held(jobs, owner="dead")
    Job.objects.filter(pk__in=ids(jobs)).update(lease_expires_at=timezone.now() - timedelta(hours=1))
    return jobs


def failed(jobs: list[Job]) -> list[Job]:
    Job.objects.filter(pk__in=ids(jobs)).update(status="FAILED", finished_at=timezone.now())
    return jobs


def later(jobs: list[Job]) -> list[Job]:
    Job.objects.filter(pk__in=ids(jobs)).update(run_after=timezone.now() + timedelta(hours=1))
    return jobs


def outcome(job: Job, **fields: object) -> Finished:
    now = timezone.now()
    return Finished(job, now, now, **fields)  # type: ignore[arg-type]


ERROR = {"exception_class_path": "builtins.ValueError", "traceback": "Traceback ..."}

TRANSITIONS = [
    Transition(
        "Job.objects.claim(owner, limit, lease)",
        "READY and due → RUNNING, held by `owner` for a lease: the claim, by any filter",
        lambda jobs: Job.objects.claim("w1", limit=2),
    ),
    Transition(
        "Job.objects.release(owner, ids)",
        "RUNNING, not started → READY: claimed jobs a worker gives back",
        lambda jobs: Job.objects.release("w1", ids(jobs)),
        prepare=held,
    ),
    Transition(
        "Job.objects.extend_leases(owners, lease)",
        "RUNNING: the heartbeat moves its workers' leases on",
        lambda jobs: Job.objects.extend_leases(["w1"]),
        prepare=held,
    ),
    Transition(
        "Job.objects.still_held(owner, ids)",
        "RUNNING: which jobs `owner` still holds, read before it starts them",
        lambda jobs: Job.objects.still_held("w1", ids(jobs)),
        prepare=held,
    ),
    Transition(
        "Job.objects.record(owner, Finished(status=SUCCESSFUL))",
        "RUNNING → SUCCESSFUL: one job's outcome",
        lambda jobs: Job.objects.record("w1", outcome(jobs[0], return_value=1)),
        prepare=held,
        rows=1,
    ),
    Transition(
        "Job.objects.record_successes(owner, group)",
        "RUNNING → SUCCESSFUL: a batch's successes in one UPDATE",
        lambda jobs: Job.objects.record_successes("w1", [outcome(job, return_value=job.pk) for job in jobs]),
        prepare=held,
    ),
    Transition(
        "Job.objects.record(owner, Finished(status=READY, retry_in=...))",
        "RUNNING → READY after a backoff: a failed attempt, to be retried",
        lambda jobs: Job.objects.record(
            "w1", outcome(jobs[0], status="READY", error=ERROR, retry_in=timedelta(seconds=5))
        ),
        prepare=held,
        rows=1,
    ),
    Transition(
        "Job.objects.record(owner, Finished(status=FAILED))",
        "RUNNING → FAILED: the last attempt failed",
        lambda jobs: Job.objects.record("w1", outcome(jobs[0], status="FAILED", error=ERROR)),
        prepare=held,
        rows=1,
    ),
    Transition(
        "Job.objects.recover_expired(limit)",
        "RUNNING, lease expired → READY, or FAILED when its attempts are spent: a dead worker's jobs",
        lambda jobs: Job.objects.recover_expired(),
        prepare=expired,
    ),
    Transition(
        "Job.objects.interrupt(owner, pks)",
        "RUNNING → READY, its attempt unspent: a worker stopping for a deploy gives its jobs back",
        lambda jobs: Job.objects.interrupt("w1", ids(jobs)),
        prepare=held,
        rows=1,
    ),
    Transition(
        "Job.objects.give_back_undeployed(owner, job, note, delay)",
        "RUNNING → READY later, its attempt unspent: this worker's code lacks the task",
        lambda jobs: Job.objects.give_back_undeployed(
            "w1", jobs[0], {"exception_class_path": "x.TaskNotDeployed"}, timedelta(seconds=5)
        ),
        prepare=held,
        rows=1,
    ),
    Transition(
        "Job.objects.cancel_running(owner, pk, error)",
        "RUNNING → CANCELLED: a cancel honoured by the job's own worker",
        lambda jobs: Job.objects.cancel_running("w1", jobs[0].pk, ERROR),
        prepare=held,
        rows=1,
    ),
    Transition(
        "Job.objects.save_progress(owner, pk, fraction, message)",
        "RUNNING: a task's progress, written only while its worker holds it",
        lambda jobs: Job.objects.save_progress("w1", jobs[0].pk, 0.5, "half way"),
        prepare=held,
        rows=1,
    ),
    Transition(
        "Job.objects.filter(...).cancel()",
        "READY, WAITING → CANCELLED, and a cancel asked of the RUNNING ones: a person's cancel",
        lambda jobs: Job.objects.filter(pk__in=ids(jobs)).cancel(),
    ),
    Transition(
        "Job.objects.filter(...).requeue()",
        "finished → READY: a person's requeue, the earlier run kept in `history`",
        lambda jobs: Job.objects.filter(pk__in=ids(jobs)).requeue(),
        prepare=failed,
    ),
    Transition(
        "Job.objects.filter(...).run_now()",
        "READY, due later → due now",
        lambda jobs: Job.objects.filter(pk__in=ids(jobs)).run_now(),
        prepare=later,
    ),
]

LITERAL = re.compile(
    r"'(?:[^'\\]|\\.|'')*'"  # a quoted string (MySQLdb escapes with \)
    r"|(?<![\w.`])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.`])"  # a number, not part of a name
)
LISTS = re.compile(r"\((?:\?, )+\?\)")
ROWS = re.compile(r"(\((?:[^()]|\([^()]*\))*\))(?:, \1)+")


QUALIFIED = re.compile(r"`\w+`\.(`\w+`)")
ALIASED = re.compile(r"(`\w+`) AS \1")
WIDE = re.compile(r"^SELECT ((?:`\w+`, ){12,}`\w+`)")
CLAUSE = re.compile(r" (FROM|WHERE|ORDER BY|SET|FOR UPDATE) ")


def normalised(sql: str) -> str:
    """The statement with its literals as ``?``, names unqualified, a wide
    row's columns counted rather than listed, and a line per clause."""
    sql = LITERAL.sub("?", sql)
    sql = LISTS.sub("(?, ...)", sql)
    sql = ROWS.sub(r"\1, ...", sql)
    sql = ALIASED.sub(r"\1", QUALIFIED.sub(r"\1", sql))
    sql = WIDE.sub(lambda m: f"SELECT <{m.group(1).count(',') + 1} columns>", sql)
    return CLAUSE.sub(lambda m: f"\n  {m.group(1)} ", sql + " ").rstrip()


def captured(transition: Transition) -> list[str]:
    """The statements ``transition.run`` sends, literals as ``?``."""
    Job.objects.all().delete()
    due = timezone.now() - timedelta(minutes=1)
    jobs = [Job.objects.create(task_path="demo.tasks.noop", run_after=due) for _ in range(transition.rows)]
    jobs = transition.prepare(jobs)
    sent: list[str] = []

    def record(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        result = execute(sql, params, many, context)
        sent.append(connection.ops.last_executed_query(context["cursor"], sql, params) or sql)
        return result

    with connection.execute_wrapper(record):
        transition.run(jobs)
    return [normalised(sql) for sql in sent if not sql.startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]


def section(transition: Transition, statements: list[str]) -> str:
    body = ";\n\n".join(statements) + ";" if statements else "-- no statement"
    return f"## `{transition.title}`\n\n{transition.what}.\n\n```sql\n{body}\n```\n"


def page() -> str:
    return HEAD + "".join("\n" + section(t, captured(t)) for t in TRANSITIONS)


def test_the_statements_page_shows_what_each_transition_sends():
    written = page()
    if WRITE:
        PAGE.write_text(written)
    assert PAGE.read_text() == written, (
        "docs/statements.md differs from what the transitions send: rewrite it with "
        "DBQUEUE_DATABASE=mysql DBQUEUE_WRITE_STATEMENTS=1 pytest tests/test_statements.py"
    )


def test_literals_become_marks_and_names_stay():
    sql = "UPDATE `t` SET `a` = 'it''s', `utf8mb4_0900_bin` = 12 WHERE `id` IN (1, 2, 3) AND x = -1.5e3"
    expected = "UPDATE `t`\n  SET `a` = ?, `utf8mb4_0900_bin` = ?\n  WHERE `id` IN (?, ...) AND x = ?"
    assert normalised(sql) == expected
    assert normalised("VALUES (1, 'a'), (2, 'b'), (3, 'c')") == "VALUES (?, ...), ..."
    columns = ", ".join(f"`t`.`c{i}` AS `c{i}`" for i in range(14))
    assert normalised(f"SELECT {columns} FROM `t` WHERE `t`.`id` = 1 FOR UPDATE SKIP LOCKED") == (
        "SELECT <14 columns>\n  FROM `t`\n  WHERE `id` = ?\n  FOR UPDATE SKIP LOCKED"
    )
