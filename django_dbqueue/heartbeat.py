"""The heartbeat thread: keeps a worker's leases and Worker row fresh, and
recovers the jobs of dead workers."""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import TYPE_CHECKING

from django.db import connections
from django.utils import timezone

from .dbfaults import drop_connection, is_outage

if TYPE_CHECKING:
    from .worker import Worker

logger = logging.getLogger("django_dbqueue")


class Heartbeat(threading.Thread):
    """Keeps the worker's leases and its Worker row fresh, and recovers jobs
    of dead workers, from its own thread and database connection, so a long
    job in the main thread does not let its lease run out."""

    def __init__(self, worker: Worker) -> None:
        super().__init__(name="dbqueue-heartbeat", daemon=True)
        self.worker = worker
        self.done = threading.Event()

    def run(self) -> None:
        self._register()
        while not self.done.wait(self.worker.config.heartbeat_interval):
            self._beat()
        self._unregister()
        connections.close_all()

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)

    def _beat(self) -> None:
        from .models import Job, Worker

        worker, db = self.worker, self.worker.backend.database
        try:
            Job.objects.using(db).extend_leases(worker.name, worker.config.LEASE_SECONDS)
            seen = Worker.objects.using(db).filter(name=worker.name)
            if not seen.update(last_seen_at=timezone.now(), processed=worker.processed, failed=worker.failed):
                self._register()  # it could not register while the database was away
            worker.outage.restored()
            worker._recover()
        except Exception as exc:
            if is_outage(exc, db):
                worker.outage.lost(exc)  # logs once per outage, whichever thread sees it
            else:
                logger.exception("Worker %s: heartbeat failed; will try again.", worker.name)
            drop_connection(db)

    def _register(self) -> None:
        from .models import Worker

        worker = self.worker
        try:
            Worker.objects.using(worker.backend.database).create(
                name=worker.name, host=socket.gethostname()[:255], pid=os.getpid(), queues=worker.queues
            )
        except Exception as exc:
            if not is_outage(exc, worker.backend.database):
                logger.exception("Worker %s could not register itself.", worker.name)
            drop_connection(worker.backend.database)

    def _unregister(self) -> None:
        from .models import Worker

        try:
            Worker.objects.using(self.worker.backend.database).filter(name=self.worker.name).delete()
        except Exception as exc:
            if not is_outage(exc, self.worker.backend.database):
                logger.exception("Worker %s could not unregister itself.", self.worker.name)
