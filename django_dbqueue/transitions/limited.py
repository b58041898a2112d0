"""The claim of concurrency-limited jobs: those with a ``concurrency_key``,
at most ``concurrency_limit`` of a key RUNNING at once, on any queue and for
any worker. ``claim_limited()`` is the one transaction; ``LimitedClaims`` is
a worker's memory of when to look for keys with due jobs. Jobs over their
limit stay READY, their attempts untouched."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from django.db import models, transaction

from .. import tables
from ..clock import DbNow
from ..db import lock_if_serialised, retry_on_conflict
from .claim import CLAIM_ORDER, _claim_key, _claimable, _mark_claimed
from .rows import DEFAULT_LEASE, READY, RUNNING, JobRows, keyed

if TYPE_CHECKING:
    from ..models import Job
    from . import JobQuerySet


class LimitedQuerySet(JobRows):
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

        ConcurrencyLock = tables.concurrency_lock()

        locks = ConcurrencyLock.objects.using(self.db)
        rows = self.model._base_manager.using(self.db)
        with transaction.atomic(using=self.db):
            lock_if_serialised(self.db, self.model._meta.db_table)
            mine = _lock_keys(locks, keys)
            if not mine:
                return []
            running = dict(
                keyed(rows, mine, [RUNNING]).order_by().values_list("concurrency_key").annotate(Count("pk"))
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


class LimitedClaims:
    """A worker's claims of jobs with a concurrency key (``claim_limited()``).

    Ordinary claims exclude those jobs with ``concurrency_key IS NULL``,
    which the claim index serves as an equality, so their cost does not
    change. Limited jobs are looked for by a separate read when a claim
    came back less than full, and at least every LOOK_EVERY seconds while
    claims are full (so a stream of ordinary jobs cannot starve them);
    after a look that found none, only every LOOK_EVERY seconds, so a queue
    that never uses limits pays one small read a second, not one a claim.
    """

    LOOK_EVERY = 1.0

    def __init__(self) -> None:
        self.next_look = 0.0
        self.found = False
        self.after = ""  # the last key of a full look: the next one goes on from it

    def claim_limited_jobs(
        self, jobs: JobQuerySet, queues: list[str], owner: str, room: int, lease: float
    ) -> list[Job]:
        """Up to ``room`` limited jobs (at most one per key), if it is time to look."""
        now = time.monotonic()
        if now < self.next_look and (room <= 0 or not self.found):
            return []
        self.next_look = now + self.LOOK_EVERY
        wanted = max(room, 1)
        keys = jobs.limited_keys(queues, wanted, self.after)
        self.after = keys[-1] if len(keys) >= wanted else ""
        self.found = bool(keys)
        if not keys:
            return []
        return retry_on_conflict(lambda: jobs.claim_limited(owner, queues, keys, lease), jobs.db)
