"""Running one claimed job, and handing its outcome to the transitions.

Whatever a task does ends as a recorded outcome: a return value, an
exception of any kind (``sys.exit()``, ``KeyboardInterrupt`` raised by the
task, ``asyncio.CancelledError``), a value the database could not store. The
only thing that passes through is the worker's own :class:`ForcedStop`. A
job stopped on purpose (cancelled, or interrupted for a deploy) is recorded
as such by stops.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import connections

from ...clock import DatabaseClock
from ...db import DB_ERRORS, DurableWrites, Outage, drop_connection, is_outage, retry_on_conflict
from ...exceptions import JobNotRunnable, Snooze, TaskNotDeployed, WorkerStopped
from ...payload import Integers, as_list, check_return_value, exact_integers
from ...retries import after_failure
from ...running.control import JobControl
from ...status import Status
from ...tasks_api import Task, TaskContext, task_finished, task_started
from ...tracing import NO_SPAN, job_spans
from ...transitions import Finished, attempts_after, retry_delay
from ...workflows.context import running_job
from ..shared import Slot
from .atomic import run_atomic
from .contract import error_entry
from .failures import log_failure
from .groups import AtomicGroup
from .outcomes import REFUSED, OutcomeBuffer
from .resolving import resolve
from .signals import ForcedStop
from .snoozing import snooze_or_fail
from .stops import end_unstarted, record_stop, stop_kind
from .timeouts import call_with_limit
from .undeployed import give_back_or_fail
from .unstored import not_storable, note_dropped, record_refused

if TYPE_CHECKING:
    from ...backend import DatabaseBackend
    from ...models import Job

logger = logging.getLogger("django_dbqueue")


class JobRunner:
    """Runs jobs for one worker (``owner``) and records their outcomes."""

    def __init__(
        self,
        backend: DatabaseBackend,
        owner: str,
        outage: Outage | None = None,
        *,
        slot: Slot | None = None,
        give_up: Callable[[], bool] = lambda: False,
        batch: int = 1,
    ) -> None:
        self.backend = backend
        self.config = backend.config
        self.owner = owner
        self.outage = outage
        self.slot = slot
        self.give_up = give_up
        self.clock = DatabaseClock(backend.database)
        self.started: Any = None  # when the job in hand started, on the database's clock
        self.running: Any = None  # the job in hand's TaskResult, as task_started carried it
        self.writes = DurableWrites(backend.database, outage, give_up)
        self.outcomes = OutcomeBuffer(
            self.writes,
            owner,
            backend,
            record_one=self.record,
            max_jobs=batch,
            max_age=min(self.config.heartbeat_interval, 1.0),
        )
        # Consecutive atomic jobs of a batch, in one transaction (atomic.py).
        self.atomic = AtomicGroup(
            backend.database, owner, batch, finished=self.finished, release=self.release
        )
        # What the task's current_job() shares with this worker (running/job.py).
        self.control = JobControl(owner, backend.database, slot, self.config.control_interval)
        self.spans = job_spans()  # None without OpenTelemetry (tracing.py)

    def due(self) -> bool:
        """Whether what waits to be written (successes, an atomic group) should be now."""
        return self.outcomes.due() or self.atomic.due()

    def settle(self) -> None:
        """Write what waits: commit the atomic group, flush the successes. A
        group and waiting successes never coexist (each is settled before
        the other starts), so outcomes reach the database in order."""
        self.atomic.commit()
        self.outcomes.flush()

    def integers(self) -> Integers:
        """The integers a result may hold (MySQL's JSON rounds wider ones), asked once."""
        if not hasattr(self, "_integers"):
            self._integers = exact_integers(connections[self.backend.database])
        return self._integers

    def release(self, ids: list[int]) -> int:
        """Give this worker's claimed jobs back to the queue, attempts unspent.
        A deadlock is run again, as a claim's is: seen on MySQL as workers
        came back together from a failover and the hold watch gave back a
        batch while the others claimed."""
        from ...models import Job

        jobs, rates = Job.objects.using(self.backend.database), self.backend.config.RATE_LIMITS
        return retry_on_conflict(lambda: jobs.release(self.owner, ids, rates), self.backend.database)

    def run(self, job: Job, batched: bool = True) -> str:
        """Run ``job`` and record its outcome; returns its new status, or
        GIVEN_BACK (undeployed.py) or INTERRUPTED (stops.py). ``batched``:
        a success may wait in the buffer for its batch-mates."""
        self.control.begin(job)
        try:
            return self._run(job, batched)
        finally:
            self.control.end()

    def _run(self, job: Job, batched: bool) -> str:
        # A row written by hand may hold any JSON in these; the outcome appends.
        job.errors, job.worker_ids = as_list(job.errors), as_list(job.worker_ids)
        self.started = started = self.clock.now()
        ended = end_unstarted(self, job, started)  # a cancel asked before it started, or its deadline past
        if ended is not None:
            return ended
        # Failures are recorded outside the except blocks: recording flushes
        # the batch's waiting successes, whose task_finished must not carry
        # this job's exception (Django's log receiver attaches the one being
        # handled, as the traceback of whatever job it logs).
        unrunnable: JobNotRunnable | None
        try:
            task = resolve(job)
        except JobNotRunnable as exc:
            unrunnable = exc
        else:
            unrunnable = None
        if isinstance(unrunnable, TaskNotDeployed):  # this worker's code may be older (undeployed.py)
            return give_back_or_fail(self, job, started, unrunnable)
        if unrunnable is not None:
            return self.fail(job, started, unrunnable, final=True)
        if getattr(task, "atomic", False):
            self.control.atomic = True
            return run_atomic(self, job, task, started)
        self.atomic.commit()  # an atomic group's outcomes first, in the order they happened
        value, raised = self.call(job, task, started)
        if raised is not None:
            return self.fail(job, started, raised, final=False, task=task)
        try:
            value, size = check_return_value(value, self.config.MAX_RETURN_BYTES, self.integers())
        except Exception as exc:  # ResultNotStorable, or a value whose own methods raise
            refused: BaseException | None = not_storable(exc)
        else:
            refused = None
        if refused is not None:
            # Running it again would return the same kind of value.
            return self.fail(job, started, refused, final=True, task=task)
        success = Finished(job, started, self.clock.now(), return_value=value, size=size)
        if batched and not job.suspect:
            self.outcomes.add(success, task, self.running)  # written, and task_finished sent, at its flush
            return Status.SUCCESSFUL
        self.settle()  # outcomes reach the database in the order they happened
        self.record(success)
        self.finished(job, task)
        return success.status

    def call(self, job: Job, task: Task, started: Any) -> tuple[Any, BaseException | None]:
        """Call the task: ``(return value, None)``, or ``(None, what it raised)``."""
        try:
            self.running = result = self.backend.results.to_result(started_view(job, started), task)
            task_started.send(type(self.backend), task_result=result)
            args: list[Any] = [TaskContext(task_result=result), *job.args] if task.takes_context else job.args
            timeout = getattr(task, "timeout", None) or self.config.JOB_TIMEOUT
            control = self.control
            # current_batch() and current_job() read it; the span (if tracing) sees the task's exception
            with running_job(job, control), self.spans(job) if self.spans else NO_SPAN:
                control.in_task = True
                try:
                    return call_with_limit(task.func, args, job.kwargs, timeout, control), None
                finally:
                    control.in_task = False
        except ForcedStop:
            raise
        except BaseException as exc:  # the task's own SystemExit, KeyboardInterrupt, CancelledError too
            return None, exc

    def fail(
        self,
        job: Job,
        started: Any,
        exc: BaseException,
        *,
        final: bool,
        task: Task | None = None,
        why: str | None = None,
    ) -> str:
        """Record a failed attempt: READY again after a backoff, or FAILED
        (``why``: the reason it is not retried); or a job stopped on purpose
        (stops.py), CANCELLED or interrupted; or a snooze (snoozing.py)."""
        stop = stop_kind(self.control, exc) if task is not None else None
        if stop is not None and task is not None:
            return record_stop(self, stop, job, started, exc, task)
        if isinstance(exc, Snooze) and not final:
            return snooze_or_fail(self, job, started, exc, task)
        self.settle()
        attempts = attempts_after(job)
        outcome = Finished(job, started, self.clock.now(), status=Status.FAILED, error=error_entry(exc, self))
        unsaved = self.control.unsaved()  # the attempt's last position, if not written yet
        if unsaved is not None:
            outcome.checkpoint = unsaved
        not_retried = why
        if not_retried and outcome.error is not None:
            outcome.error["not_retried"] = not_retried
        if not final and attempts < job.max_attempts:
            verdict = after_failure(task, exc, attempts, self._default_backoff)
            if verdict.delay is not None:
                outcome.status, outcome.retry_in = Status.READY, verdict.delay
            elif outcome.error is not None and verdict.not_retried:
                not_retried = outcome.error["not_retried"] = verdict.not_retried
        self.record(outcome)
        log_failure(job, attempts, outcome, exc, not_retried)
        if task is not None:
            self.finished(job, task, exc)
        return outcome.status

    def _default_backoff(self, attempt: int) -> float:
        """The backend's backoff, for a task that names none."""
        config = self.config
        return retry_delay(attempt, config.RETRY_BACKOFF_BASE, config.RETRY_BACKOFF_MAX).total_seconds()

    def abandon(self, job: Job, started: Any) -> None:
        """The job in hand when the worker was stopped at once: its attempt
        counts (it ran), and it is due again at once unless that was its last."""
        stop = WorkerStopped(
            "The worker was stopped at once (a second signal or SIGQUIT) while running this job."
        )
        attempts = attempts_after(job)
        status = Status.READY if attempts < job.max_attempts else Status.FAILED
        self.record(Finished(job, started, self.clock.now(), status=status, error=error_entry(stop, self)))

    def record(self, outcome: Finished) -> int:
        """Write one outcome through outages; a write the database refuses
        becomes a FAILED job saying so, never a retry loop."""
        from ...models import Job

        jobs = Job.objects.using(self.backend.database)
        note_dropped(outcome, self.control)  # a checkpoint that cannot be stored: why not
        try:
            updated = self.writes(lambda: jobs.record(self.owner, outcome))
        except REFUSED as exc:
            if isinstance(exc, DB_ERRORS) and is_outage(exc, self.backend.database):
                raise
            drop_connection(self.backend.database)
            updated = record_refused(self, outcome, exc)
        if not updated:
            logger.warning(
                "Job %s finished (%s) after its lease was lost, so the outcome was not "
                "recorded; the job will run again (delivery is at least once).",
                outcome.job.pk,
                outcome.status,
            )
        return updated

    def finished(self, job: Job, task: Task, exc: BaseException | None = None) -> None:
        """Send ``task_finished``. For a failure, from inside a handler of
        its own exception: Django's log receiver attaches the traceback it
        finds there, so it must be this job's, and a success's must be none."""
        result = self.backend.results.to_result(job, task)
        if exc is None:
            task_finished.send(type(self.backend), task_result=result)
            return
        try:
            raise exc
        except BaseException:
            task_finished.send(type(self.backend), task_result=result)


def started_view(job: Job, started: Any) -> Job:
    """A copy of the job as it looks while running, for the signals."""
    # A shallow copy through __dict__: copy.copy() of a model goes through
    # pickling hooks and showed in the worker's profile.
    view = type(job).__new__(type(job))
    view.__dict__.update(job.__dict__)
    view.started_at = job.started_at or started
    view.last_attempted_at = started
    if not job.suspect:  # a suspect's attempt was counted in its claim
        view.worker_ids = [*job.worker_ids, job.owner]
        view.attempts = job.attempts + 1
    return view
