"""People's changes to selected jobs (requeue, cancel, run now), a chunk at
a time with their rows locked, so that what changed is known exactly: the
admin's actions on a few jobs call ``change_locked`` directly, and on more
than OPTIONS ``OPERATION_INLINE_ROWS`` start a :class:`ChangeJobs`
operation job (operations/big.py) that records who changed which job in
Django's admin log, chunk by chunk.

A selection has no row to decide on, as a batch has: a selected job that
a worker claims before its chunk is reached is RUNNING by then, and a
cancel asks its worker to stop it (``JobQuerySet.cancel()``), as it would
for any running job."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from ..status import Status
from .big import Step

METHODS = ("requeue", "cancel", "run_now")
# What the admin log says of a changed job, and of a running one asked to stop.
VERBS = {"requeue": "Requeued", "cancel": "Cancelled", "run_now": "Made due now"}
ASKED_VERB = "Asked to stop"


@dataclass(frozen=True)
class State:
    """What an action may change in a job's row."""

    status: str
    due: datetime
    cancel_requested_at: datetime | None

    @property
    def label(self) -> str:
        """How a skipped job is named in the message: its status, or more."""
        if self.status == Status.RUNNING and self.cancel_requested_at is not None:
            return "running and already asked to stop"
        return self.status.lower()


def change_locked(rows: QuerySet, ids: list[int], method: str) -> tuple[dict[int, State], dict[int, State]]:
    """Apply the JobQuerySet ``method`` to the jobs ``ids`` with their rows
    locked, so what changed is known exactly: the rows whose state differs
    afterwards. Returns each job's state before and after."""
    columns = ("pk", "status", "run_after", "cancel_requested_at")
    with transaction.atomic(using=rows.db):
        selected = rows.filter(pk__in=ids)
        was = {pk: State(*state) for pk, *state in selected.select_for_update().values_list(*columns)}
        getattr(selected, method)()
        after = {pk: State(*state) for pk, *state in selected.values_list(*columns)}
    return was, after


def runs(ids: Iterable[int]) -> list[list[int]]:
    """Sorted ids as ``[first, last]`` runs of consecutive ids: a selection
    of 100,000 jobs is often a few runs, not 100,000 numbers in a job's row."""
    found: list[list[int]] = []
    for pk in sorted(set(ids)):
        if found and pk == found[-1][1] + 1:
            found[-1][1] = pk
        else:
            found.append([pk, pk])
    return found


def next_ids(spans: list[list[int]], after: int, size: int) -> list[int]:
    """Up to ``size`` ids of ``spans`` past ``after``, in order."""
    ids: list[int] = []
    start = bisect_right([last for _, last in spans], after)
    for first, last in spans[start:]:
        pk = max(first, after + 1)
        while pk <= last and len(ids) < size:
            ids.append(pk)
            pk += 1
        if len(ids) >= size:
            break
    return ids


class ChangeJobs:
    """``{"method": "cancel", "ids": runs(ids), "user": user id or None}``:
    the JobQuerySet method on the selected jobs, ``size`` of them per
    transaction, in id order; the position is the last id done."""

    def decide(self, using: str, params: dict[str, Any]) -> int | None:
        if params.get("method") not in METHODS:
            raise ValueError(
                f"ChangeJobs changes jobs by {', '.join(METHODS)}, not {params.get('method')!r}."
            )
        total = sum(last - first + 1 for first, last in params["ids"])
        return total or None

    def chunk(self, using: str, params: dict[str, Any], cursor: Any, size: int) -> Step:
        from ..models import Job

        method = params["method"]
        if method not in METHODS:
            raise ValueError(f"ChangeJobs changes jobs by {', '.join(METHODS)}, not {method!r}.")
        ids = next_ids(params["ids"], int(cursor or 0), size)
        if not ids:
            return Step(cursor, 0, done=True)
        was, after = change_locked(Job.objects.using(using), ids, method)
        changed = {pk for pk, state in was.items() if after.get(pk) != state}
        asked = {pk for pk in changed if after[pk].status == Status.RUNNING}
        log(using, params.get("user"), method, {pk: was[pk].status for pk in changed}, asked)
        return Step(ids[-1], len(changed), done=len(ids) < size)


def log(using: str, user: Any, method: str, was: dict[int, str], asked: set[int]) -> None:
    """One admin log entry per changed job (as the admin's actions write
    them), if the admin is installed and a user asked for the change."""
    from django.apps import apps

    if not was or user is None or not apps.is_installed("django.contrib.admin"):
        return
    from django.contrib.admin.models import CHANGE, LogEntry

    from ..models import Job

    rows = list(Job.objects.using(using).filter(pk__in=list(was)).only("pk", "task_path", "status"))
    for status, stopping in sorted({(status, pk in asked) for pk, status in was.items()}):
        LogEntry.objects.log_actions(
            user_id=int(user),
            queryset=[job for job in rows if was[job.pk] == status and (job.pk in asked) == stopping],
            action_flag=CHANGE,
            change_message=f"{ASKED_VERB if stopping else VERBS[method]} (was {status}).",
        )
