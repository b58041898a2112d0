"""Every state change of a job: small methods, each a short conditional UPDATE.

The worker, the admin and user code all go through these, so there is one
state machine and one claim path.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import connections, models, transaction
from django.db.models import Case, F, When
from django.utils import timezone

from .payload import as_list
from .retry import retry_on_conflict

if TYPE_CHECKING:
    from .models import Job

READY, RUNNING = "READY", "RUNNING"
SUCCESSFUL, FAILED, CANCELLED = "SUCCESSFUL", "FAILED", "CANCELLED"
FINISHED = (SUCCESSFUL, FAILED, CANCELLED)
# Higher priority first, then the job that has been due longest.
CLAIM_ORDER = ("-priority", "run_after", "id")
DEFAULT_LEASE = 60.0
WORKER_LOST = "django_dbqueue.exceptions.WorkerLost"
# How many times a claimer looks past candidates that others took meanwhile.
CANDIDATE_ROUNDS = 8


class JobQuerySet(models.QuerySet):
    def ready(self) -> JobQuerySet:
        return self.filter(status=READY)

    def due(self, now: datetime | None = None) -> JobQuerySet:
        return self.ready().filter(run_after__lte=now or timezone.now())

    def running(self) -> JobQuerySet:
        return self.filter(status=RUNNING)

    def finished(self) -> JobQuerySet:
        return self.filter(status__in=FINISHED)

    # -- claiming ---------------------------------------------------------

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
        return retry_on_conflict(lambda: self._claim_once(owner, limit, lease), using=self.db)

    def _claim_once(self, owner: str, limit: int, lease: float) -> list[Job]:
        return self.claim_candidates(owner, limit, lease, _ids_in_claim_order)

    def claim_candidates(
        self, owner: str, limit: int, lease: float, read_ids: Callable[[JobQuerySet, int], list[int]]
    ) -> list[Job]:
        """One claim attempt: ``read_ids(due_jobs, limit)`` picks candidate ids
        by a plain read that locks nothing, then just those rows are locked by
        primary key. A single locking SELECT ... ORDER BY ... LIMIT that no
        index serves (several queues, or any filter) would lock every row it
        sorts, starving every other claimer until it commits."""
        now = timezone.now()
        taken: list[int] = []
        for _ in range(CANDIDATE_ROUNDS):
            ids = read_ids(self.due(now).exclude(pk__in=taken) if taken else self.due(now), limit)
            if not ids:
                return []
            batch = self._lock_and_mark(ids, owner, lease, now)
            if batch:
                return batch
            taken.extend(ids)  # all claimed by others meanwhile: look further on
        return []

    def _lock_and_mark(self, ids: list[int], owner: str, lease: float, now: datetime) -> list[Job]:
        rows = self.model._base_manager.using(self.db)
        with transaction.atomic(using=self.db):
            _lock_if_serialised(self.db, self.model._meta.db_table)
            locked = rows.filter(pk__in=ids, status=READY, run_after__lte=now).select_for_update(
                skip_locked=True
            )
            batch = _claimable(sorted(locked, key=_claim_key))
            if batch:
                mark_claimed(rows, batch, owner, lease, now)
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

    def extend_leases(self, owner: str, lease: float = DEFAULT_LEASE) -> int:
        """The heartbeat: push out the lease of everything ``owner`` holds."""
        expires = timezone.now() + timedelta(seconds=lease)
        return self.filter(owner=owner, status=RUNNING).update(lease_expires_at=expires)

    def recover_expired(self, limit: int = 500) -> tuple[int, int]:
        """Return jobs whose worker stopped heartbeating to READY, marked
        suspect; a suspect whose last attempt died with its worker ends FAILED.
        Returns ``(requeued, failed)``."""
        now = timezone.now()
        expired = self.running().filter(lease_expires_at__lt=now)
        requeued = failed = 0
        with transaction.atomic(using=self.db):
            for job in expired.select_for_update(skip_locked=True).order_by("pk")[:limit]:
                if job.suspect:
                    # It ran alone and its worker died: that attempt failed.
                    job.errors = [*as_list(job.errors), worker_lost_error(job, now)]
                    if job.attempts >= job.max_attempts:
                        job.status, job.finished_at = FAILED, now
                        failed += 1
                    else:
                        job.status = READY
                        requeued += 1
                else:
                    job.status, job.suspect = READY, True
                    requeued += 1
                job.owner = job.lease_expires_at = None
                job.save(
                    update_fields=[
                        "status",
                        "suspect",
                        "owner",
                        "lease_expires_at",
                        "errors",
                        "finished_at",
                    ]
                )
        return requeued, failed

    # -- people's actions ---------------------------------------------------

    def requeue(self) -> int:
        """Put finished jobs back in the queue, due now, with fresh attempts."""
        return self.filter(status__in=FINISHED).update(
            status=READY,
            run_after=timezone.now(),
            attempts=0,
            suspect=False,
            owner=None,
            lease_expires_at=None,
            finished_at=None,
            return_value=None,
        )

    def cancel(self) -> int:
        """Cancel jobs that have not started; RUNNING jobs are left alone."""
        return self.ready().update(status=CANCELLED, finished_at=timezone.now())

    def run_now(self) -> int:
        """Make READY jobs that wait for a future ``run_after`` due now."""
        now = timezone.now()
        return self.ready().filter(run_after__gt=now).update(run_after=now)

    def prune(self, older_than: timedelta) -> int:
        """Delete finished jobs that finished more than ``older_than`` ago."""
        cutoff = timezone.now() - older_than
        return self.finished().filter(finished_at__lt=cutoff).delete()[0]


class WorkerQuerySet(models.QuerySet):
    def alive(self, within: float = 120.0) -> WorkerQuerySet:
        return self.filter(last_seen_at__gte=timezone.now() - timedelta(seconds=within))


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


def mark_claimed(rows: models.QuerySet, batch: list[Job], owner: str, lease: float, now: datetime) -> None:
    """Mark a locked batch RUNNING for ``owner``, in the caller's transaction.
    A suspect (always alone) has its attempt and start recorded here."""
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


def _ids_in_claim_order(due: JobQuerySet, limit: int) -> list[int]:
    return list(due.order_by(*CLAIM_ORDER).values_list("pk", flat=True)[:limit])


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


def _lock_if_serialised(using: str, table: str) -> None:
    """SQLite has no row locks or SKIP LOCKED. A no-op write takes its single
    write lock first, so concurrent claims queue up instead of sharing rows."""
    connection = connections[using]
    if not connection.features.has_select_for_update:
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {connection.ops.quote_name(table)} SET id = id WHERE 1 = 0")
