"""Only transitions/ writes a job's or a batch's status: the guard that
watches every test's SQL for it (tests/status_guard.py, installed for the
whole suite by conftest.py) catches a write from elsewhere, through a dict
of values too, and lets transitions/' own and a plain INSERT's pass."""

from __future__ import annotations

from typing import Any

import pytest

from django_dbqueue.models import Job
from django_dbqueue.status import Status
from django_dbqueue.workflows.models import Batch, BatchStatus
from tests.status_guard import PACKAGE, StatusGuard, writes_status

pytestmark = pytest.mark.django_db(transaction=True)


def from_package_file(relative: str, source: str) -> dict[str, Any]:
    """The functions of ``source``, compiled as if they were written in the
    package's file ``relative``: their frames are that file's."""
    names: dict[str, Any] = {"Job": Job, "Batch": Batch}
    exec(compile(source, PACKAGE + relative, "exec"), names)
    return names


WRITER = """
def write(pk, changes):
    return Job.objects.filter(pk=pk).update(**changes)

def close(pk, changes):
    return Batch.objects.filter(pk=pk).update(**changes)
"""


def make_job() -> Job:
    return Job.objects.create(task_path="tests.tasks.noop")


def test_a_status_written_through_a_dict_outside_transitions_is_caught(status_writes: StatusGuard) -> None:
    job = make_job()
    outside = from_package_file("workflows/elsewhere.py", WRITER)
    assert outside["write"](job.pk, {"status": Status.CANCELLED}) == 1
    caught = status_writes.take()
    assert len(caught) == 1
    assert caught[0].where.endswith("django_dbqueue/workflows/elsewhere.py:3")
    assert "status" in caught[0].sql.lower()
    assert "workflows/elsewhere.py:3" in str(caught[0])


def test_a_batch_status_written_outside_transitions_is_caught(status_writes: StatusGuard) -> None:
    batch = Batch.objects.create()
    outside = from_package_file("admin/elsewhere.py", WRITER)
    outside["close"](batch.pk, {"status": BatchStatus.SUCCEEDED})
    assert [v.where.rsplit("/", 1)[-1] for v in status_writes.take()] == ["elsewhere.py:6"]


def test_transitions_and_other_columns_pass(status_writes: StatusGuard) -> None:
    job = make_job()
    inside = from_package_file("transitions/elsewhere.py", WRITER)
    inside["write"](job.pk, {"status": Status.CANCELLED})
    outside = from_package_file("workflows/elsewhere.py", WRITER)
    outside["write"](job.pk, {"priority": 5, "metadata": {"status": "x"}})
    # The test's own writes are a person's SQL, not the package's.
    Job.objects.filter(pk=job.pk).update(status=Status.READY)
    assert status_writes.take() == []


@pytest.mark.parametrize(
    "sql",
    [
        'UPDATE "django_dbqueue_job" SET "status" = %s WHERE "django_dbqueue_job"."id" = %s',
        "UPDATE `django_dbqueue_job` SET `priority` = 1, `status` = 'READY' WHERE `id` IN (1)",
        'UPDATE "django_dbqueue_batch" SET "finished_at" = NOW(), "status" = %s WHERE "id" = 1',
        'UPDATE "django_dbqueue_job" SET "django_dbqueue_job"."status" = CASE WHEN (a = 1) THEN %s END',
        "INSERT INTO `django_dbqueue_job` (`id`) VALUES (1) ON DUPLICATE KEY UPDATE `status` = 'READY'",
        'INSERT INTO "django_dbqueue_batch" ("id") VALUES (1) ON CONFLICT ("id") DO UPDATE SET "status" = 1',
    ],
)
def test_status_assignments_are_recognised(sql: str) -> None:
    assert writes_status(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO `django_dbqueue_job` (`status`, `task_path`) VALUES ('WAITING', 'x')",
        'UPDATE "django_dbqueue_job" SET "run_after" = %s WHERE "status" = %s',
        'UPDATE "django_dbqueue_job" SET "rate_limit" = 1, "args" = (SELECT 1 WHERE "status" = 1)',
        "UPDATE `django_dbqueue_worker` SET `status` = 'x'",
        'SELECT "status" FROM "django_dbqueue_job" WHERE "status" = %s',
        "UPDATE `django_dbqueue_job` SET `status_note` = 'x'",
    ],
)
def test_other_statements_are_not_status_writes(sql: str) -> None:
    assert not writes_status(sql)
