"""The worker's claim, shaped so that the claim index serves it.

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

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from django.db import connections

from .clock import DbNow
from .db import retry_on_conflict
from .status import Status
from .transitions import CLAIM_ORDER

if TYPE_CHECKING:
    from .models import Job
    from .transitions import JobQuerySet
    from .transitions.rows import JobRows

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


def _per_queue(jobs: JobQuerySet, queues: list[str], owner: str, limit: int, lease: float) -> list[Job]:
    return jobs.claim_candidates(owner, limit, lease, lambda due, n: _merged_candidates(due, queues, n))


def _merged_candidates(due: JobRows, queues: list[str], limit: int) -> list[int]:
    fields = ("pk", "priority", "run_after")
    reads = [due.filter(queue_name=q).order_by(*CLAIM_ORDER).values_list(*fields)[:limit] for q in queues]
    if len(reads) > 1 and connections[due.db].features.supports_slicing_ordering_in_compound:
        merged = list(reads[0].union(*reads[1:], all=True))  # one round trip
    else:
        merged = [row for read in reads for row in read]  # SQLite: no LIMIT inside UNION
    # Claim order across queues: the key the index orders each queue by.
    return [row[0] for row in sorted(merged, key=lambda row: (-row[1], row[2], row[0]))[:limit]]


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

    def claim(self, jobs: JobQuerySet, queues: list[str], owner: str, room: int, lease: float) -> list[Job]:
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

    def claim(self, jobs: JobQuerySet, queues: list[str], owner: str, room: int, lease: float) -> list[Job]:
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
