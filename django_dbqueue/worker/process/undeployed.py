"""A claimed job whose task this worker's code lacks: the module of its
task path imports, but does not define the name. During a rolling deploy
the hosts that enqueue may run newer code than this worker, so that is not
a bad row but a task "not deployed here yet" (docs/deploys.md).

The job goes back to the queue, its attempt unspent (transitions/deploys.py),
due again after a delay that doubles at each give-back (so that this worker
does not claim it again at every poll), until OPTIONS
UNDEPLOYED_TASK_GRACE_SECONDS have passed since its first give-back: then it
fails, naming the workers that lacked it. Each give-back rewrites one entry
of the job's errors, which carries that count (when it began, how many,
which workers): no column of its own, and nothing written beside the job.

A path whose module does not import, or that the allow-list refuses, is
still a bad row and fails at once (resolving.py). A give-back is no run:
the loop counts it neither as processed nor as failed (loop.py).
"""

from __future__ import annotations

import logging
import random
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import DataError, IntegrityError

from ...db import DB_ERRORS, StatementRefused, doubled, drop_connection, is_outage
from ...exceptions import TaskNotDeployed
from ...status import Status
from ...transitions import TASK_NOT_DEPLOYED, Finished, undeployed_note, without_undeployed_note
from .contract import error_entry

if TYPE_CHECKING:
    from ...models import Job
    from .contract import Runner

logger = logging.getLogger("django_dbqueue")

# What runner.run() returns for a job given back: not a status, nothing ran.
GIVEN_BACK = "GIVEN_BACK"
# Seconds until a given-back job is due again: doubling from FIRST_DELAY, at most MAX_DELAY.
FIRST_DELAY = 2.0
MAX_DELAY = 30.0
# Worker names kept in the give-backs' entry (a fleet may have many).
MAX_NAMED = 20

_warned: set[str] = set()  # task paths this process has warned about


def give_back_or_fail(runner: Runner, job: Job, started: Any, missing: TaskNotDeployed) -> str:
    """Give ``job`` back for a worker that has its task, or fail it once the
    grace ran out; GIVEN_BACK or the status recorded."""
    from ...models import Job

    runner.settle()  # outcomes reach the database in the order they happened
    now = runner.clock.now()
    note = undeployed_note(job.errors)
    since = _since(note, now)
    count = _count(note) + 1
    workers = _workers(note, runner.owner)
    grace = runner.config.UNDEPLOYED_TASK_GRACE_SECONDS
    if (now - since).total_seconds() >= grace:
        return _fail(runner, job, started, missing, since, workers)
    entry = {
        "exception_class_path": TASK_NOT_DEPLOYED,
        "traceback": (
            f"{TASK_NOT_DEPLOYED}: {missing} Given back {count} time{'' if count == 1 else 's'} since "
            f"{since.isoformat()}, its attempt unspent, by workers whose code lacks the task: "
            f"{', '.join(workers)}. It fails if no worker has run it {grace:g}s after that "
            "(OPTIONS UNDEPLOYED_TASK_GRACE_SECONDS).\n"
        ),
        "at": now.isoformat(),
        "worker": runner.owner,
        "since": since.isoformat(),
        "given_back": count,
        "workers": workers,
    }
    jobs = Job.objects.using(runner.backend.database)
    try:
        held = runner.writes(lambda: jobs.give_back_undeployed(runner.owner, job, entry, _delay(count)))
    except (*DB_ERRORS, IntegrityError, DataError, StatementRefused) as exc:
        if isinstance(exc, DB_ERRORS) and is_outage(exc, runner.backend.database):
            raise
        # Refused (the row holds what cannot be written back): a failure, whose write has a fallback.
        drop_connection(runner.backend.database)
        return runner.fail(job, started, missing, final=True)
    if held:
        _log(job, since + timedelta(seconds=grace))
    return GIVEN_BACK


def _fail(
    runner: Runner, job: Job, started: Any, missing: TaskNotDeployed, since: datetime, workers: list[str]
) -> str:
    grace = runner.config.UNDEPLOYED_TASK_GRACE_SECONDS
    error = TaskNotDeployed(
        f"{missing} No worker that claimed the job since {since.isoformat()} defines the task, and "
        f"OPTIONS UNDEPLOYED_TASK_GRACE_SECONDS ({grace:g}s) ran out; the workers that lacked it: "
        f"{', '.join(workers)}. Deploy the code that defines it to them, then requeue the job."
    )
    job.errors = without_undeployed_note(job.errors)  # the failure's entry says it all
    outcome = Finished(job, started, runner.clock.now(), status=Status.FAILED, ran=False)
    outcome.error = error_entry(error, runner)
    runner.record(outcome)
    logger.error("Job %s (%s) failed: %s", job.pk, job.task_path, error)
    return Status.FAILED


def _since(note: dict[str, Any] | None, now: datetime) -> datetime:
    """When the give-backs began: the entry's, if it reads as a time of the
    same kind as ``now`` and is not in its future (a row may hold anything)."""
    try:
        since = datetime.fromisoformat(str(note["since"])) if note else now
        return min(since, now)
    except (ValueError, TypeError):  # not a time, or naive against aware
        return now


def _count(note: dict[str, Any] | None) -> int:
    value = note.get("given_back") if note else 0
    return value if isinstance(value, int) and 0 <= value < 10**9 else 0


def _workers(note: dict[str, Any] | None, owner: str) -> list[str]:
    named = note.get("workers") if note else None
    workers = [str(name) for name in named if isinstance(name, str)] if isinstance(named, list) else []
    if owner not in workers:
        workers.append(owner)
    return workers[-MAX_NAMED:]


def _delay(count: int) -> timedelta:
    """Doubling with the count, with jitter, so given-back jobs do not come back in step."""
    ceiling = doubled(FIRST_DELAY, count - 1, MAX_DELAY)
    return timedelta(seconds=random.uniform(ceiling / 2, ceiling))


def _log(job: Job, fails_at: datetime) -> None:
    log = logger.debug if job.task_path in _warned else logger.warning
    _warned.add(job.task_path)
    log(
        "Job %s (%s): this worker's code does not define the task, though its module imports (a "
        "rolling deploy?). The job goes back to the queue, its attempt unspent, for a worker that "
        "has it; it fails if none has run it by %s.",
        job.pk,
        job.task_path,
        fails_at.isoformat(),
    )
