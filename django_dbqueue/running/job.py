"""The job a worker is running, as its task sees it: ``current_job()``.

Nothing here costs a task that does not call it: the worker hands over a
:class:`JobControl` per job (no query, no system call), and the
:class:`RunningJob` is made on the task's first ``current_job()``. A cancel
request and a stopping worker are read from memory the worker shares with
its heartbeat; progress is written there, and the heartbeat writes it to the
row every CONTROL_INTERVAL. Only checkpoints are written by the task itself,
at most once per CONTROL_INTERVAL, on the worker's lease.
"""

from __future__ import annotations

import asyncio
import math
import numbers
import re
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from ..clock import elapsed
from ..enqueue.metadata import as_metadata
from ..exceptions import JobCancelled, JobInterrupted
from .checkpoints import Checkpoints, Step

if TYPE_CHECKING:
    from ..models import Job
    from .control import JobControl


# Set by the worker around each task it calls (workflows/context.py, running_job()).
controls: ContextVar[JobControl | None] = ContextVar("dbqueue_job_control", default=None)


def current_job() -> RunningJob | None:
    """The job this worker is running, from inside its task (and from any
    code the task calls, in its thread or its coroutines); None elsewhere,
    such as in ``task.call()`` or Django's ImmediateBackend."""
    control = controls.get()
    return control.running() if control is not None else None


class RunningJob:
    """The job a worker is running: ``current_job()`` inside its task.

    ``id``: the job's primary key; ``attempt``: this attempt's number (1 on
    the first run); ``interruptions``: how often a stopping worker gave it
    back before; ``snoozes``: how often the task snoozed it (``Snooze``);
    ``metadata``: the job's metadata as enqueued (a dict, ``{}`` for none,
    and for a row whose metadata is not a JSON object).
    ``progress()``, ``check()``, ``checkpoint()`` and the steps
    raise :class:`~django_dbqueue.exceptions.JobCancelled` once a cancel was
    asked for the job, and :class:`~django_dbqueue.exceptions.JobInterrupted`
    once its worker is stopping past its STOP_TIMEOUT; both are
    BaseExceptions, which ``except Exception:`` lets through."""

    def __init__(self, control: JobControl, job: Job) -> None:
        self._control, self._job = control, job
        self.id: int = job.pk
        self.attempt: int = job.attempts if job.suspect else job.attempts + 1
        self.interruptions: int = job.interruptions
        self.snoozes: int = job.snoozes
        self.metadata: dict[str, Any] = as_metadata(job.metadata)
        self._checkpoints = Checkpoints(job.pk, job.checkpoint, control)
        self._step: str | None = None  # the step running now
        self._reported_at = -math.inf  # without a heartbeat: the last progress write

    def __repr__(self) -> str:
        return f"<RunningJob {self.id}, attempt {self.attempt}>"

    # -- cancel and stop ---------------------------------------------------------

    def cancel_requested(self) -> bool:
        """Whether a cancel was asked for this job (read from memory, no query)."""
        return self._control.cancel_posted()

    def check(self) -> None:
        """Raise JobCancelled if a cancel was asked for this job, or
        JobInterrupted if its worker is stopping and its STOP_TIMEOUT ran out."""
        slot = self._control.slot
        if slot is None:
            return
        if slot.cancel_posted()[0] == self.id:
            raise JobCancelled(f"Job {self.id} was cancelled while running.")
        deadline = slot.stop_deadline
        if deadline and elapsed() >= deadline:
            raise JobInterrupted(
                f"Job {self.id} was interrupted: its worker is stopping and its STOP_TIMEOUT ran "
                "out. It goes back to the queue, its attempt unspent, and resumes from its last checkpoint."
            )

    def progress(self, fraction: float | None = None, message: str | None = None) -> None:
        """Report how far the job is: ``fraction`` done (0.0 to 1.0) and/or a
        ``message`` (at most 255 characters are kept, a lone surrogate as
        U+FFFD); None keeps the last one. Costs a few memory writes: the
        heartbeat writes the latest report to the row every CONTROL_INTERVAL.
        Then ``check()``."""
        fraction, message = reported(fraction, message)
        slot = self._control.slot
        if slot is not None:
            slot.report_progress(self.id, fraction, message)
        elif asyncio._get_running_loop() is None:
            self._report_to_row(fraction, message)
        self.check()

    def _report_to_row(self, fraction: float | None, message: str | None) -> None:
        """No heartbeat shares this worker's memory (``run_due_jobs()``):
        write the report itself, at most once per CONTROL_INTERVAL."""
        now = time.monotonic()
        if now - self._reported_at >= self._control.interval:
            self._reported_at = now
            self._rows().save_progress(self._control.owner, self.id, fraction, message)

    # -- checkpoints ---------------------------------------------------------------

    @property
    def cursor(self) -> Any:
        """The saved position of the step running now (outside any step: of
        the job), from an earlier attempt or from ``checkpoint()``; None if none."""
        doc = self._checkpoints.doc
        return doc.cursor if doc.step == self._step else None

    @property
    def steps_done(self) -> tuple[str, ...]:
        """The steps completed, in this attempt or an earlier one."""
        return tuple(self._checkpoints.doc.done)

    def checkpoint(self, cursor: Any, *, save: bool = False) -> None:
        """Record the position reached (any JSON value) for the step running
        now (outside any step: for the job), then ``check()``. It is written
        with the job, on the worker's lease, at most once per
        CONTROL_INTERVAL (``save=True``: now); the last one not written yet
        is written with the outcome when the attempt fails or is interrupted.
        Inside a transaction (yours, or an ``atomic=True`` task's) it is kept
        in memory only: take the checkpoint after the commit. In an
        ``async def`` task, ``await acheckpoint()``."""
        self._sync_only("checkpoint", "acheckpoint")
        checkpoints = self._checkpoints
        checkpoints.move(self._step, cursor, self._in_transaction())
        if checkpoints.due(save):
            self._write()
        self.check()

    async def acheckpoint(self, cursor: Any, *, save: bool = False) -> None:
        """``checkpoint()`` for an ``async def`` task."""
        checkpoints = self._checkpoints
        checkpoints.move(self._step, cursor, self._control.atomic)
        if checkpoints.due(save):
            await sync_to_async(self._write)()
        self.check()

    def checkpoint_with(self, cursor: Any, fraction: float | None = None, message: str | None = None) -> None:
        """Write the position reached as part of the transaction open now on
        the queue's database, for work that lives there too: the position
        commits with the work it describes, or neither does, so a resumed
        attempt neither redoes nor skips any of it (the queue's own
        operations, operations/big.py, move their chunks so). Raises
        JobInterrupted, which rolls that transaction back, if the worker no
        longer holds the job. The row stays locked until the commit, its
        heartbeat with it: keep such transactions short. ``fraction`` and
        ``message``: the progress, written with it (as ``progress()``
        reports it), so that the job's page shows it even when the job ends
        before the heartbeat's next write."""
        self._sync_only("checkpoint_with", "checkpoint_with")
        checkpoints = self._checkpoints
        doc = checkpoints.doc
        doc.step, doc.cursor = self._step, cursor
        checkpoints.tainted, checkpoints.held_back, checkpoints.dirty = False, None, True
        self._write()
        if fraction is not None or message is not None:
            fraction, message = reported(fraction, message)
            self._rows().save_progress(self._control.owner, self.id, fraction, message)
            slot = self._control.slot
            if slot is not None:
                slot.report_progress(self.id, fraction, message)

    def flush(self) -> None:
        """Write the last recorded position now, if it was not written yet
        (not inside a transaction: see ``checkpoint()``)."""
        self._sync_only("flush", "aflush")
        if self._checkpoints.dirty and self._checkpoints.due(save=True):
            self._write()

    async def aflush(self) -> None:
        """``flush()`` for an ``async def`` task."""
        if self._checkpoints.dirty and self._checkpoints.due(save=True):
            await sync_to_async(self._write)()

    def step(self, name: str, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``func(step, *args, **kwargs)`` as the step ``name``, unless an
        earlier attempt of this job completed it; then it is not run again,
        and None is returned (steps pass results on through the database,
        not through return values). ``step.cursor`` is where an interrupted
        or failed attempt left the step (None the first time);
        ``step.advance(cursor)`` records a new position. The step counts as
        completed when ``func`` returns, and that is written at once (after
        the commit, inside a transaction)."""
        self._sync_only("step", "astep")
        step = self._enter(name)
        if step is None:
            return None
        try:
            result = func(step, *args, **kwargs)
        finally:
            self._step = None
        self._checkpoints.complete(name, self._in_transaction())
        if self._checkpoints.due(save=True):
            self._write()
        self.check()
        return result

    async def astep(
        self, name: str, func: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any
    ) -> Any:
        """``step()`` for an ``async def`` task, whose ``func`` is ``async def``
        too (and calls ``await step.aadvance(cursor)``)."""
        step = self._enter(name)
        if step is None:
            return None
        try:
            result = await func(step, *args, **kwargs)
        finally:
            self._step = None
        self._checkpoints.complete(name, self._control.atomic)
        if self._checkpoints.due(save=True):
            await sync_to_async(self._write)()
        self.check()
        return result

    def _enter(self, name: str) -> Step | None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"A step's name must be a non-empty string, not {name!r}.")
        if self._step is not None:
            raise RuntimeError(
                f"The step {name!r} was started inside the step {self._step!r}: steps do not "
                "nest. Run them one after the other."
            )
        doc = self._checkpoints.doc
        if name in doc.done:
            return None
        self._step = name
        return Step(self, name)

    def _in_transaction(self) -> bool:
        return self._control.atomic or self._checkpoints.in_transaction()

    def _write(self) -> None:
        if not self._checkpoints.write():
            self._control.lease_lost = True
            raise JobInterrupted(
                f"Job {self.id} was interrupted: its worker no longer holds it (it was paused or cut "
                "off past its lease, and the job was recovered), so its checkpoint was not saved."
            )

    def _rows(self) -> Any:
        from ..models import Job

        return Job.objects.using(self._control.database)

    def _sync_only(self, name: str, instead: str) -> None:
        if asyncio._get_running_loop() is not None:
            raise RuntimeError(
                f"RunningJob.{name}() writes to the database, which an async task may not do "
                f"from its event loop: use `await job.{instead}(...)`."
            )


# A lone surrogate: valid in a Python str, but no database stores it as text.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def reported(fraction: Any, message: Any) -> tuple[float | None, str | None]:
    """A progress report as it is kept: TypeError, before anything is
    written, for what is not a number or a text; a lone surrogate in the
    message as U+FFFD (a message describes, and must never fail the job)."""
    if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, numbers.Real)):
        raise TypeError(f"progress() takes a fraction from 0.0 to 1.0, or None, not {fraction!r:.100}.")
    if message is not None and not isinstance(message, str):
        raise TypeError(f"progress() takes a message as a str, or None, not {message!r:.100}.")
    text = None if message is None else LONE_SURROGATE.sub("\ufffd", message)
    return (None if fraction is None else float(fraction)), text
