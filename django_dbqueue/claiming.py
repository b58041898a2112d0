"""The worker's claim, shaped so that the claim index serves it.

Three shapes, all measured by the benchmark (``--only shapes``; figures in
README.md, "Claim shapes"):

- "candidates" (shape a): ``JobQuerySet.claim()``, for arbitrary filters: a
  plain read of candidate ids, then lock those by primary key. With one queue
  the index (status, queue_name, -priority, run_after) serves the read in
  claim order; it is the fastest shape there, so the worker uses it.
- "locking-select" (shape b): one ``SELECT ... ORDER BY ... LIMIT ... FOR
  UPDATE SKIP LOCKED`` walking that index for one queue. A statement fewer,
  but slower under contention; kept for measurement.
- "per-queue" (shape c), the worker's claim for several queues: with
  ``queue_name IN (...)`` no index range holds the rows in claim order, so a
  single read sorts every READY row of those queues. Instead one read takes
  the first ``limit`` ids of each queue in index order (a UNION ALL of
  per-queue reads), Python merges them in claim order, and those ids are
  locked by primary key as in shape a.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import connections, transaction
from django.utils import timezone

from .query import CLAIM_ORDER, READY, _claimable, _lock_if_serialised, mark_claimed
from .retry import retry_on_conflict

if TYPE_CHECKING:
    from .models import Job
    from .query import JobQuerySet

SHAPES = ("candidates", "locking-select", "per-queue")


def claim_from_queues(
    jobs: JobQuerySet, queues: list[str], owner: str, limit: int, lease: float, shape: str | None = None
) -> list[Job]:
    """Claim up to ``limit`` due jobs from ``queues`` in claim order, with the
    fastest shape for the number of queues unless ``shape`` names one."""
    if limit < 1:
        raise ValueError("claim() needs a limit of at least 1.")
    # Measured (README.md, "Claim shapes"): for one queue the candidates read (an
    # index-only read) then locking by primary key beat the single locking
    # select, which locks index and row entries and, under contention, steps
    # over the other claimer's locked entries; for several queues per-queue won.
    shape = shape or ("candidates" if len(queues) == 1 else "per-queue")
    if shape == "candidates":
        filtered = (
            jobs.filter(queue_name__in=queues) if len(queues) > 1 else jobs.filter(queue_name=queues[0])
        )
        return filtered.claim(owner, limit=limit, lease=lease)
    if shape == "locking-select":
        if len(queues) != 1:
            raise ValueError("The locking-select claim serves exactly one queue.")
        return retry_on_conflict(lambda: _locking_select(jobs, queues[0], owner, limit, lease), jobs.db)
    if shape == "per-queue":
        return retry_on_conflict(lambda: _per_queue(jobs, queues, owner, limit, lease), jobs.db)
    raise ValueError(f"Unknown claim shape {shape!r}; the shapes are {', '.join(SHAPES)}.")


def _locking_select(jobs: JobQuerySet, queue: str, owner: str, limit: int, lease: float) -> list[Job]:
    now = timezone.now()
    rows = jobs.model._base_manager.using(jobs.db)
    with transaction.atomic(using=jobs.db):
        _lock_if_serialised(jobs.db, jobs.model._meta.db_table)
        locked = rows.filter(status=READY, queue_name=queue, run_after__lte=now).order_by(*CLAIM_ORDER)
        batch = _claimable(list(locked.select_for_update(skip_locked=True)[:limit]))
        if batch:
            mark_claimed(rows, batch, owner, lease, now)
    return batch


def _per_queue(jobs: JobQuerySet, queues: list[str], owner: str, limit: int, lease: float) -> list[Job]:
    return jobs.claim_candidates(owner, limit, lease, lambda due, n: _merged_candidates(due, queues, n))


def _merged_candidates(due: JobQuerySet, queues: list[str], limit: int) -> list[int]:
    fields = ("pk", "priority", "run_after")
    reads = [due.filter(queue_name=q).order_by(*CLAIM_ORDER).values_list(*fields)[:limit] for q in queues]
    if len(reads) > 1 and connections[due.db].features.supports_slicing_ordering_in_compound:
        merged = list(reads[0].union(*reads[1:], all=True))  # one round trip
    else:
        merged = [row for read in reads for row in read]  # SQLite: no LIMIT inside UNION
    # Claim order across queues: the key the index orders each queue by.
    return [row[0] for row in sorted(merged, key=lambda row: (-row[1], row[2], row[0]))[:limit]]
