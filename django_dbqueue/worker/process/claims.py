"""What a worker claims, and whether burst mode is done: the worker's policy
over the claim shapes, which live in transitions/ (its map lists them).

A claim takes up to a batch of ordinary jobs (transitions/shapes.py), shared
with jobs of fairness keys when some have jobs (FairClaims, fair.py), and
fills the room left with jobs of limited keys (LimitedClaims, limited.py),
then of rate keys (RateClaims, rated.py), from the queues that are not
paused. A claim that outlasted the paused set it used gives back what it
took from a queue paused meanwhile, so that a pause holds once it is one
read's lifetime old (operations/pausing.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ...clock import elapsed
from ...db import Outage, nothing_if_lost, retry_on_conflict
from ...operations.pausing import PauseCache
from ...transitions.fair import FairClaims
from ...transitions.limited import LimitedClaims
from ...transitions.rated import RateClaims
from ...transitions.shapes import claim_from_queues
from ...transitions.unreadable import READ_ERRORS
from ..housekeeping.rescuer import recover, recovery_grace

if TYPE_CHECKING:
    from ...models import Job

logger = logging.getLogger("django_dbqueue")

# How often, in the lease after an outage, a worker looks for strays.
STRAY_EVERY = 1.0


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
        self.strays_at = 0.0
        self.seen: set[int] = set()

    def claim_batch(self, outage: Outage | None = None) -> tuple[list[Job], float | None]:
        """A batch, and when its claim was sent (elapsed clock); None when
        every queue is paused and nothing was sent. Within a lease after
        ``outage`` ended, strays go back first (:meth:`release_strays`)."""
        from ...models import Job

        if outage is not None and outage.within(self.lease):
            self.release_strays()
        sent_at = elapsed()
        queues = self.pauses.unpaused(self.queues)  # a paused queue is left out (pausing.py)
        if not queues:
            return [], None
        jobs = Job.objects.using(self.database)
        name, lease = self.name, self.lease
        batch = self.guarded(
            queues,
            lambda: self.fair.claim_fair_share(
                jobs,
                queues,
                name,
                self.size,
                lease,
                lambda n: claim_from_queues(jobs, queues, name, n, lease),
            ),
        )
        room = self.size - len(batch)
        batch += self.guarded(
            queues, lambda: self.limited.claim_limited_jobs(jobs, queues, self.name, room, self.lease)
        )
        room = self.size - len(batch)
        batch += self.guarded(
            queues, lambda: self.rated.claim_rated_jobs(jobs, queues, self.name, room, self.lease)
        )
        if batch and self.pauses.stale():
            batch = self.drop_paused(batch)
        return batch, sent_at

    def guarded(self, queues: list[str], claim: Callable[[], list[Job]]) -> list[Job]:
        """``claim()``, which claimed nothing if it lost to other claimers on
        every try (``nothing_if_lost``) or met a row holding a time Python
        cannot read: that row fails alone (transitions/unreadable.py), and
        the next claim goes on. Any other error is raised as before."""
        from ...models import Job

        try:
            return nothing_if_lost(claim)
        except READ_ERRORS:
            failed = Job.objects.using(self.database).fail_unreadable(queues, self.name)
            if not failed:
                raise  # not a row's time: a fault to see
            logger.error(
                "Worker %s failed %d jobs whose rows hold a time Python cannot read; their errors "
                "name the column.",
                self.name,
                failed,
            )
            return []

    def release_strays(self) -> None:
        """Give back jobs RUNNING under this worker's name that it does not
        hold; called between batches, when it holds none. They come from a
        claim whose COMMIT was sent as the connection died: the worker saw
        an error and went on without them, but the commit took effect, or
        takes effect late (a Galera node applies another's write-sets after
        they are certified). The heartbeat renews the lease of whatever
        runs under a live worker's name, so without this they would wait
        for as long as the worker lives. The look after the outage
        (giveback.py, GiveBack.orphans) can come too early; this one
        repeats every STRAY_EVERY seconds for a lease after the database
        came back, and gives back what two looks in a row saw (one look may
        meet a row in passing: an outcome of this worker's applied late)."""
        from ...models import Job

        if elapsed() < self.strays_at:
            return
        self.strays_at = elapsed() + STRAY_EVERY
        seen = set(Job.objects.using(self.database).held_by(self.name))
        strays, self.seen = sorted(seen & self.seen), seen
        if not strays:
            return
        released = retry_on_conflict(lambda: self.release(strays), self.database)
        self.seen -= set(strays)
        if released:
            logger.warning(
                "Worker %s gave back %d jobs held under its name that it never had: a claim whose "
                "commit it did not see, taking effect after an outage.",
                self.name,
                released,
            )

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
        from ...models import Job

        if recover(self.database, outage, self.lease):
            return 0
        if self.seen and outage.within(self.lease):
            return STRAY_EVERY  # a stray awaits its second look (release_strays)
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
