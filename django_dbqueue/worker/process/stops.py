"""The outcomes of a job stopped on purpose: CANCELLED (a cancel was asked,
before it started or while it ran) or interrupted (its worker is stopping
past STOP_TIMEOUT: READY again, its attempt unspent, its checkpoint kept).

Which one a failed run is: a job whose cancel the worker learned of ends
CANCELLED, whatever its task raised after (a task that returns normally
ended SUCCESSFUL before this is asked); a task may also raise JobCancelled
itself. A JobInterrupted counts as an interruption only if the worker did
stop the job (its stop deadline passed, or it lost the job); raised by a
task on its own, it is an ordinary failure, so that it cannot loop for
ever without spending attempts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.db import connections

from ...clock import elapsed
from ...db import DB_ERRORS, drop_connection, is_outage
from ...enqueue.results import JOB_EXPIRED
from ...exceptions import JobCancelled, JobInterrupted
from ...payload import bounded_text
from ...status import Status
from ...transitions import Finished, cancelled_error
from .contract import error_entry
from .outcomes import REFUSED
from .unstored import interrupt_refused, not_saved

if TYPE_CHECKING:
    from ...models import Job
    from ...running.control import JobControl
    from ...tasks_api import Task
    from .contract import Runner

logger = logging.getLogger("django_dbqueue")

# What runner.run() returns for a job interrupted by a stop: back READY, its
# attempt unspent, counted as interrupted and not as processed.
INTERRUPTED = "INTERRUPTED"


def stop_kind(control: JobControl, exc: BaseException) -> str | None:
    """CANCELLED, READY (interrupted), or None for an ordinary failure."""
    if control.cancel_posted() or isinstance(exc, JobCancelled):
        return Status.CANCELLED
    if _interrupted(exc):
        deadline = control.slot.stop_deadline if control.slot is not None else 0.0
        if control.lease_lost or (deadline and elapsed() >= deadline):
            return Status.READY
    return None


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is a JobInterrupted, or was raised while one was
    handled (a task's cleanup that failed on its way out)."""
    seen: BaseException | None = exc
    for _ in range(20):
        if seen is None:
            return False
        if isinstance(seen, JobInterrupted):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def record_stop(runner: Runner, kind: str, job: Job, started: Any, exc: BaseException, task: Task) -> str:
    database = runner.backend.database
    if runner.control.stopping is not None and not connections[database].in_atomic_block:
        # The worker stopped the task itself, maybe inside a query whose
        # answer the connection still waits for: the outcome takes a fresh one.
        drop_connection(database)
    if kind == Status.CANCELLED:
        return _cancelled(runner, job, started, exc, task)
    return _interrupted_outcome(runner, job, exc)


def _cancelled(runner: Runner, job: Job, started: Any, exc: BaseException, task: Task) -> str:
    from ...models import Job

    runner.settle()
    # When the cancel was asked: read only on this rare path, never per job.
    asked = Job.objects.using(runner.backend.database).filter(pk=job.pk)
    job.cancel_requested_at = asked.values_list("cancel_requested_at", flat=True).first()
    how = "while running" if job.cancel_requested_at is not None else "by the task itself"
    error = cancelled_error(job, runner.clock.now(), runner.owner, how)
    where = "".join(_format(exc))
    error["traceback"] = bounded_text(f"{error['traceback']}\nWhere the task was stopped:\n{where}")
    outcome = Finished(job, started, runner.clock.now(), status=Status.CANCELLED, error=error)
    outcome.checkpoint = _unsaved(runner)
    if runner.record(outcome):
        _count(runner, cancelled=True)
        logger.info("Job %s (%s) was cancelled while running.", job.pk, job.task_path)
    runner.finished(job, task, exc)
    return Status.CANCELLED


def _interrupted_outcome(runner: Runner, job: Job, exc: BaseException) -> str:
    from ...models import Job

    runner.settle()
    note = error_entry(exc, runner)
    unsaved = runner.control.unsaved()
    dropped = runner.control.dropped(job)
    if dropped is not None:
        note = not_saved(note, dropped)
    checkpoints = {job.pk: unsaved} if unsaved is not None else None
    jobs = Job.objects.using(runner.backend.database)
    given_back: int | None
    try:
        given_back = runner.writes(lambda: jobs.interrupt(runner.owner, [job.pk], note, checkpoints))
    except REFUSED as refused:
        if isinstance(refused, DB_ERRORS) and is_outage(refused, runner.backend.database):
            raise
        drop_connection(runner.backend.database)
        given_back = interrupt_refused(runner, job, note, refused, unsaved)
    if given_back:
        _count(runner, interrupted=True)
        logger.info(
            "Job %s (%s) was interrupted: its worker is stopping past STOP_TIMEOUT. It is back in "
            "the queue, its attempt unspent, and resumes from its last checkpoint.",
            job.pk,
            job.task_path,
        )
    elif given_back is not None:  # None: refused, and said so
        logger.warning(
            "Job %s was interrupted after its worker lost it (its lease ran out and it was "
            "recovered), so nothing was recorded; it runs again from its last saved checkpoint.",
            job.pk,
        )
    return INTERRUPTED


def end_unstarted(runner: Runner, job: Job, started: Any) -> str | None:
    """CANCELLED for a claimed job that must not start: its cancel was asked
    (by SQL, say), or its deadline passed; None for a job to run."""
    if job.cancel_requested_at is not None:
        return cancel_unstarted(runner, job, started)
    if job.expires_at is not None and job.expires_at <= started:  # no run starts past its deadline
        return expire_unstarted(runner, job, started)
    return None


def cancel_unstarted(runner: Runner, job: Job, started: Any) -> str:
    """A claimed job whose cancel was asked before it started (a READY or
    WAITING row set by SQL, say): CANCELLED without running, its attempt
    unspent, through the outcome path, so that its batch and dependants
    follow as for any cancelled job."""
    runner.settle()
    now = runner.clock.now()
    error = cancelled_error(job, now, runner.owner, "before it started")
    if runner.record(Finished(job, started, now, status=Status.CANCELLED, error=error, ran=False)):
        _count(runner, cancelled=True)
        logger.info("Job %s (%s) was cancelled before it started.", job.pk, job.task_path)
    return Status.CANCELLED


def expire_unstarted(runner: Runner, job: Job, started: Any) -> str:
    """A claimed job past its deadline (``expires_at``): CANCELLED without
    running, its attempt unspent, with a ``JobExpired`` entry; through the
    outcome path, so that its batch and dependants follow as for any
    cancelled job."""
    runner.settle()
    now, deadline = runner.clock.now(), job.expires_at
    error = {
        "exception_class_path": JOB_EXPIRED,
        "traceback": f"{JOB_EXPIRED}: not started by its deadline, {deadline and deadline.isoformat()}; "
        "cancelled without running.\n",
        "at": now.isoformat(),
        "worker": runner.owner,
    }
    if runner.record(Finished(job, started, now, status=Status.CANCELLED, error=error, ran=False)):
        _count(runner, cancelled=True, expired=True)
        logger.info("Job %s (%s) expired before it started: cancelled.", job.pk, job.task_path)
    return Status.CANCELLED


def _unsaved(runner: Runner) -> Any:
    from ...transitions import UNCHANGED

    unsaved = runner.control.unsaved()
    return UNCHANGED if unsaved is None else unsaved


def _count(runner: Runner, cancelled: bool = False, interrupted: bool = False, expired: bool = False) -> None:
    """Count the job in hand's end in its slot (an expired job apart from the cancelled)."""
    if runner.slot is not None:
        runner.slot.count_control(cancelled and not expired, interrupted, expired)


def _format(exc: BaseException) -> list[str]:
    import traceback

    return traceback.format_exception(exc)
