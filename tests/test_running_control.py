"""Control over running jobs, in-process: a bare Worker (its own heartbeat
thread) runs in the test's main thread, as runqueue's workers do, while a
helper thread plays the person or program that cancels, watches progress,
or stops the worker. Every database; tests/test_running_control_processes.py
does the same with real runqueue processes, SIGKILL and deploys."""

import signal
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from demo import workflow_tasks as wt
from demo.models import Execution
from django_dbqueue import batch, call, current_job, get_batch
from django_dbqueue.exceptions import JobCancelled, JobInterrupted
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import task_backends
from django_dbqueue.worker import Worker
from tests import running_tasks as rt
from tests.conftest import wait_for
from tests.threads import alongside

pytestmark = pytest.mark.django_db(transaction=True)

CANCELLED = "django_dbqueue.exceptions.JobCancelled"
INTERRUPTED = "django_dbqueue.exceptions.JobInterrupted"


def with_options(**options: object) -> dict:
    entry = rt.CONTROL_TASKS["default"]
    return {"default": {**entry, "OPTIONS": {**entry["OPTIONS"], **options}}}


@pytest.fixture(autouse=True)
def control_settings() -> Iterator[None]:
    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1)
    saved = {signum: signal.getsignal(signum) for signum in signals}
    with override_settings(TASKS=rt.CONTROL_TASKS):
        yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def run_worker(action: Callable[[], None] | None = None) -> tuple[Worker, int]:
    """Run a burst Worker in this (the main) thread while ``action`` runs in
    another; re-raise what ``action`` raised."""
    worker = Worker(task_backends["default"], ["default"], batch=1, burst=True)
    with alongside(action or (lambda: None)):
        code = worker.run()
    return worker, code


def drain(timeout: float = 20.0) -> None:
    """Burst runs until nothing is READY (retries wait out their short backoff)."""
    deadline = time.monotonic() + timeout
    while Job.objects.ready().exists():
        assert time.monotonic() < deadline, "jobs were still READY"
        run_worker()
        time.sleep(0.03)


def executed(key: str) -> bool:
    return Execution.objects.filter(key=key).exists()


def stops_running(pk: int | str) -> float:
    """Seconds until job ``pk`` is no longer RUNNING (after it started)."""
    started = time.monotonic()
    wait_for(lambda: Job.objects.filter(pk=pk).exclude(status="RUNNING").exists(), timeout=15, interval=0.02)
    return time.monotonic() - started


def request_cancel_by_sql(pk: int | str) -> None:
    """What docs/sql-contract.md tells any program to run."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE django_dbqueue_job SET cancel_requested_at = %s "
            "WHERE id = %s AND status IN ('READY', 'WAITING', 'RUNNING')",
            [timezone.now(), int(pk)],
        )
        assert cursor.rowcount == 1


def assert_cancelled_while_running(job: Job) -> None:
    assert (job.status, job.owner, job.cancel_requested_at, job.finished_at is not None) == (
        "CANCELLED",
        None,
        None,
        True,
    ), job.errors
    assert job.attempts == 1, "it ran: its attempt counts"
    assert job.errors[-1]["exception_class_path"] == CANCELLED
    assert "cancelled while running (requested at " in job.errors[-1]["traceback"]


# -- cancelling ----------------------------------------------------------------------


def test_a_ready_job_cancelled_by_sql_is_cancelled_unrun_and_its_batch_and_dependants_follow():
    with batch(on_finish=call(wt.callback, "after-sql-cancel")) as members:
        first = rt.checks.enqueue("never-runs")
    child = wt.member.using(depends_on=[int(first.id)]).enqueue("child")
    request_cancel_by_sql(first.id)

    _, code = run_worker()

    job = Job.objects.get(pk=first.id)
    assert (code, job.status, job.attempts, job.cancel_requested_at) == (0, "CANCELLED", 0, None)
    assert not executed("never-runs")
    assert job.errors[-1]["exception_class_path"] == CANCELLED
    assert "cancelled before it started (requested at " in job.errors[-1]["traceback"]
    assert Job.objects.get(pk=child.id).status == "CANCELLED", "a dependant follows its cancelled parent"
    assert get_batch(members.id).finished
    assert executed(f"after-sql-cancel:{members.id}"), "the batch's callback ran"


def test_a_running_task_that_checks_is_cancelled_within_a_heartbeat():
    result = rt.checks.enqueue("checks")

    def cancel() -> None:
        wait_for(lambda: executed("checks"))
        assert Job.objects.filter(pk=result.id).cancel() == 1
        assert stops_running(result.id) < 3

    worker, code = run_worker(cancel)

    job = Job.objects.get(pk=result.id)
    assert_cancelled_while_running(job)
    assert "job.check()" in job.errors[-1]["traceback"], "where the task was stopped"
    assert executed("checks-saw-request"), "cancel_requested() said so before check() raised"
    assert (code, worker.slot.cancelled, worker.slot.interrupted) == (0, 1, 0)


@override_settings(TASKS=with_options(CANCEL_GRACE_SECONDS=0.5))
def test_a_task_that_never_checks_is_stopped_after_the_grace_period():
    result = rt.never_checks.enqueue("sleeper")

    def cancel() -> None:
        wait_for(lambda: executed("sleeper"))
        request_cancel_by_sql(result.id)
        # The heartbeat learns of it within CONTROL_INTERVAL (0.1 s), then the grace.
        assert 0.45 < stops_running(result.id) < 4

    run_worker(cancel)

    job = Job.objects.get(pk=result.id)
    assert_cancelled_while_running(job)
    assert "stopped by its worker after the grace period" in job.errors[-1]["traceback"]
    assert executed("sleeper-stopped-by-JobCancelled"), "raised inside time.sleep()"


@override_settings(TASKS=with_options(CANCEL_GRACE_SECONDS=60))
def test_an_async_task_is_cancelled_as_a_coroutine_at_once():
    result = rt.waits.enqueue("coroutine")

    def cancel() -> None:
        wait_for(lambda: executed("coroutine"))
        Job.objects.filter(pk=result.id).cancel()
        assert stops_running(result.id) < 3, "not after the 60 s grace"

    run_worker(cancel)

    job = Job.objects.get(pk=result.id)
    assert_cancelled_while_running(job)
    assert executed("coroutine-cancelled"), "the coroutine saw its CancelledError"


def test_a_task_that_checkpoints_after_the_request_is_cancelled_there():
    result = rt.saves.enqueue("checkpoints")

    def cancel_then_release() -> None:
        wait_for(lambda: executed("checkpoints"))
        Job.objects.filter(pk=result.id).cancel()
        time.sleep(0.3)  # the worker learned of it; the task looks at its next checkpoint
        Execution.objects.create(key="checkpoints-release", pid=0)

    run_worker(cancel_then_release)

    job = Job.objects.get(pk=result.id)
    assert_cancelled_while_running(job)
    assert job.checkpoint["cursor"] == "second", "the position it reached, then the cancel"


@override_settings(TASKS=with_options(CANCEL_GRACE_SECONDS=60))
def test_a_task_that_returns_before_it_is_stopped_ends_successful():
    result = rt.never_checks.enqueue("quick", seconds=0.6)

    def cancel() -> None:
        wait_for(lambda: executed("quick"))
        Job.objects.filter(pk=result.id).cancel()

    run_worker(cancel)

    job = Job.objects.get(pk=result.id)
    assert (job.status, job.return_value, job.cancel_requested_at) == ("SUCCESSFUL", "slept to the end", None)


def test_a_task_may_cancel_its_own_job_but_not_give_it_back_by_raising_job_interrupted():
    itself = rt.cancels_itself.enqueue("itself")
    interrupted = rt.raises_interrupted.enqueue("interrupted")

    drain()

    job = Job.objects.get(pk=itself.id)
    assert (job.status, job.attempts) == ("CANCELLED", 1)
    assert "cancelled by the task itself" in job.errors[-1]["traceback"]
    job = Job.objects.get(pk=interrupted.id)
    assert (job.status, job.attempts, job.interruptions) == ("FAILED", 2, 0), "attempts spent: no loop"
    assert Execution.objects.filter(key="interrupted").count() == 2


# -- progress and checkpoints ------------------------------------------------------------


def test_progress_reaches_the_row_and_the_result():
    result = rt.reports.enqueue("progress")

    def watch() -> None:
        wait_for(lambda: Job.objects.filter(pk=result.id, progress=0.25).exists(), timeout=10, interval=0.02)
        job = Job.objects.get(pk=result.id)
        assert (job.progress_message, job.status) == ("a quarter done", "RUNNING")
        assert job.progress_at is not None
        Execution.objects.create(key="progress-release", pid=0)
        wait_for(lambda: Job.objects.filter(pk=result.id, progress=1.0).exists(), timeout=10, interval=0.02)
        result.refresh()
        assert (result.progress, result.progress_message) == (1.0, "a quarter done"), "None kept the message"
        Execution.objects.create(key="progress-release2", pid=0)

    run_worker(watch)

    job = Job.objects.get(pk=result.id)
    assert (job.status, job.progress, job.progress_message) == ("SUCCESSFUL", 1.0, "a quarter done")


def test_a_retry_resumes_from_the_checkpoint_its_failed_attempt_saved():
    result = rt.resumable.enqueue("resume", fail_at=3)

    drain()

    job = Job.objects.get(pk=result.id)
    assert (job.status, job.return_value, job.attempts) == ("SUCCESSFUL", "done", 2), job.errors
    keys = list(Execution.objects.order_by("pk").values_list("key", flat=True))
    assert keys == [
        "resume-one",
        "resume-0-attempt-1",
        "resume-1-attempt-1",
        "resume-2-attempt-1",
        "resume-3-attempt-1",
        "resume-4-attempt-2",
    ], "step one is not repeated, step two resumes after item 3"
    assert job.checkpoint == {"steps_done": ["one", "two"], "step": None, "cursor": None}


def test_a_checkpoint_taken_inside_a_transaction_that_rolled_back_is_not_resumed_from():
    result = rt.in_own_transaction.enqueue("tx")

    drain()

    job = Job.objects.get(pk=result.id)
    assert (job.status, job.return_value) == ("SUCCESSFUL", "resumed"), job.errors
    assert executed("tx-resumed-from-outside") and not executed("tx-rolled-back")


def test_an_atomic_tasks_checkpoints_roll_back_with_it_and_its_progress_is_reported():
    result = rt.atomic_steps.enqueue("atomic")

    drain()

    job = Job.objects.get(pk=result.id)
    assert (job.status, job.return_value, job.attempts) == ("SUCCESSFUL", "atomic", 2), job.errors
    assert executed("atomic-attempt-2-cursor-None"), "the retry starts where the job stood before"
    assert not executed("atomic-attempt-1-cursor-None"), "the first attempt's writes rolled back"
    assert job.checkpoint is None, "never written inside the transaction (it would lock the row)"


def test_an_async_task_saves_steps_and_checkpoints_and_its_retry_resumes():
    result = rt.async_steps.enqueue("async")

    drain()

    job = Job.objects.get(pk=result.id)
    assert (job.status, job.return_value, job.attempts) == ("SUCCESSFUL", "async done", 2), job.errors
    keys = list(Execution.objects.order_by("pk").values_list("key", flat=True))
    assert keys == [
        "async-refused",  # checkpoint() in a coroutine says to await acheckpoint()
        "async-one",
        "async-two-from-None",
        "async-refused",
        "async-two-from-half way",  # step one is not run again
    ]


@override_settings(TASKS=with_options(STOP_TIMEOUT=0.2, CANCEL_GRACE_SECONDS=60))
def test_a_stopping_worker_interrupts_an_async_task_at_its_stop_timeout():
    result = rt.waits.enqueue("async-deploy")

    def deploy() -> None:
        wait_for(lambda: executed("async-deploy"))
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        assert stops_running(result.id) < 3

    run_worker(deploy)

    job = Job.objects.get(pk=result.id)
    assert (job.status, job.attempts, job.interruptions) == ("READY", 0, 1), job.errors
    assert executed("async-deploy-cancelled")


def test_writes_about_a_running_job_are_refused_to_a_worker_that_lost_it():
    rt.checks.enqueue("held")
    (job,) = Job.objects.claim("w1", limit=1)
    jobs = Job.objects
    assert jobs.save_progress("w1", job.pk, 0.5, "half") and jobs.save_checkpoint("w1", job.pk, {"a": 1})
    Job.objects.filter(pk=job.pk).update(owner="w2")  # recovered, and claimed by another worker

    error = {"exception_class_path": CANCELLED, "traceback": "", "at": "", "worker": "w1"}
    assert not jobs.save_progress("w1", job.pk, 0.9, "late")
    assert not jobs.save_checkpoint("w1", job.pk, {"a": 2})
    assert not jobs.cancel_running("w1", job.pk, error)
    assert jobs.interrupt("w1", [job.pk]) == 0
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.owner, row.progress, row.progress_message) == ("RUNNING", "w2", 0.5, "half")
    assert (row.checkpoint, row.interruptions, row.errors) == ({"a": 1}, 0, [])


def test_a_task_whose_worker_lost_the_job_is_interrupted_at_its_next_checkpoint():
    result = rt.saves.enqueue("lost")

    def steal() -> None:
        wait_for(lambda: Job.objects.filter(pk=result.id, checkpoint__cursor="first").exists())
        Job.objects.filter(pk=result.id).update(owner="another-worker")
        Execution.objects.create(key="lost-release", pid=0)

    run_worker(steal)

    job = Job.objects.get(pk=result.id)
    assert (job.status, job.owner, job.checkpoint["cursor"]) == ("RUNNING", "another-worker", "first")
    assert (job.attempts, job.interruptions, job.errors) == (0, 0, []), "nothing written by the loser"


# -- interrupting (a deploy) --------------------------------------------------------------


@override_settings(TASKS=with_options(STOP_TIMEOUT=0.3))
def test_a_stopping_worker_interrupts_its_job_at_a_checkpoint_and_the_next_run_resumes_it():
    result = rt.loops_with_checkpoints.enqueue("deploy", items=80)

    def deploy() -> None:
        wait_for(lambda: executed("deploy-from-0"))
        time.sleep(0.2)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        assert stops_running(result.id) < 3

    worker, code = run_worker(deploy)

    job = Job.objects.get(pk=result.id)
    assert (code, job.status, job.attempts, job.interruptions) == (0, "READY", 0, 1), job.errors
    assert job.owner is None and job.run_after <= timezone.now()
    assert job.errors[-1]["exception_class_path"] == INTERRUPTED
    cursor = job.checkpoint["cursor"]
    assert 0 < cursor < 79, "the position reached, written with the outcome"
    assert (worker.slot.interrupted, worker.slot.cancelled) == (1, 0)

    with override_settings(TASKS=with_options(STOP_TIMEOUT=None)):
        run_worker()

    job.refresh_from_db()
    assert (job.status, job.attempts, job.interruptions) == ("SUCCESSFUL", 1, 1)
    assert executed(f"deploy-from-{cursor + 1}"), "resumed after the last saved item"


@override_settings(TASKS=with_options(STOP_TIMEOUT=0.2, CANCEL_GRACE_SECONDS=0.3))
def test_a_job_that_reaches_no_checkpoint_is_stopped_after_the_stop_timeout_and_grace():
    result = rt.never_checks.enqueue("deaf")

    def deploy() -> None:
        wait_for(lambda: executed("deaf"))
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        assert 0.45 < stops_running(result.id) < 4

    _, code = run_worker(deploy)

    job = Job.objects.get(pk=result.id)
    assert (code, job.status, job.attempts, job.interruptions) == (0, "READY", 0, 1), job.errors
    assert executed("deaf-stopped-by-JobInterrupted")


def test_interrupt_gives_the_attempt_back_even_a_suspects_and_keeps_the_checkpoint():
    plain = rt.checks.enqueue("plain")
    (job,) = Job.objects.claim("w1", limit=1)
    Job.objects.save_checkpoint("w1", job.pk, {"steps_done": [], "step": None, "cursor": 7})
    assert Job.objects.interrupt("w1", [job.pk]) == 1
    row = Job.objects.get(pk=plain.id)
    assert (row.status, row.attempts, row.interruptions, row.owner) == ("READY", 0, 1, None)
    assert row.checkpoint["cursor"] == 7

    # A suspect's attempt is counted in its claim: the interruption gives it back.
    Job.objects.filter(pk=row.pk).update(suspect=True)
    (job,) = Job.objects.claim("w2", limit=1)
    assert Job.objects.get(pk=row.pk).attempts == 1
    assert Job.objects.interrupt("w2", [job.pk], checkpoints={job.pk: {"cursor": 9}}) == 1
    row.refresh_from_db()
    assert (row.status, row.attempts, row.interruptions, row.suspect) == ("READY", 0, 2, True)
    assert row.checkpoint == {"cursor": 9}


def test_an_interrupted_job_whose_cancel_was_asked_ends_cancelled():
    rt.checks.enqueue("both")
    (job,) = Job.objects.claim("w1", limit=1)
    assert Job.objects.filter(pk=job.pk).request_cancel() == 1
    assert Job.objects.interrupt("w1", [job.pk]) == 1
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.interruptions, row.cancel_requested_at) == ("CANCELLED", 0, None)
    assert "while the worker was stopping" in row.errors[-1]["traceback"]


# -- recovery, batches and dependants -------------------------------------------------------


def test_recovery_of_a_dead_workers_job_whose_cancel_was_asked_ends_it_cancelled():
    with batch(on_finish=call(wt.callback, "after-recovery")) as members:
        first = rt.checks.enqueue("dead")
    child = wt.member.using(depends_on=[int(first.id)]).enqueue("orphan")
    (job,) = Job.objects.claim("dead-worker", limit=1, lease=0)
    Job.objects.filter(pk=job.pk).request_cancel()

    assert Job.objects.recover_expired() == (0, 1)

    row = Job.objects.get(pk=first.id)
    assert (row.status, row.owner, row.cancel_requested_at) == ("CANCELLED", None, None)
    assert "cancelled after its worker died (requested at " in row.errors[-1]["traceback"]
    assert Job.objects.get(pk=child.id).status == "CANCELLED"
    assert get_batch(members.id).finished
    assert Job.objects.filter(task_path="demo.workflow_tasks.callback").count() == 1


def test_the_batch_and_dependants_of_a_job_cancelled_while_running_follow_it():
    with batch(on_finish=call(wt.callback, "after-running-cancel")) as members:
        first = rt.checks.enqueue("member")
    child = wt.member.using(depends_on=[int(first.id)]).enqueue("dependant")

    def cancel() -> None:
        wait_for(lambda: executed("member"))
        Job.objects.filter(pk=first.id).cancel()

    run_worker(cancel)

    assert_cancelled_while_running(Job.objects.get(pk=first.id))
    assert Job.objects.get(pk=child.id).status == "CANCELLED"
    assert get_batch(members.id).finished
    assert executed(f"after-running-cancel:{members.id}")


# -- the queryset and the API -----------------------------------------------------------


def test_cancel_cancels_unstarted_jobs_and_asks_for_running_ones():
    rt.checks.enqueue("ready")
    rt.checks.enqueue("running")
    (running,) = Job.objects.claim("w1", limit=1)
    finished = rt.checks.enqueue("finished")
    Job.objects.filter(pk=finished.id).update(status="SUCCESSFUL")

    assert Job.objects.cancel() == 2
    assert Job.objects.cancel() == 0, "a request already made is not made again"
    statuses = dict(Job.objects.values_list("pk", "status"))
    assert sorted(statuses.values()) == ["CANCELLED", "RUNNING", "SUCCESSFUL"]
    assert Job.objects.get(pk=running.pk).cancel_requested_at is not None
    assert not Job.objects.exclude(pk=running.pk).filter(cancel_requested_at__isnull=False).exists()


def test_requeue_clears_what_the_run_reported_and_saved():
    result = rt.checks.enqueue("again")
    Job.objects.filter(pk=result.id).update(
        status="CANCELLED",
        progress=0.5,
        progress_message="half",
        progress_at=timezone.now(),
        checkpoint={"steps_done": ["a"], "step": None, "cursor": None},
        interruptions=2,
        cancel_requested_at=timezone.now(),
    )
    assert Job.objects.filter(pk=result.id).requeue() == 1
    job = Job.objects.get(pk=result.id)
    assert (job.status, job.progress, job.progress_message, job.progress_at) == ("READY", None, "", None)
    assert (job.checkpoint, job.interruptions, job.cancel_requested_at) == (None, 0, None)
    assert job.history[-1]["interruptions"] == 2


def test_the_stop_exceptions_pass_through_except_exception_and_current_job_is_none_outside_a_worker():
    assert not issubclass(JobCancelled, Exception) and issubclass(JobCancelled, BaseException)
    assert not issubclass(JobInterrupted, Exception) and issubclass(JobInterrupted, BaseException)
    assert current_job() is None


def test_a_checkpoint_this_version_cannot_read_fails_the_attempt_saying_what_to_do():
    result = rt.loops_with_checkpoints.enqueue("garbled", items=2)
    Job.objects.filter(pk=result.id).update(checkpoint=[1, 2, 3])

    drain()

    job = Job.objects.get(pk=result.id)
    assert job.status == "FAILED"
    assert "cannot be resumed from" in job.errors[-1]["traceback"]
    assert "Requeue the job to run it from the beginning" in job.errors[-1]["traceback"]
