"""Successes waiting to be recorded together: one UPDATE per batch, not per job.

A worker that runs a batch of quick jobs would otherwise spend most of its
time on one UPDATE (and one commit) per job. Successes are the common outcome
and carry little per-job data, so they wait here and are written together
(``JobQuerySet.record_successes``); failures and retries are recorded at once.

Why this keeps the delivery guarantee: an outcome is only ever added after
its job ran, so no job can be marked SUCCESSFUL without having run. If the
worker dies before a flush, those jobs are still RUNNING under its name; when
the lease runs out, recovery returns them as suspects and they run again
(at least once, as before). And one job's outcome never costs its
batch-mates theirs: a statement the database refuses is split, each success
written alone, and only the one it still refuses becomes a failure. A job
whose failure is refused too (what its outcome sets off in workflows cannot
be written) is left RUNNING for lease recovery, which isolates it in turn;
its batch-mates are written first, and only then does the worker give up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError

from ...db import DB_ERRORS, StatementRefused, drop_connection, is_outage
from ...tasks_api import API_MODULE, Task, task_finished
from ...transitions import Finished, statements

if TYPE_CHECKING:
    from ...backend import DatabaseBackend
    from ...db import DurableWrites

logger = logging.getLogger("django_dbqueue")

# What a write may fail with besides an outage: every database error (a
# value refused, a packet too big, PostgreSQL's ProgrammingError for an
# exception raised by a trigger), and a value Python cannot encode.
REFUSED = (DatabaseError, StatementRefused, ValueError, TypeError)


# Seconds a limited job's success waits to be written with others.
LIMITED_AGE = 0.01


class OutcomeBuffer:
    """Successes of ``owner``'s jobs on ``backend``, written through
    ``writes`` (db.DurableWrites); a success the database refuses within a
    group is written alone by ``record_one``."""

    def __init__(
        self,
        writes: DurableWrites,
        owner: str,
        backend: DatabaseBackend,
        *,
        record_one: Callable[[Finished], int],
        max_jobs: int,
        max_age: float,
    ) -> None:
        self.writes = writes
        self.owner = owner
        self.backend = backend
        self.record_one = record_one
        self.max_jobs = max_jobs
        self.max_age = max_age
        self.pending: list[tuple[Finished, Task, Any]] = []
        self.oldest = 0.0
        self.urgent_since: float | None = None

    def __len__(self) -> int:
        return len(self.pending)

    def add(self, success: Finished, task: Task, running: Any = None) -> None:
        """``running``: the TaskResult its task_started carried, from which
        its task_finished's is made (``backend.results.succeeded``)."""
        if not self.pending:
            self.oldest = time.monotonic()
        self.pending.append((success, task, running))
        # A limited job holds one of its key's slots until its success is
        # written, and others of its key wait for it: it is kept back for
        # LIMITED_AGE at most, not for max_age (one write per limited job
        # would cap a batch of no-ops of many keys at the disk's commit rate).
        if self.urgent_since is None and success.job.concurrency_key is not None:
            self.urgent_since = time.monotonic()

    def due(self) -> bool:
        """Whether enough has waited, by count or by age, to be worth a write."""
        return bool(self.pending) and (
            (self.urgent_since is not None and time.monotonic() - self.urgent_since >= LIMITED_AGE)
            or len(self.pending) >= self.max_jobs
            or time.monotonic() - self.oldest >= self.max_age
        )

    def flush(self) -> int:
        """Write every pending success, then send each one's ``task_finished``
        (so a receiver sees the stored outcome); returns the rows updated."""
        if not self.pending:
            return 0
        from ...models import Job

        database = self.backend.database
        jobs = Job.objects.using(database)
        updated = 0
        unrecorded: dict[int, Exception] = {}  # job id: why neither outcome could be written
        # A flush that fails through an outage keeps what it has not written
        # for the next one; rewriting a group that did get through matches no
        # row, as those rows are no longer RUNNING.
        for group in statements([success for success, _, _ in self.pending]):
            try:
                updated += self.writes(partial(jobs.record_successes, self.owner, group))
            except REFUSED as exc:
                if isinstance(exc, DB_ERRORS) and is_outage(exc, database):
                    raise
                drop_connection(database)
                logger.warning(
                    "The database refused %d outcomes at once (%s); writing them one by one.", len(group), exc
                )
                for success in group:
                    updated += self._alone(success, unrecorded)
        pending = [entry for entry in self.pending if entry[0].job.pk not in unrecorded]
        self.pending = []
        self.urgent_since = None
        if updated < len(pending):
            logger.warning(
                "%d of %d jobs finished after their lease was lost, so their outcome was not "
                "recorded; they will run again (delivery is at least once).",
                len(pending) - updated,
                len(pending),
            )
        sender = type(self.backend)
        if task_finished.has_listeners(sender):
            backend = self.backend
            results = backend.results
            for success, task, running in pending:
                job = success.job
                result = results.succeeded(running, job) if running else results.to_result(job, task)
                task_finished.send(sender, task_result=result)
        if unrecorded:
            raise next(iter(unrecorded.values()))
        return updated

    def _alone(self, success: Finished, unrecorded: dict[int, Exception]) -> int:
        """Write one success; a refusal there becomes that job's failure
        (``record_one``). If that is refused too, the job is noted in
        ``unrecorded`` and its batch-mates are written all the same."""
        try:
            return self.record_one(success)
        except REFUSED as exc:
            if isinstance(exc, DB_ERRORS) and is_outage(exc, self.backend.database):
                raise
            drop_connection(self.backend.database)
            logger.error(
                "Job %s: neither its success nor its failure could be recorded (%s); it is left "
                "RUNNING for lease recovery once this worker stops.",
                success.job.pk,
                exc,
            )
            unrecorded[success.job.pk] = exc
            return 0


class OneTraceback(logging.Filter):
    """A failed attempt's traceback once, not twice. The worker logs each
    failure with its traceback (execution.py), then sends ``task_finished``
    from inside a handler of that exception, so that receivers can read it;
    Django's own receiver logs a ``state=FAILED`` line that attaches it
    again. Installed on the tasks API's logger (``django.tasks``, or the
    backport's ``django_tasks``) in a worker process, where every
    task_finished is this worker's, it keeps Django's line and drops its
    copy of the traceback, as long as ours is shown."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.funcName == "log_task_finished" and _failures_shown():
            record.exc_info, record.exc_text = None, None
        return True

    def __enter__(self) -> OneTraceback:
        logging.getLogger(API_MODULE).addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger(API_MODULE).removeFilter(self)


def _failures_shown() -> bool:
    """Whether the worker's own failure lines (WARNING and up) reach a handler."""
    return logger.isEnabledFor(logging.WARNING) and logger.hasHandlers()
