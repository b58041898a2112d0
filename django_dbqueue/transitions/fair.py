"""Fair share: jobs with a fairness key (a tenant, a customer) are claimed in
turns, each key's share of a claim in proportion to its weight
(OPTIONS FAIRNESS_WEIGHTS, 1 by default), so that a key with 100,000 due
jobs and a key with ten both make progress.

The ordinary claim leaves these jobs out (``JobRows.unlimited()``: ``fairness_key
IS NULL``, an equality for the claim index), so queues that do not use keys
claim exactly as before. A worker reads the keys with READY jobs in its
queues at most every LOOK_EVERY seconds (a skip scan: one index dive per
key, however many jobs a key holds). While there are some, each claim
splits the batch among them (KEYS_PER_CLAIM at most, in turns), the jobs
without a key counting as one more key of weight 1; each key's candidates
are its first jobs in claim order (priority, then due time: fairness is
among keys, priority orders the jobs within one key), read by the claim
index, then locked by primary key with SKIP LOCKED as the ordinary claim
does. Nothing of it is kept in the database but the key on each job: a
worker's credits live and die with it.

A share is rarely a whole number of jobs: each worker keeps every key's
unspent fraction as a credit for its next claim (deficit round robin), so
small batches stay fair over time, and breaks ties at random, so that
several workers do not all favour the same key.

A job with both a fairness key and a concurrency key is refused at enqueue
(enqueue/keys.py); a row written by SQL with both is a limited job, claimed by
``claim_limited()``, its fairness key ignored.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import Min

from ..clock import DbNow
from ..db import retry_on_conflict
from .candidates import first_free, past
from .claim import CLAIM_ORDER, claim_key
from .rows import READY

if TYPE_CHECKING:
    from ..models import Job
    from . import JobQuerySet
    from .rows import JobRows

# The most keys one look reads; past them, the next look goes on from the
# last key read, so that every key comes round.
KEYS_MAX = 200
# The most keys one claim serves; with more, claims take them in turns
# (those served longest ago first), so that a claim stays one UNION ALL of
# a few rows per key. Measured on MariaDB with 200 keys, claims of 200 in
# turns: 48 ms with 32 keys a claim, 150 ms with all 200 (median of 11).
KEYS_PER_CLAIM = 32
# Reads of (key, queue) sent in one UNION ALL.
BRANCHES_MAX = 64
# The share of a worker's time its looks for keys may take: a look that
# took longer (many keys, each a round trip) makes the next one wait longer
# than LOOK_EVERY.
LOOK_SHARE = 0.05
# A key's carried credit, in jobs, either way: enough to keep small batches
# fair, too little for a key that was absent to claim a burst on its return.
CREDIT_MAX = 1.0


def usable_weight(weight: Any) -> float:
    """A weight as the claim uses it: within OPTIONS' bounds, and 1 for
    anything but a finite number. The check refuses the rest; this keeps a
    weight that arrived anyway (1e308, NaN) from overflowing the shares'
    arithmetic, which killed the worker at its first fair claim."""
    from ..options import MAX_WEIGHT, MIN_WEIGHT

    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        return 1.0
    if isinstance(weight, float) and not math.isfinite(weight):
        return 1.0
    return float(min(max(weight, MIN_WEIGHT), MAX_WEIGHT))  # an int of any size compares exactly


def keys_with_jobs(jobs: JobRows, queues: list[str], after: str = "", limit: int = KEYS_MAX) -> list[str]:
    """Up to ``limit`` fairness keys with READY jobs in ``queues`` (due or
    not), in the order read: the keys after ``after``, then from the first.

    A skip scan: one ``MIN(fairness_key) ... WHERE fairness_key > %s`` per key
    and queue, each a single dive into the claim index, however many jobs a
    key holds. (A DISTINCT, even a GROUP BY on the index's prefix, read
    every READY entry on MariaDB: 100,000 for one big key, 40 ms against
    0.1 ms a dive.) No ``run_after`` condition, which would end the index
    prefix: a key whose jobs are not due yet is dropped by the first claim
    that finds none. ``after`` lets successive looks go round, when there
    are more keys than ``limit``; the database orders the keys, so that
    the two parts meet whatever its collation."""
    found: dict[str, None] = {}
    for queue in queues:
        rows = jobs.filter(status=READY, queue_name=queue, concurrency_key=None, rate_key=None).order_by()
        parts = (
            [rows.filter(fairness_key__gt=after), rows.filter(fairness_key__lte=after)] if after else [rows]
        )
        for part in parts:
            ahead = part
            while len(found) < limit:
                key = ahead.aggregate(first=Min("fairness_key"))["first"]
                if key is None:
                    break
                found[key] = None
                ahead = part.filter(fairness_key__gt=key)
    return list(found)


def allocate(
    keys: Iterable[str],
    weight: Callable[[str], float],
    room: int,
    credit: dict[str, float],
    rng: random.Random,
) -> dict[str, int]:
    """Split ``room`` jobs among ``keys`` by weight: each key's credit grows by
    its share, it gets the whole jobs of its credit, and the jobs left go to
    the largest fractions (ties at random). ``credit`` carries what is left
    over to the next call."""
    keys = list(keys)
    total = sum(weight(key) for key in keys)
    for key in keys:
        credit[key] = credit.get(key, 0.0) + room * weight(key) / total
    shares = {key: max(0, int(credit[key])) for key in keys}
    left = room - sum(shares.values())
    # Largest fraction first; the random part breaks ties between workers.
    order = sorted(keys, key=lambda key: (credit[key] - shares[key], rng.random()), reverse=True)
    for key in order[: max(left, 0)]:
        shares[key] += 1
    while left < 0:  # carried credits asked for more than the room
        for key in reversed(order):
            if left < 0 and shares[key] > 0:
                shares[key] -= 1
                left += 1
    for key in keys:
        credit[key] = max(-CREDIT_MAX, min(CREDIT_MAX, credit[key] - shares[key]))
    return shares


def fair_candidates(due: JobRows, queues: list[str], wanted: Mapping[str, int], room: int) -> list[int]:
    """Up to ``room`` due ids in ``queues``: first ``wanted[key]`` of each key,
    then, where a key had fewer, more of the others (room a claim would
    otherwise leave empty), each key's in claim order. One index range per
    (key, queue), sent as UNION ALL reads."""
    active = {key: n for key, n in wanted.items() if n > 0}
    spare = -(-room // len(active)) if active else 0  # each key reads a little past its share
    fields = ("pk", "fairness_key", "priority", "run_after")
    reads = [
        due.filter(queue_name=queue, fairness_key=key)
        .order_by(*CLAIM_ORDER)
        .values_list(*fields)[: min(room, n + spare)]
        for key, n in active.items()
        for queue in queues
    ]
    rows: list[Any] = []
    compound = connections[due.db].features.supports_slicing_ordering_in_compound
    step = BRANCHES_MAX if compound else 1  # SQLite: no LIMIT inside UNION
    for start in range(0, len(reads), step):
        chunk = reads[start : start + step]
        rows += chunk[0].union(*chunk[1:], all=True) if len(chunk) > 1 else chunk[0]
    rows.sort(key=lambda row: claim_key(row[2], row[3], row[0]))
    taken: Counter[str] = Counter()
    shared: list[int] = []
    extra: list[int] = []
    for pk, key, _priority, _run_after in rows:
        (shared if taken[key] < active[key] else extra).append(pk)
        taken[key] += 1
    return (shared + extra)[:room]


def claim_fair(
    jobs: JobQuerySet, queues: list[str], owner: str, wanted: Mapping[str, int], lease: float, room: int
) -> list[Job]:
    """Claim about ``wanted[key]`` due jobs of each fairness key in
    ``queues``, ``room`` at most, in one short transaction (retried on
    conflicts)."""
    rows = jobs.model._base_manager.using(jobs.db)

    def lock(ids: list[int]) -> list[Job]:
        return jobs.lock_and_mark(rows.filter(pk__in=ids, status=READY, run_after__lte=DbNow()), owner, lease)

    due = jobs.due().filter(concurrency_key=None, rate_key=None)
    return retry_on_conflict(
        lambda: first_free(lambda taken: fair_candidates(past(due, taken), queues, wanted, room), lock),
        jobs.db,
    )


def in_turns(batch: list[Job], weight: Callable[[str | None], float]) -> list[Job]:
    """``batch`` in the order to run it: the keys (and the jobs without a
    key) take turns, each key's n-th job at n / its weight, each key's jobs
    in claim order. A worker runs its batch one job at a time: in claim
    order a small key's jobs would wait behind a big key's share, and spread
    evenly through the batch they would still end near its end. In turns, a
    key with ten jobs in a claim of 200 among one other of the same weight
    has them all done within the batch's first twenty."""
    seen: Counter[str | None] = Counter()
    places = []
    for at, job in enumerate(batch):
        seen[job.fairness_key] += 1
        places.append(((seen[job.fairness_key] - 0.5) / weight(job.fairness_key), at))
    return [batch[at] for _, at in sorted(places)]


class FairClaims:
    """A worker's claims while fairness keys have jobs in its queues.

    ``claim_fair_share()`` takes ``ordinary(n)``, the worker's usual claim of up to
    ``n`` jobs without a key. With no key found it is called for the whole
    batch, as before; the keys are looked for every LOOK_EVERY seconds, so
    a queue that never uses them pays one small read a second."""

    LOOK_EVERY = 1.0

    def __init__(self, weights: Mapping[str, float] | None = None, rng: random.Random | None = None) -> None:
        self.weights = {key: usable_weight(weight) for key, weight in (weights or {}).items()}
        self.random = rng or random.Random()
        self.keys: list[str] = []
        self.credit: dict[str, float] = {}
        self.next_look = 0.0
        self.after = ""  # where the next look starts, when there were more keys than it reads
        self.served: dict[str, int] = {}  # the claim that last served each key
        self.claims = 0
        self.found = False  # the last claim took jobs with a key
        self.plain = True  # jobs without a key filled their last share

    def weight(self, key: str | None) -> float:
        return 1.0 if key is None else self.weights.get(key, 1.0)

    def claim_fair_share(
        self,
        jobs: JobQuerySet,
        queues: list[str],
        owner: str,
        size: int,
        lease: float,
        ordinary: Callable[[int], list[Job]],
    ) -> list[Job]:
        keys = self.look(jobs, queues)
        if not keys:
            self.found = False
            return ordinary(size)
        # The jobs without a key are one more key of weight 1; their share is
        # rounded at random, so that it averages out right. Once they fall
        # short of it, they are left out until the next look: a queue of
        # keyed jobs alone does not pay an empty ordinary claim each time.
        exact = size / (sum(self.weight(key) for key in keys) + 1)
        share = int(exact) + (self.random.random() < exact - int(exact)) if self.plain else 0
        batch = ordinary(share) if share else []
        self.plain = self.plain and len(batch) == share
        room = size - len(batch)  # what the jobs without a key left goes to the keys
        if room <= 0:
            return batch
        wanted = allocate(self.turn(keys), self.weight, room, self.credit, self.random)
        claimed = claim_fair(jobs, queues, owner, wanted, lease, room)
        got = Counter(job.fairness_key for job in claimed)
        # A key that gave nothing has no due jobs left (or others hold them):
        # left out until the next look.
        self.keys = [key for key in self.keys if got[key] or not wanted.get(key)]
        self.found = bool(claimed)
        return in_turns(batch + claimed, self.weight)

    def turn(self, keys: list[str]) -> list[str]:
        """The keys this claim serves: all of them, or KEYS_PER_CLAIM of them,
        those served longest ago first (ties at random)."""
        self.claims += 1
        if len(keys) > KEYS_PER_CLAIM:
            keys = sorted(keys, key=lambda key: (self.served.get(key, 0), self.random.random()))
            keys = keys[:KEYS_PER_CLAIM]
        for key in keys:
            self.served[key] = self.claims
        return keys

    def look(self, jobs: JobQuerySet, queues: list[str]) -> list[str]:
        now = time.monotonic()
        if now >= self.next_look:
            self.keys = keys_with_jobs(jobs, queues, self.after)
            spent = time.monotonic() - now
            self.next_look = now + max(self.LOOK_EVERY, spent / LOOK_SHARE)
            self.after = self.keys[-1] if len(self.keys) >= KEYS_MAX else ""
            self.plain = True
            # A key that left gives up its credit and its turn.
            read = set(self.keys)
            self.credit = {key: value for key, value in self.credit.items() if key in read}
            self.served = {key: claim for key, claim in self.served.items() if key in read}
        return self.keys
