"""Giving back the rest of a batch while a slow job runs.

A worker claims a batch and runs it in order, so every job behind a slow one
waits for it, even while other workers sit idle. The batch's unstarted jobs
cannot be given back from the worker's main thread (it is busy running the
slow job), so this thread watches it: once the job in hand has run for
BATCH_HOLD_SECONDS, the unstarted rest goes back to READY at once, without
costing an attempt, for whichever worker is free. The job in hand itself is
never touched: it left ``pending`` before it started, and this thread only
takes what is still there, under the worker's lock.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from django.db import connections

from ..db import DB_ERRORS, drop_connection, is_outage
from .signals import main_thread_signals

if TYPE_CHECKING:
    from .loop import Worker

logger = logging.getLogger("django_dbqueue")


class HoldWatch(threading.Thread):
    def __init__(self, worker: Worker) -> None:
        super().__init__(name="dbqueue-hold-watch", daemon=True)
        self.worker = worker
        self.hold = worker.config.BATCH_HOLD_SECONDS
        self.done = threading.Event()

    def run(self) -> None:
        main_thread_signals()
        # Checking twice per hold bounds the extra wait at half a hold.
        while not self.done.wait(self.hold / 2):
            try:
                self._check()
            except Exception as exc:
                database = self.worker.backend.database
                # An outage is reported once, by the worker's loop; the jobs
                # went back to the loop, so nothing is lost by skipping.
                if not (isinstance(exc, DB_ERRORS) and is_outage(exc, database)):
                    logger.exception("Worker %s could not give back its unstarted jobs.", self.worker.name)
                drop_connection(database)
        connections.close_all()

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)

    def _check(self) -> None:
        from ..models import Job

        worker = self.worker
        with worker.lock:
            started = worker.current_since
            if started is None or time.monotonic() - started < self.hold or not worker.pending:
                return
            rest = list(worker.pending)
            worker.pending.clear()
        try:
            released = Job.objects.using(worker.backend.database).release(
                worker.name, [job.pk for job in rest]
            )
        except BaseException:
            # Still ours and still RUNNING: hand them back to the loop, or the
            # heartbeat would keep their leases alive with nobody to run them.
            with worker.lock:
                worker.pending.extendleft(reversed(rest))
            raise
        logger.debug("Worker %s gave back %d jobs queued behind a slow one.", worker.name, released)
