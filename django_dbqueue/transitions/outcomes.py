"""A run's outcome: one job at a time (``record``), or many successes in one
UPDATE (``record_successes``, grouped by ``statements()``), as the worker
hands them over in ``Finished``.

Every outcome that finishes a job clears its ``unique_key`` and its
``cancel_requested_at``: both are held only while a job is unfinished."""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import F

from ..clock import DbNow
from ..db import doubled
from ..limits import counted
from ..payload import as_list, bounded_errors, for_attempt
from ..status import Status
from .cascade import jobs_finished, members_finished
from .rows import READY, RUNNING, JobRows
from .updates import RowUpdate

if TYPE_CHECKING:
    from ..models import Job

# Finished.checkpoint's default: the outcome leaves the saved checkpoint as it is.
UNCHANGED: Any = object()

# A batched success write stays far below MariaDB's default max_allowed_packet
# (16 MiB): return values are grouped into statements of at most this many bytes.
STATEMENT_BUDGET = 4_000_000


@dataclass
class Finished:
    """One run's outcome, as the worker hands it over to be recorded.
    ``ran``: False for a job ended before its task was called (its attempt
    is not spent); ``checkpoint``: the cursor to save with the outcome."""

    job: Job
    started: datetime
    finished: datetime
    status: str = Status.SUCCESSFUL  # or READY (to be retried), FAILED or CANCELLED
    return_value: Any = None
    size: int = 4  # bytes the return value takes as JSON
    error: dict[str, Any] | None = None
    retry_in: timedelta | None = None
    ran: bool = True
    snoozed: bool = False  # given back by the task for a while (Snooze): snoozes + 1
    checkpoint: Any = UNCHANGED


class OutcomeQuerySet(JobRows):
    def record(self, owner: str, outcome: Finished) -> int:
        """Record one job's outcome, if ``owner`` still holds it (1) or not (0)."""
        job = outcome.job
        changes = _run_fields(job, owner, outcome.started) if outcome.ran else _unrun_fields(job)
        changes.update(
            status=outcome.status,
            return_value=outcome.return_value,
            finished_at=outcome.finished if outcome.status != READY else None,
        )
        if outcome.error is not None:
            changes["errors"] = bounded_errors(as_list(job.errors), _entry(job, outcome))
        if outcome.retry_in is not None:
            changes["run_after"] = DbNow() + outcome.retry_in
        if outcome.snoozed:
            changes["snoozes"] = F("snoozes") + 1
        if outcome.checkpoint is not UNCHANGED:
            changes["checkpoint"] = outcome.checkpoint
        if outcome.status != READY:
            changes["unique_key"] = None  # finished: the key is free (unique.py)
            changes["cancel_requested_at"] = None  # and a request is honoured or moot
        rows = self.filter(pk=job.pk, owner=owner, status=RUNNING)
        if outcome.status == READY:
            updated = rows.update(**changes)
        else:
            updated = self._finish(lambda **only: rows.filter(**only).update(**changes), [job])
        changes.pop("run_after", None)  # an expression; the row has the value
        if changes.pop("snoozes", None) is not None:
            job.snoozes += 1
        for name, value in changes.items():
            setattr(job, name, value)
        return updated

    def record_successes(self, owner: str, group: list[Finished]) -> int:
        """Record many successes in one UPDATE (a group of ``statements()``);
        returns how many ``owner`` still held."""
        first = group[0].job
        # One pass, by the id attribute, not the pk property: per job.
        attempted, finished, values = {}, {}, {}
        for s in group:
            pk = s.job.id
            attempted[pk], finished[pk], values[pk] = s.started, s.finished, s.return_value
        worker_ids = [*as_list(first.worker_ids), owner]
        update = RowUpdate(self.model, self.db)
        update.set("status", Status.SUCCESSFUL)
        # Batches hold no suspects, so every one of these counts its attempt here.
        update.set_sql("attempts", f"{update.column('attempts')} + 1")
        update.set_by_pk("last_attempted_at", attempted)
        # A first attempt starts the job (the row's started_at, as claimed, is
        # NULL); a later one keeps the start it has. One CASE for both.
        update.coalesce("started_at", "last_attempted_at")
        update.set_by_pk("finished_at", finished)
        update.set("worker_ids", worker_ids)
        for name in ("owner", "lease_expires_at", "unique_key", "cancel_requested_at"):
            # unique_key: finished, the key is free (unique.py); a cancel
            # request that came too late is moot.
            update.set(name, None)
        update.set("suspect", False)
        if any(value is not None for value in values.values()):
            update.set_by_pk("return_value", values)
        else:  # PostgreSQL cannot type a CASE of bare NULLs; all None is the common case
            update.set("return_value", None)
        # The caller retries conflicts and outages (it holds the outcomes meanwhile).
        ids = list(attempted)
        jobs = [s.job for s in group]
        updated = self._finish(lambda **only: update.run(ids, owner=owner, status=RUNNING, **only), jobs)
        for s in group:
            job = s.job
            job.status, job.attempts, job.return_value = Status.SUCCESSFUL, job.attempts + 1, s.return_value
            job.started_at = job.started_at or s.started
            job.last_attempted_at, job.finished_at = s.started, s.finished
            job.worker_ids = worker_ids
            job.owner = job.lease_expires_at = None
        return updated

    def _finish(self, write: Callable[..., int], jobs: list[Job]) -> int:
        """The UPDATE that finishes ``jobs`` (``write(**conditions)`` runs it,
        on the rows that also match ``conditions``), and what it sets off in
        workflows (cascade.py) in the same transaction. The
        UPDATE is conditioned on ``has_dependants`` still being false unless
        a job had dependants when claimed: a plain job costs one UPDATE as
        before, a batch member that UPDATE and its batch's check. A
        dependant added since the claim makes the UPDATE match fewer rows,
        and the outcome is then written the full way (which also covers a
        lease lost meanwhile)."""
        batches = sorted({job.batch_id for job in jobs if job.batch_id is not None})
        with transaction.atomic(using=self.db) if batches else nullcontext():
            updated = 0
            if not any(job.has_dependants for job in jobs):
                updated = write(has_dependants=False)
                if updated == len(jobs):
                    if batches:
                        members_finished(self.db, batches)
                    return updated
            with transaction.atomic(using=self.db):
                updated += write()
                jobs_finished(self.db, [job.pk for job in jobs])
        return updated


def retry_delay(attempts: int, base: float, cap: float) -> timedelta:
    """Exponential backoff with jitter: ``base * 2**(attempts-1)``, capped,
    then a random point in its upper half so failed jobs do not retry in step.
    A row may count thousands of attempts (written by SQL, or a high
    max_attempts): ``doubled`` bounds the doublings."""
    ceiling = doubled(base, attempts - 1, cap)
    return timedelta(seconds=random.uniform(ceiling / 2, ceiling))


def _entry(job: Job, outcome: Finished) -> dict[str, Any]:
    """The outcome's error, saying which attempt it ends (an unrun job's:
    the one it would have been, not counted) and, for a retry, its delay."""
    attempt = attempts_after(job) if outcome.ran else unspent_attempt(job)
    entry = for_attempt(outcome.error or {}, attempt, spent=outcome.ran)
    if outcome.retry_in is not None:
        entry["retry_in"] = round(outcome.retry_in.total_seconds(), 3)
    return entry


def unspent_attempt(job: Job) -> int:
    """The number of the attempt a held job is in, when it does not count:
    a suspect's was counted in its claim, and is given back."""
    return job.attempts if job.suspect else job.attempts + 1


def attempts_after(job: Job) -> int:
    """The job's attempts once this run is recorded: a suspect's was counted in its claim."""
    return job.attempts if job.suspect else counted(job.attempts)


def _run_fields(job: Job, owner: str, started: datetime) -> dict[str, Any]:
    return {
        "attempts": attempts_after(job),
        "started_at": job.started_at or started,
        "last_attempted_at": started,
        "worker_ids": as_list(job.worker_ids) if job.suspect else [*as_list(job.worker_ids), owner],
        "owner": None,
        "lease_expires_at": None,
        "suspect": False,
    }


def _unrun_fields(job: Job) -> dict[str, Any]:
    """A job ended before it ran: its attempt is not spent (a suspect's was
    counted in its claim, and is given back)."""
    return {
        "attempts": job.attempts - 1 if job.suspect else job.attempts,
        "owner": None,
        "lease_expires_at": None,
    }


def statements(successes: list[Finished]) -> list[list[Finished]]:
    """Successes grouped for one UPDATE each: same earlier ``worker_ids``
    (almost always one group: jobs on their first run), and no statement
    over STATEMENT_BUDGET bytes of return values."""
    groups: dict[tuple, list[list[Finished]]] = {}
    sizes: dict[tuple, int] = {}
    for success in successes:
        earlier = success.job.worker_ids
        key = tuple(map(str, as_list(earlier))) if earlier else ()  # () for most: a first run
        size = success.size + 200
        if key not in groups or sizes[key] + size > STATEMENT_BUDGET:
            groups.setdefault(key, []).append([])
            sizes[key] = 0
        groups[key][-1].append(success)
        sizes[key] += size
    return [group for chunks in groups.values() for group in chunks]
