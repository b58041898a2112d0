"""A batch's completion: its last finisher, without a hot row, and what
completing writes (the batch's status and its callbacks' jobs).

A finishing member does not update its batch: it asks whether any
unfinished member is left.

1. ``FOR UPDATE SKIP LOCKED`` of one unfinished member: found, so this is
   not the last (that member's own finisher asks again later).
2. None found: the unfinished members, if any, are being written by other
   transactions right now. Lock the batch row, then read the unfinished
   members with a blocking locking read, which waits for those writers and
   reads what they committed. Two last finishers that wait for each other
   deadlock; the database rolls one back and the worker's write is retried
   whole (db.retry_on_conflict): by then the survivor has committed.
3. None unfinished: ``UPDATE batch ... WHERE status = 'OPEN'``; the one
   transaction whose UPDATE changes the row inserts the callbacks.

A dependant's parents are checked the same way on Dependency rows
(``last_unfinished``, dependants.py). SQLite has one writer at a time, so
plain reads are the latest there.
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import Count, Exists, OuterRef, Q

from .. import tables
from ..clock import DbNow
from ..status import Status
from .own_jobs import insert_callbacks
from .rows import of_batch

UNFINISHED = (Status.READY, Status.RUNNING, Status.WAITING)
FAILURES = (Status.FAILED, Status.CANCELLED)


def last_unfinished(using: str, rows: Any) -> bool:
    """Whether no row of ``rows`` (the unfinished ones of some group) is
    left, waiting for whoever is writing one right now (the module's steps 1-2)."""
    if connections[using].vendor == "sqlite":
        return not rows.exists()
    if list(rows.select_for_update(skip_locked=True).values_list("pk", flat=True)[:1]):
        return False
    return not list(rows.select_for_update().values_list("pk", flat=True))


def complete_if_last(using: str, batch_id: int) -> bool:
    """Complete the sealed, open batch ``batch_id`` if none of its members
    is unfinished, in the caller's transaction; whether it completed (its
    dependants are then the caller's to see to)."""
    from ..workflows.models import BatchStatus

    members = _jobs(using).filter(batch_id=batch_id)
    unfinished = members.filter(Q(status__in=(Status.READY, Status.RUNNING)) | Q(waits(using)))
    if connections[using].vendor != "sqlite" and unlocked_member(using, batch_id):
        return False  # the common case: not the last member
    batches = _batches(using)
    if not batches.filter(pk=batch_id, status=BatchStatus.OPEN, sealed=True).select_for_update().exists():
        return False
    if not last_unfinished(using, unfinished):
        return False
    return complete(using, batch_id)


def unlocked_member(using: str, batch_id: int) -> bool:
    """Step 1: whether an unfinished member no one is writing is left.
    One status at a time, newest first: the claim takes the oldest READY
    members, so the newest is found at the end of its index range
    instead of past the entries the claims have just moved out of it
    (measured: 1.1-1.9 ms instead of 1.7-9.4 ms on a 20,000-job batch)."""
    for status in UNFINISHED:
        members = of_batch(_jobs(using), batch_id, [status]).order_by("-pk")
        if status == Status.WAITING:
            members = members.filter(waits(using))
        if members.select_for_update(skip_locked=True).values_list("pk", flat=True)[:1]:
            return True
    return False


def complete(using: str, batch_id: int) -> bool:
    """OPEN → SUCCEEDED or FAILED by its members' outcomes, and its
    callbacks' jobs inserted; False if it was not OPEN."""
    from ..workflows.models import Batch, BatchStatus

    members = _jobs(using).filter(batch_id=batch_id).order_by()
    counts = dict(members.values_list("status").annotate(Count("pk")))
    failed = any(counts.get(status) for status in FAILURES)
    status = BatchStatus.FAILED if failed else BatchStatus.SUCCEEDED
    batches = _batches(using)
    if not batches.filter(pk=batch_id, status=BatchStatus.OPEN).update(status=status, finished_at=DbNow()):
        return False  # completed by someone else (cannot happen under the lock; cheap to say)
    batch = batches.annotate(now=DbNow()).get(pk=batch_id)
    first = "on_failure" if failed else "on_success"
    specs = [(first, getattr(batch, first)), ("on_finish", batch.on_finish)]
    called = [(name, spec) for name, spec in specs if spec]
    ids = insert_callbacks(using, batch_id, called, batch.now) if called else []
    if ids:
        # After the earlier completions' (a batch retried completes again): all are kept.
        earlier = batch.callback_job_ids if isinstance(batch.callback_job_ids, list) else []
        Batch.objects.using(using).filter(pk=batch_id).update(callback_job_ids=[*earlier, *ids])
    return True


def waits(using: str) -> Q:
    """A WAITING job that something will release: one with a parent not
    finished yet. A WAITING row with none (a plain INSERT may write any
    status and batch id) is never released, so its batch does not wait for
    it: ``insert_dependant`` writes a dependant and its Dependency rows in
    one transaction, and a release makes the job READY in the transaction
    that resolves its last one."""
    from ..workflows.models import Dependency

    unresolved = Dependency.objects.using(using).filter(child_id=OuterRef("pk"), resolved=False)
    return Q(status=Status.WAITING) & Q(Exists(unresolved))


def _batches(using: str) -> Any:
    from ..workflows.models import Batch

    return Batch.objects.using(using)


def _jobs(using: str) -> Any:
    Job = tables.job()

    return Job._base_manager.using(using)
