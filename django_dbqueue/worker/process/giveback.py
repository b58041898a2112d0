"""Giving back claimed jobs that never started, without costing an attempt.

The worker's loop gives back the unstarted rest of its batch when the batch
ends or the worker stops (GiveBack), and after an outage whatever it still
holds RUNNING and never started.

A worker claims a batch and runs it in order, so every job behind a slow one
waits for it, even while other workers sit idle. The batch's unstarted jobs
cannot be given back from the worker's main thread (it is busy running the
slow job), so a thread (HoldWatch) watches the batch in hand (hand.py): once
the job in hand has run for BATCH_HOLD_SECONDS, the unstarted rest goes back
to READY at once, without costing an attempt, for whichever worker is free.
The job in hand itself is never touched: it left the unstarted jobs before
it started, and this thread only takes what is still there, under the
batch's lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import connections

from ...db import DB_ERRORS, drop_connection, is_outage
from ..threads import main_thread_signals
from .hand import BatchInHand

logger = logging.getLogger("django_dbqueue")


class HoldWatch(threading.Thread):
    """Gives back ``hand``'s unstarted jobs through ``release(ids)`` once the
    job in hand has run ``hold`` seconds; ``who`` names the worker in logs."""

    def __init__(
        self, hand: BatchInHand, release: Callable[[list[int]], int], database: str, who: str, hold: float
    ) -> None:
        super().__init__(name="dbqueue-hold-watch", daemon=True)
        self.hand = hand
        self.release = release
        self.database = database
        self.who = who
        self.hold = hold
        self.done = threading.Event()

    def run(self) -> None:
        main_thread_signals()
        # Checking twice per hold bounds the extra wait at half a hold.
        while not self.done.wait(self.hold / 2):
            try:
                self._check()
            except Exception as exc:
                # An outage is reported once, by the worker's loop; the jobs
                # went back to the loop, so nothing is lost by skipping.
                if not (isinstance(exc, DB_ERRORS) and is_outage(exc, self.database)):
                    logger.exception("Worker %s could not give back its unstarted jobs.", self.who)
                drop_connection(self.database)
        connections.close_all()

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)

    def _check(self) -> None:
        rest = self.hand.behind_slow(self.hold)
        if not rest:
            return
        try:
            released = self.release([job.pk for job in rest])
        except BaseException:
            # Still ours and still RUNNING: hand them back to the loop, or the
            # heartbeat would keep their leases alive with nobody to run them.
            self.hand.put_back(rest)
            raise
        logger.debug("Worker %s gave back %d jobs queued behind a slow one.", self.who, released)


class GiveBack:
    """The loop's giving back, for worker ``who``: ``release(ids)`` returns
    its claimed jobs to the queue; ``settle()`` first records the outcomes
    it buffered; ``stopping()`` tells whether the worker is on its way out."""

    def __init__(
        self,
        hand: BatchInHand,
        database: str,
        who: str,
        *,
        release: Callable[[list[int]], int],
        settle: Callable[[], None],
        stopping: Callable[[], bool],
    ) -> None:
        self.hand = hand
        self.database = database
        self.who = who
        self.release = release
        self.settle = settle
        self.stopping = stopping

    def unstarted(self) -> None:
        """Return claimed jobs that never started, without costing an attempt."""
        ids = [job.pk for job in self.hand.take_unstarted()]
        if not ids:
            return
        try:
            released = self.release(ids)
        except DB_ERRORS as exc:
            if not is_outage(exc, self.database) or not self.stopping():
                raise  # in the loop, riding out the outage gives them back once it can (orphans())
            logger.warning(
                "Worker %s could not give back %d unstarted jobs (%s); they return to the "
                "queue when their lease expires.",
                self.who,
                len(ids),
                exc,
            )
            return
        logger.info("Worker %s gave back %d unstarted jobs.", self.who, released)

    def orphans(self) -> None:
        """After an outage: give back what this worker still holds and never started."""
        from ...models import Job

        # Successes waiting in the buffer ran: record them first. Failures are
        # recorded at once, so what this worker still holds RUNNING after
        # that never started (or, an atomic group's, was rolled back).
        self.settle()
        self.hand.take_unstarted()
        ids = Job.objects.using(self.database).held_by(self.who)
        if ids:
            released = self.release(ids)
            logger.info("Worker %s gave back %d claimed jobs after the outage.", self.who, released)
