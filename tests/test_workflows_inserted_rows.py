"""Rows a plain SQL INSERT gives another batch's id (docs/security.md:
INSERT cannot stop a batch): a WAITING row with no dependency, or a
RUNNING row with no lease, would be waited for by no one's finish. With
real `runqueue` processes, on every database."""

import pytest
from django.db import connection

from demo import workflow_tasks as wt
from demo.models import Execution
from django_dbqueue import batch, call, get_batch
from django_dbqueue.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def insert_row(status: str, batch_id: int) -> int:
    """A plain INSERT naming only the task, the status and the batch."""
    table = connection.ops.quote_name(Job._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(name) for name in ("task_path", "status", "batch_id"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({columns}) VALUES (%s, %s, %s)", ["demo.tasks.noop", status, batch_id]
        )
    return Job.objects.latest("pk").pk


@pytest.mark.parametrize("status", ["WAITING", "RUNNING"])
def test_a_row_inserted_into_a_batch_that_nothing_would_finish_does_not_hold_it_open(runqueue, status):
    with batch("victim", on_success=call(wt.callback, "done")) as victim:
        wt.member.enqueue("victim-0")
    intruder = insert_row(status, victim.id)

    worker = runqueue("--burst", DBQUEUE_LEASE="1")
    assert worker.wait(120) == 0, worker.output()[-3000:]

    done = get_batch(victim.id)
    assert done.status == "SUCCEEDED", done.counts
    assert Execution.objects.filter(key=f"done:{victim.id}").count() == 1, "its callback ran once"
    # The WAITING row is never released (nothing names it a dependant); the
    # RUNNING one comes back from lease recovery and runs like any job.
    assert Job.objects.get(pk=intruder).status == {"WAITING": "WAITING", "RUNNING": "SUCCESSFUL"}[status]
