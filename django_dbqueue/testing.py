"""Testing tasks without worker processes: ``run_due_jobs()`` claims the
due jobs and runs them in this process, through the worker's own claim and
JobRunner (the same signals, time limits, retries and recorded outcomes),
inside a ``TestCase`` or a pytest-django test.

The pytest fixture of the same name comes with the package (a pytest11
entry point, django_dbqueue.pytest_plugin)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .routing import is_queue_backend
from .tasks_api import DEFAULT_TASK_BACKEND_ALIAS, TaskResult, task_backends

if TYPE_CHECKING:
    from .models import Job
    from .transitions import JobQuerySet

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
    claim order, until none is due; return the runs in order. A failed job
    whose retry waits out a backoff is not due, so it ends READY; call again
    (after its ``run_after``) to run the retry. ``queues``: the backend's
    QUEUES by default.

    Jobs with a rate, fairness or concurrency key run too: one job at a
    time has no rate or share to pace. A concurrency key whose slots are
    all held by RUNNING jobs this call did not run (a worker's, or rows the
    test made) keeps its jobs READY, and a warning names them."""
    from .models import Job
    from .worker.process.execution import JobRunner

    queue_backend = task_backends[backend]
    if not is_queue_backend(queue_backend):
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
    full: dict[str, list[int]] = {}  # concurrency keys whose slots others hold, and their due jobs
    while len(ran) < max_runs:
        job = _claim_next(jobs, queues, owner, queue_backend.config.LEASE_SECONDS, full)
        if job is None:
            break
        runner.run(job, batched=False)
        job.refresh_from_db(using=queue_backend.database)
        try:
            result = queue_backend.results.to_result(job)
        except LookupError:  # a row whose task path names no task it may load
            result = None
        ran_id = queue_backend.results.result_id(job.pk)
        ran.append(RanJob(ran_id, job.task_path, str(job.status), job.attempts, result))
    for key, left in full.items():
        _warn_left(jobs, key, left, queue_backend.results.result_id)
    return ran


def _claim_next(
    jobs: JobQuerySet, queues: list[str], owner: str, lease: float, full: dict[str, list[int]]
) -> Job | None:
    """Claim the first due job of ``queues`` in claim order, whatever its
    keys, leaving out the jobs of the concurrency keys in ``full``; a key
    found with no free slot is added there with its due jobs."""
    from .transitions import CLAIM_ORDER

    due = jobs.filter(queue_name__in=queues).due().order_by(*CLAIM_ORDER)
    while True:
        left = [pk for pks in full.values() for pk in pks]
        first = due.exclude(pk__in=left).values_list("pk", "concurrency_key").first()
        if first is None:
            return None
        pk, key = first
        if key is None:  # another connection may hold it locked: then stop, as a claim of none would
            claimed = jobs.lock_and_mark(due.filter(pk=pk), owner, lease, 1)
            return claimed[0] if claimed else None
        # Its limit counts the RUNNING jobs of the key, wherever they run.
        claimed = jobs.claim_limited(owner, queues, [key], lease)
        if claimed:
            return claimed[0]
        full[key] = list(due.filter(concurrency_key=key).values_list("pk", flat=True))


def _warn_left(jobs: JobQuerySet, key: str, left: list[int], shown: Callable[[int], str]) -> None:
    held = jobs.running().filter(concurrency_key=key).order_by("pk").values_list("pk", flat=True)
    warnings.warn(
        f"run_due_jobs() left {len(left)} due job{'s' if len(left) != 1 else ''} READY: their concurrency "
        f"key {key!r} has all its slots taken by RUNNING jobs it did not run "
        f"({', '.join(map(shown, held))}). Left: {', '.join(map(shown, left))}. Finish or cancel the "
        "RUNNING ones first.",
        stacklevel=3,
    )
