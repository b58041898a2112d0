"""Testing tasks without worker processes: ``run_due_jobs()`` claims the
due jobs and runs them in this process, through the worker's own claim and
JobRunner (the same signals, time limits, retries and recorded outcomes),
inside a ``TestCase`` or a pytest-django test.

The pytest fixture of the same name comes with the package (a pytest11
entry point, django_dbqueue.pytest_plugin)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .tasks_api import DEFAULT_TASK_BACKEND_ALIAS, TaskResult, task_backends

# A guard against a task that enqueues itself: the loop stops after this many runs.
MAX_RUNS = 1000


@dataclass(frozen=True)
class RanJob:
    """One run of one job: which, and how it ended. ``status`` is the job's
    status after the run: SUCCESSFUL, FAILED, or READY (it failed and will be
    retried after its backoff). ``result`` is the job's TaskResult as stored
    then (``result.return_value``, ``result.errors``); None for a row whose
    task path names no task (it ends FAILED without running). ``id`` is the
    job's result id, as ``result.id`` and ``enqueue()`` give it: ``"17"`` on
    the home database, ``"reports:17"`` on the backend ``reports`` elsewhere."""

    id: str
    task_path: str
    status: str
    attempts: int
    result: TaskResult | None

    @property
    def return_value(self) -> Any:
        if self.result is None:
            raise ValueError(f"The job {self.id} names no task that may be loaded: {self.task_path!r}.")
        return self.result.return_value


def run_due_jobs(
    *, backend: str = DEFAULT_TASK_BACKEND_ALIAS, queues: list[str] | None = None, max_runs: int = MAX_RUNS
) -> list[RanJob]:
    """Run every job that is due now (and any job those enqueue, once due) in
    the order a worker would, until none is due; return the runs in order. A
    failed job whose retry waits out a backoff is not due, so it ends READY;
    call again (after its ``run_after``) to run the retry. ``queues``: the
    backend's QUEUES by default."""
    from .backend import DatabaseBackend
    from .claiming import claim_from_queues
    from .models import Job
    from .worker.execution import JobRunner

    queue_backend = task_backends[backend]
    if not isinstance(queue_backend, DatabaseBackend):
        raise TypeError(
            f"run_due_jobs() runs the jobs of a django_dbqueue DatabaseBackend, but the task backend "
            f"{backend!r} is {type(queue_backend).__name__}: Django's ImmediateBackend runs each "
            "task when it is enqueued, and its DummyBackend never runs them."
        )
    if max_runs < 1:
        raise ValueError(f"max_runs must be at least 1, not {max_runs!r}.")
    queues = list(queues or sorted(queue_backend.queues) or ["default"])
    owner = f"testing-{os.getpid()}"
    runner = JobRunner(queue_backend, owner)
    jobs = Job.objects.using(queue_backend.database)
    ran: list[RanJob] = []
    while len(ran) < max_runs:
        claimed = claim_from_queues(jobs, queues, owner, 1, queue_backend.config.LEASE_SECONDS)
        if not claimed:
            break
        job = claimed[0]
        runner.run(job, batched=False)
        job.refresh_from_db(using=queue_backend.database)
        try:
            result = queue_backend.to_result(job)
        except LookupError:  # a row whose task path names no task it may load
            result = None
        ran_id = queue_backend.result_id(job.pk)
        ran.append(RanJob(ran_id, job.task_path, str(job.status), job.attempts, result))
    return ran
