"""The changes people make to jobs in the admin (requeue, cancel, run now):
what each calls, when its button shows, and how it reports what it did;
and applying one to selected jobs, a chunk at a time with their rows
locked, so that what changed is known exactly (operations/selections.py,
which also changes a big selection as an operation job). actions.py runs
them as list actions and page buttons."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet
from django.utils.translation import ngettext

from ..models import Job, Status
from ..operations.selections import VERBS, State, change_locked

__all__ = ["CHANGES", "Change", "State", "change_locked", "chunks", "jobs", "label_rank", "status_rank"]

READY, RUNNING = Status.READY, Status.RUNNING
FINISHED = (Status.SUCCESSFUL, Status.FAILED, Status.CANCELLED)
STATUS_ORDER = (READY, RUNNING, *FINISHED)


@dataclass(frozen=True)
class Change:
    method: str  # the JobQuerySet method that makes it
    verb: str
    why: str  # why the jobs it skips were skipped
    # How the page button is labelled, and which jobs show it. The queryset
    # method decides for itself; this only spares people buttons that would
    # do nothing.
    button: str
    applies: Callable[[Job, datetime], bool]
    # What the message says it did, singular and plural, with %(count)d.
    did: tuple[str, str]
    unchanged_ready: str = "ready"  # how to name a READY job it left alone
    # What it did to a RUNNING job, for an action that changes them (cancel
    # asks their workers to stop them): the log's verb, and the message.
    asked_verb: str = ""
    asked: tuple[str, str] = ("", "")


CHANGES = {
    "requeue": Change(
        "requeue",
        VERBS["requeue"],
        "only failed, cancelled or successful jobs can be requeued",
        "Requeue",
        lambda job, now: job.status in FINISHED,
        ("Requeued %(count)d job.", "Requeued %(count)d jobs."),
    ),
    "cancel": Change(
        "cancel",
        VERBS["cancel"],
        "finished jobs cannot be cancelled, and a running job is asked to stop once",
        "Cancel",
        # WAITING: a job whose parents have not all finished (workflows).
        lambda job, now: job.status in (READY, Status.WAITING) or asked_nothing_yet(job),
        ("Cancelled %(count)d job.", "Cancelled %(count)d jobs."),
        asked_verb="Asked to stop",
        asked=(
            "Asked %(count)d running job to stop: it ends CANCELLED when its worker stops it.",
            "Asked %(count)d running jobs to stop: they end CANCELLED when their workers stop them.",
        ),
    ),
    "run_now": Change(
        "run_now",
        VERBS["run_now"],
        "only ready jobs waiting for a later time can be made due",
        "Run now",
        lambda job, now: job.status == READY and job.run_after > now,
        ("Made %(count)d job due now.", "Made %(count)d jobs due now."),
        unchanged_ready="ready and already due",
    ),
}


def jobs(n: int) -> str:
    return ngettext("%(count)d job", "%(count)d jobs", n) % {"count": n}


def asked_nothing_yet(job: Job) -> bool:
    """A running job nobody has asked to stop yet."""
    return job.status == RUNNING and job.cancel_requested_at is None


def status_rank(status: str) -> int:
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)


def label_rank(label: str) -> tuple[int, str]:
    """Skipped jobs' labels in the order of their statuses ("running and ..." with running)."""
    return status_rank(label.split()[0].upper()), label


def chunks(queryset: QuerySet, size: int) -> Iterator[list[int]]:
    """The selected ids in ascending runs of ``size``, without reading them all at once."""
    ids = queryset.order_by("pk").values_list("pk", flat=True)
    last = None
    while True:
        page = list((ids if last is None else ids.filter(pk__gt=last))[:size])
        if not page:
            return
        yield page
        last = page[-1]
