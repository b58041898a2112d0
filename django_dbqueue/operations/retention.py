"""Deleting finished jobs past their retention (``OPTIONS["RETENTION"]``),
in small batches that never hold long locks.

Each batch is one short transaction: lock up to BATCH finished rows past
their outcome's age (``SKIP LOCKED``, so pruners on several hosts take
different rows and never wait for each other), delete them by primary key,
commit. Claims lock READY rows only, so a prune never blocks one; its cost
to a claim is the I/O and the purge of deleted index entries, which the
benchmark measures (benchmarks/prune.py).

Ages are on the database's clock. Every heartbeat process prunes a little
on each beat (:class:`Pruner`); ``manage.py prunejobs`` prunes on demand.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db import transaction

from ..clock import DbNow
from ..db import DB_ERRORS, is_outage

if TYPE_CHECKING:
    from ..backend import DatabaseBackend
    from ..transitions import JobQuerySet

logger = logging.getLogger("django_dbqueue")

BATCH = 500
# Seconds of pruning per heartbeat beat at most (and at most a quarter of the
# beat's interval), so leases are extended on time.
BEAT_BUDGET = 1.0
# With nothing (or little) left to prune, look again after this many seconds.
IDLE_INTERVAL = 60.0


def expired(using: str, outcome: str, days: float) -> JobQuerySet:
    """Finished jobs with ``outcome`` that finished more than ``days`` ago."""
    from ..models import Job

    return Job.objects.using(using).filter(status=outcome, finished_at__lt=DbNow() - timedelta(days=days))


def delete_batch(using: str, outcome: str, days: float, size: int = BATCH) -> int:
    """Delete up to ``size`` expired jobs in one short transaction."""
    from ..models import Job

    with transaction.atomic(using=using):
        ids = list(
            expired(using, outcome, days)
            .select_for_update(skip_locked=True)
            .values_list("pk", flat=True)[:size]
        )
        if not ids:
            return 0
        # The status and age again: nothing requeued them meanwhile, as they are locked.
        return Job.objects.using(using).filter(pk__in=ids).delete()[0]


def prune(
    using: str,
    retention: Mapping[str, float],
    *,
    size: int = BATCH,
    budget: float | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, int]:
    """Delete expired jobs of every outcome in ``retention``, batch by batch,
    until none is left or ``budget`` seconds have passed; returns how many
    were deleted per outcome."""
    deadline = None if budget is None else time.monotonic() + budget
    deleted = dict.fromkeys(retention, 0)
    for outcome, days in retention.items():
        while deadline is None or time.monotonic() < deadline:
            n = delete_batch(using, outcome, days, size)
            deleted[outcome] += n
            if progress is not None and n:
                progress(outcome, deleted[outcome])
            if n < size:
                break
    return deleted


class Pruner:
    """The heartbeat's share of retention: a little on each beat while a
    backlog lasts, then one look every IDLE_INTERVAL seconds."""

    def __init__(self, backend: DatabaseBackend) -> None:
        self.using = backend.database
        self.retention = dict(backend.config.RETENTION)
        # Never long enough to delay the next lease extension noticeably.
        self.budget = min(BEAT_BUDGET, backend.config.heartbeat_interval / 4)
        self.next_at = 0.0

    def run(self) -> int:
        if not self.retention or time.monotonic() < self.next_at:
            return 0
        started = time.monotonic()
        try:
            deleted = prune(self.using, self.retention, budget=self.budget)
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
        # It used its whole budget: more is waiting, carry on at the next beat.
        backlog = time.monotonic() - started >= self.budget
        self.next_at = 0.0 if backlog else time.monotonic() + IDLE_INTERVAL
        return total
