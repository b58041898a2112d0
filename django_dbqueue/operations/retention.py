"""Deleting finished jobs past their retention (``OPTIONS["RETENTION"]``),
in small batches that never hold long locks.

Each batch is one short transaction: lock up to BATCH finished rows past
their outcome's age (``SKIP LOCKED``, so pruners on several hosts take
different rows and never wait for each other), delete them by primary key,
commit. Claims lock READY rows only, so a prune never blocks one; its cost
to a claim is the I/O and the purge of deleted index entries, which the
benchmark measures (benchmarks/prune.py).

The Dependency rows of pruned jobs go with them, just after (in a
transaction of their own); a workflow's Batch row goes once no member is
left and it finished longer ago than the longest retention. ``JobQuerySet.prune()``
deletes through the same batches.

Rate slots (rates.py) free for longer than SLOT_IDLE are deleted too, with
or without a retention: a key met once (a customer's) would otherwise keep
its N rows for ever. A claim treats a missing slot as a free one and makes
it again, so the prune changes no limit. So are concurrency keys'
ConcurrencyLock rows once no unfinished job has the key: a claim makes a
key's row when it meets one.

Ages are on the database's clock. Every heartbeat process prunes a little
on each beat (:class:`Pruner`); ``manage.py prunejobs`` prunes on demand.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Exists, OuterRef

from ..clock import DbNow
from ..db import DB_ERRORS, is_outage
from ..status import Status

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from ..backend import DatabaseBackend
    from ..models import Job

logger = logging.getLogger("django_dbqueue")

BATCH = 500
# Seconds of pruning per heartbeat beat at most (and at most a quarter of the
# beat's interval), so leases are extended on time.
BEAT_BUDGET = 1.0
# With nothing (or little) left to prune, look again after this many seconds.
IDLE_INTERVAL = 60.0
# A rate slot free for this long is deleted.
SLOT_IDLE = timedelta(hours=1)


def expired(using: str, outcome: str, days: float) -> QuerySet[Job]:
    """Finished jobs with ``outcome`` that finished more than ``days`` ago."""
    return past(all_jobs(using), outcome, timedelta(days=days))


def past(jobs: QuerySet[Job], outcome: str, age: timedelta) -> QuerySet[Job]:
    """The jobs of ``jobs`` with ``outcome`` that finished more than ``age`` ago."""
    return jobs.filter(status=outcome, finished_at__lt=DbNow() - age)


def all_jobs(using: str) -> QuerySet[Job]:
    from ..models import Job

    return Job.objects.using(using)


def delete_batch(using: str, outcome: str, days: float, size: int = BATCH) -> int:
    """Delete up to ``size`` expired jobs in one short transaction."""
    return delete_past(all_jobs(using), outcome, timedelta(days=days), size)


def delete_past(jobs: QuerySet[Job], outcome: str, age: timedelta, size: int = BATCH) -> int:
    """Delete up to ``size`` of ``jobs`` that ended ``outcome`` more than
    ``age`` ago in one short transaction, then their Dependency rows."""
    with transaction.atomic(using=jobs.db):
        ids = list(
            past(jobs, outcome, age).select_for_update(skip_locked=True).values_list("pk", flat=True)[:size]
        )
        if not ids:
            return 0
        # The status and age again: nothing requeued them meanwhile, as they are locked.
        deleted = jobs.model._base_manager.using(jobs.db).filter(pk__in=ids).delete()[0]
    forget_dependencies(jobs.db, ids)
    return deleted


def forget_dependencies(using: str, ids: list[int]) -> int:
    """Delete the Dependency rows of the deleted jobs ``ids`` (as children).
    In a transaction of its own, after the jobs' delete committed, so that
    pruning jobs never waits on that table; a row another transaction holds
    is skipped, and stays, harmless, with no child to hold back."""
    from ..workflows.models import Dependency

    rows = Dependency.objects.using(using)
    with transaction.atomic(using=using):
        held = list(
            rows.filter(child_id__in=ids).select_for_update(skip_locked=True).values_list("pk", flat=True)
        )
        return rows.filter(pk__in=held).delete()[0] if held else 0


def delete_old_batches(using: str, age: timedelta, size: int = BATCH) -> int:
    """Delete up to ``size`` batches that finished more than ``age`` ago and
    have no member left (all pruned), in one short transaction. Such a batch
    cannot open again: only a member's requeue or a running member reopens
    or extends one."""
    from ..workflows.models import Batch, BatchStatus

    members = all_jobs(using).filter(batch_id=OuterRef("pk"))
    batches = Batch.objects.using(using)
    old = batches.exclude(status=BatchStatus.OPEN).filter(finished_at__lt=DbNow() - age)
    with transaction.atomic(using=using):
        ids = list(
            old.filter(~Exists(members))
            .select_for_update(skip_locked=True)
            .values_list("pk", flat=True)[:size]
        )
        return batches.filter(pk__in=ids).delete()[0] if ids else 0


def delete_idle_slots(using: str, size: int = BATCH) -> int:
    """Delete up to ``size`` rate slots that have been free for more than
    SLOT_IDLE, in one short transaction; a slot a claim holds is skipped."""
    from ..models import RateSlot

    slots = RateSlot.objects.using(using)
    idle = slots.filter(free_at__lt=DbNow() - SLOT_IDLE).order_by("free_at")
    with transaction.atomic(using=using):
        ids = list(idle.select_for_update(skip_locked=True).values_list("pk", flat=True)[:size])
        return slots.filter(pk__in=ids).delete()[0] if ids else 0


def delete_idle_locks(using: str, size: int = BATCH) -> int:
    """Delete up to ``size`` ConcurrencyLock rows of keys with no unfinished
    job, in one short transaction; a row a claim holds is skipped. A claim
    makes its key's row again when it next meets the key (transitions/claim.py,
    _lock_keys), so this only keeps keys used once (per user, per order) from
    growing the table for ever."""
    from ..models import ConcurrencyLock

    locks = ConcurrencyLock.objects.using(using)
    unfinished = all_jobs(using).filter(
        concurrency_key=OuterRef("key"), status__in=(Status.READY, Status.RUNNING, Status.WAITING)
    )
    idle = locks.filter(~Exists(unfinished))
    # The look, over every key, takes no lock (0.5-0.8 s for 50,000 keys with
    # jobs, on the machine of docs/performance.md); the lock, by id, only
    # the rows it found, looked at again.
    found = list(idle.values_list("pk", flat=True)[:size])
    if not found:
        return 0
    with transaction.atomic(using=using):
        ids = list(idle.filter(pk__in=found).select_for_update(skip_locked=True).values_list("pk", flat=True))
        return locks.filter(pk__in=ids).delete()[0] if ids else 0


def prune_jobs(
    jobs: QuerySet[Job],
    ages: Mapping[str, timedelta],
    *,
    size: int = BATCH,
    deadline: float | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, int]:
    """Delete the jobs of ``jobs`` past their outcome's age in ``ages``,
    batch by batch, until none is left or the ``deadline`` (monotonic
    clock) has passed; returns how many were deleted per outcome. The one
    way jobs are pruned: ``JobQuerySet.prune()``, :func:`prune`, and so
    ``prunejobs`` and the heartbeat, all come here."""
    deleted = dict.fromkeys(ages, 0)
    for outcome, age in ages.items():
        while deadline is None or time.monotonic() < deadline:
            n = delete_past(jobs, outcome, age, size)
            deleted[outcome] += n
            if progress is not None and n:
                progress(outcome, deleted[outcome])
            if n < size:
                break
    return deleted


def prune(
    using: str,
    retention: Mapping[str, float],
    *,
    size: int = BATCH,
    budget: float | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, int]:
    """Delete expired jobs of every outcome in ``retention`` (days), batch by
    batch, until none is left or ``budget`` seconds have passed; returns how
    many were deleted per outcome. Then, with time left, the batches that
    finished longer ago than the longest retention and have no member left."""
    deadline = None if budget is None else time.monotonic() + budget
    ages = {outcome: timedelta(days=days) for outcome, days in retention.items()}
    deleted = prune_jobs(all_jobs(using), ages, size=size, deadline=deadline, progress=progress)
    batches = 0
    while ages and (deadline is None or time.monotonic() < deadline):
        n = delete_old_batches(using, max(ages.values()), size)
        batches += n
        if n < size:
            break
    if batches:
        logger.info("Pruned %d finished batches with no member left.", batches)
    return deleted


class Pruner:
    """The heartbeat's share of retention: a little on each beat while a
    backlog lasts, then one look every IDLE_INTERVAL seconds."""

    def __init__(self, backend: DatabaseBackend) -> None:
        self.using = backend.database
        self.retention = dict(backend.config.RETENTION)
        # Never long enough to delay the next lease extension noticeably.
        self.budget = min(BEAT_BUDGET, backend.config.heartbeat_interval / 4)
        self.next_at = 0.0

    def run(self) -> int:
        if time.monotonic() < self.next_at:
            return 0
        started = time.monotonic()
        try:
            slots = delete_idle_slots(self.using)
            locks = delete_idle_locks(self.using)
            deleted = prune(self.using, self.retention, budget=self.budget) if self.retention else {}
        except DB_ERRORS as exc:
            if is_outage(exc, self.using):
                raise
            logger.warning("Pruning finished jobs failed (%s); trying again later.", exc)
            self.next_at = time.monotonic() + IDLE_INTERVAL
            return 0
        total = sum(deleted.values())
        if total:
            logger.info(
                "Pruned %d finished jobs past their retention (%s).",
                total,
                ", ".join(f"{outcome} {n}" for outcome, n in deleted.items() if n),
            )
        if slots:
            logger.info("Deleted %d rate slots idle for more than %s.", slots, SLOT_IDLE)
        if locks:
            logger.info("Deleted %d concurrency locks of keys with no unfinished job.", locks)
        # It used its whole budget: more is waiting, carry on at the next beat.
        backlog = time.monotonic() - started >= self.budget or slots >= BATCH or locks >= BATCH
        self.next_at = 0.0 if backlog else time.monotonic() + IDLE_INTERVAL
        return total
