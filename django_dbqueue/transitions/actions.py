"""People's actions on jobs, as the admin and user code call them: requeue
finished jobs, cancel unstarted ones (and ask for running ones to be
cancelled), run waiting ones now, prune old ones."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Q

from ..clock import DbNow
from ..payload import as_list
from ..status import FINISHED, Status
from .pruning import BATCH as PRUNE_BATCH
from .pruning import prune_jobs
from .rows import READY
from .running import RunningQuerySet
from .updates import RowUpdate

if TYPE_CHECKING:
    from ..models import Job

# Requeued runs a job keeps in ``history``.
MAX_HISTORY = 10
# What a running job reported and saved, which a requeued job starts without.
CONTROL_FIELDS = (
    "cancel_requested_at",
    "progress",
    "progress_message",
    "progress_at",
    "checkpoint",
    "interruptions",
    "snoozes",
)


# What a requeued job starts from (besides its history and a due now).
CLEAN_RUN: dict[str, Any] = {
    "status": READY,
    "attempts": 0,
    "suspect": False,
    "owner": None,
    "lease_expires_at": None,
    "claimed_at": None,
    "started_at": None,
    "last_attempted_at": None,
    "finished_at": None,
    "return_value": None,
    "errors": [],
    "worker_ids": [],
    **dict.fromkeys(CONTROL_FIELDS, None),
    "progress_message": "",
    "interruptions": 0,
    "snoozes": 0,
    # A person asked for this run: the deadline (expires=) was the first
    # run's, and would end a job requeued after it at once.
    "expires_at": None,
}


class ActionQuerySet(RunningQuerySet):
    def requeue(self) -> int:
        """Put finished jobs back in the queue, due now, for a clean run: fresh
        attempts, no errors, no times; each earlier run is kept as a summary
        in ``history`` (the latest MAX_HISTORY). A requeued job holds no
        unique key: its key was freed when it finished, and may be held by
        a newer job by now. Nor does it keep its progress, checkpoint,
        interruptions or deadline (``expires_at``): it starts from the
        beginning, and runs whenever a worker reaches it."""
        count = 0
        with transaction.atomic(using=self.db):
            jobs = list(self.finished().annotate(db_now=DbNow()).select_for_update().order_by("pk"))
            for start in range(0, len(jobs), 500):
                part = jobs[start : start + 500]
                # One UPDATE of the values every row gets, and each row's own
                # history by primary key: bulk_update() compiled a CASE per
                # field and row, 12 s of Python for 1,000 jobs.
                update = RowUpdate(self.model, self.db)
                update.set_by_pk(
                    "history", {job.pk: [*as_list(job.history), _summary(job)][-MAX_HISTORY:] for job in part}
                )
                for name, value in CLEAN_RUN.items():
                    update.set(name, value)
                update.set("run_after", part[0].db_now)
                count += update.run([job.pk for job in part])
            # A finished batch with a member back in the queue is open again:
            # it completes, and runs its callbacks, when that member finishes.
            reopened = {job.batch_id for job in jobs if job.batch_id is not None}
            if reopened:
                from ..workflows.models import Batch, BatchStatus

                Batch.objects.using(self.db).filter(pk__in=reopened).exclude(status=BatchStatus.OPEN).update(
                    status=BatchStatus.OPEN, finished_at=None
                )
            if jobs:
                from .dependants import wait_again

                # A child waits again for its parents that are unfinished now.
                wait_again(self.db, [job.pk for job in jobs])
        return count

    def cancel(self) -> int:
        """Cancel these jobs: those that have not started (READY, or WAITING
        for their parents) at once, and in the same transaction their
        batches may complete and their dependants are cancelled or released
        (cascade.py); RUNNING ones are asked to stop
        (``request_cancel()``: their worker ends them CANCELLED). Finished
        jobs are left alone. Returns how many were cancelled or asked."""
        from .cascade import jobs_finished

        unstarted = self.filter(status__in=(READY, Status.WAITING))
        with transaction.atomic(using=self.db):
            followed = unstarted.filter(Q(batch__isnull=False) | Q(has_dependants=True))
            ids = list(followed.select_for_update().values_list("pk", flat=True))
            count = unstarted.update(
                status=Status.CANCELLED, finished_at=DbNow(), unique_key=None, cancel_requested_at=None
            )
            if ids:
                jobs_finished(self.db, ids)
        return count + self.request_cancel()

    def run_now(self) -> int:
        """Make READY jobs that wait for a future ``run_after`` due now."""
        return self.ready().filter(run_after__gt=DbNow()).update(run_after=DbNow())

    def prune(self, older_than: timedelta, *, batch: int = PRUNE_BATCH) -> int:
        """Delete these jobs that finished more than ``older_than`` ago, the
        way retention does (pruning.py): per outcome, in short
        transactions of ``batch`` rows that skip rows others hold, with
        their Dependency rows. Returns how many jobs were deleted."""
        return sum(prune_jobs(self, dict.fromkeys(FINISHED, older_than), size=batch).values())


def _summary(job: Job) -> dict[str, Any]:
    """One earlier run of a requeued job, as kept in ``history``."""

    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    errors = as_list(job.errors)
    return {
        "requeued_at": iso(job.db_now),  # type: ignore[attr-defined]
        "status": job.status,
        "attempts": job.attempts,
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "workers": as_list(job.worker_ids),
        "last_error": errors[-1] if errors else None,
        "interruptions": job.interruptions,
        "snoozes": job.snoozes,
        "expires_at": iso(job.expires_at),
    }
