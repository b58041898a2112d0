"""People's actions on jobs, as the admin and user code call them: requeue
finished jobs, cancel unstarted ones (and ask for running ones to be
cancelled), run waiting ones now, prune old ones."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Q

from ..clock import DbNow
from ..operations.retention import BATCH as PRUNE_BATCH
from ..operations.retention import prune_jobs
from ..payload import as_list
from ..status import FINISHED, Status
from .rows import READY
from .running import RunningQuerySet

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
)


class ActionQuerySet(RunningQuerySet):
    def requeue(self) -> int:
        """Put finished jobs back in the queue, due now, for a clean run: fresh
        attempts, no errors, no times; each earlier run is kept as a summary
        in ``history`` (the latest MAX_HISTORY). A requeued job holds no
        unique key: its key was freed when it finished, and may be held by
        a newer job by now. Nor does it keep its progress, checkpoint or
        interruptions: it starts from the beginning."""
        fields = ["status", "attempts", "suspect", "owner", "lease_expires_at", "started_at"]
        fields += ["last_attempted_at", "finished_at", "return_value", "errors", "worker_ids", "history"]
        fields += ["run_after", *CONTROL_FIELDS]
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
                job.cancel_requested_at = job.progress = job.progress_at = job.checkpoint = None
                job.progress_message, job.interruptions = "", 0
            for start in range(0, len(jobs), 500):
                count += self.model._base_manager.using(self.db).bulk_update(
                    jobs[start : start + 500], fields
                )
            # A finished batch with a member back in the queue is open again:
            # it completes, and runs its callbacks, when that member finishes.
            reopened = {job.batch_id for job in jobs if job.batch_id is not None}
            if reopened:
                from ..workflows.models import Batch, BatchStatus

                Batch.objects.using(self.db).filter(pk__in=reopened).exclude(status=BatchStatus.OPEN).update(
                    status=BatchStatus.OPEN, finished_at=None, callback_job_ids=[]
                )
            if jobs:
                from ..workflows.dependencies import wait_again

                # A child waits again for its parents that are unfinished now.
                wait_again(self.db, [job.pk for job in jobs])
        return count

    def cancel(self) -> int:
        """Cancel these jobs: those that have not started (READY, or WAITING
        for their parents) at once, and in the same transaction their
        batches may complete and their dependants are cancelled or released
        (workflows/completion.py); RUNNING ones are asked to stop
        (``request_cancel()``: their worker ends them CANCELLED). Finished
        jobs are left alone. Returns how many were cancelled or asked."""
        from ..workflows.completion import jobs_finished

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
        way retention does (operations/retention.py): per outcome, in short
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
    }
