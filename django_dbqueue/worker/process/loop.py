"""One worker process: claim a batch, run it, record, stop cleanly.

A worker never starts a job it cannot show it still holds (hand.py: the
batch in hand and its proof, checked before each job without a query; when
it cannot be shown, the database says which jobs are still its own, and the
rest are dropped: another worker has recovered them). What it claims is
claims.py's; how it runs and records one job, execution.py's; an outage is
ridden out in outage.py; what it claimed and did not start goes back in
giveback.py (the unstarted rest of a batch stuck behind a slow job, by its
thread).
"""

from __future__ import annotations

import logging
import multiprocessing
import random
import time
from typing import TYPE_CHECKING

from django.db import connections
from django.template.defaultfilters import pluralize

from ...clock import elapsed
from ...db import DB_ERRORS, Outage, drop_connection, is_outage
from ...status import Status
from ..housekeeping.heartbeat import Heartbeat, HeartbeatThread
from ..housekeeping.roster import owner_name
from ..shared import SharedState, safety_margin
from ..threads import Wake
from .claims import Claims
from .execution import JobRunner
from .giveback import GiveBack, HoldWatch
from .hand import BatchInHand
from .outage import ride_out
from .outcomes import OneTraceback
from .signals import ForcedStop, StopSignals
from .softstop import SoftStopWatch
from .stops import INTERRUPTED
from .undeployed import GIVEN_BACK

if TYPE_CHECKING:
    from ...backend import DatabaseBackend
    from ...models import Job

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
        self.wake = Wake()  # set by the stop signal's handler: not a threading.Event
        self.hand = BatchInHand(self.lease)
        self.stop_requested_at: float | None = None
        self.outage = Outage(f"Worker {self.name}", self.config.RECONNECT_BACKOFF_MAX)
        self.signals = StopSignals(self.name, self.request_stop)
        self.runner = JobRunner(
            backend, self.name, self.outage, slot=self.slot, give_up=self._give_up, batch=self.batch
        )
        self.give_back = GiveBack(
            self.hand,
            self.database,
            self.name,
            release=self.runner.release,
            settle=self.runner.settle,
            stopping=lambda: self.stopping,
        )
        self.claims = Claims(
            self.database,
            self.name,
            self.queues,
            size=self.batch,
            lease=self.lease,
            poll_max=self.config.POLL_INTERVAL_MAX,
            release=self.runner.release,
            weights=self.config.FAIRNESS_WEIGHTS,
            rate_limits=self.config.RATE_LIMITS,
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
        hold_watch = HoldWatch(
            self.hand, self.runner.release, self.database, self.name, self.config.BATCH_HOLD_SECONDS
        )
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
        done = f"{self.processed} job{pluralize(self.processed)}"
        logger.info("Worker %s stopped after %s (%d failed).", self.name, done, self.failed)
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
        self.runner.atomic.lose("the worker was stopped at once")
        job, since = self.hand.current, self.runner.started
        if job is None:
            return
        try:
            self.runner.abandon(job, since)
        except Exception as exc:
            logger.warning("Worker %s could not record the job it abandoned (%s).", self.name, exc)
        self.hand.end()

    def _finish(self) -> None:
        """Record what ran and give back what did not, on the way out."""
        try:
            self.runner.settle()
        except BaseException:
            # Those jobs stay RUNNING under this worker's name; once the lease
            # runs out, recovery requeues them and they run again.
            logger.exception("Worker %s could not record %d outcomes.", self.name, len(self.runner.outcomes))
            drop_connection(self.database)
        self.give_back.unstarted()

    # -- the loop ------------------------------------------------------------------

    def _loop(self) -> None:
        idle: float | None = self.config.POLL_INTERVAL_MIN
        while not self.stopping:
            polled = time.monotonic()
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
                # Jittered, against polling in lockstep; from the claim, not the batch's end.
                self.wake.wait(idle * random.uniform(0.5, 1.0) - (time.monotonic() - polled))

    def _step(self, idle: float) -> float | None:
        """One claim and its batch; returns how long to idle, None to exit."""
        jobs = self._claim()
        waiting = self.claims.waiting(self.config.POLL_INTERVAL_MIN)
        if jobs:
            self._run_batch(jobs)
            # A full batch: more is probably waiting; so are more of a limited key (a
            # slot free soon), and the dependants (or batch callbacks) these released.
            followed = any(job.has_dependants or job.batch_id is not None for job in jobs)
            soon = waiting is not None and waiting <= self.config.POLL_INTERVAL_MIN
            more = len(jobs) >= self.batch or soon or self.claims.fair.found or followed
            return 0 if more else self.config.POLL_INTERVAL_MIN
        if waiting is not None:
            # Limited jobs wait for a slot: a slot that frees should not sit
            # idle for a long backoff while its jobs wait.
            return waiting
        backoff = min(idle * 2, self.config.POLL_INTERVAL_MAX)
        if self.burst:
            return self.claims.burst_idle(self.outage, backoff)
        return backoff

    def _claim(self) -> list[Job]:
        batch, sent_at = self.claims.claim_batch(self.outage)
        if sent_at is None:
            return batch  # every queue paused: no claim to time
        self.state.timings.claims.observe(self.slot.index, elapsed() - sent_at)
        if batch:
            self.hand.claimed(sent_at)
        return batch

    def _run_batch(self, jobs: list[Job]) -> None:
        hand = self.hand
        hand.add(jobs)
        while not self.stopping:
            job = hand.next()
            if job is None:
                break
            if not self._holds(job):
                continue
            began = hand.start(job)
            try:
                status = self.runner.run(job)
            finally:
                if not self.signals.forcing:  # a forced stop abandons the job in hand: run() records it
                    hand.end()
            if status != GIVEN_BACK:  # nothing ran: its task is not deployed here (undeployed.py)
                self.state.timings.runs.observe(self.slot.index, time.monotonic() - began)
            if status not in (GIVEN_BACK, INTERRUPTED):  # an interruption is counted as one (stops.py)
                self._count(failed=status == Status.FAILED)
            if self.runner.due():
                self.runner.settle()
        self.runner.settle()
        self.give_back.unstarted()

    def _holds(self, job: Job) -> bool:
        """Whether this worker can show it still holds ``job``: by its own
        claim, or by the heartbeat's chain of extensions if that began while
        the claim still held; or else by asking the database."""
        now = elapsed()
        if self.hand.shown(now, safety_margin(self.lease), self.slot.vouched_until()):
            return True
        from ...models import Job

        self.runner.settle()  # not in an atomic group's transaction: the extensions must commit
        jobs = Job.objects.using(self.database)
        lost = self.hand.confirm(job, now, lambda ids: jobs.still_held(self.name, ids, self.lease))
        if lost:
            logger.warning(
                "Worker %s lost %d claimed jobs to recovery while it could not show its lease "
                "(paused, or cut off from the database); it does not run them.",
                self.name,
                len(lost),
            )
        return job.pk not in lost

    def _ride_out(self, exc: BaseException) -> None:
        ride_out(
            exc,
            self.database,
            self.outage,
            wait=self.wake.wait,
            stopping=lambda: self.stopping,
            give_back=self.give_back.orphans,
            who=self.name,
        )

    def _count(self, failed: bool) -> None:
        # Shared with the supervisor after every job, not every batch: it tells
        # a worker that died after doing work from a crash loop (supervisor/supervisor.py).
        self.processed += 1
        self.failed += failed
        self.slot.count(failed)
