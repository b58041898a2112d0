"""The claim: READY, due jobs become RUNNING for one owner with a lease, in
one short transaction; and ``release``, which gives back claimed jobs that
never started."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.db.models import Case, F, When

from ..candidates import first_free
from ..clock import DbNow, read_database_now
from ..db import lock_if_serialised, retry_on_conflict
from ..payload import as_list
from .instances import attnames, built, loaded
from .rows import DEFAULT_LEASE, READY, RUNNING, JobRows, listed
from .updates import RowUpdate

if TYPE_CHECKING:
    from ..models import Job

# Higher priority first, then the job that has been due longest.
CLAIM_ORDER = ("-priority", "run_after", "id")


class ClaimQuerySet(JobRows):
    def claim(self, owner: str, limit: int = 100, lease: float = DEFAULT_LEASE) -> list[Job]:
        """Claim up to ``limit`` due READY jobs matching this queryset, in
        priority order, for ``owner``; they come back RUNNING with a lease.

        A batch holds only jobs that never killed a worker. A *suspect* job
        (recovered from a dead worker) is claimed alone, and its attempt is
        counted in the claim itself, so a job that kills every worker that
        runs it runs out of attempts instead of looping.
        """
        if limit < 1:
            raise ValueError("claim() needs a limit of at least 1.")
        return retry_on_conflict(
            lambda: self.claim_candidates(owner, limit, lease, ids_in_claim_order), using=self.db
        )

    def claim_candidates(
        self, owner: str, limit: int, lease: float, read_ids: Callable[[JobRows, int], list[int]]
    ) -> list[Job]:
        """One claim attempt: ``read_ids(due_jobs, limit)`` picks candidate ids
        by a plain read that locks nothing, then just those rows are locked by
        primary key. A single locking SELECT ... ORDER BY ... LIMIT that no
        index serves (several queues, or any filter) would lock every row it
        sorts, starving every other claimer until it commits (candidates.py)."""
        due_by_id, names = _due_by_id(self.model, self.db)

        def lock(ids: list[int]) -> list[Job]:
            return self._mark_locked(lambda: built(due_by_id.filter(pk__in=listed(ids)), names), owner, lease)

        return first_free(self.due().unlimited(), lambda due: read_ids(due, limit), lock)

    def lock_and_mark(
        self, candidates: models.QuerySet, owner: str, lease: float, limit: int | None = None
    ) -> list[Job]:
        """Lock the rows of ``candidates`` (due READY jobs) that nobody else
        holds (SKIP LOCKED), and mark them RUNNING for ``owner``, in one
        transaction."""

        def read() -> list[Job]:
            locked = candidates.annotate(db_now=DbNow()).select_for_update(skip_locked=True)
            return loaded(locked[:limit] if limit else locked, "db_now")

        return self._mark_locked(read, owner, lease)

    def _mark_locked(self, read: Callable[[], list[Job]], owner: str, lease: float) -> list[Job]:
        """Mark RUNNING for ``owner`` what ``read()`` locks, in one transaction."""
        rows = self.model._base_manager.using(self.db)
        with transaction.atomic(using=self.db):
            lock_if_serialised(self.db, self.model._meta.db_table)
            batch = _claimable(sorted(read(), key=_claim_key))
            if batch:
                _mark_claimed(rows, batch, owner, lease)
        return batch

    def limited_keys(self, queues: list[str], limit: int, after: str = "") -> list[str]:
        """Up to ``limit`` concurrency keys with due READY jobs in ``queues``,
        going round them (``keys_round()``) from the key after ``after``."""
        due = self.due().filter(queue_name__in=queues, concurrency_key__isnull=False)
        return due.keys_round("concurrency_key", limit, after)

    def claim_limited(
        self, owner: str, queues: list[str], keys: list[str], lease: float = DEFAULT_LEASE
    ) -> list[Job]:
        """For each of ``keys``, claim its first due job in ``queues`` if
        fewer than its ``concurrency_limit`` jobs of that key are RUNNING (on
        any queue, for any worker); all in one short transaction.

        The keys' ConcurrencyLock rows are locked first, so claims of one
        key take turns and the count cannot go stale before the mark;
        claims of other keys and ordinary claims never wait for them. One
        job per key per claim: a worker runs its batch one job at a time,
        so two of one key in one batch would hold two slots to run one."""
        from django.db.models import Count

        from ..models import ConcurrencyLock

        locks = ConcurrencyLock.objects.using(self.db)
        rows = self.model._base_manager.using(self.db)
        with transaction.atomic(using=self.db):
            lock_if_serialised(self.db, self.model._meta.db_table)
            mine = _lock_keys(locks, keys)
            if not mine:
                return []
            running = dict(
                rows.filter(concurrency_key__in=mine, status=RUNNING)
                .order_by()
                .values_list("concurrency_key")
                .annotate(Count("pk"))
            )
            due = rows.filter(status=READY, queue_name__in=queues, run_after__lte=DbNow())
            picked = []
            for key in mine:
                first = due.filter(concurrency_key=key).annotate(db_now=DbNow()).order_by(*CLAIM_ORDER)
                job = first.select_for_update(skip_locked=True).first()
                # Over its limit, a job waits READY, its attempts untouched.
                if job is not None and running.get(key, 0) < (job.concurrency_limit or 1):
                    picked.append(job)
            batch = _claimable(sorted(picked, key=_claim_key))
            if batch:
                _mark_claimed(rows, batch, owner, lease)
        return batch

    def release(self, owner: str, ids: list[int]) -> int:
        """Give claimed jobs that never started back to the queue at once,
        without costing them an attempt."""
        if not ids:
            return 0
        return self.filter(pk__in=ids, owner=owner, status=RUNNING).update(
            status=READY,
            owner=None,
            lease_expires_at=None,
            # A suspect's attempt was counted in its claim; it never ran.
            attempts=Case(
                When(suspect=True, then=F("attempts") - 1),
                default=F("attempts"),
                output_field=models.PositiveIntegerField(),
            ),
        )


def _lock_keys(locks: models.QuerySet, keys: list[str]) -> list[str]:
    """Lock the ConcurrencyLock rows of ``keys``, in key order (so two
    claimers of overlapping keys cannot deadlock); a key's row is created
    the first time it is met. Waiting for a claimer of the same key beats
    skipping it: that claim lasts a few statements, and a slot it leaves
    free would otherwise wait for the next poll."""

    def lock(wanted: list[str]) -> list[str]:
        rows = locks.select_for_update().filter(key__in=wanted).order_by("key")
        return list(rows.values_list("key", flat=True))

    mine = lock(keys)
    if len(mine) < len(keys):
        new = [key for key in keys if key not in set(mine)]
        for key in new:
            locks.get_or_create(key=key)  # a race is settled by its unique index
        mine += lock(new)
    return mine


@functools.cache
def _due_by_id(model: Any, using: str) -> tuple[models.QuerySet, list[str]]:
    """What the claim locks, once its candidates' ids are read: the due
    READY jobs among them that nobody else holds, as a ``values_list`` of
    ``names``, built once per database and filtered by ids per claim
    (transitions/instances.py). The rows carry no ``db_now``: the mark
    takes the database's now in its own UPDATE (``_mark_claimed``), as
    decoding a datetime on every row cost more than a microsecond a job."""
    names = attnames(model)
    rows = model._base_manager.using(using).filter(status=READY, run_after__lte=DbNow())
    return rows.select_for_update(skip_locked=True).values_list(*names), names


def ids_in_claim_order(due: JobRows, limit: int) -> list[int]:
    return list(due.order_by(*CLAIM_ORDER).values_list("pk", flat=True)[:limit])


def _mark_claimed(rows: models.QuerySet, batch: list[Job], owner: str, lease: float) -> None:
    """Mark a locked batch RUNNING for ``owner``, in the caller's transaction.
    A suspect (always alone) has its attempt and start recorded here.

    The lease runs from the database's now: the one the rows were read
    with (``db_now``), or else the UPDATE's own, and then the instances
    leave ``lease_expires_at`` unread (it loads on access, as a deferred
    field does; the worker's own proof of its lease is hand.py's)."""
    now = vars(batch[0]).get("db_now")
    if now is None and batch[0].suspect:
        now = read_database_now(rows.db)
    update = RowUpdate(rows.model, rows.db)
    changes: dict[str, Any] = {"status": RUNNING, "owner": owner}
    if now is None:
        update.set_expression("lease_expires_at", DbNow() + timedelta(seconds=lease))
    else:
        changes["lease_expires_at"] = now + timedelta(seconds=lease)
    if batch[0].suspect:
        job = batch[0]
        changes.update(
            attempts=job.attempts + 1,
            started_at=job.started_at or now,
            last_attempted_at=now,
            worker_ids=[*as_list(job.worker_ids), owner],
        )
    for name, value in changes.items():
        update.set(name, value)
    update.run([job.id for job in batch])
    # The instances hold plain attributes (instances.py): their __dict__ takes the changes at once.
    for job in batch:
        row = vars(job)
        row.update(changes)
        if now is None:
            del row["lease_expires_at"]


def _claim_key(job: Job) -> tuple[int, datetime, int]:
    return (-job.priority, job.run_after, job.id)


def _claimable(locked: list[Job]) -> list[Job]:
    """A suspect alone, or the run of trusted jobs before the first suspect."""
    if locked and locked[0].suspect:
        return locked[:1]
    batch = []
    for job in locked:
        if job.suspect:
            break
        batch.append(job)
    return batch
