"""Deleting finished jobs past their retention (``OPTIONS["RETENTION"]``),
in small batches that never hold long locks.

Each batch is one short transaction: lock up to BATCH finished rows past
their outcome's age (``SKIP LOCKED``, so pruners on several hosts take
different rows and never wait for each other), delete them by primary key,
commit. Claims lock READY rows only, so a prune never blocks one; its cost
to a claim is the I/O and the purge of deleted index entries, which the
benchmark measures (benchmarks/prune.py).

The Dependency rows of pruned jobs go with them, just after (in a
transaction of their own); a workflow's Batch row goes once no member is
left and it finished longer ago than the longest retention. ``JobQuerySet.prune()``
deletes through the same batches.

Rate slots (rates.py) free for longer than SLOT_IDLE are deleted too, with
or without a retention: a key met once (a customer's) would otherwise keep
its N rows for ever. A claim treats a missing slot as a free one and makes
it again, so the prune changes no limit. So are concurrency keys'
ConcurrencyLock rows once no unfinished job has the key: a claim makes a
key's row when it meets one.

The deletes themselves, one short transaction each, are
transitions/pruning.py's; this module is the policy: what to prune, for
how long, and what to log. Ages are on the database's clock. Every heartbeat process prunes a little
on each beat (:class:`Pruner`); ``manage.py prunejobs`` prunes on demand.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

from ..db import DB_ERRORS, is_outage
from ..transitions.pruning import (
    BATCH,
    SLOT_IDLE,
    all_jobs,
    delete_idle_locks,
    delete_idle_slots,
    delete_old_batches,
    prune_jobs,
)

if TYPE_CHECKING:
    from ..backend import DatabaseBackend

logger = logging.getLogger("django_dbqueue")

# Seconds of pruning per heartbeat beat at most (and at most a quarter of the
# beat's interval), so leases are extended on time.
BEAT_BUDGET = 1.0
# With nothing (or little) left to prune, look again after this many seconds.
IDLE_INTERVAL = 60.0


def prune(
    using: str,
    retention: Mapping[str, float],
    *,
    size: int = BATCH,
    budget: float | None = None,
    progress: Callable[[str, int], None] | None = None,
    archive: bool = False,
) -> dict[str, int]:
    """Delete expired jobs of every outcome in ``retention`` (days), batch by
    batch, until none is left or ``budget`` seconds have passed; returns how
    many were deleted per outcome. Then, with time left, the batches that
    finished longer ago than the longest retention and have no member left."""
    deadline = None if budget is None else time.monotonic() + budget
    ages = {outcome: timedelta(days=days) for outcome, days in retention.items()}
    deleted = prune_jobs(
        all_jobs(using), ages, size=size, deadline=deadline, progress=progress, archive=archive
    )
    batches = 0
    while ages and (deadline is None or time.monotonic() < deadline):
        n = delete_old_batches(using, max(ages.values()), size)
        batches += n
        if n < size:
            break
    if batches:
        logger.info("Pruned %d finished batches with no member left.", batches)
    return deleted


class Pruner:
    """The heartbeat's share of retention: a little on each beat while a
    backlog lasts, then one look every IDLE_INTERVAL seconds."""

    def __init__(self, backend: DatabaseBackend) -> None:
        self.using = backend.database
        self.retention = dict(backend.config.RETENTION)
        self.archive = backend.config.ARCHIVE
        # Never long enough to delay the next lease extension noticeably.
        self.budget = min(BEAT_BUDGET, backend.config.heartbeat_interval / 4)
        self.next_at = 0.0

    def run(self) -> int:
        if time.monotonic() < self.next_at:
            return 0
        started = time.monotonic()
        try:
            slots = delete_idle_slots(self.using)
            locks = delete_idle_locks(self.using)
            deleted = (
                prune(self.using, self.retention, budget=self.budget, archive=self.archive)
                if self.retention
                else {}
            )
        except DB_ERRORS as exc:
            if is_outage(exc, self.using):
                raise
            logger.warning("Pruning finished jobs failed (%s); trying again later.", exc)
            self.next_at = time.monotonic() + IDLE_INTERVAL
            return 0
        total = sum(deleted.values())
        if total:
            logger.info(
                "Pruned %d finished jobs past their retention (%s).",
                total,
                ", ".join(f"{outcome} {n}" for outcome, n in deleted.items() if n),
            )
        if slots:
            logger.info("Deleted %d rate slots idle for more than %s.", slots, SLOT_IDLE)
        if locks:
            logger.info("Deleted %d concurrency locks of keys with no unfinished job.", locks)
        # It used its whole budget: more is waiting, carry on at the next beat.
        backlog = time.monotonic() - started >= self.budget or slots >= BATCH or locks >= BATCH
        self.next_at = 0.0 if backlog else time.monotonic() + IDLE_INTERVAL
        return total
