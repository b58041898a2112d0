"""The changes people make to jobs in the admin (requeue, cancel, run now):
what each calls, when its button shows, and how it reports what it did;
and applying one to selected jobs, a chunk at a time with their rows
locked, so that what changed is known exactly. actions.py runs them as
list actions and page buttons."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import QuerySet
from django.utils.translation import ngettext

from ..models import Job, Status

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
        "Requeued",
        "only failed, cancelled or successful jobs can be requeued",
        "Requeue",
        lambda job, now: job.status in FINISHED,
        ("Requeued %(count)d job.", "Requeued %(count)d jobs."),
    ),
    "cancel": Change(
        "cancel",
        "Cancelled",
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
        "Made due now",
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


@dataclass(frozen=True)
class State:
    """What an action may change in a job's row."""

    status: str
    due: datetime
    cancel_requested_at: datetime | None

    @property
    def label(self) -> str:
        """How a skipped job is named in the message: its status, or more."""
        if self.status == RUNNING and self.cancel_requested_at is not None:
            return "running and already asked to stop"
        return self.status.lower()


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


def change_locked(
    rows: QuerySet, ids: list[int], change: Change
) -> tuple[dict[int, State], dict[int, State]]:
    """Apply ``change`` to the jobs ``ids`` with their rows locked, so what
    changed is known exactly: the rows whose state differs afterwards.
    Returns each job's state before and after."""
    columns = ("pk", "status", "run_after", "cancel_requested_at")
    with transaction.atomic(using=rows.db):
        selected = rows.filter(pk__in=ids)
        was = {pk: State(*state) for pk, *state in selected.select_for_update().values_list(*columns)}
        getattr(selected, change.method)()
        after = {pk: State(*state) for pk, *state in selected.values_list(*columns)}
    return was, after
