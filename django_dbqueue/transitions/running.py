"""Control over running jobs: ask for a cancel, save a running job's progress
and checkpoint, end it CANCELLED, or give it back unfinished (interrupt).

Everything a worker writes here is conditional on its lease (``owner`` and
RUNNING), like an outcome: a worker that lost its job (it was paused, the
job was recovered and runs elsewhere) writes nothing, and learns so from
the return value."""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.db.models import F

from ..clock import DbNow
from ..payload import as_list, bounded_errors, for_attempt
from ..status import Status
from .outcomes import UNCHANGED, Finished, OutcomeQuerySet, unspent_attempt
from .rows import READY, RUNNING

if TYPE_CHECKING:
    from ..models import Job

JOB_CANCELLED = "django_dbqueue.exceptions.JobCancelled"
JOB_INTERRUPTED = "django_dbqueue.exceptions.JobInterrupted"
# progress_message's column width.
MESSAGE_CHARS = 255


class RunningQuerySet(OutcomeQuerySet):
    def request_cancel(self) -> int:
        """Ask the workers running these jobs to cancel them: RUNNING jobs
        without a request get ``cancel_requested_at`` (the database's now).
        The worker learns of it within ``CONTROL_INTERVAL``; the job ends
        CANCELLED (see docs/cancel.md). Returns how many were asked."""
        return self.running().filter(cancel_requested_at__isnull=True).update(cancel_requested_at=DbNow())

    def save_progress(self, owner: str, pk: int, fraction: float | None, message: str | None) -> bool:
        """Write a running job's latest progress, if ``owner`` still holds it.
        ``fraction`` is clamped to 0..1 and ``message`` cut to 255
        characters; None leaves that column as it is."""
        changes: dict[str, Any] = {"progress_at": DbNow()}
        fraction = clamp(fraction)
        if fraction is not None:
            changes["progress"] = fraction
        if message is not None:
            changes["progress_message"] = message[:MESSAGE_CHARS]
        return bool(self.filter(pk=pk, owner=owner, status=RUNNING).update(**changes))

    def save_checkpoint(self, owner: str, pk: int, checkpoint: Any) -> bool:
        """Save a running job's cursor (any JSON value), if ``owner`` still holds it."""
        return bool(self.filter(pk=pk, owner=owner, status=RUNNING).update(checkpoint=checkpoint))

    def cancel_running(
        self, owner: str, pk: int, error: dict[str, str], started: datetime | None = None
    ) -> bool:
        """End a job ``owner`` runs CANCELLED, if it still holds it: its
        attempt counts (it ran), ``error`` is appended to its errors, and its
        batch and dependants follow in the same transaction, as for any
        finished job. ``started``: when this attempt started (default: now,
        for a caller that cannot know, such as a supervisor whose worker it killed)."""
        with transaction.atomic(using=self.db):
            job = self._held(owner, [pk]).first()
            if job is None:
                return False
            now = job.db_now  # type: ignore[attr-defined]
            outcome = Finished(job, started or now, now, status=Status.CANCELLED, error=error)
            return bool(self.record(owner, outcome))

    def interrupt(
        self,
        owner: str,
        pks: list[int],
        error_note: dict[str, str] | None = None,
        checkpoints: dict[int, Any] | None = None,
    ) -> int:
        """Give jobs ``owner`` runs back unfinished (the worker is stopping for
        a deploy): READY and due now, their attempt unspent (a suspect's,
        counted in its claim, is given back), ``interruptions`` + 1, their
        checkpoint kept, or replaced by ``checkpoints[pk]``; ``error_note``
        (by default, one saying the supervisor gave the job back) is
        appended to their errors, for the attempt it does not count, so the
        job's page tells the interruption. A job whose cancel was asked meanwhile
        ends CANCELLED instead. Returns how many ``owner`` still held."""
        done = 0
        with transaction.atomic(using=self.db):
            for job in self._held(owner, pks):
                now = job.db_now  # type: ignore[attr-defined]
                saved = (checkpoints or {}).get(job.pk, UNCHANGED)
                if job.cancel_requested_at is not None:
                    error = cancelled_error(job, now, owner, "while the worker was stopping")
                    outcome = Finished(job, now, now, status=Status.CANCELLED, error=error, checkpoint=saved)
                    done += self.record(owner, outcome)
                    continue
                changes: dict[str, Any] = {
                    "status": READY,
                    "owner": None,
                    "lease_expires_at": None,
                    "run_after": now,
                    "attempts": job.attempts - 1 if job.suspect else job.attempts,
                    "interruptions": F("interruptions") + 1,
                }
                note = error_note or interrupted_note(now, owner)
                entry = for_attempt(note, unspent_attempt(job), spent=False)
                changes["errors"] = bounded_errors(as_list(job.errors), entry)
                if saved is not UNCHANGED:
                    changes["checkpoint"] = saved
                done += self.filter(pk=job.pk, owner=owner, status=RUNNING).update(**changes)
        return done

    def _held(self, owner: str, pks: list[int]) -> models.QuerySet[Job]:
        """The rows of ``pks`` ``owner`` holds, locked, with the database's now."""
        rows = self.model._base_manager.using(self.db).filter(pk__in=pks, owner=owner, status=RUNNING)
        return rows.annotate(db_now=DbNow()).select_for_update().order_by("pk")


def clamp(fraction: float | None) -> float | None:
    """A reported fraction as stored: within 0..1; None for none (or NaN)."""
    if fraction is None or math.isnan(fraction):
        return None
    return min(1.0, max(0.0, float(fraction)))


def interrupted_note(when: datetime, worker: str) -> dict[str, str]:
    """The entry of an interruption whose worker could not say more (its
    supervisor gave the job back after killing it)."""
    return {
        "exception_class_path": JOB_INTERRUPTED,
        "traceback": (
            f"{JOB_INTERRUPTED}: its worker was stopping past STOP_TIMEOUT and did not stop the job "
            "itself, so its supervisor killed it and gave the job back, its attempt unspent.\n"
        ),
        "at": when.isoformat(),
        "worker": worker,
    }


def cancelled_error(job: Job, when: datetime, worker: str, how: str) -> dict[str, str]:
    """The error entry of a job cancelled while it was running (or claimed)."""
    asked = job.cancel_requested_at
    when_asked = f" (requested at {asked.isoformat()})" if asked is not None else ""
    return {
        "exception_class_path": JOB_CANCELLED,
        "traceback": f"{JOB_CANCELLED}: cancelled {how}{when_asked}.\n",
        "at": when.isoformat(),
        "worker": worker,
    }
