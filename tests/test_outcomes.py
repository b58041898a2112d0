"""Successes of a batch are written with one UPDATE, and only after the job ran."""

import pytest
from django.db import connection
from django.tasks import task_backends
from django.tasks.signals import task_finished
from django.test.utils import CaptureQueriesContext

from demo.tasks import add, always_fails, noop
from django_dbqueue.execution import run_job
from django_dbqueue.models import Job
from django_dbqueue.outcomes import OutcomeBuffer
from django_dbqueue.worker import Worker

pytestmark = pytest.mark.django_db


def backend():
    return task_backends["default"]


def updates(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]


def test_a_batch_of_successes_is_recorded_with_one_update():
    for i in range(20):
        add.enqueue(i, 1)
    worker = Worker(backend(), ["default"], batch=20)
    jobs = Job.objects.claim(worker.name, limit=20)

    with CaptureQueriesContext(connection) as queries:
        worker._run_batch(jobs)

    assert len(updates(queries)) == 1
    # Distinct return values share that UPDATE: nothing is written per job.
    for job in Job.objects.all():
        assert (job.status, job.attempts, job.owner, job.worker_ids) == ("SUCCESSFUL", 1, None, [worker.name])
        assert job.return_value == job.args[0] + 1
        assert job.started_at == job.last_attempted_at <= job.finished_at


def test_nothing_is_recorded_before_the_flush():
    noop.enqueue()
    [job] = Job.objects.claim("w1", limit=1)
    outcomes = OutcomeBuffer(backend(), "w1", max_jobs=10, max_age=60)

    run_job(backend(), job, "w1", outcomes)

    assert Job.objects.get().status == "RUNNING", "a crash now must leave it to recovery"
    assert outcomes.flush() == 1
    assert Job.objects.get().status == "SUCCESSFUL"


def test_a_failure_flushes_the_successes_before_it_keeping_their_order():
    noop.enqueue()
    always_fails.enqueue("boom")
    noop.enqueue()
    claimed = Job.objects.claim("w1", limit=10)
    outcomes = OutcomeBuffer(backend(), "w1", max_jobs=10, max_age=60)

    statuses = []
    for job in claimed:
        run_job(backend(), job, "w1", outcomes)
        statuses.append(dict(Job.objects.values_list("pk", "status"))[claimed[0].pk])
    outcomes.flush()

    assert statuses[1] == "SUCCESSFUL", "the failure wrote the earlier success first"
    assert sorted(Job.objects.values_list("status", flat=True)) == ["READY", "SUCCESSFUL", "SUCCESSFUL"]


def test_an_outcome_whose_lease_was_lost_is_not_recorded():
    noop.enqueue()
    [job] = Job.objects.claim("w1", limit=1)
    outcomes = OutcomeBuffer(backend(), "w1", max_jobs=10, max_age=60)
    run_job(backend(), job, "w1", outcomes)
    Job.objects.update(owner="w2")  # recovered and claimed again meanwhile

    assert outcomes.flush() == 0
    assert Job.objects.get().status == "RUNNING"


def test_task_finished_is_sent_per_job_once_the_outcome_is_stored():
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((task_result.id, task_result.status, Job.objects.get(pk=task_result.id).status))

    for _ in range(3):
        noop.enqueue()
    claimed = Job.objects.claim("w1", limit=10)
    outcomes = OutcomeBuffer(backend(), "w1", max_jobs=10, max_age=60)
    task_finished.connect(receiver)
    try:
        for job in claimed:
            run_job(backend(), job, "w1", outcomes)
        assert seen == []
        outcomes.flush()
    finally:
        task_finished.disconnect(receiver)
    assert seen == [(str(job.pk), "SUCCESSFUL", "SUCCESSFUL") for job in claimed]


def test_the_buffer_is_due_by_count_or_by_age():
    outcomes = OutcomeBuffer(backend(), "w1", max_jobs=2, max_age=0.0)
    assert not outcomes.due()
    noop.enqueue()
    [job] = Job.objects.claim("w1", limit=1)
    run_job(backend(), job, "w1", outcomes)
    assert outcomes.due()
