"""The deletes of retention, each one short transaction that skips rows
others hold (``SKIP LOCKED``): finished jobs past their outcome's age and
their Dependency rows, finished batches with no member left, idle rate slots
and concurrency keys. operations/retention.py decides when and how much;
``JobQuerySet.prune()`` deletes through the same :func:`prune_jobs`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections, transaction
from django.db.models import Exists, OuterRef

from .. import tables
from ..clock import DbNow
from ..status import Status
from .rows import keyed

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from ..models import Job

BATCH = 500
# A rate slot free for this long is deleted.
SLOT_IDLE = timedelta(hours=1)


def expired(using: str, outcome: str, days: float) -> QuerySet[Job]:
    """Finished jobs with ``outcome`` that finished more than ``days`` ago."""
    return past(all_jobs(using), outcome, timedelta(days=days))


def past(jobs: QuerySet[Job], outcome: str, age: timedelta) -> QuerySet[Job]:
    """The jobs of ``jobs`` with ``outcome`` that finished more than ``age`` ago."""
    return jobs.filter(status=outcome, finished_at__lt=DbNow() - age)


def all_jobs(using: str) -> QuerySet[Job]:
    Job = tables.job()

    return Job.objects.using(using)


def delete_batch(using: str, outcome: str, days: float, size: int = BATCH) -> int:
    """Delete up to ``size`` expired jobs in one short transaction."""
    return delete_past(all_jobs(using), outcome, timedelta(days=days), size)


def delete_past(
    jobs: QuerySet[Job], outcome: str, age: timedelta, size: int = BATCH, archive: bool = False
) -> int:
    """Delete up to ``size`` of ``jobs`` that ended ``outcome`` more than
    ``age`` ago in one short transaction (with ``archive``, copied into
    ArchivedJob in it first), then their Dependency rows."""
    with transaction.atomic(using=jobs.db):
        ids = list(
            past(jobs, outcome, age).select_for_update(skip_locked=True).values_list("pk", flat=True)[:size]
        )
        if not ids:
            return 0
        locked = jobs.model._base_manager.using(jobs.db).filter(pk__in=ids)
        if archive:
            archive_rows(locked)
        # The status and age again: nothing requeued them meanwhile, as they are locked.
        deleted = locked.delete()[0]
    forget_dependencies(jobs.db, ids)
    forget_windows(jobs.db, ids)
    tables.job_tag().objects.using(jobs.db).filter(job_id__in=ids).delete()
    return deleted


def archive_rows(rows: QuerySet[Job]) -> int:
    """Copy ``rows`` (locked, about to be deleted) into ArchivedJob: the
    columns people look jobs up by, and every column as JSON. A job id met
    again (a server that reused an id) replaces its older copy."""
    Archived = tables.archived_job()
    copies = []
    for job in rows:
        row = {field.attname: getattr(job, field.attname) for field in job._meta.concrete_fields}
        copies.append(
            Archived(
                id=job.pk,
                task_path=job.task_path,
                queue_name=job.queue_name,
                status=job.status,
                enqueued_at=job.enqueued_at,
                finished_at=job.finished_at,
                row=json.loads(json.dumps(row, cls=DjangoJSONEncoder)),
            )
        )
    kept = ("task_path", "queue_name", "status", "enqueued_at", "finished_at", "archived_at", "row")
    # MySQL and MariaDB upsert on any unique key (here, the id) and take no target.
    target = ["id"] if connections[rows.db].features.supports_update_conflicts_with_target else None
    Archived.objects.using(rows.db).bulk_create(
        copies, update_conflicts=True, update_fields=kept, unique_fields=target
    )
    return len(copies)


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


def forget_windows(using: str, ids: list[int]) -> int:
    """Delete the UniqueWindow rows of the deleted jobs ``ids``: a window's
    key holds while its job's row is kept (enqueue/windows.py). After the
    jobs' delete committed, as forget_dependencies(); a row left behind is
    given up by the next call of its window, which finds no job."""
    windows = tables.unique_window().objects.using(using)
    return windows.filter(job_id__in=ids).delete()[0]


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
    RateSlot = tables.rate_slot()

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
    ConcurrencyLock = tables.concurrency_lock()

    locks = ConcurrencyLock.objects.using(using)
    unfinished = keyed(all_jobs(using), OuterRef("key"), (Status.READY, Status.RUNNING, Status.WAITING))
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
    archive: bool = False,
) -> dict[str, int]:
    """Delete the jobs of ``jobs`` past their outcome's age in ``ages``,
    batch by batch, until none is left or the ``deadline`` (monotonic
    clock) has passed; returns how many were deleted per outcome. The one
    way jobs are pruned: ``JobQuerySet.prune()``, :func:`prune`, and so
    ``prunejobs`` and the heartbeat, all come here."""
    deleted = dict.fromkeys(ages, 0)
    for outcome, age in ages.items():
        while deadline is None or time.monotonic() < deadline:
            n = delete_past(jobs, outcome, age, size, archive)
            deleted[outcome] += n
            if progress is not None and n:
                progress(outcome, deleted[outcome])
            if n < size:
                break
    return deleted
