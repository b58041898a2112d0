"""The claim of rate-limited jobs: those with a ``rate_key`` (and no
concurrency key), at most N of a key claimed in any window of the period
(rates.py). Jobs over the rate stay READY, their attempts untouched."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

from django.db import models, transaction
from django.db.models import Count, Min

from ..clock import DbNow
from ..db import lock_if_serialised
from ..rates import Rate, parse_rate, rate_or_fallback
from .claim import CLAIM_ORDER, _claimable, _mark_claimed
from .instances import loaded
from .rows import DEFAULT_LEASE, READY, JobRows

if TYPE_CHECKING:
    from ..models import Job


class RateQuerySet(JobRows):
    def rated_keys(self, queues: list[str], limit: int) -> list[str]:
        """Up to ``limit`` rate keys with due READY jobs in ``queues``, in
        random order so that no key starves the others."""
        due = self.due().filter(queue_name__in=queues, concurrency_key__isnull=True, rate_key__isnull=False)
        keys = cast(
            "list[str]", list(due.order_by().values_list("rate_key", flat=True).distinct()[: limit * 4])
        )
        random.shuffle(keys)
        return keys[:limit]

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
        from the jobs enqueued after the change. A job locked here but left
        unclaimed for want of a slot is untouched when the transaction ends."""
        from ..models import RateSlot

        rows = self.model._base_manager.using(self.db)
        slots = RateSlot.objects.using(self.db)
        with transaction.atomic(using=self.db):
            lock_if_serialised(self.db, self.model._meta.db_table)
            due = rows.filter(
                status=READY,
                queue_name__in=queues,
                concurrency_key=None,
                rate_key=key,
                run_after__lte=DbNow(),
            )
            locked = due.annotate(db_now=DbNow()).order_by(*CLAIM_ORDER).select_for_update(skip_locked=True)
            jobs = _claimable(loaded(locked[:room], "db_now"))
            if not jobs:
                return [], None
            rate = parse_rate(limit) if limit else rate_or_fallback(jobs[0].rate_limit)
            now = jobs[0].db_now  # type: ignore[attr-defined]
            free, wait = _free_slots(slots.filter(key=key, slot__lt=rate.number), key, rate, len(jobs), now)
            batch = jobs[: len(free)]
            if batch:
                _mark_claimed(rows, batch, owner, lease)
                # Free again one period after this claim, on the database's clock.
                slots.filter(pk__in=free).update(free_at=now + timedelta(seconds=rate.seconds))
        return batch, wait


def _free_slots(
    mine: models.QuerySet, key: str, rate: Rate, wanted: int, now: datetime
) -> tuple[list[int], float]:
    """Lock up to ``wanted`` of the key's free slots that no other claimer
    holds (SKIP LOCKED); and, when fewer than that were free, the seconds
    until the next one frees (0: another claimer holds a free one, or it
    was just made). A key's missing slots (a new key, a raised limit) are
    made here, free at once; two claimers making them both are settled by
    the unique (key, slot) index."""

    def lock() -> list[int]:
        free = mine.filter(free_at__lte=now).order_by("slot").select_for_update(skip_locked=True)
        return list(free.values_list("pk", flat=True)[:wanted])

    free = lock()
    if len(free) >= min(wanted, rate.number):
        return free, 0.0
    made, earliest = mine.aggregate(made=Count("pk"), earliest=Min("free_at")).values()
    if made < rate.number:
        new = [mine.model(key=key, slot=slot, free_at=now) for slot in range(rate.number)]
        mine.bulk_create(new, ignore_conflicts=True)
        return lock(), 0.0
    if free or earliest is None:
        return free, 0.0
    return free, max((earliest - now).total_seconds(), 0.0)
