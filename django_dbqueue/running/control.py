"""The link between a worker and the task it runs: the worker makes one
:class:`JobControl` and tells it of each job it starts and ends (a few
attribute writes, no query, no system call); ``current_job()`` finds it in
a context variable and makes the task's RunningJob from it on first use."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from django.db import connections

from .job import RunningJob, controls

__all__ = ["JobControl", "controls"]

if TYPE_CHECKING:
    from ..models import Job
    from ..worker.shared import Slot


class JobControl:
    """The worker's side of the job in hand, which the task's RunningJob
    shares: made once per worker (JobRunner), told of each job it runs.

    Written by the worker's threads: ``stopping`` (JobCancelled or
    JobInterrupted) when the worker decided to stop the task itself,
    ``coroutine`` (the event loop and task of an ``async def`` job) so that
    the worker can cancel it, ``lease_lost`` when a write found the job gone.
    ``begin()`` and ``end()`` run for every job: they stay a few stores."""

    __slots__ = (
        "atomic",
        "base_depth",
        "coroutine",
        "database",
        "in_task",
        "interval",
        "job",
        "lease_lost",
        "owner",
        "slot",
        "stopping",
        "task",
    )

    def __init__(self, owner: str, database: str, slot: Slot | None, interval: float) -> None:
        self.owner, self.database, self.slot, self.interval = owner, database, slot, interval
        # The transactions open where the worker was made (a test's, for
        # run_due_jobs()): a checkpoint inside more than these is inside
        # the task's own (or an atomic task's) transaction.
        self.base_depth = len(connections[database].atomic_blocks)
        self.job: Job | None = None
        self.task: RunningJob | None = None
        self.atomic = False
        self.in_task = False
        self.stopping: type[BaseException] | None = None
        self.coroutine: tuple[asyncio.AbstractEventLoop, asyncio.Task] | None = None
        self.lease_lost = False

    def begin(self, job: Job) -> None:
        self.job = job
        if self.slot is not None:
            self.slot.job_id = job.id

    def end(self) -> None:
        if self.slot is not None:
            self.slot.job_id = 0
        self.job = None
        # What only a job that used or met control set (rare) is reset here.
        if self.task is not None or self.stopping is not None or self.lease_lost or self.atomic:
            self.task = self.stopping = None
            self.lease_lost = self.atomic = False

    def running(self) -> RunningJob | None:
        if self.task is None and self.job is not None:
            self.task = RunningJob(self, self.job)
        return self.task

    def cancel_posted(self) -> bool:
        """Whether the heartbeat posted a cancel for the job in hand."""
        return self.slot is not None and self.job is not None and self.slot.cancel_posted()[0] == self.job.pk

    def unsaved(self) -> dict[str, Any] | None:
        """The checkpoint the task recorded and did not write yet, to be
        written with the attempt's outcome (None: nothing). Never in an
        atomic task: its transaction was rolled back, checkpoints included."""
        task = self.task
        if task is None or self.atomic:
            return None
        return task._checkpoints.unsaved()

    def dropped(self, job: Job) -> str | None:
        """Why the last unsaved checkpoint of ``job`` (the job in hand) was
        dropped by ``unsaved()`` as one that cannot be stored; None if not."""
        task = self.task
        if task is None or self.job is not job:
            return None
        return task._checkpoints.dropped
