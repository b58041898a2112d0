"""Successes of a batch are written with one UPDATE, and only after the job ran."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from demo.tasks import add, always_fails, noop
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import task_backends, task_finished
from django_dbqueue.worker import Worker
from django_dbqueue.worker.process.execution import JobRunner

pytestmark = pytest.mark.django_db


def backend():
    return task_backends["default"]


def runner(max_jobs: int = 10, max_age: float = 60) -> JobRunner:
    job_runner = JobRunner(backend(), "w1")
    job_runner.outcomes.max_jobs, job_runner.outcomes.max_age = max_jobs, max_age
    return job_runner


def updates(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]


def test_a_batch_of_successes_is_recorded_with_one_update():
    for i in range(20):
        add.enqueue(i, 1)
    worker = Worker(backend(), ["default"], batch=20)
    jobs = worker._claim()

    with CaptureQueriesContext(connection) as queries:
        worker._run_batch(jobs)

    assert len(updates(queries)) == 1
    # Distinct return values share that UPDATE: nothing is written per job.
    for job in Job.objects.all():
        assert (job.status, job.attempts, job.owner, job.worker_ids) == ("SUCCESSFUL", 1, None, [worker.name])
        assert job.return_value == job.args[0] + 1
        assert job.started_at == job.last_attempted_at <= job.finished_at


def test_a_batch_keeps_a_retried_jobs_first_start_and_starts_the_others():
    from datetime import timedelta

    from django.utils import timezone

    for i in range(4):
        add.enqueue(i, 1)
    first_start = timezone.now() - timedelta(hours=2)
    retried = Job.objects.order_by("pk")[1]
    Job.objects.filter(pk=retried.pk).update(started_at=first_start, attempts=1, worker_ids=["w0"])
    worker = Worker(backend(), ["default"], batch=4)
    jobs = worker._claim()
    worker._run_batch(jobs)

    for held in jobs:
        row = Job.objects.get(pk=held.pk)
        assert row.status == "SUCCESSFUL" and row.last_attempted_at <= row.finished_at
        if row.pk == retried.pk:
            assert row.started_at == first_start < row.last_attempted_at
            assert (row.attempts, row.worker_ids) == (2, ["w0", worker.name])
        else:
            assert row.started_at == row.last_attempted_at
            assert (row.attempts, row.worker_ids) == (1, [worker.name])
        # The instance the worker holds says what its row says.
        assert (held.started_at, held.last_attempted_at, held.finished_at) == (
            row.started_at,
            row.last_attempted_at,
            row.finished_at,
        )


def test_nothing_is_recorded_before_the_flush():
    noop.enqueue()
    [job] = Job.objects.claim("w1", limit=1)
    job_runner = runner()
    outcomes = job_runner.outcomes

    job_runner.run(job)

    assert Job.objects.get().status == "RUNNING", "a crash now must leave it to recovery"
    assert outcomes.flush() == 1
    assert Job.objects.get().status == "SUCCESSFUL"


def test_a_failure_flushes_the_successes_before_it_keeping_their_order():
    noop.enqueue()
    always_fails.enqueue("boom")
    noop.enqueue()
    claimed = Job.objects.claim("w1", limit=10)
    job_runner = runner()
    outcomes = job_runner.outcomes

    statuses = []
    for job in claimed:
        job_runner.run(job)
        statuses.append(dict(Job.objects.values_list("pk", "status"))[claimed[0].pk])
    outcomes.flush()

    assert statuses[1] == "SUCCESSFUL", "the failure wrote the earlier success first"
    assert sorted(Job.objects.values_list("status", flat=True)) == ["READY", "SUCCESSFUL", "SUCCESSFUL"]


def test_an_outcome_whose_lease_was_lost_is_not_recorded():
    noop.enqueue()
    [job] = Job.objects.claim("w1", limit=1)
    job_runner = runner()
    outcomes = job_runner.outcomes
    job_runner.run(job)
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
    job_runner = runner()
    outcomes = job_runner.outcomes
    task_finished.connect(receiver)
    try:
        for job in claimed:
            job_runner.run(job)
        assert seen == []
        outcomes.flush()
    finally:
        task_finished.disconnect(receiver)
    assert seen == [(str(job.pk), "SUCCESSFUL", "SUCCESSFUL") for job in claimed]


def test_the_buffer_is_due_by_count_or_by_age():
    job_runner = runner(max_jobs=2, max_age=0.0)
    outcomes = job_runner.outcomes
    assert not outcomes.due()
    noop.enqueue()
    [job] = Job.objects.claim("w1", limit=1)
    job_runner.run(job)
    assert outcomes.due()


def test_a_batched_success_carries_the_result_to_result_makes_of_its_row():
    """task_finished's result of a batched success is made from its running
    one (ResultView.succeeded): it must equal what to_result() reads back."""
    import dataclasses

    for i in range(5):
        add.enqueue(i, 1)
    heard = []

    def receiver(sender, task_result, **kwargs):
        heard.append(task_result)

    task_finished.connect(receiver)
    try:
        worker = Worker(backend(), ["default"], batch=5)
        worker._run_batch(worker._claim())
    finally:
        task_finished.disconnect(receiver)
    assert len(heard) == 5
    for result in heard:
        stored = backend().to_result(Job.objects.get(pk=result.id))
        for field in dataclasses.fields(stored):
            assert getattr(result, field.name) == getattr(stored, field.name), field.name
        assert result.status == "SUCCESSFUL" and result.return_value == result.args[0] + 1


def test_the_outcome_writes_times_as_the_backend_would_adapt_them():
    import re
    from datetime import datetime, timedelta, timezone

    from django.conf import settings

    from django_dbqueue.transitions.updates import _datetime_literal

    literal = _datetime_literal(connection)
    moments = [datetime(2026, 11, 26, 22, 41, 5, 123456), datetime(2026, 1, 2, 3, 4, 5)]
    if settings.USE_TZ:
        moments = [m.replace(tzinfo=timezone.utc) for m in moments] + [
            datetime(2026, 3, 29, 1, 30, tzinfo=timezone(timedelta(hours=-5)))
        ]
    written = 0
    for moment in moments:
        text = literal(moment)
        if text is not None:  # else the adapter is asked, as a parameter
            written += 1
            assert text == connection.ops.adapt_datetimefield_value(moment)
            assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?", text)
    # MySQL and MariaDB take the UTC times a worker's clock gives as text.
    assert written == (2 if connection.vendor == "mysql" else 0)
