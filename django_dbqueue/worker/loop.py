"""One worker process: claim a batch, run it, record, stop cleanly.

A worker never starts a job it cannot show it still holds. It holds a batch
from its claim for one lease, and for as long after as the heartbeat keeps
vouching for it without a gap; before each job it checks that (no query),
and when it cannot show it (it was paused, the heartbeat was cut off), it
asks the database which of its jobs are still its own, and drops the rest:
another worker has recovered them.
"""

from __future__ import annotations

import logging
import multiprocessing
import random
import threading
import time
from collections import deque
from typing import TYPE_CHECKING

from django.db import connections
from django.template.defaultfilters import pluralize

from ..claiming import LimitedClaims, claim_from_queues
from ..clock import elapsed
from ..db import DB_ERRORS, Outage, check_writable, drop_connection, is_outage, nothing_if_lost
from ..operations.pausing import PauseCache
from .execution import JobRunner
from .giveback import HoldWatch
from .heartbeat import Heartbeat, HeartbeatThread, owner_name, recover, recovery_grace
from .outcomes import OneTraceback
from .shared import SharedState, safety_margin
from .signals import ForcedStop, StopSignals
from .softstop import SoftStopWatch

if TYPE_CHECKING:
    from ..backend import DatabaseBackend
    from ..models import Job

logger = logging.getLogger("django_dbqueue")


class Worker:
    """Claims jobs from ``queues`` and runs them until told to stop.

    ``run()`` returns the process exit code: 0 after a graceful stop or, in
    burst mode, once nothing is due and nothing is left to recover; 1 after
    a forced stop. ``state`` and ``slot``: what a supervisor shares with it
    (its heartbeat then runs in the supervisor's heartbeat process); without
    them the worker runs its own heartbeat thread.
    """

    def __init__(
        self,
        backend: DatabaseBackend,
        queues: list[str],
        *,
        batch: int | None = None,
        burst: bool = False,
        state: SharedState | None = None,
        slot: int = 0,
    ) -> None:
        self.backend = backend
        self.database = backend.database
        self.config = backend.config
        self.lease = self.config.LEASE_SECONDS
        self.queues = list(queues)
        self.batch = batch or self.config.BATCH_SIZE
        self.burst = burst
        self.name = owner_name()
        self.supervised = state is not None
        self.state = state or SharedState(1, multiprocessing.get_context())
        self.slot = self.state.slot(slot)
        self.processed = self.failed = 0
        self.stopping = False
        self.wake = threading.Event()
        self.lock = threading.Lock()  # guards pending and current against the hold watch
        self.pending: deque[Job] = deque()  # claimed, not started
        self.current: Job | None = None
        self.current_since: float | None = None  # monotonic, for the hold watch
        self.stop_requested_at: float | None = None
        self.held_until = 0.0  # elapsed clock: this worker's own proof of its leases
        self.outage = Outage(f"Worker {self.name}", self.config.RECONNECT_BACKOFF_MAX)
        self.limited = LimitedClaims()
        self.signals = StopSignals(self.name, self.request_stop)
        self.pauses = PauseCache(self.database, self.config.POLL_INTERVAL_MAX)
        self.runner = JobRunner(
            backend, self.name, self.outage, slot=self.slot, give_up=self._give_up, batch=self.batch
        )

    # -- lifecycle ---------------------------------------------------------------------

    def run(self) -> int:
        self.signals.install()
        self.slot.reset(self.name)
        heartbeat = None
        if not self.supervised:
            heartbeat = HeartbeatThread(Heartbeat(self.backend, self.state, self.queues))
            heartbeat.start()
        else:
            self.signals.watch_parent(self.state.stop)
        hold_watch = HoldWatch(self)
        hold_watch.start()
        soft_stop = SoftStopWatch(self.runner.control, self.config.CANCEL_GRACE_SECONDS)
        soft_stop.start()
        logger.info("Worker %s started on queues %s.", self.name, ", ".join(self.queues))
        code = 0
        try:
            with OneTraceback():
                self._loop()
        except ForcedStop:
            logger.warning("Worker %s stopped at once on a second signal or SIGQUIT.", self.name)
            code = 1
            drop_connection(self.database)  # the signal may have cut a query short
            self._abandon_current()
        finally:
            hold_watch.stop()
            soft_stop.stop()
            self._finish()
            self.slot.name = ""
            if heartbeat is not None:
                heartbeat.stop()
            self.signals.restore()
            connections.close_all()
        logger.info(
            "Worker %s stopped after %d job%s (%d failed).",
            self.name,
            self.processed,
            pluralize(self.processed),
            self.failed,
        )
        return code

    def request_stop(self) -> None:
        if self.stop_requested_at is None:
            self.stop_requested_at = time.monotonic()
            # From then on, the job in hand has STOP_TIMEOUT to finish before
            # it is interrupted at its next checkpoint (softstop.py).
            if self.config.STOP_TIMEOUT is not None:
                self.slot.stop_deadline = elapsed() + self.config.STOP_TIMEOUT
        self.stopping = True
        self.wake.set()

    def _give_up(self) -> bool:
        """Whether a write waiting out an outage should stop waiting: on a
        forced stop at once; on a graceful one, once a lease has passed."""
        if self.signals.forcing:
            return True
        since = self.stop_requested_at
        return since is not None and time.monotonic() - since > self.lease

    def _abandon_current(self) -> None:
        job, since = self.current, self.runner.started
        if job is None:
            return
        try:
            self.runner.abandon(job, since)
        except Exception as exc:
            logger.warning("Worker %s could not record the job it abandoned (%s).", self.name, exc)
        self.current = None

    def _finish(self) -> None:
        """Record what ran and give back what did not, on the way out."""
        try:
            self.runner.outcomes.flush()
        except BaseException:
            # Those jobs stay RUNNING under this worker's name; once the lease
            # runs out, recovery requeues them and they run again.
            logger.exception("Worker %s could not record %d outcomes.", self.name, len(self.runner.outcomes))
            drop_connection(self.database)
        self._give_back()

    # -- the loop ------------------------------------------------------------------

    def _loop(self) -> None:
        idle: float | None = self.config.POLL_INTERVAL_MIN
        while not self.stopping:
            try:
                idle = self._step(idle or self.config.POLL_INTERVAL_MIN)
            except DB_ERRORS as exc:
                if not is_outage(exc, self.database):
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
            # A full batch: more is probably waiting; so are more of a limited key,
            # and the dependants (or batch callbacks) these outcomes released.
            followed = any(job.has_dependants or job.batch_id is not None for job in jobs)
            more = len(jobs) >= self.batch or self.limited.found or followed
            return 0 if more else self.config.POLL_INTERVAL_MIN
        if self.limited.found:
            # Limited jobs wait for a slot: a slot that frees should not sit
            # idle for a long backoff while its jobs wait.
            return self.config.POLL_INTERVAL_MIN
        backoff = min(idle * 2, self.config.POLL_INTERVAL_MAX)
        if self.burst:
            return self._burst_idle(backoff)
        return backoff

    def _burst_idle(self, backoff: float) -> float | None:
        """Burst mode found nothing to claim: exit only if nothing is due and
        nothing is left to recover, waiting out the recovery grace if need be."""
        from ..models import Job

        if recover(self.database, self.outage, self.lease):
            return 0
        jobs = Job.objects.using(self.database).filter(queue_name__in=self.pauses.unpaused(self.queues))
        # Expired first, then due: a job that another process recovers
        # between the two reads is seen as one or the other, never as neither.
        expired = jobs.expired_count()
        if jobs.due().exists():
            return backoff  # due, but another claimer holds it locked for now
        if expired:
            grace = recovery_grace(self.database, self.outage, self.lease)
            logger.info("Worker %s: waiting %.0fs to recover jobs whose lease ran out.", self.name, grace)
            return max(backoff, min(grace, self.config.POLL_INTERVAL_MAX))
        return None

    def _claim(self) -> list[Job]:
        from ..models import Job

        queues = self.pauses.unpaused(self.queues)  # a paused queue is left out (pausing.py)
        if not queues:
            return []
        jobs = Job.objects.using(self.database)
        sent_at = elapsed()
        batch = nothing_if_lost(lambda: claim_from_queues(jobs, queues, self.name, self.batch, self.lease))
        room = self.batch - len(batch)
        batch += nothing_if_lost(lambda: self.limited.claim(jobs, queues, self.name, room, self.lease))
        self.state.timings.claims.observe(self.slot.index, elapsed() - sent_at)
        if batch and self.pauses.stale():
            batch = self._drop_paused(batch)
        if batch:
            self.held_until = sent_at + self.lease
        return batch

    def _drop_paused(self, batch: list[Job]) -> list[Job]:
        """The claim outlasted the paused set it used: read the set again and
        give back what it took from a queue paused meanwhile, so that a
        pause holds once it is one read's lifetime old (pausing.py)."""
        from ..models import Job

        paused = self.pauses.refresh()
        dropped = [job.pk for job in batch if job.queue_name in paused]
        if dropped:
            Job.objects.using(self.database).release(self.name, dropped)
            logger.info(
                "Worker %s gave back %d jobs of a queue paused during its claim.", self.name, len(dropped)
            )
        return [job for job in batch if job.queue_name not in paused]

    def _run_batch(self, jobs: list[Job]) -> None:
        with self.lock:
            self.pending.extend(jobs)
        outcomes = self.runner.outcomes
        while not self.stopping:
            with self.lock:
                if not self.pending:
                    break
                job = self.pending.popleft()
            if not self._holds(job):
                continue
            with self.lock:
                # From here the job has started: nothing gives it back unstarted.
                began = time.monotonic()
                self.current, self.current_since = job, began
            try:
                status = self.runner.run(job)
                self.state.timings.runs.observe(self.slot.index, time.monotonic() - began)
            finally:
                if not self.signals.forcing:  # a forced stop abandons the job in hand: run() records it
                    with self.lock:
                        self.current = self.current_since = None
            self._count(failed=status == "FAILED")
            if outcomes.due():
                outcomes.flush()
        outcomes.flush()
        self._give_back()

    def _holds(self, job: Job) -> bool:
        """Whether this worker can show it still holds ``job``: by its own
        claim, or by the heartbeat's chain of extensions if that began while
        the claim still held; or else by asking the database."""
        margin, now = safety_margin(self.lease), elapsed()
        vouched_until, chain_start = self.slot.vouched_until()
        own = self.held_until - margin
        if now < own or (chain_start < own and now < vouched_until - margin):
            return True
        from ..models import Job

        with self.lock:
            ids = [job.pk, *(j.pk for j in self.pending)]
        held = Job.objects.using(self.database).still_held(self.name, ids, self.lease)
        self.held_until = now + self.lease
        lost = [pk for pk in ids if pk not in held]
        if lost:
            with self.lock:
                self.pending = deque(j for j in self.pending if j.pk in held)
            logger.warning(
                "Worker %s lost %d claimed jobs to recovery while it could not show its lease "
                "(paused, or cut off from the database); it does not run them.",
                self.name,
                len(lost),
            )
        return job.pk in held

    def _ride_out(self, exc: BaseException) -> None:
        """Wait for the database to come back, then give back whatever this
        worker holds but has not started: a claim whose commit reached the
        server but whose reply did not, or a release that never arrived."""
        from ..models import Job

        while True:
            drop_connection(self.database)
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
                # A server made read-only answers the reads above: back means back for writes.
                check_writable(self.database, Job._meta.db_table)
            except DB_ERRORS as again:
                if not is_outage(again, self.database):
                    raise
                exc = again
                continue
            self.outage.restored()
            return

    def _give_back_orphans(self) -> None:
        from ..models import Job

        # Successes waiting in the buffer ran: record them first. Failures are
        # recorded at once, so what this worker still holds RUNNING after
        # that never started.
        self.runner.outcomes.flush()
        jobs = Job.objects.using(self.database)
        with self.lock:
            self.pending.clear()
        ids = list(jobs.running().filter(owner=self.name).values_list("pk", flat=True))
        if ids:
            released = jobs.release(self.name, ids)
            logger.info("Worker %s gave back %d claimed jobs after the outage.", self.name, released)

    def _give_back(self) -> None:
        """Return claimed jobs that never started, without costing an attempt."""
        from ..models import Job

        with self.lock:
            ids = [job.pk for job in self.pending]
            self.pending.clear()
        if not ids:
            return
        try:
            released = Job.objects.using(self.database).release(self.name, ids)
        except DB_ERRORS as exc:
            if not is_outage(exc, self.database) or not self.stopping:
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

    def _count(self, failed: bool) -> None:
        # Shared with the supervisor after every job, not every batch: it tells
        # a worker that died after doing work from a crash loop (supervisor.py).
        self.processed += 1
        self.failed += failed
        self.slot.count(failed)
