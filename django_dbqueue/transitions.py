"""Every state change of a job, and nowhere else: small methods on the
queryset, each one short conditional UPDATE (or one transaction).

claim ─> RUNNING ─> SUCCESSFUL (one or many) | READY again (retry) | FAILED
         RUNNING ─> READY (release: never started; recover: its worker died)
finished ─> READY (requeue)      READY ─> CANCELLED (cancel)

The worker, the admin and user code all go through these, so there is one
state machine and one claim path. Times that decide anything (due, lease,
expiry) are the database's (``DbNow``), never a worker host's clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.db.models import Case, F, When

from .clock import DbNow
from .db import ValueByPk, lock_if_serialised, retry_on_conflict
from .payload import as_list, bounded_errors
from .status import FINISHED, Status

if TYPE_CHECKING:
    from .models import Job

READY, RUNNING = Status.READY, Status.RUNNING
# Higher priority first, then the job that has been due longest.
CLAIM_ORDER = ("-priority", "run_after", "id")
DEFAULT_LEASE = 60.0
WORKER_LOST = "django_dbqueue.exceptions.WorkerLost"
# How many times a claimer looks past candidates that others took meanwhile.
CANDIDATE_ROUNDS = 8
# A batched success write stays far below MariaDB's default max_allowed_packet
# (16 MiB): return values are grouped into statements of at most this many bytes.
STATEMENT_BUDGET = 4_000_000
# Requeued runs a job keeps in ``history``.
MAX_HISTORY = 10


@dataclass
class Finished:
    """One run's outcome, as the worker hands it over to be recorded."""

    job: Job
    started: datetime
    finished: datetime
    status: str = Status.SUCCESSFUL  # or READY (to be retried) or FAILED
    return_value: Any = None
    size: int = 4  # bytes the return value takes as JSON
    error: dict[str, str] | None = None
    retry_in: timedelta | None = None


class JobQuerySet(models.QuerySet):
    def ready(self) -> JobQuerySet:
        return self.filter(status=READY)

    def due(self, now: datetime | None = None) -> JobQuerySet:
        """READY jobs due at ``now`` (default: the database's now)."""
        return self.ready().filter(run_after__lte=now or DbNow())

    def unlimited(self) -> JobQuerySet:
        """Jobs without a concurrency limit: the ordinary claim's. For the claim
        index ``concurrency_key IS NULL`` is an equality, so the claim reads
        these in claim order as before; limited jobs are claimed by
        ``claim_limited()``."""
        return self.filter(concurrency_key__isnull=True)

    def running(self) -> JobQuerySet:
        return self.filter(status=RUNNING)

    def finished(self) -> JobQuerySet:
        return self.filter(status__in=FINISHED)

    # -- claim ---------------------------------------------------------------------

    def claim(self, owner: str, limit: int = 100, lease: float = DEFAULT_LEASE) -> list[Job]:
        """Claim up to ``limit`` due READY jobs matching this queryset, in
        priority order, for ``owner``; they come back RUNNING with a lease.

        A batch holds only jobs that never killed a worker. A *suspect* job
        (recovered from a dead worker) is claimed alone, and its attempt is
        counted in the claim itself, so a job that kills every worker that
        runs it runs out of attempts instead of looping.
        """
        if limit < 1:
            raise ValueError("claim() needs a limit of at least 1.")
        return retry_on_conflict(
            lambda: self.claim_candidates(owner, limit, lease, ids_in_claim_order), using=self.db
        )

    def claim_candidates(
        self, owner: str, limit: int, lease: float, read_ids: Callable[[JobQuerySet, int], list[int]]
    ) -> list[Job]:
        """One claim attempt: ``read_ids(due_jobs, limit)`` picks candidate ids
        by a plain read that locks nothing, then just those rows are locked by
        primary key. A single locking SELECT ... ORDER BY ... LIMIT that no
        index serves (several queues, or any filter) would lock every row it
        sorts, starving every other claimer until it commits."""
        taken: list[int] = []
        due = self.due().unlimited()
        for _ in range(CANDIDATE_ROUNDS):
            ids = read_ids(due.exclude(pk__in=taken) if taken else due, limit)
            if not ids:
                return []
            rows = self.model._base_manager.using(self.db)
            batch = self.lock_and_mark(
                rows.filter(pk__in=ids, status=READY, run_after__lte=DbNow()), owner, lease
            )
            if batch:
                return batch
            taken.extend(ids)  # all claimed by others meanwhile: look further on
        return []

    def lock_and_mark(
        self, candidates: models.QuerySet, owner: str, lease: float, limit: int | None = None
    ) -> list[Job]:
        """Lock the rows of ``candidates`` (due READY jobs) that nobody else
        holds (SKIP LOCKED), and mark them RUNNING for ``owner``, in one
        transaction."""
        rows = self.model._base_manager.using(self.db)
        with transaction.atomic(using=self.db):
            lock_if_serialised(self.db, self.model._meta.db_table)
            locked = candidates.annotate(db_now=DbNow()).select_for_update(skip_locked=True)
            batch = _claimable(sorted(locked[:limit] if limit else locked, key=_claim_key))
            if batch:
                _mark_claimed(rows, batch, owner, lease)
        return batch

    def limited_keys(self, queues: list[str], limit: int) -> list[str]:
        """Up to ``limit`` concurrency keys with due READY jobs in ``queues``,
        in random order so that no key starves the others."""
        due = self.due().filter(queue_name__in=queues, concurrency_key__isnull=False)
        keys = list(due.order_by().values_list("concurrency_key", flat=True).distinct()[: limit * 4])
        random.shuffle(keys)
        return keys[:limit]

    def claim_limited(
        self, owner: str, queues: list[str], keys: list[str], lease: float = DEFAULT_LEASE
    ) -> list[Job]:
        """For each of ``keys``, claim its first due job in ``queues`` if
        fewer than its ``concurrency_limit`` jobs of that key are RUNNING (on
        any queue, for any worker); all in one short transaction.

        The keys' ConcurrencyLock rows are locked first, so claims of one
        key take turns and the count cannot go stale before the mark;
        claims of other keys and ordinary claims never wait for them. One
        job per key per claim: a worker runs its batch one job at a time,
        so two of one key in one batch would hold two slots to run one."""
        from django.db.models import Count

        from .models import ConcurrencyLock

        locks = ConcurrencyLock.objects.using(self.db)
        rows = self.model._base_manager.using(self.db)
        with transaction.atomic(using=self.db):
            lock_if_serialised(self.db, self.model._meta.db_table)
            mine = _lock_keys(locks, keys)
            if not mine:
                return []
            running = dict(
                rows.filter(concurrency_key__in=mine, status=RUNNING)
                .order_by()
                .values_list("concurrency_key")
                .annotate(Count("pk"))
            )
            due = rows.filter(status=READY, queue_name__in=queues, run_after__lte=DbNow())
            picked = []
            for key in mine:
                first = due.filter(concurrency_key=key).annotate(db_now=DbNow()).order_by(*CLAIM_ORDER)
                job = first.select_for_update(skip_locked=True).first()
                # Over its limit, a job waits READY, its attempts untouched.
                if job is not None and running.get(key, 0) < (job.concurrency_limit or 1):
                    picked.append(job)
            batch = _claimable(sorted(picked, key=_claim_key))
            if batch:
                _mark_claimed(rows, batch, owner, lease)
        return batch

    def release(self, owner: str, ids: list[int]) -> int:
        """Give claimed jobs that never started back to the queue at once,
        without costing them an attempt."""
        if not ids:
            return 0
        return self.filter(pk__in=ids, owner=owner, status=RUNNING).update(
            status=READY,
            owner=None,
            lease_expires_at=None,
            # A suspect's attempt was counted in its claim; it never ran.
            attempts=Case(
                When(suspect=True, then=F("attempts") - 1),
                default=F("attempts"),
                output_field=models.PositiveIntegerField(),
            ),
        )

    # -- leases ----------------------------------------------------------------------

    def extend_leases(self, owners: str | Iterable[str], lease: float = DEFAULT_LEASE) -> int:
        """The heartbeat: push out the lease of everything ``owners`` hold."""
        owners = [owners] if isinstance(owners, str) else list(owners)
        if not owners:
            return 0
        return self.filter(owner__in=owners, status=RUNNING).update(
            lease_expires_at=DbNow() + timedelta(seconds=lease)
        )

    def still_held(self, owner: str, ids: list[int], lease: float = DEFAULT_LEASE) -> set[int]:
        """Which of ``ids`` ``owner`` still holds, their leases pushed out.
        A job recovered from ``owner`` (its lease ran out) is no longer its."""
        if not ids:
            return set()
        self.filter(pk__in=ids).extend_leases(owner, lease)
        return set(self.filter(pk__in=ids, owner=owner, status=RUNNING).values_list("pk", flat=True))

    def recover_expired(self, limit: int = 500) -> tuple[int, int]:
        """Return jobs whose worker stopped heartbeating to READY, marked
        suspect; a suspect whose last attempt died with its worker ends FAILED.
        Returns ``(requeued, failed)``."""
        expired = self.running().filter(lease_expires_at__lt=DbNow()).annotate(db_now=DbNow())
        requeued = failed = 0
        with transaction.atomic(using=self.db):
            for job in expired.select_for_update(skip_locked=True).order_by("pk")[:limit]:
                changes: dict[str, Any] = {"owner": None, "lease_expires_at": None, "status": READY}
                if not job.suspect:
                    changes["suspect"] = True  # we cannot tell whether it started
                else:
                    # It ran alone and its worker died: that attempt failed.
                    changes["errors"] = bounded_errors(
                        as_list(job.errors), worker_lost_error(job, job.db_now)
                    )
                    if job.attempts >= job.max_attempts:
                        changes.update(status=Status.FAILED, finished_at=job.db_now, unique_key=None)
                failed += changes["status"] == Status.FAILED
                requeued += changes["status"] == READY
                self.model._base_manager.using(self.db).filter(pk=job.pk).update(**changes)
        return requeued, failed

    def expired_count(self) -> int:
        """RUNNING jobs whose lease ran out, waiting to be recovered."""
        return self.running().filter(lease_expires_at__lt=DbNow()).count()

    # -- outcomes --------------------------------------------------------------------

    def record(self, owner: str, outcome: Finished) -> int:
        """Record one job's outcome, if ``owner`` still holds it (1) or not (0)."""
        job = outcome.job
        changes = _run_fields(job, owner, outcome.started)
        changes.update(
            status=outcome.status,
            return_value=outcome.return_value,
            finished_at=outcome.finished if outcome.status != READY else None,
        )
        if outcome.error is not None:
            changes["errors"] = bounded_errors(as_list(job.errors), outcome.error)
        if outcome.retry_in is not None:
            changes["run_after"] = DbNow() + outcome.retry_in
        if outcome.status != READY:
            changes["unique_key"] = None  # finished: the key is free (unique.py)
        updated = self.filter(pk=job.pk, owner=owner, status=RUNNING).update(**changes)
        changes.pop("run_after", None)  # an expression; the row has the value
        for name, value in changes.items():
            setattr(job, name, value)
        return updated

    def record_successes(self, owner: str, group: list[Finished]) -> int:
        """Record many successes in one UPDATE (a group of ``statements()``);
        returns how many ``owner`` still held."""
        first = group[0].job
        started = {s.job.pk: s.job.started_at or s.started for s in group}
        values = {s.job.pk: s.return_value for s in group}
        changes: dict[str, Any] = {
            "status": Status.SUCCESSFUL,
            # Batches hold no suspects, so every one of these counts its attempt here.
            "attempts": F("attempts") + 1,
            "started_at": ValueByPk(started, models.DateTimeField()),
            "last_attempted_at": ValueByPk({s.job.pk: s.started for s in group}, models.DateTimeField()),
            "finished_at": ValueByPk({s.job.pk: s.finished for s in group}, models.DateTimeField()),
            "worker_ids": [*as_list(first.worker_ids), owner],
            "owner": None,
            "lease_expires_at": None,
            "suspect": False,
            "unique_key": None,  # finished: the key is free (unique.py)
            # PostgreSQL cannot type a CASE of bare NULLs; all None is the common case.
            "return_value": None
            if all(v is None for v in values.values())
            else ValueByPk(values, models.JSONField()),
        }
        # The caller retries conflicts and outages (it holds the outcomes meanwhile).
        updated = self.filter(pk__in=list(started), owner=owner, status=RUNNING).update(**changes)
        for s in group:
            job = s.job
            job.status, job.attempts, job.return_value = Status.SUCCESSFUL, job.attempts + 1, s.return_value
            job.started_at, job.last_attempted_at, job.finished_at = started[job.pk], s.started, s.finished
            job.worker_ids = changes["worker_ids"]
            job.owner = job.lease_expires_at = None
        return updated

    # -- people's actions ------------------------------------------------------------

    def requeue(self) -> int:
        """Put finished jobs back in the queue, due now, for a clean run: fresh
        attempts, no errors, no times; each earlier run is kept as a summary
        in ``history`` (the latest MAX_HISTORY). A requeued job holds no
        unique key: its key was freed when it finished, and may be held by
        a newer job by now."""
        fields = ["status", "attempts", "suspect", "owner", "lease_expires_at", "started_at"]
        fields += ["last_attempted_at", "finished_at", "return_value", "errors", "worker_ids", "history"]
        fields += ["run_after"]
        count = 0
        with transaction.atomic(using=self.db):
            jobs = list(self.finished().annotate(db_now=DbNow()).select_for_update().order_by("pk"))
            for job in jobs:
                job.history = [*as_list(job.history), _summary(job)][-MAX_HISTORY:]
                job.status, job.attempts, job.suspect = READY, 0, False
                job.owner = job.lease_expires_at = job.started_at = job.last_attempted_at = None
                job.finished_at = job.return_value = None
                job.errors, job.worker_ids = [], []
                job.run_after = job.db_now
            for start in range(0, len(jobs), 500):
                count += self.model._base_manager.using(self.db).bulk_update(
                    jobs[start : start + 500], fields
                )
        return count

    def cancel(self) -> int:
        """Cancel jobs that have not started; RUNNING jobs are left alone."""
        return self.ready().update(status=Status.CANCELLED, finished_at=DbNow(), unique_key=None)

    def run_now(self) -> int:
        """Make READY jobs that wait for a future ``run_after`` due now."""
        return self.ready().filter(run_after__gt=DbNow()).update(run_after=DbNow())

    def prune(self, older_than: timedelta) -> int:
        """Delete finished jobs that finished more than ``older_than`` ago."""
        return self.finished().filter(finished_at__lt=DbNow() - older_than).delete()[0]


class WorkerQuerySet(models.QuerySet):
    def alive(self, within: float = 120.0) -> WorkerQuerySet:
        return self.filter(last_seen_at__gte=DbNow() - timedelta(seconds=within))


def _lock_keys(locks: models.QuerySet, keys: list[str]) -> list[str]:
    """Lock the ConcurrencyLock rows of ``keys``, in key order (so two
    claimers of overlapping keys cannot deadlock); a key's row is created
    the first time it is met. Waiting for a claimer of the same key beats
    skipping it: that claim lasts a few statements, and a slot it leaves
    free would otherwise wait for the next poll."""

    def lock(wanted: list[str]) -> list[str]:
        rows = locks.select_for_update().filter(key__in=wanted).order_by("key")
        return list(rows.values_list("key", flat=True))

    mine = lock(keys)
    if len(mine) < len(keys):
        new = [key for key in keys if key not in set(mine)]
        for key in new:
            locks.get_or_create(key=key)  # a race is settled by its unique index
        mine += lock(new)
    return mine


def retry_delay(attempts: int, base: float, cap: float) -> timedelta:
    """Exponential backoff with jitter: ``base * 2**(attempts-1)``, capped,
    then a random point in its upper half so failed jobs do not retry in step."""
    ceiling = min(cap, base * 2 ** max(attempts - 1, 0))
    return timedelta(seconds=random.uniform(ceiling / 2, ceiling))


def worker_lost_error(job: Job, when: datetime) -> dict[str, str]:
    return {
        "exception_class_path": WORKER_LOST,
        "traceback": (
            f"The worker {job.owner} stopped heartbeating while running this job "
            f"(its lease expired at {job.lease_expires_at:%Y-%m-%d %H:%M:%S%z}); "
            "it was probably killed or crashed."
        ),
        "at": when.isoformat(),
        "worker": job.owner or "",
    }


def attempts_after(job: Job) -> int:
    """The job's attempts once this run is recorded: a suspect's was counted in its claim."""
    return job.attempts if job.suspect else job.attempts + 1


def ids_in_claim_order(due: JobQuerySet, limit: int) -> list[int]:
    return list(due.order_by(*CLAIM_ORDER).values_list("pk", flat=True)[:limit])


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


def _mark_claimed(rows: models.QuerySet, batch: list[Job], owner: str, lease: float) -> None:
    """Mark a locked batch RUNNING for ``owner``, in the caller's transaction.
    A suspect (always alone) has its attempt and start recorded here."""
    now = batch[0].db_now
    changes: dict[str, Any] = {
        "status": RUNNING,
        "owner": owner,
        "lease_expires_at": now + timedelta(seconds=lease),
    }
    if batch[0].suspect:
        job = batch[0]
        changes.update(
            attempts=job.attempts + 1,
            started_at=job.started_at or now,
            last_attempted_at=now,
            worker_ids=[*as_list(job.worker_ids), owner],
        )
    rows.filter(pk__in=[job.pk for job in batch]).update(**changes)
    for job in batch:
        for name, value in changes.items():
            setattr(job, name, value)


def _claim_key(job: Job) -> tuple[int, datetime, int]:
    return (-job.priority, job.run_after, job.pk)


def _claimable(locked: list[Job]) -> list[Job]:
    """A suspect alone, or the run of trusted jobs before the first suspect."""
    if locked and locked[0].suspect:
        return locked[:1]
    batch = []
    for job in locked:
        if job.suspect:
            break
        batch.append(job)
    return batch


def statements(successes: list[Finished]) -> list[list[Finished]]:
    """Successes grouped for one UPDATE each: same earlier ``worker_ids``
    (almost always one group: jobs on their first run), and no statement
    over STATEMENT_BUDGET bytes of return values."""
    groups: dict[tuple, list[list[Finished]]] = {}
    sizes: dict[tuple, int] = {}
    for success in successes:
        key = tuple(map(str, as_list(success.job.worker_ids)))
        size = success.size + 200
        if key not in groups or sizes[key] + size > STATEMENT_BUDGET:
            groups.setdefault(key, []).append([])
            sizes[key] = 0
        groups[key][-1].append(success)
        sizes[key] += size
    return [group for chunks in groups.values() for group in chunks]


def _summary(job: Job) -> dict[str, Any]:
    """One earlier run of a requeued job, as kept in ``history``."""

    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    errors = as_list(job.errors)
    return {
        "requeued_at": iso(job.db_now),
        "status": job.status,
        "attempts": job.attempts,
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "workers": as_list(job.worker_ids),
        "last_error": errors[-1] if errors else None,
    }
