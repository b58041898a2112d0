"""Leases: the heartbeat pushes them out, and the jobs of a worker that
stopped heartbeating go back to READY (marked suspect), or end FAILED when a
suspect's last attempt died with its worker, or CANCELLED when a cancel was
asked for them (what each writes, recovered.py).

Recovery runs in transactions of RECOVERY_CHUNK jobs, each with what its
jobs' outcomes set off in workflows. One job's data must not hold back the
others: a chunk the database refuses (a release too big for a packet, a
trigger, a value it rejects) is recovered again job by job, and a job
refused alone ends FAILED saying why, with its workflow follow-up, in a
transaction of its own, instead of failing every beat with its chunk-mates.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction
from django.db.models import Q

from ..clock import DbNow
from ..db import DB_ERRORS, brief, drop_connection, is_conflict, is_outage, retry_on_conflict
from .recovered import given_up, recovered
from .rows import DEFAULT_LEASE, READY, RUNNING, JobRows

if TYPE_CHECKING:
    from ..models import Job

# Jobs recovered in one transaction: a few round trips per chunk, and a
# refused chunk costs at most this many single-job transactions.
RECOVERY_CHUNK = 50
# What recovery reads of a job: not its arguments or results, which may be
# megabytes each.
RECOVERY_FIELDS = (
    "id",
    "status",
    "owner",
    "lease_expires_at",
    "claimed_at",
    "cancel_requested_at",
    "suspect",
    "attempts",
    "max_attempts",
    "errors",
    "batch_id",
    "has_dependants",
)

logger = logging.getLogger("django_dbqueue")


class LeaseQuerySet(JobRows):
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
        suspect; a suspect whose last attempt died with its worker ends
        FAILED, and a job whose cancel was asked ends CANCELLED. Returns
        ``(requeued, finished)``: finished counts the FAILED and CANCELLED.
        Each chunk is its own transaction, retried on conflicts; run it
        outside the caller's transaction."""
        ids = list(self._expired().order_by("pk").values_list("pk", flat=True)[:limit])
        requeued = finished = 0
        for start in range(0, len(ids), RECOVERY_CHUNK):
            chunk = ids[start : start + RECOVERY_CHUNK]
            try:
                counts = retry_on_conflict(partial(self._recover, chunk), self.db)
            except Exception as exc:
                self._isolable(exc)
                counts = self._one_by_one(chunk)
            requeued, finished = requeued + counts[0], finished + counts[1]
        return requeued, finished

    def expired_count(self) -> int:
        """RUNNING jobs whose lease ran out, waiting to be recovered."""
        return self._expired().count()

    def _expired(self) -> Any:
        # No lease at all: no claim writes that (it sets the lease in the
        # same UPDATE), so the row was written by hand or SQL, and no
        # heartbeat will ever renew it; left alone it would hold its batch
        # open for ever.
        lapsed = Q(lease_expires_at__lt=DbNow()) | Q(lease_expires_at__isnull=True)
        return self.running().filter(lapsed)

    def _recover(self, ids: list[int]) -> tuple[int, int]:
        """One transaction: the jobs of ``ids`` still expired, back to READY or finished."""
        requeued = finished = 0
        rows = self._expired().filter(pk__in=ids).annotate(db_now=DbNow()).only(*RECOVERY_FIELDS)
        with transaction.atomic(using=self.db):
            for job in rows.select_for_update(skip_locked=True).order_by("pk"):
                changes = recovered(job)
                finished += changes["status"] != READY
                requeued += changes["status"] == READY
                self._write(job, changes)
        return requeued, finished

    def _one_by_one(self, ids: list[int]) -> tuple[int, int]:
        """A refused chunk again, one job a transaction: only a job that is
        refused alone is given up (``_give_up``)."""
        requeued = finished = 0
        for pk in ids:
            try:
                counts = retry_on_conflict(partial(self._recover, [pk]), self.db)
            except Exception as exc:
                self._isolable(exc)
                counts = self._give_up(pk, exc)
            requeued, finished = requeued + counts[0], finished + counts[1]
        return requeued, finished

    def _give_up(self, pk: int, refused: Exception) -> tuple[int, int]:
        """End a job that recovery could not give back FAILED, saying why,
        with what that sets off in workflows; if even that is refused, leave
        it for the next beat and say so (its chunk-mates are not held back)."""

        def fail() -> int:
            rows = self._expired().filter(pk=pk).annotate(db_now=DbNow()).only(*RECOVERY_FIELDS)
            with transaction.atomic(using=self.db):
                job = rows.select_for_update(skip_locked=True).first()
                if job is not None:
                    self._write(job, given_up(job, refused))
            return int(job is not None)

        try:
            failed = retry_on_conflict(fail, self.db)
        except Exception as exc:
            self._isolable(exc)
            logger.error(
                "Lease recovery could not give job %s back (%s), nor end it FAILED (%s); it will try "
                "again at the next beat, without holding back other jobs.",
                pk,
                brief(refused),
                brief(exc),
            )
            return 0, 0
        if failed:
            logger.error(
                "Lease recovery could not give job %s back, so it ends FAILED: %s", pk, brief(refused)
            )
        return 0, failed

    def _write(self, job: Job, changes: dict[str, Any]) -> None:
        """Write a recovered job's changes, and what a finished one sets off
        in workflows (its batch and dependants), in the caller's transaction."""
        self.model._base_manager.using(self.db).filter(pk=job.pk).update(**changes)
        if changes["status"] != READY and (job.batch_id is not None or job.has_dependants):
            from .cascade import jobs_finished

            jobs_finished(self.db, [job.pk])

    def _isolable(self, exc: Exception) -> None:
        """Raise ``exc`` again unless it is one job's data the database
        refused: an outage or a conflict that outlasted its retries is the
        heartbeat's to handle, and in the caller's transaction nothing can
        be isolated. Otherwise forget the connection: MySQL drops it after
        refusing a packet too big."""
        if connections[self.db].in_atomic_block:
            raise exc
        if isinstance(exc, DB_ERRORS) and (is_conflict(exc) or is_outage(exc, self.db)):
            raise exc
        drop_connection(self.db)
