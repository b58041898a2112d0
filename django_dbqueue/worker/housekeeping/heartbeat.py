"""The heartbeat: the one starter of the housekeeping services, each a
chore in a file of its own, run in turn from one loop:

  every beat (a quarter lease)   leases.py (extend and vouch), roster.py
                                 (the Worker rows), rescuer.py (dead
                                 workers' jobs), pruning.py (RETENTION)
  every tick between beats       roster.py: enrol new workers, forget
                                 stopped ones
  every CONTROL_INTERVAL         cancel_relay.py (cancels in, progress out)
  a thread of its own            scheduler.py (start_scheduler, stopped
                                 when the heartbeat ends)

Under ``runqueue`` it runs in a process of its own, forked by the
supervisor, and vouches for every worker process the supervisor knows to
be alive. So nothing a task does can starve it: a task that holds the GIL
for minutes, in one C call, keeps its lease (a busy worker keeps its
jobs), while a worker that dies stops being vouched for at once (the
supervisor clears its name) and its jobs come back after one lease. A
``Worker`` run on its own (tests, embedding) runs the same heartbeat in a
thread.

A failed beat (a lost lock, an outage) is retried after a delay; nothing
touches the database before it is over.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from django.db import connections

from ...db import DB_ERRORS, Outage, drop_connection, is_conflict, is_outage
from ..shared import SharedState, name_process
from ..threads import main_thread_signals
from .cancel_relay import CancelRelay
from .leases import LeaseKeeper
from .pruning import Pruning
from .rescuer import Rescuer
from .roster import Roster

if TYPE_CHECKING:
    from ...backend import DatabaseBackend

logger = logging.getLogger("django_dbqueue")


class Heartbeat:
    def __init__(self, backend: DatabaseBackend, state: SharedState, queues: list[str]) -> None:
        self.backend = backend
        self.database = backend.database
        self.interval = backend.config.heartbeat_interval
        self.state = state
        self.outage = Outage("The heartbeat", backend.config.RECONNECT_BACKOFF_MAX)
        self.failing = False  # the last beat or enrolment failed: wait out its delay before the next
        lease = backend.config.LEASE_SECONDS
        self.leases = LeaseKeeper(self.database, lease, state)
        self.roster = Roster(self.database, state, queues)
        self.rescuer = Rescuer(self.database, self.outage, lease)
        self.pruning = Pruning(backend)
        self.control = CancelRelay(self.database, state)
        self.control_interval = backend.config.control_interval

    def run(self, done: Callable[[], bool], wait: Callable[[float], object]) -> None:
        """Beat every quarter lease until ``done()``; ``wait(seconds)`` sleeps.
        The backend's schedules tick meanwhile in a thread of their own."""
        from .scheduler import start_scheduler

        scheduler = start_scheduler(self.backend)
        try:
            self._beat_until(done, wait)
        finally:
            if scheduler is not None:
                scheduler.stop()

    def _beat_until(self, done: Callable[[], bool], wait: Callable[[float], object]) -> None:
        next_beat = next_control = 0.0  # time.monotonic() of the next full beat, and control
        while not done():
            now = time.monotonic()
            try:
                if now >= next_beat:
                    next_beat = now + self.interval
                    self.beat()
                else:
                    self.roster.enrol(self.state.live_names())
                if now >= next_control:
                    next_control = now + self.control_interval
                    self.control.run_once(self.state.live_names())
                self.outage.restored()
                self.failing = False
            except DB_ERRORS as exc:
                delay = self.interval
                if is_conflict(exc):
                    # Lost to another transaction (on Galera, another node's write): beat again soon.
                    logger.debug("The heartbeat lost a lock conflict or certification failure (%s).", exc)
                    delay = 0.1
                elif not is_outage(exc, self.database):
                    logger.exception("The heartbeat failed; it will try again.")
                else:
                    delay = min(delay, self.outage.lost(exc))
                drop_connection(self.database)
                next_beat, self.failing = time.monotonic() + delay, True
            except Exception:
                logger.exception("The heartbeat failed; it will try again.")
                drop_connection(self.database)
                next_beat, self.failing = time.monotonic() + self.interval, True
            if self.failing:  # nothing touches the database before the delay is over
                next_control = max(next_control, next_beat)
            # A wait may end early when a worker starts or stops (see roster_changed).
            wait(max(0.0, min(next_beat, next_control) - time.monotonic()))
        self.roster.forget(list(self.roster.registered))
        connections.close_all()

    def roster_changed(self) -> bool:
        """Whether a worker started or stopped since the last enrolment (not
        while the heartbeat is failing: it waits out its delay first)."""
        return not self.failing and self.roster.changed()

    def beat(self) -> None:
        live = self.state.live_names()
        self.roster.enrol(live)
        self.leases.run_once(live, then=self.roster.stamp)  # each worker's vouch, then its row
        self.rescuer.run_once()
        self.pruning.run_once()


class HeartbeatThread(threading.Thread):
    """The heartbeat of a worker that runs without a supervisor."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        super().__init__(name="dbqueue-heartbeat", daemon=True)
        self.heartbeat = heartbeat
        self.done = threading.Event()

    def run(self) -> None:
        main_thread_signals()
        self.heartbeat.run(self.done.is_set, self.done.wait)

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)


def heartbeat_process_main(alias: str, state: SharedState, queues: list[str]) -> None:
    """The supervisor's heartbeat process: group signals are for the workers;
    it stops when the supervisor says so, or is gone."""
    from ...tasks_api import task_backends

    name_process("dbqueue-heartbt")
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_IGN)
    parent = os.getppid()

    def done() -> bool:
        return bool(state.heartbeat_stop.value) or os.getppid() != parent

    heartbeat = Heartbeat(cast("DatabaseBackend", task_backends[alias]), state, queues)

    def wait(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline and not heartbeat.roster_changed():
            time.sleep(0.05)

    heartbeat.run(done, wait)
