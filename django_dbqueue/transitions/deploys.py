"""Give back a job whose task the worker's code lacks: its module imports
but does not define the name, as during a rolling deploy while the hosts
that enqueue run newer code than the worker (worker/process/undeployed.py decides
when, and for how long). Not a failed attempt: READY again after a delay,
its attempt unspent. The give-backs so far are one entry of the job's
``errors`` (no column of their own), replaced at each give-back, so that
the job's last entry says since when, how often and on which workers."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..clock import DbNow
from ..payload import as_list, bounded_errors
from .rows import READY, RUNNING, JobRows

if TYPE_CHECKING:
    from ..models import Job

TASK_NOT_DEPLOYED = "django_dbqueue.exceptions.TaskNotDeployed"


class DeployQuerySet(JobRows):
    def give_back_undeployed(self, owner: str, job: Job, note: dict[str, Any], delay: timedelta) -> int:
        """Give ``job`` back, if ``owner`` still holds it: READY and due
        after ``delay``, its attempt unspent (a suspect's, counted in its
        claim, is given back), ``note`` its latest error entry in place of
        an earlier give-back's. Returns 1, or 0 if ``owner`` lost it."""
        errors = without_undeployed_note(job.errors)
        return self.filter(pk=job.pk, owner=owner, status=RUNNING).update(
            status=READY,
            owner=None,
            lease_expires_at=None,
            run_after=DbNow() + delay,
            attempts=job.attempts - 1 if job.suspect else job.attempts,
            errors=bounded_errors(errors, note),
        )


def undeployed_note(errors: Any) -> dict[str, Any] | None:
    """The entry of the give-backs so far, if it is the job's latest (a
    failed run since then starts the count again)."""
    entries = as_list(errors)
    last = entries[-1] if entries else None
    if isinstance(last, dict) and last.get("exception_class_path") == TASK_NOT_DEPLOYED and "since" in last:
        return last
    return None


def without_undeployed_note(errors: Any) -> list:
    entries = as_list(errors)
    return entries[:-1] if undeployed_note(entries) is not None else entries
