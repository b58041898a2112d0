"""The worker's claim of ordinary jobs from its queues, shaped so that the
claim index serves it.

Three shapes, all measured by the benchmark (``--only shapes``; figures in
docs/performance.md, "Claim shapes"):

- "candidates" (shape a): ``JobQuerySet.claim()``, for arbitrary filters: a
  plain read of candidate ids, then lock those by primary key. With one queue
  the index (status, queue_name, concurrency_key, rate_key, fairness_key,
  -priority, run_after), with the three keys IS NULL, serves the read in
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

Shape c costs a UNION branch, and up to ``limit`` rows sent back, per queue:
past PER_QUEUE_MAX queues the worker uses shape a with ``queue_name IN
(...)`` instead, one sorted read whose cost follows the due backlog of those
queues, not their number (``benchmarks/many_queues.py``; docs/performance.md, "Many
queues").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import connections

from ..clock import DbNow
from ..db import retry_on_conflict
from ..status import Status
from .candidates import past
from .claim import CLAIM_ORDER, claim_key, ids_in_claim_order
from .compiled import once

if TYPE_CHECKING:
    from ..models import Job
    from . import JobQuerySet
    from .rows import JobRows

SHAPES = ("candidates", "locking-select", "per-queue")
# Measured on MariaDB with claims of 200: per-queue costs about 10 ms plus
# 1.3-2 ms per queue whatever the backlog; the single IN read about 20 ms at
# 10,000 due jobs and 55 ms at 100,000 whatever the number of queues. They
# cross near 10 queues at the first backlog and near 30 at the second.
PER_QUEUE_MAX = 30


def claim_from_queues(
    jobs: JobQuerySet, queues: list[str], owner: str, limit: int, lease: float, shape: str | None = None
) -> list[Job]:
    """Claim up to ``limit`` due jobs from ``queues`` in claim order, with the
    fastest shape for the number of queues unless ``shape`` names one."""
    if limit < 1:
        raise ValueError("claim() needs a limit of at least 1.")
    # Measured (docs/performance.md, "Claim shapes"): for one queue the candidates read (an
    # index-only read) then locking by primary key beat the single locking
    # select, which locks index and row entries and, under contention, steps
    # over the other claimer's locked entries; for several queues per-queue
    # won, until its one UNION branch per queue outweighed the single sort.
    shape = shape or ("candidates" if len(queues) == 1 or len(queues) > PER_QUEUE_MAX else "per-queue")
    if shape == "candidates":
        if jobs.query.has_filters():  # a caller's own filter: compiled per claim
            return of_queues(jobs, queues).claim(owner, limit=limit, lease=lease)
        return retry_on_conflict(
            lambda: jobs.claim_candidates(owner, lease, _first_ids(jobs, queues, limit)), jobs.db
        )
    if shape == "locking-select":
        if len(queues) != 1:
            raise ValueError("The locking-select claim serves exactly one queue.")
        return retry_on_conflict(lambda: _locking_select(jobs, queues[0], owner, limit, lease), jobs.db)
    if shape == "per-queue":
        return retry_on_conflict(lambda: _per_queue(jobs, queues, owner, limit, lease), jobs.db)
    raise ValueError(f"Unknown claim shape {shape!r}; the shapes are {', '.join(SHAPES)}.")


def _locking_select(jobs: JobQuerySet, queue: str, owner: str, limit: int, lease: float) -> list[Job]:
    rows = jobs.model._base_manager.using(jobs.db)
    ready = rows.filter(
        status=Status.READY,
        queue_name=queue,
        concurrency_key=None,
        rate_key=None,
        fairness_key=None,
        run_after__lte=DbNow(),
    )
    return jobs.lock_and_mark(ready.order_by(*CLAIM_ORDER), owner, lease, limit)


def of_queues(jobs: JobQuerySet, queues: list[str]) -> JobQuerySet:
    """``jobs`` of ``queues``: one queue as an equality, for the claim index."""
    return jobs.filter(queue_name__in=queues) if len(queues) > 1 else jobs.filter(queue_name=queues[0])


def _first_ids(jobs: JobQuerySet, queues: list[str], limit: int) -> Callable[[list[int]], list[int]]:
    """The read of shape a: the first ``limit`` due ids of ``queues`` in
    claim order, past those taken, by a statement compiled once
    (compiled.py) for the first round of a claim."""

    def due() -> JobRows:
        return of_queues(jobs, queues).due().unlimited()

    def read(taken: list[int]) -> list[int]:
        if taken:
            return ids_in_claim_order(due().exclude(pk__in=taken), limit)
        key = (jobs.db, "candidates", jobs.model, tuple(queues), limit)
        return once(lambda: due().order_by(*CLAIM_ORDER).values_list("pk", flat=True)[:limit], key).rows()

    return read


def _per_queue(jobs: JobQuerySet, queues: list[str], owner: str, limit: int, lease: float) -> list[Job]:
    return jobs.claim_candidates(owner, lease, _merged_candidates(jobs, queues, limit))


def _merged_candidates(jobs: JobQuerySet, queues: list[str], limit: int) -> Callable[[list[int]], list[int]]:
    """The read of shape c: the first ``limit`` due ids of each queue in
    index order, merged in claim order, past those taken; the first round's
    statement compiled once (compiled.py)."""

    def reads(taken: list[int]) -> Any:
        due = past(jobs.due().unlimited(), taken)
        fields = ("pk", "priority", "run_after")
        return [due.filter(queue_name=q).order_by(*CLAIM_ORDER).values_list(*fields)[:limit] for q in queues]

    def read(taken: list[int]) -> list[int]:
        if connections[jobs.db].features.supports_slicing_ordering_in_compound:

            def union() -> Any:
                first, *more = reads(taken)
                return first.union(*more, all=True)

            if taken:
                merged = list(union())
            else:  # one round trip
                merged = once(union, (jobs.db, "per-queue", jobs.model, tuple(queues), limit)).rows()
        else:
            merged = [row for read in reads(taken) for row in read]  # SQLite: no LIMIT inside UNION
        # Claim order across queues: the key the index orders each queue by.
        return [row[0] for row in sorted(merged, key=lambda row: claim_key(row[1], row[2], row[0]))[:limit]]

    return read
