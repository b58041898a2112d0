"""Leases: the heartbeat pushes them out, and the jobs of a worker that
stopped heartbeating go back to READY (marked suspect), or end FAILED when a
suspect's last attempt died with its worker, or CANCELLED when a cancel was
asked for them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction

from ..clock import DbNow
from ..payload import as_list, bounded_errors
from ..status import Status
from .rows import DEFAULT_LEASE, READY, RUNNING, JobRows

if TYPE_CHECKING:
    from ..models import Job

WORKER_LOST = "django_dbqueue.exceptions.WorkerLost"


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
        ``(requeued, finished)``: finished counts the FAILED and CANCELLED."""
        expired = self.running().filter(lease_expires_at__lt=DbNow()).annotate(db_now=DbNow())
        requeued = finished = 0
        with transaction.atomic(using=self.db):
            for job in expired.select_for_update(skip_locked=True).order_by("pk")[:limit]:
                changes: dict[str, Any] = {"owner": None, "lease_expires_at": None, "status": READY}
                if job.cancel_requested_at is not None:
                    changes.update(_cancelled(job))
                elif not job.suspect:
                    changes["suspect"] = True  # we cannot tell whether it started
                else:
                    # It ran alone and its worker died: that attempt failed.
                    changes["errors"] = bounded_errors(
                        as_list(job.errors),
                        worker_lost_error(job, job.db_now),  # type: ignore[attr-defined]
                    )
                    if job.attempts >= job.max_attempts:
                        changes.update(status=Status.FAILED, finished_at=job.db_now, unique_key=None)  # type: ignore[attr-defined]
                finished += changes["status"] != READY
                requeued += changes["status"] == READY
                self.model._base_manager.using(self.db).filter(pk=job.pk).update(**changes)
                if changes["status"] != READY and (job.batch_id is not None or job.has_dependants):
                    from ..workflows.completion import jobs_finished

                    jobs_finished(self.db, [job.pk])  # its batch and dependants, in this transaction
        return requeued, finished

    def expired_count(self) -> int:
        """RUNNING jobs whose lease ran out, waiting to be recovered."""
        return self.running().filter(lease_expires_at__lt=DbNow()).count()


def _cancelled(job: Job) -> dict[str, Any]:
    """A dead worker's job whose cancel was asked: CANCELLED, not run again.
    Its attempt is not counted here: only a suspect is known to have started,
    and its attempt was counted in its claim."""
    from .running import cancelled_error

    now = job.db_now  # type: ignore[attr-defined]
    error = cancelled_error(job, now, job.owner or "", "after its worker died")
    return {
        "status": Status.CANCELLED,
        "finished_at": now,
        "unique_key": None,
        "cancel_requested_at": None,
        "errors": bounded_errors(as_list(job.errors), error),
    }


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
