"""One worker process: claim a batch, run it, record, heartbeat, stop cleanly."""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.utils import timezone
from django.utils.crypto import get_random_string

from .execution import run_job

if TYPE_CHECKING:
    from .backend import DatabaseBackend
    from .models import Job

logger = logging.getLogger("django_dbqueue")


class ForcedStop(BaseException):
    """Raised in the worker's main thread by a second stop signal."""


def make_owner_name() -> str:
    return f"{socket.gethostname()[:80]}:{os.getpid()}:{get_random_string(6)}"


class Worker:
    """Claims jobs from ``queues`` and runs them until told to stop.

    ``run()`` returns the process exit code: 0 after a graceful stop or, in
    burst mode, once no due job is left; 1 after a forced stop.
    """

    def __init__(
        self,
        backend: DatabaseBackend,
        queues: list[str],
        *,
        batch: int | None = None,
        burst: bool = False,
        counters: Any = None,
        slot: int = 0,
        stop_event: Any = None,
    ) -> None:
        self.backend = backend
        self.config = backend.config
        self.queues = list(queues)
        self.batch = batch or self.config.BATCH_SIZE
        self.burst = burst
        self.name = make_owner_name()
        self.counters = counters  # shared [processed, failed] per slot, or None
        self.slot = slot
        self.parent_stop = stop_event  # the supervisor's graceful-stop request
        self.processed = self.failed = 0
        self._published = (0, 0)
        self.stopping = False
        self.forcing = False
        self.wake = threading.Event()
        self.in_hand: deque[Job] = deque()
        self.parent_pid = os.getppid()

    # -- lifecycle ----------------------------------------------------------

    def run(self) -> int:
        self._install_signal_handlers()
        heartbeat = Heartbeat(self)
        heartbeat.start()
        self._watch_parent()
        logger.info("Worker %s started on queues %s.", self.name, ", ".join(self.queues))
        code = 0
        try:
            self._loop()
        except ForcedStop:
            logger.warning("Worker %s stopped at once on a second signal.", self.name)
            code = 1
        finally:
            self._give_back()
            heartbeat.stop()
            connections.close_all()
        logger.info("Worker %s stopped after %d jobs (%d failed).", self.name, self.processed, self.failed)
        return code

    def request_stop(self) -> None:
        self.stopping = True
        self.wake.set()

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        signal.signal(signal.SIGQUIT, self._on_force)

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Only a flag, so the job in hand finishes; a second signal forces.
        if self.stopping:
            self._on_force(signum, frame)
        logger.info("Worker %s: %s, stopping after the job in hand.", self.name, signal.Signals(signum).name)
        self.request_stop()

    def _on_force(self, signum: int, frame: Any) -> None:
        # Raise once: a further signal (Ctrl-C to the group and the
        # supervisor's SIGQUIT both arrive) must not cut short the give-back.
        if self.forcing:
            return
        self.forcing = True
        self.request_stop()
        raise ForcedStop()

    def _watch_parent(self) -> None:
        # The supervisor asks for a stop through an event, not a signal: with
        # Ctrl-C every process of the group already got one, and a relayed
        # signal would count as the second, forcing one.
        if self.parent_stop is None:
            return

        def watch() -> None:
            while not self.stopping:
                if self.parent_stop.is_set() or os.getppid() != self.parent_pid:
                    self.request_stop()
                time.sleep(0.2)

        threading.Thread(target=watch, name="dbqueue-parent-watch", daemon=True).start()

    # -- the loop -----------------------------------------------------------

    def _loop(self) -> None:
        idle = self.config.POLL_INTERVAL_MIN
        while not self.stopping:
            jobs = self._claim()
            if jobs:
                self._run_batch(jobs)
                idle = self.config.POLL_INTERVAL_MIN
                if len(jobs) >= self.batch:
                    continue  # a full batch: more is probably waiting
            elif self.burst:
                # An empty claim can mean only that others held every
                # candidate for a moment; exit only when nothing is due.
                if not self._recover() and not self._due_jobs_left():
                    return
                continue
            else:
                idle = min(idle * 2, self.config.POLL_INTERVAL_MAX)
            # Jitter keeps idle workers from polling in lockstep.
            self.wake.wait(idle * random.uniform(0.5, 1.0))

    def _claim(self) -> list[Job]:
        from .models import Job

        jobs = Job.objects.using(self.backend.database)
        jobs = (
            jobs.filter(queue_name=self.queues[0])
            if len(self.queues) == 1
            else jobs.filter(queue_name__in=self.queues)
        )
        return jobs.claim(self.name, limit=self.batch, lease=self.config.LEASE_SECONDS)

    def _due_jobs_left(self) -> bool:
        from .models import Job

        return Job.objects.using(self.backend.database).filter(queue_name__in=self.queues).due().exists()

    def _run_batch(self, jobs: list[Job]) -> None:
        self.in_hand.extend(jobs)
        while self.in_hand and not self.stopping:
            job = self.in_hand[0]
            outcome = run_job(self.backend, job, self.name)
            self.in_hand.popleft()
            self.processed += 1
            self.failed += outcome.status == "FAILED"
        self._publish_counts()
        self._give_back()

    def _give_back(self) -> None:
        """Return claimed jobs that never started, without costing an attempt."""
        from .models import Job

        if not self.in_hand:
            return
        ids = [job.pk for job in self.in_hand]
        self.in_hand.clear()
        released = Job.objects.using(self.backend.database).release(self.name, ids)
        logger.info("Worker %s gave back %d unstarted jobs.", self.name, released)

    def _recover(self) -> int:
        from .models import Job

        requeued, failed = Job.objects.using(self.backend.database).recover_expired()
        if requeued or failed:
            logger.warning(
                "Recovered %d jobs from dead workers (%d back to READY, %d FAILED on their last attempt).",
                requeued + failed,
                requeued,
                failed,
            )
        return requeued

    def _publish_counts(self) -> None:
        if self.counters is not None:
            self.counters[2 * self.slot] += self.processed - self._published[0]
            self.counters[2 * self.slot + 1] += self.failed - self._published[1]
        self._published = (self.processed, self.failed)


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
            Worker.objects.using(db).filter(name=worker.name).update(
                last_seen_at=timezone.now(), processed=worker.processed, failed=worker.failed
            )
            worker._recover()
        except Exception:
            logger.exception("Worker %s: heartbeat failed; will try again.", worker.name)
            connections[db].close()

    def _register(self) -> None:
        from .models import Worker

        worker = self.worker
        try:
            Worker.objects.using(worker.backend.database).create(
                name=worker.name, host=socket.gethostname()[:255], pid=os.getpid(), queues=worker.queues
            )
        except Exception:
            logger.exception("Worker %s could not register itself.", worker.name)

    def _unregister(self) -> None:
        from .models import Worker

        try:
            Worker.objects.using(self.worker.backend.database).filter(name=self.worker.name).delete()
        except Exception:
            logger.exception("Worker %s could not unregister itself.", self.worker.name)
