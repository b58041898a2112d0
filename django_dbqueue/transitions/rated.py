"""The claim of rate-limited jobs: those with a ``rate_key`` (and no
concurrency key), at most N of a key claimed in any window of the period
(the limit's form: the package's rates.py). ``claim_rated()`` is the one
transaction; ``RateClaims`` is a worker's memory of which keys to try and
which are busy. Jobs over the rate stay READY, their attempts untouched."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import models, transaction
from django.db.models import Max, Min

from .. import tables
from ..clock import DbNow, read_database_now
from ..db import lock_if_serialised, retry_on_conflict
from ..rates import rate_or_fallback
from .claim import CLAIM_ORDER, _claimable, _mark_claimed
from .instances import loaded
from .rows import DEFAULT_LEASE, READY, JobRows

if TYPE_CHECKING:
    from ..models import Job
    from . import JobQuerySet


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
        RateSlot = tables.rate_slot()

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
        RateSlot = tables.rate_slot()

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
            if not batch:  # members of a cancelled batch, cancelled instead: no slot spent
                return [], 0.0
            # Free again a period after the claim (its jobs' claimed_at: one
            # now), by which a job given back unstarted finds its slot (rated_slots.py).
            used, now = [pk for pk, _ in free[: len(batch)]], vars(batch[0])["claimed_at"]
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
    claimer holds a free one).

    A key's missing slots (a new key, a raised limit, slots pruned while
    idle) are made here, free at once, only as many as this claim lacks and
    one more, left free: a claim writes at most ``wanted`` + 1 slot rows
    whatever the limit (a key of 100000/d once made its 100,000 rows in one
    claim). New slots are numbered on from the key's highest, one index
    dive; only when every number below the limit was made once are the gaps
    pruning left looked for. Two claimers making the same slot are settled
    by the unique (key, slot) index."""

    def lock() -> list[tuple[int, datetime]]:
        free = mine.filter(free_at__lte=DbNow()).annotate(db_now=DbNow()).order_by("slot")
        return list(free.select_for_update(skip_locked=True).values_list("pk", "db_now")[:wanted])

    free = lock()
    if len(free) >= wanted:
        return free, 0.0
    # One slot more than this claim lacks, while the limit allows: left free,
    # it tells busy_rate_keys() (which reads the slots made, not the limit)
    # that the key is not at its limit.
    lacking = wanted - len(free) + 1
    top = mine.aggregate(top=Max("slot"))["top"]
    first = 0 if top is None else top + 1
    numbers = list(range(first, min(number, first + lacking)))
    if not numbers:
        numbers = _gaps(mine, number, lacking)
    if numbers:
        now = read_database_now(mine.db)
        mine.bulk_create(
            [mine.model(key=key, slot=slot, free_at=now) for slot in numbers], ignore_conflicts=True
        )
        return lock(), 0.0
    earliest = mine.aggregate(earliest=Min("free_at"))["earliest"]
    if free or earliest is None:
        return free, 0.0
    return free, max((earliest - read_database_now(mine.db)).total_seconds(), 0.0)


def _gaps(mine: models.QuerySet, number: int, lacking: int) -> list[int]:
    """Up to ``lacking`` slot numbers below ``number`` that the key lacks:
    pruning deleted them while idle (operations/retention.py). Claims use a
    key's lowest free slots first, so idle ones, and gaps, are mostly at
    the top; this read of the key's numbers runs only once every number
    was made, and a slot short."""
    if mine.count() >= number:
        return []
    made = set(mine.values_list("slot", flat=True))
    return [slot for slot in range(number) if slot not in made][:lacking]


class RateClaims:
    """A worker's claims of rate-limited jobs (``claim_rated()``), with the
    limits of OPTIONS RATE_LIMITS winning over the jobs' own.

    Rate keys with due jobs are looked for every LOOK_EVERY seconds when a
    claim has room, every LOOK_FULL seconds while claims are full, KEYS at
    a time, each look going on from the last key of the one before. A
    key whose slots were all taken is skipped until its next slot frees
    (``busy``), so a backlog of jobs over their rate costs no query per
    poll; ``wait()`` tells the loop how long that is. Keys met for the
    first time are checked for free slots all at once (``busy_rate_keys()``).
    """

    LOOK_EVERY = 1.0
    LOOK_FULL = 5.0
    KEYS = 20  # keys tried per look, at most
    LEARNED_FOR = 60.0  # the longest a key found busy by busy_rate_keys() is skipped

    def __init__(self, limits: Mapping[str, str] | None = None) -> None:
        self.limits = dict(limits or {})
        self.looked = -math.inf
        self.keys: list[str] = []
        self.busy: dict[str, float] = {}
        self.after = ""  # the last key of a full look: the next one goes on from it

    @property
    def found(self) -> bool:
        """Whether the last look found rate keys with due jobs."""
        return bool(self.keys)

    def claim_rated_jobs(
        self, jobs: JobQuerySet, queues: list[str], owner: str, room: int, lease: float
    ) -> list[Job]:
        """Up to ``room`` rate-limited jobs (at least one is tried for while
        ordinary claims are full, so they cannot starve these)."""
        now = time.monotonic()
        # While ordinary jobs fill every claim, new keys are looked for less
        # often: the look is the one read a backlog over its rate costs.
        if now >= self.looked + (self.LOOK_EVERY if room > 0 else self.LOOK_FULL):
            self.looked = now
            self.keys = jobs.rated_keys(queues, self.KEYS, self.after)
            self.after = self.keys[-1] if len(self.keys) >= self.KEYS else ""
            self.busy = {key: until for key, until in self.busy.items() if until > now}
            unknown = [key for key in self.keys if key not in self.busy]
            if unknown:
                # Up to LEARNED_FOR: a raised limit's new slots show only to a claim.
                learned = jobs.busy_rate_keys(unknown)
                self.busy.update({key: now + min(wait, self.LEARNED_FOR) for key, wait in learned.items()})
        batch: list[Job] = []
        room = max(room, 1)
        for key in list(self.keys):
            if len(batch) >= room:
                break
            if self.busy.get(key, 0.0) > now:
                continue
            claimed, wait = self._claim_key(jobs, queues, owner, key, room - len(batch), lease)
            batch += claimed
            if wait is None:
                self.keys.remove(key)  # nothing of it due any more
            elif wait > 0:
                self.busy[key] = now + wait
        return batch

    def _claim_key(
        self, jobs: JobQuerySet, queues: list[str], owner: str, key: str, room: int, lease: float
    ) -> tuple[list[Job], float | None]:
        limit = self.limits.get(key)
        return retry_on_conflict(lambda: jobs.claim_rated(owner, queues, key, room, lease, limit), jobs.db)

    def wait(self) -> float:
        """Seconds until the first busy key's next slot frees (0: none is busy)."""
        now = time.monotonic()
        waiting = [self.busy.get(key, 0.0) - now for key in self.keys]
        return max(min(waiting), 0.0) if waiting else 0.0
