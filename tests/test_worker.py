"""The worker loop in-process: outcomes, retries, backoff, bad rows, signals."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from demo import tasks
from demo.models import Execution
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import task_backends, task_finished, task_started
from django_dbqueue.transitions import retry_delay
from django_dbqueue.worker import Worker
from tests.conftest import drain_in_bursts, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("restore_signal_handlers")]

FAST_RETRIES = {
    "default": {
        "BACKEND": "django_dbqueue.backend.DatabaseBackend",
        "QUEUES": ["default", "email", "slow"],
        "OPTIONS": {"RETRY_BACKOFF_BASE": 0.05, "RETRY_BACKOFF_MAX": 0.2, "POLL_INTERVAL_MIN": 0.01},
    }
}


def burst(batch: int = 20) -> Worker:
    worker = Worker(task_backends["default"], ["default", "email", "slow"], batch=batch, burst=True)
    assert worker.run() == 0
    return worker


def drain(timeout: float = 20.0) -> None:
    """Burst runs until nothing is READY; retries wait out their backoff."""
    drain_in_bursts(("default", "email", "slow"), batch=20, timeout=timeout)


def test_a_successful_job_records_its_return_value_and_times():
    result = tasks.add.enqueue(2, 3)
    before = timezone.now()

    burst()

    result.refresh()
    job = Job.objects.get(pk=int(result.id))
    assert (result.status, result.return_value) == ("SUCCESSFUL", 5)
    assert (job.attempts, job.owner, job.lease_expires_at, job.errors) == (1, None, None, [])
    assert before <= job.started_at <= job.finished_at <= timezone.now()
    assert len(job.worker_ids) == 1 and result.attempts == 1


def test_jobs_run_in_priority_order():
    low = tasks.record.using(priority=-5).enqueue("low")
    high = tasks.record.using(priority=50).enqueue("high")
    mid = tasks.record.enqueue("mid")

    burst(batch=1)

    order = list(Execution.objects.order_by("pk").values_list("key", flat=True))
    assert order == ["high", "mid", "low"]
    assert {r.id for r in (low, high, mid)} == {str(pk) for pk in Job.objects.values_list("pk", flat=True)}


def test_a_future_job_waits_and_burst_exits_without_it():
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
    now = tasks.add.enqueue(2, 2)

    burst()

    assert Job.objects.get(pk=int(later.id)).status == "READY"
    assert Job.objects.get(pk=int(now.id)).status == "SUCCESSFUL"


# A first retry due 0.25-0.5 s later: a burst run on a loaded machine may
# take longer than FAST_RETRIES' 25-50 ms to find the queue empty, and so
# run the retry too.
RETRY_AFTER_QUARTER_SECOND = {
    "default": {
        **FAST_RETRIES["default"],
        "OPTIONS": {
            **FAST_RETRIES["default"]["OPTIONS"],
            "RETRY_BACKOFF_BASE": 0.5,
            "RETRY_BACKOFF_MAX": 0.5,
        },
    }
}


@override_settings(TASKS=RETRY_AFTER_QUARTER_SECOND)
def test_a_failing_job_is_retried_with_backoff_then_succeeds():
    result = tasks.flaky.enqueue("f", failures=2)

    failed_at = timezone.now()
    burst(batch=1)  # first run fails; the retry waits out its backoff
    job = Job.objects.get(pk=int(result.id))
    assert (job.status, job.attempts, job.owner) == ("READY", 1, None)
    assert failed_at + timedelta(seconds=0.25) <= job.run_after <= timezone.now() + timedelta(seconds=0.5)
    assert job.errors[0]["exception_class_path"] == "builtins.RuntimeError"
    assert "failing run 1 of 2 on purpose" in job.errors[0]["traceback"]

    drain()

    job.refresh_from_db()
    assert (job.status, job.attempts, job.return_value, len(job.errors)) == ("SUCCESSFUL", 3, 3, 2)
    assert Execution.objects.filter(key="f").count() == 3


@override_settings(TASKS=FAST_RETRIES)
def test_a_job_that_keeps_failing_ends_failed_after_max_attempts():
    result = tasks.always_fails.enqueue("broken on purpose")

    drain()

    result.refresh()
    job = Job.objects.get(pk=int(result.id))
    assert (job.status, job.attempts, job.max_attempts) == ("FAILED", 2, 2)
    assert [e.exception_class_path for e in result.errors] == ["builtins.ValueError"] * 2
    assert "ValueError: broken on purpose" in result.errors[-1].traceback
    assert job.finished_at is not None
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018


def test_retry_delay_grows_exponentially_with_jitter_and_a_cap():
    for attempts in range(1, 8):
        ceiling = min(60.0, 2.0 * 2 ** (attempts - 1))
        delays = [retry_delay(attempts, 2.0, 60.0).total_seconds() for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 100, "jitter spreads retries out"


def test_bad_rows_fail_with_a_message_and_the_rest_of_the_batch_runs():
    good_before = tasks.add.enqueue(1, 1)
    bad = {
        "demo.nothing_here.task": ("The task path 'demo.nothing_here.task' does not import", []),
        "os.system": ("is outside every installed app and OPTIONS ALLOWED_TASK_MODULES", ["true"]),
        "demo.tasks.not_a_task": ("names a function, not a task", []),
        "demo.tasks.add": ("The job's arguments do not fit demo.tasks.add(a: int, b: int)", [1, 2, 3]),
    }
    rows = {path: Job.objects.create(task_path=path, args=args) for path, (_, args) in bad.items()}
    shape = Job.objects.create(task_path="demo.tasks.add", args={"a": 1})  # an object, not a list
    good_after = tasks.add.enqueue(2, 2)

    burst()

    for path, (message, _) in bad.items():
        row = Job.objects.get(pk=rows[path].pk)
        assert (row.status, row.attempts) == ("FAILED", 1), path
        assert row.errors[0]["exception_class_path"] == "django_dbqueue.exceptions.JobNotRunnable"
        assert message in row.errors[0]["traceback"]
    shape.refresh_from_db()
    assert shape.status == "FAILED" and "must be a JSON list" in shape.errors[0]["traceback"]
    for result in (good_before, good_after):
        result.refresh()
        assert result.status == "SUCCESSFUL"


def test_a_return_value_that_is_not_json_fails_the_job_without_retry():
    result = tasks.returns_object.enqueue()
    burst()
    job = Job.objects.get(pk=int(result.id))
    assert (job.status, job.attempts) == ("FAILED", 1)
    assert (
        "The return value is a builtins.object, which cannot be stored as JSON" in job.errors[0]["traceback"]
    )


def test_context_async_and_keyword_arguments():
    attempt = tasks.which_attempt.enqueue()
    summed = tasks.async_add.enqueue(a=4, b=5)

    burst()

    attempt.refresh()
    summed.refresh()
    assert (attempt.return_value, summed.return_value) == (1, 9)


def test_task_started_and_finished_signals_are_sent_for_each_job():
    seen = []

    def on_started(sender, task_result, **kwargs):
        seen.append(("started", task_result.id, task_result.status))

    def on_finished(sender, task_result, **kwargs):
        seen.append(("finished", task_result.id, task_result.status))

    task_started.connect(on_started)
    task_finished.connect(on_finished)
    try:
        ok = tasks.add.enqueue(1, 2)
        bad = tasks.always_fails.enqueue("x")
        burst()
    finally:
        task_started.disconnect(on_started)
        task_finished.disconnect(on_finished)

    assert ("started", ok.id, "RUNNING") in seen
    assert ("finished", ok.id, "SUCCESSFUL") in seen
    assert ("started", bad.id, "RUNNING") in seen
    assert ("finished", bad.id, "READY") in seen, "a failure with attempts left is READY again"


def test_the_worker_registers_itself_and_leaves_no_claims_behind():
    tasks.add.enqueue(1, 1)
    worker = burst()
    assert worker.processed == 1
    assert not Job.objects.running().exists()
    from django_dbqueue.models import Worker as WorkerRow

    assert not WorkerRow.objects.filter(name=worker.name).exists(), "unregistered at exit"


SLOW_POLL = {
    "default": {
        "BACKEND": "django_dbqueue.backend.DatabaseBackend",
        "QUEUES": ["default", "slow"],
        "OPTIONS": {"POLL_INTERVAL_MIN": 1.0, "POLL_INTERVAL_MAX": 2.0},
    }
}


@override_settings(TASKS=SLOW_POLL)
def test_the_poll_sleep_counts_from_the_claim_so_a_long_batch_is_followed_by_a_claim_at_once():
    # The batch (one job) runs longer than POLL_INTERVAL_MIN: its poll period
    # is spent, so the next claim follows at once instead of after 0.5-1 s.
    first = tasks.sleep.enqueue(1.2)
    worker = Worker(task_backends["default"], ["default", "slow"], batch=20)
    seconds: list[float] = []

    def feed() -> None:
        try:
            wait_for(lambda: Job.objects.filter(pk=int(first.id), status="RUNNING").exists(), 10, 0.01)
            second = tasks.add.enqueue(1, 1)
            done = Job.objects.filter(pk=int(second.id), status="SUCCESSFUL")
            job = wait_for(done.first, 10, 0.01)
            seconds.append((job.started_at - Job.objects.get(pk=int(first.id)).finished_at).total_seconds())
        finally:
            worker.request_stop()
            connection.close()

    thread = threading.Thread(target=feed)
    thread.start()
    assert worker.run() == 0
    thread.join(10)
    assert seconds and seconds[0] < 0.3, seconds


def test_after_an_outage_a_job_running_under_the_workers_name_that_it_never_had_goes_back_and_runs(caplog):
    """A claim's COMMIT sent as the connection died can take effect after
    the worker's look for orphans (a Galera node applies the write-set late):
    the rows are RUNNING under its name, their lease renewed by its
    heartbeat. In the lease after the outage the worker gives them back."""
    stray, own = tasks.add.enqueue(1, 2), tasks.add.enqueue(3, 4)
    worker = Worker(task_backends["default"], ["default"], batch=20, burst=True)
    lease = timezone.now() + timedelta(seconds=60)
    Job.objects.filter(pk=int(stray.id)).update(status="RUNNING", owner=worker.name, lease_expires_at=lease)
    worker.outage.back_at = time.monotonic()  # the database came back just now (db.Outage)
    with caplog.at_level("WARNING", logger="django_dbqueue"):
        assert worker.run() == 0
    rows = Job.objects.in_bulk([int(stray.id), int(own.id)])
    assert {(job.status, job.attempts, job.return_value) for job in rows.values()} == {
        ("SUCCESSFUL", 1, 3),
        ("SUCCESSFUL", 1, 7),
    }
    assert "gave back 1 jobs held under its name that it never had" in caplog.text


def test_without_an_outage_a_worker_does_not_look_for_strays():
    from django.test.utils import CaptureQueriesContext

    tasks.add.enqueue(1, 2)
    worker = Worker(task_backends["default"], ["default"], batch=20, burst=True)
    with CaptureQueriesContext(connection) as queries:
        assert worker.run() == 0
    sql = [q["sql"] for q in queries.captured_queries]
    looks = [q for q in sql if q.startswith("SELECT") and worker.name in q]
    assert looks == [], looks
