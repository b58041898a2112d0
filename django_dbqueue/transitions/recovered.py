"""What lease recovery writes of a dead worker's job (leases.py): READY
again as a suspect, FAILED when a suspect's last attempt died with its
worker, CANCELLED when a cancel was asked; and, each time, a ``WorkerLost``
entry in its errors naming the worker, its claim and its lease, and
whether that run counts, so that the job's page tells what happened."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..db import brief
from ..payload import as_list, bounded_errors, for_attempt
from ..status import Status
from .rows import READY

if TYPE_CHECKING:
    from ..models import Job

WORKER_LOST = "django_dbqueue.exceptions.WorkerLost"


def recovered(job: Job) -> dict[str, Any]:
    """A dead worker's job's changes: CANCELLED if asked, else READY again
    (suspect), or FAILED when it was a suspect on its last attempt. Each
    is written in the job's errors, naming the worker and when its lease
    ran out, so the job's page tells why it took longer."""
    changes: dict[str, Any] = {"owner": None, "lease_expires_at": None, "status": READY}
    if job.cancel_requested_at is not None:
        changes.update(_cancelled(job))
        return changes
    now = job.db_now  # type: ignore[attr-defined]
    if not job.suspect:
        # A batch claim records no start, so we cannot tell whether it
        # started: this run does not count, and the job runs alone next.
        changes["suspect"] = True
        entry = for_attempt(worker_lost_error(job, now), job.attempts + 1, spent=False)
    else:
        # It ran alone and its worker died: that attempt failed.
        entry = for_attempt(worker_lost_error(job, now), job.attempts)
        if job.attempts >= job.max_attempts:
            changes.update(status=Status.FAILED, finished_at=now, unique_key=None)
    changes["errors"] = bounded_errors(as_list(job.errors), entry)
    return changes


def given_up(job: Job, refused: Exception) -> dict[str, Any]:
    """A dead worker's job that the database refused to give back: FAILED,
    its error saying so, rather than refused again at every beat."""
    now = job.db_now  # type: ignore[attr-defined]
    error = for_attempt(worker_lost_error(job, now), _attempt(job), spent=job.suspect)
    error["traceback"] += (
        f" Lease recovery could not give it back to the queue, so it ends FAILED here: the database "
        f"refused the write ({brief(refused)})."
    )
    return {
        "owner": None,
        "lease_expires_at": None,
        "status": Status.FAILED,
        "finished_at": now,
        "unique_key": None,
        "cancel_requested_at": None,
        "errors": bounded_errors(as_list(job.errors), error),
    }


def _cancelled(job: Job) -> dict[str, Any]:
    """A dead worker's job whose cancel was asked: CANCELLED, not run again.
    Its attempt is not counted here: only a suspect is known to have started,
    and its attempt was counted in its claim."""
    from .running import cancelled_error

    now = job.db_now  # type: ignore[attr-defined]
    error = cancelled_error(job, now, job.owner or "", "after its worker died")
    error = for_attempt(error, _attempt(job), spent=job.suspect)
    return {
        "status": Status.CANCELLED,
        "finished_at": now,
        "unique_key": None,
        "cancel_requested_at": None,
        "errors": bounded_errors(as_list(job.errors), error),
    }


def _attempt(job: Job) -> int:
    """The attempt a dead worker's job was in: a suspect's was counted in its claim."""
    return job.attempts if job.suspect else job.attempts + 1


def worker_lost_error(job: Job, when: datetime) -> dict[str, str]:
    lease, claimed = job.lease_expires_at, job.claimed_at
    expired = (
        f"its lease expired at {lease:%Y-%m-%d %H:%M:%S%z}" if lease else "it held the job with no lease"
    )
    if claimed is not None:
        expired = f"claimed at {claimed:%Y-%m-%d %H:%M:%S%z}, {expired}"
    if job.suspect:
        what = (
            f"The worker {job.owner} stopped heartbeating while running this job alone ({expired}); "
            "it was probably killed or crashed, and this attempt counts."
        )
    else:
        what = (
            f"The worker {job.owner} stopped heartbeating while holding this job ({expired}); it was "
            "probably killed or crashed. It had claimed the job in a batch, which records no start, "
            "so whether the job had started is not known: this run does not count, and the job "
            "comes back as a suspect, to be run alone."
        )
    return {
        "exception_class_path": WORKER_LOST,
        "traceback": what,
        "at": when.isoformat(),
        "worker": job.owner or "",
    }
