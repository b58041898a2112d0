"""Atomic tasks: the task's body and its job's success in one transaction.

At least once is the honest guarantee for arbitrary side effects. But a task
whose effects are writes to the queue's own database can have them exactly
once: run the body inside a transaction on that database, and record the
job SUCCESSFUL in the same transaction, on the condition that this worker
still holds the job (owner and RUNNING, as every outcome is recorded). Then
whatever happens, the body's writes and the success commit together or not
at all:

- the worker dies (SIGKILL, OOM, the host) or loses the connection before
  the commit: the server rolls both back; the job is recovered and runs
  again, and its effects happen once, in the run that commits;
- the body raises or times out: both roll back, and the failed attempt is
  recorded afterwards, as for any task;
- the lease was lost meanwhile (the worker was paused, another recovered
  the job): the conditional write finds nothing to update, and the body is
  rolled back; the run that holds the job commits its own.

Not covered: anything outside that transaction (email, HTTP, files, other
databases, or a connection the task opens itself). A job's success is not
batched with others: each atomic job commits its own transaction.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.db import transaction

from ..exceptions import ResultNotStorable
from ..payload import check_return_value
from ..status import Status
from ..tasks_api import Task
from ..transitions import Finished

if TYPE_CHECKING:
    from ..models import Job
    from .execution import JobRunner

logger = logging.getLogger("django_dbqueue")


class _RollBack(Exception):
    """Leaves the transaction with what should become the job's failure."""

    def __init__(self, cause: BaseException, final: bool) -> None:
        super().__init__(str(cause))
        self.cause, self.final = cause, final


class _LeaseLost(Exception):
    pass


def run_atomic(runner: JobRunner, job: Job, task: Task, started: Any) -> str:
    """Run an ``atomic=True`` task and record its outcome (see the module)."""
    from ..models import Job

    database = runner.backend.database
    runner.outcomes.flush()  # earlier successes first, in the order they happened
    try:
        with transaction.atomic(using=database):
            value, raised = runner.call(job, task, started)
            if raised is not None:
                raise _RollBack(raised, final=False)
            try:
                value, size = check_return_value(value, runner.config.MAX_RETURN_BYTES)
            except ResultNotStorable as exc:
                raise _RollBack(exc, final=True) from None
            success = Finished(job, started, runner.clock.now(), return_value=value, size=size)
            if not Job.objects.using(database).record(runner.owner, success):
                raise _LeaseLost
    except _RollBack as rolled_back:
        cause = rolled_back.cause
        return runner.fail(job, started, cause, final=rolled_back.final, task=task)
    except _LeaseLost:
        logger.warning(
            "Job %s finished after its lease was lost, so its transaction was rolled back: its "
            "database effects are those of the run that holds the job.",
            job.pk,
        )
        return Status.RUNNING
    runner.finished(job, task)
    return Status.SUCCESSFUL
