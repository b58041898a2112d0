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
from django.utils.crypto import get_random_string

from . import dbfaults, timeouts
from .claiming import claim_from_queues
from .dbfaults import DB_ERRORS, Outage, drop_connection, is_outage
from .execution import run_job
from .heartbeat import Heartbeat
from .holding import HoldWatch
from .outcomes import OutcomeBuffer
from .payload import as_list

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
        deadlines: Any = None,
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
        self.stopping = False
        self.forcing = False
        self.wake = threading.Event()
        self.in_hand: deque[Job] = deque()
        self.lock = threading.Lock()  # guards in_hand against the hold watch
        self.job_started: float | None = None
        self.parent_pid = os.getppid()
        self.deadlines = deadlines  # shared with the supervisor: see timeouts.py
        self.outage = Outage(f"Worker {self.name}", self.config.RECONNECT_BACKOFF_MAX)
        # Successes wait here for one UPDATE per batch; written at the end of
        # each batch, or sooner once a lease quarter (at most 1s) has passed.
        self.outcomes = OutcomeBuffer(
            backend, self.name, max_jobs=self.batch, max_age=min(self.config.heartbeat_interval, 1.0)
        )

    # -- lifecycle ----------------------------------------------------------

    def run(self) -> int:
        self._install_signal_handlers()
        dbfaults.watch(self.outage)
        timeouts.publish_to(self.deadlines, self.slot)
        heartbeat, hold_watch = Heartbeat(self), HoldWatch(self)
        heartbeat.start()
        hold_watch.start()
        self._watch_parent()
        logger.info("Worker %s started on queues %s.", self.name, ", ".join(self.queues))
        code = 0
        try:
            self._loop()
        except ForcedStop:
            logger.warning("Worker %s stopped at once on a second signal.", self.name)
            code = 1
        finally:
            hold_watch.stop()
            self._flush_outcomes()
            self._give_back()
            heartbeat.stop()
            dbfaults.watch(None)
            timeouts.publish_to(None, 0)
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
        # The supervisor asks for a stop through a shared flag, not a signal: with
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
        idle: float | None = self.config.POLL_INTERVAL_MIN
        while not self.stopping:
            try:
                idle = self._step(idle or self.config.POLL_INTERVAL_MIN)
            except DB_ERRORS as exc:
                if not is_outage(exc, self.backend.database):
                    raise
                self._ride_out(exc)
                continue
            if idle is None:
                return
            if idle:
                # Jitter keeps idle workers from polling in lockstep.
                self.wake.wait(idle * random.uniform(0.5, 1.0))

    def _step(self, idle: float) -> float | None:
        """One claim and its batch; returns how long to idle, None to exit."""
        jobs = self._claim()
        if jobs:
            self._run_batch(jobs)
            # A full batch: more is probably waiting.
            return 0 if len(jobs) >= self.batch else self.config.POLL_INTERVAL_MIN
        if self.burst:
            # An empty claim can mean only that others held every
            # candidate for a moment; exit only when nothing is due.
            return None if not self._recover() and not self._due_jobs_left() else 0
        return min(idle * 2, self.config.POLL_INTERVAL_MAX)

    def _ride_out(self, exc: BaseException) -> None:
        """Wait for the database to come back, then give back whatever this
        worker holds but has not started: a claim whose commit reached the
        server but whose reply did not, or a release that never arrived."""
        while True:
            drop_connection(self.backend.database)
            self.wake.wait(self.outage.lost(exc))
            if self.stopping:
                logger.warning(
                    "Worker %s stopping while the database is away; jobs it claimed "
                    "return to the queue when their lease expires.",
                    self.name,
                )
                return
            try:
                self._give_back_orphans()
            except DB_ERRORS as again:
                if not is_outage(again, self.backend.database):
                    raise
                exc = again
                continue
            self.outage.restored()
            return

    def _give_back_orphans(self) -> None:
        from .models import Job

        # Successes waiting in the buffer ran: record them first. Failures are
        # recorded at once (persist()), so what this worker still holds
        # RUNNING after that never started.
        self.outcomes.flush()
        jobs = Job.objects.using(self.backend.database)
        with self.lock:
            self.in_hand.clear()
        ids = list(jobs.running().filter(owner=self.name).values_list("pk", flat=True))
        if ids:
            released = jobs.release(self.name, ids)
            logger.info("Worker %s gave back %d claimed jobs after the outage.", self.name, released)

    def _claim(self) -> list[Job]:
        from .models import Job

        jobs = Job.objects.using(self.backend.database)
        return claim_from_queues(jobs, self.queues, self.name, self.batch, self.config.LEASE_SECONDS)

    def _due_jobs_left(self) -> bool:
        from .models import Job

        return Job.objects.using(self.backend.database).filter(queue_name__in=self.queues).due().exists()

    def _run_batch(self, jobs: list[Job]) -> None:
        self.in_hand.extend(jobs)
        while not self.stopping:
            # The hold watch may take the unstarted jobs behind this one
            # (holding.py); the job stays at the head until it has run.
            with self.lock:
                if not self.in_hand:
                    break
                job = self.in_hand[0]
                self.job_started = time.monotonic()
            # A row written by hand may hold any JSON here; the outcome appends.
            job.errors, job.worker_ids = as_list(job.errors), as_list(job.worker_ids)
            outcome = run_job(self.backend, job, self.name, self.outcomes)
            with self.lock:
                self.in_hand.popleft()
                self.job_started = None
            self._count(failed=outcome.status == "FAILED")
            if self.outcomes.due():
                self.outcomes.flush()
        self.outcomes.flush()
        self._give_back()

    def _flush_outcomes(self) -> None:
        try:
            self.outcomes.flush()
        except Exception:
            # Those jobs stay RUNNING under this worker's name; once the lease
            # runs out, recovery requeues them and they run again.
            logger.exception("Worker %s could not record %d outcomes.", self.name, len(self.outcomes))

    def _give_back(self) -> None:
        """Return claimed jobs that never started, without costing an attempt."""
        from .models import Job

        with self.lock:
            ids = [job.pk for job in self.in_hand]
            self.in_hand.clear()
        if not ids:
            return
        try:
            released = Job.objects.using(self.backend.database).release(self.name, ids)
        except DB_ERRORS as exc:
            if not is_outage(exc, self.backend.database) or not self.stopping:
                raise  # in the loop, _ride_out() gives them back once it can
            logger.warning(
                "Worker %s could not give back %d unstarted jobs (%s); they return to the "
                "queue when their lease expires.",
                self.name,
                len(ids),
                exc,
            )
            return
        logger.info("Worker %s gave back %d unstarted jobs.", self.name, released)

    def _recover(self) -> int:
        from .models import Job

        if self.outage.within(self.config.LEASE_SECONDS):
            # Just after an outage every lease may have run out, including
            # those of live workers still holding an outcome to record: give
            # them one lease to reconnect and heartbeat before taking jobs.
            return 0
        requeued, failed = Job.objects.using(self.backend.database).recover_expired()
        if requeued or failed:
            logger.warning(
                "Recovered %d jobs from dead workers (%d back to READY, %d FAILED on their last attempt).",
                requeued + failed,
                requeued,
                failed,
            )
        return requeued

    def _count(self, failed: bool) -> None:
        # Shared with the supervisor after every job, not every batch: it tells
        # a worker that died after doing work from a crash loop (supervisor.py).
        self.processed += 1
        self.failed += failed
        if self.counters is not None:
            self.counters[2 * self.slot] += 1
            self.counters[2 * self.slot + 1] += failed
