"""get_result() carries what a running job reports: its progress, its
message and when the worker wrote them, and a cancel request; refresh()
reads them again. On each database (DBQUEUE_DATABASE)."""

import dataclasses

import pytest
from asgiref.sync import async_to_sync

from demo import progress_tasks, tasks
from django_dbqueue.enqueue.results import JobResult
from django_dbqueue.exceptions import JobCancelled
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import TaskResult, TaskResultStatus, default_task_backend
from django_dbqueue.testing import run_due_jobs

pytestmark = pytest.mark.django_db

OWNER = "web-1:4242:0"


def claimed(result: TaskResult) -> Job:
    """The job of ``result``, claimed by OWNER as a worker claims it."""
    [job] = Job.objects.filter(pk=result.id).claim(OWNER, limit=1)
    return job


def test_a_result_is_djangos_task_result_with_the_running_fields():
    enqueued = tasks.add.enqueue(1, 2)

    assert isinstance(enqueued, JobResult) and isinstance(enqueued, TaskResult)
    assert (enqueued.progress, enqueued.progress_message, enqueued.progress_at) == (None, "", None)
    assert enqueued.cancel_requested_at is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        enqueued.progress = 0.5
    assert default_task_backend.get_result(enqueued.id) == enqueued


def test_refresh_reads_the_progress_a_worker_wrote_and_a_cancel_request():
    result = tasks.add.enqueue(1, 2)
    job = claimed(result)
    assert Job.objects.save_progress(OWNER, job.pk, 0.25, "a quarter")

    result.refresh()

    assert (result.status, result.progress, result.progress_message) == ("RUNNING", 0.25, "a quarter")
    assert result.progress_at is not None
    first_report = result.progress_at
    assert Job.objects.filter(pk=job.pk).request_cancel() == 1
    assert Job.objects.save_progress(OWNER, job.pk, 0.75, None)  # None keeps the message

    async_to_sync(result.arefresh)()

    assert (result.progress, result.progress_message) == (0.75, "a quarter")
    assert result.progress_at >= first_report
    assert result.cancel_requested_at == Job.objects.get(pk=job.pk).cancel_requested_at
    assert result.status == TaskResultStatus.RUNNING, "asked, not yet stopped"
    assert (result.args, result.task) == ([1, 2], tasks.add), "what it was enqueued as stays"


def test_a_job_cancelled_while_running_reads_as_failed_with_one_cancel_error():
    result = tasks.add.enqueue(1, 2)
    job = claimed(result)
    Job.objects.filter(pk=job.pk).request_cancel()
    error = {
        "exception_class_path": "django_dbqueue.exceptions.JobCancelled",
        "traceback": "django_dbqueue.exceptions.JobCancelled: cancelled while running\n",
        "at": "2026-11-22T01:00:00+00:00",
        "worker": OWNER,
    }
    assert Job.objects.cancel_running(OWNER, job.pk, error)

    result.refresh()

    assert (result.status, result.is_finished) == (TaskResultStatus.FAILED, True)
    [cancelled] = result.errors
    assert cancelled.exception_class is JobCancelled
    assert "cancelled while running" in cancelled.traceback
    assert result.cancel_requested_at is None, "a finished job's request is cleared"
    assert Job.objects.get(pk=job.pk).status == "CANCELLED"


def test_a_task_that_reports_progress_is_seen_running_at_that_progress():
    enqueued = progress_tasks.reports_progress.enqueue(8)

    [ran] = run_due_jobs()

    assert ran.return_value == {"status": "RUNNING", "progress": 0.5, "message": "4 of 8"}
    done = progress_tasks.reports_progress.get_result(enqueued.id)
    assert (done.status, done.progress, done.progress_message) == ("SUCCESSFUL", 0.5, "4 of 8")
