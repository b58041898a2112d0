"""The outcome side of workflows, statement by statement: a plain job's
outcome costs what it did before (one UPDATE per group), a dependant added
after its parent was claimed is still released, and a job that runs out of
attempts in lease recovery completes its batch. Every database."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from demo import workflow_tasks as wt
from django_dbqueue import batch, call, get_batch
from django_dbqueue.models import Job
from django_dbqueue.transitions import Finished

pytestmark = pytest.mark.django_db(transaction=True)


def success(job: Job) -> Finished:
    return Finished(job, job.lease_expires_at, job.lease_expires_at, return_value=job.args[0])


def test_plain_outcomes_cost_one_update_per_group_and_batch_members_one_more_read():
    for index in range(20):
        wt.member.enqueue(f"plain-{index}")
    # (Outcomes made first: a claimed job's lease_expires_at is read on access.)
    plain = [success(job) for job in Job.objects.claim("w", limit=20)]
    with CaptureQueriesContext(connection) as plain_queries:
        assert Job.objects.record_successes("w", plain) == 20
    assert [q["sql"].split()[0] for q in plain_queries.captured_queries] == ["UPDATE"]

    with batch() as members:
        for index in range(20):
            wt.member.enqueue(f"member-{index}")
        wt.member.enqueue("left")
    claimed = [
        success(job) for job in Job.objects.filter(batch_id=members.id).order_by("pk").claim("w", limit=20)
    ]
    with CaptureQueriesContext(connection) as member_queries:
        assert Job.objects.record_successes("w", claimed) == 20
    statements = [q["sql"].split()[0] for q in member_queries.captured_queries]
    assert statements.count("UPDATE") == 1 and statements.count("SELECT") <= 3, statements


def test_a_dependant_added_after_its_parent_was_claimed_is_still_released():
    wt.member.enqueue("parent")
    (parent,) = Job.objects.claim("w", limit=1)
    assert not parent.has_dependants, "the worker's copy predates the dependant"
    child = wt.member.using(depends_on=[parent.pk]).enqueue("child")
    assert Job.objects.get(pk=child.id).status == "WAITING"
    assert Job.objects.record_successes("w", [success(parent)]) == 1
    assert Job.objects.get(pk=child.id).status == "READY"


def test_a_job_failed_by_lease_recovery_completes_its_batch_and_cancels_its_dependants():
    with batch(on_failure=call(wt.callback, "lost")) as lost:
        wt.member.enqueue("dies")
    dependant = wt.member.using(depends_on=[lost]).enqueue("after")
    (job,) = Job.objects.claim("w", limit=1, lease=0)
    Job.objects.filter(pk=job.pk).update(suspect=True, attempts=job.max_attempts)
    assert Job.objects.recover_expired() == (0, 1)
    lost = get_batch(lost.id)
    assert (lost.status, lost.failed) == ("FAILED", 1)
    assert Job.objects.filter(task_path="demo.workflow_tasks.callback").count() == 1
    assert Job.objects.get(pk=dependant.id).status == "CANCELLED"


def test_cancelling_a_waiting_job_cancels_its_own_dependants_and_completes_its_batch():
    parent = wt.member.enqueue("parent")
    with batch(on_finish=call(wt.callback, "done")) as waiting:
        child = wt.member.using(depends_on=[parent]).enqueue("child")
    grandchild = wt.member.using(depends_on=[child]).enqueue("grandchild")
    assert Job.objects.filter(pk=child.id).cancel() == 1
    assert Job.objects.get(pk=grandchild.id).status == "CANCELLED"
    assert get_batch(waiting.id).status == "FAILED"
    assert Job.objects.get(pk=parent.id).status == "READY", "a parent is not touched"
