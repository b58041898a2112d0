"""What a worker claims, and whether burst mode is done.

A claim takes up to a batch of ordinary jobs (claiming.py), shared with
jobs of fairness keys when some have jobs (FairClaims), and fills the room
left with jobs of limited keys (LimitedClaims), then of rate keys
(RateClaims), from the queues that are not paused. A claim that outlasted
the paused set it used gives back
what it took from a queue paused meanwhile, so that a pause holds once it
is one read's lifetime old (operations/pausing.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..claiming import LimitedClaims, RateClaims, claim_from_queues
from ..clock import elapsed
from ..db import Outage, nothing_if_lost
from ..fairness import FairClaims
from ..operations.pausing import PauseCache
from .heartbeat import recover, recovery_grace

if TYPE_CHECKING:
    from ..models import Job

logger = logging.getLogger("django_dbqueue")


class Claims:
    """Claims for the worker ``name`` from ``queues`` on ``database``;
    ``release(ids)`` gives back jobs claimed from a queue paused meanwhile."""

    def __init__(
        self,
        database: str,
        name: str,
        queues: list[str],
        *,
        size: int,
        lease: float,
        poll_max: float,
        release: Callable[[list[int]], int],
        weights: Mapping[str, float] | None = None,
        rate_limits: Mapping[str, str] | None = None,
    ) -> None:
        self.database = database
        self.name = name
        self.queues = queues
        self.size = size
        self.lease = lease
        self.poll_max = poll_max
        self.release = release
        self.limited = LimitedClaims()
        self.fair = FairClaims(weights)
        self.rated = RateClaims(rate_limits)
        self.pauses = PauseCache(database, poll_max)

    def claim(self) -> tuple[list[Job], float | None]:
        """A batch, and when its claim was sent (elapsed clock); None when
        every queue is paused and nothing was sent."""
        from ..models import Job

        sent_at = elapsed()
        queues = self.pauses.unpaused(self.queues)  # a paused queue is left out (pausing.py)
        if not queues:
            return [], None
        jobs = Job.objects.using(self.database)
        name, lease = self.name, self.lease
        batch = nothing_if_lost(
            lambda: self.fair.claim(
                jobs,
                queues,
                name,
                self.size,
                lease,
                lambda n: claim_from_queues(jobs, queues, name, n, lease),
            )
        )
        room = self.size - len(batch)
        batch += nothing_if_lost(lambda: self.limited.claim(jobs, queues, self.name, room, self.lease))
        room = self.size - len(batch)
        batch += nothing_if_lost(lambda: self.rated.claim(jobs, queues, self.name, room, self.lease))
        if batch and self.pauses.stale():
            batch = self.drop_paused(batch)
        return batch, sent_at

    def waiting(self, poll_min: float) -> float | None:
        """How long to idle while limited jobs wait for a slot, or None when
        none was found: a concurrency slot may free at any moment, a rate
        slot when its period is over (waited for, up to the poll interval)."""
        if self.limited.found:
            return poll_min
        if self.rated.found:
            return max(poll_min, min(self.rated.wait(), self.poll_max))
        return None

    def drop_paused(self, batch: list[Job]) -> list[Job]:
        """The claim outlasted the paused set it used: read the set again and
        give back what it took from a queue paused meanwhile."""
        paused = self.pauses.refresh()
        dropped = [job.pk for job in batch if job.queue_name in paused]
        if dropped:
            self.release(dropped)
            logger.info(
                "Worker %s gave back %d jobs of a queue paused during its claim.", self.name, len(dropped)
            )
        return [job for job in batch if job.queue_name not in paused]

    def burst_idle(self, outage: Outage, backoff: float) -> float | None:
        """Burst mode found nothing to claim: how long to wait before the next
        claim, or None to exit, once nothing is due and nothing is left to
        recover (waiting out the recovery grace if need be)."""
        from ..models import Job

        if recover(self.database, outage, self.lease):
            return 0
        jobs = Job.objects.using(self.database).filter(queue_name__in=self.pauses.unpaused(self.queues))
        # Expired first, then due: a job that another process recovers
        # between the two reads is seen as one or the other, never as neither.
        expired = jobs.expired_count()
        if jobs.due().exists():
            return backoff  # due, but another claimer holds it locked for now
        if expired:
            grace = recovery_grace(self.database, outage, self.lease)
            logger.info("Worker %s: waiting %.0fs to recover jobs whose lease ran out.", self.name, grace)
            return max(backoff, min(grace, self.poll_max))
        return None
