"""The claim of rate-limited jobs: those with a ``rate_key`` (and no
concurrency key), at most N of a key claimed in any window of the period
(rates.py). Jobs over the rate stay READY, their attempts untouched."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import models, transaction
from django.db.models import Count, Min

from ..clock import DbNow, read_database_now
from ..db import lock_if_serialised
from ..rates import rate_or_fallback
from .claim import CLAIM_ORDER, _claimable, _mark_claimed
from .instances import loaded
from .rows import DEFAULT_LEASE, READY, JobRows

if TYPE_CHECKING:
    from ..models import Job


class RateQuerySet(JobRows):
    def rated_keys(self, queues: list[str], limit: int, after: str = "") -> list[str]:
        """Up to ``limit`` rate keys with due READY jobs in ``queues``, going
        round them (``keys_round()``) from the key after ``after``."""
        due = self.due().filter(queue_name__in=queues, concurrency_key__isnull=True, rate_key__isnull=False)
        return due.keys_round("rate_key", limit, after)

    def busy_rate_keys(self, keys: list[str]) -> dict[str, float]:
        """Of ``keys``, those whose every slot is taken, with the seconds
        until the first frees: one plain read, so a worker learns a backlog
        of keys over their rate without a claim per key. (A key whose limit
        was raised has slots still to make: only its claim can tell.)"""
        from ..models import RateSlot

        slots = RateSlot.objects.using(self.db).filter(key__in=keys).order_by()
        taken = slots.values("key").annotate(earliest=Min("free_at")).filter(earliest__gt=DbNow())
        found = list(taken.values_list("key", "earliest"))
        if not found:
            return {}
        now = read_database_now(self.db)
        return {key: (earliest - now).total_seconds() for key, earliest in found}

    def claim_rated(
        self,
        owner: str,
        queues: list[str],
        key: str,
        room: int,
        lease: float = DEFAULT_LEASE,
        limit: str | None = None,
    ) -> tuple[list[Job], float | None]:
        """Claim up to ``room`` due jobs of the rate key ``key`` in
        ``queues``, as many as the key has free slots, in one short
        transaction. Returns the batch and, when no slot was free, the
        seconds until the key's next one frees (None: nothing of the key
        is due).

        The limit is ``limit`` when given (OPTIONS RATE_LIMITS), else the
        one the first due job carries, so a limit changed in code holds
        from the jobs enqueued after the change. The slots are locked
        first: a key over its rate costs two small reads and locks no job."""
        from ..models import RateSlot

        rows = self.model._base_manager.using(self.db)
        slots = RateSlot.objects.using(self.db)
        # fairness_key first, as the claim index has it: NULL for the jobs of a
        # rate key, so this is their claim order, read by that index. A row
        # with a fairness key too (a queue's rate limit, or SQL) is claimed
        # under its rate, grouped by that key (NULLs sort first on MySQL and
        # SQLite, last on PostgreSQL).
        due = rows.filter(
            status=READY, queue_name__in=queues, concurrency_key=None, rate_key=key, run_after__lte=DbNow()
        ).order_by("fairness_key", *CLAIM_ORDER)
        if limit is None:
            first = list(due.values_list("rate_limit", flat=True)[:1])
            if not first:
                return [], None
            limit = first[0]
        rate = rate_or_fallback(limit)
        with transaction.atomic(using=self.db):
            lock_if_serialised(self.db, self.model._meta.db_table)
            mine = slots.filter(key=key, slot__lt=rate.number)
            free, wait = _free_slots(mine, key, rate.number, min(room, rate.number, per_claim(rate.number)))
            if not free:
                return [], wait
            locked = due.annotate(db_now=DbNow()).select_for_update(skip_locked=True)
            batch = _claimable(loaded(locked[: len(free)], "db_now"))
            if not batch:
                return [], 0.0  # its due jobs are being claimed by others: try again
            _mark_claimed(rows, batch, owner, lease)
            # Free again a period after the read that took them (one statement: one now).
            used, now = [pk for pk, _ in free[: len(batch)]], free[0][1]
            slots.filter(pk__in=used).update(free_at=now + timedelta(seconds=rate.seconds))
        return batch, 0.0


def per_claim(number: int) -> int:
    """The most jobs of a key one claim takes: a tenth of its slots (at
    least one). A worker starts its batch one job after another, so a key's
    window taken by one claim would start over the time that batch takes;
    spread over several claims, and workers, its jobs start close to their
    claims (docs/performance.md, "Rate limits")."""
    return max(1, number // SPREAD)


SPREAD = 10


def _free_slots(
    mine: models.QuerySet, key: str, number: int, wanted: int
) -> tuple[list[tuple[int, datetime]], float]:
    """Lock up to ``wanted`` of the key's free slots that no other claimer
    holds (SKIP LOCKED), each with the database's now as it was taken;
    and, when none was, the seconds until the next one frees (0: another
    claimer holds a free one). A key's missing slots (a new key, a raised
    limit) are made here, free at once; two claimers making them both are
    settled by the unique (key, slot) index."""

    def lock() -> list[tuple[int, datetime]]:
        free = mine.filter(free_at__lte=DbNow()).annotate(db_now=DbNow()).order_by("slot")
        return list(free.select_for_update(skip_locked=True).values_list("pk", "db_now")[:wanted])

    free = lock()
    if len(free) >= wanted:
        return free, 0.0
    made, earliest = mine.aggregate(made=Count("pk"), earliest=Min("free_at")).values()
    if made < number:
        now = read_database_now(mine.db)
        mine.bulk_create(
            [mine.model(key=key, slot=slot, free_at=now) for slot in range(number)], ignore_conflicts=True
        )
        return lock(), 0.0
    if free or earliest is None:
        return free, 0.0
    return free, max((earliest - read_database_now(mine.db)).total_seconds(), 0.0)
