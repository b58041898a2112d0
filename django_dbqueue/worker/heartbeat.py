"""The heartbeat: keeps the leases of living workers alive, their Worker
rows fresh, and returns dead workers' jobs to the queue.

Under ``runqueue`` it runs in a process of its own, forked by the
supervisor, and vouches for every worker process the supervisor knows to
be alive. So nothing a task does can starve it: a task that holds the GIL
for minutes, in one C call, keeps its lease (a busy worker keeps its
jobs), while a worker that dies stops being vouched for at once (the
supervisor clears its name) and its jobs come back after one lease. A
``Worker`` run on its own (tests, embedding) runs the same heartbeat in a
thread.

Recovery waits for a grace period after the database was away: every lease
may have run out meanwhile, including live workers' that simply could not
reach the database, so they get one lease to reconnect and extend first.
That holds after this process lost its connection, and after the database
server itself restarted (its uptime is read), whoever noticed.

Between beats it keeps watching which workers are alive, and writes a new
worker's row (or deletes a stopped one's) within a tick: a worker is visible
to ``queuehealth``, ``queuestats``, the metrics and the admin, with its start
time, from the moment it starts, not a quarter lease later at the next beat.
And every CONTROL_INTERVAL it passes cancel requests to the workers whose
jobs they concern, and their tasks' progress to the rows (control.py).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from django.db import connections
from django.template.defaultfilters import pluralize

from ..clock import DbNow, elapsed
from ..db import DB_ERRORS, Outage, drop_connection, is_conflict, is_outage, retry_on_conflict
from ..operations.retention import Pruner
from .control import RunningControl
from .shared import SharedState, name_process
from .signals import main_thread_signals

if TYPE_CHECKING:
    from ..backend import DatabaseBackend

logger = logging.getLogger("django_dbqueue")


class Heartbeat:
    def __init__(self, backend: DatabaseBackend, state: SharedState, queues: list[str]) -> None:
        self.backend = backend
        self.database = backend.database
        self.lease = backend.config.LEASE_SECONDS
        self.interval = backend.config.heartbeat_interval
        self.state = state
        self.queues = queues
        self.outage = Outage("The heartbeat", backend.config.RECONNECT_BACKOFF_MAX)
        self.sent: dict[int, tuple[str, float]] = {}  # slot: (name, when its last extension was sent)
        self.registered: set[str] = set()  # the live workers whose Worker row this heartbeat wrote
        self.failing = False  # the last beat or enrolment failed: wait out its delay before the next
        self.pruner = Pruner(backend)  # OPTIONS RETENTION, a little per beat
        self.control = RunningControl(self.database, state)
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
                    self.enrol(self.state.live_names())
                if now >= next_control:
                    next_control = now + self.control_interval
                    self.control.run(self.state.live_names())
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
        self._forget(list(self.registered))
        connections.close_all()

    def roster_changed(self) -> bool:
        """Whether a worker started or stopped since the last enrolment (not
        while the heartbeat is failing: it waits out its delay first)."""
        return not self.failing and set(self.state.live_names().values()) != self.registered

    def enrol(self, live: dict[int, str]) -> None:
        """Write the rows of workers that started since the last look, and
        delete those of workers that stopped or died."""
        names = set(live.values())
        for name in sorted(names - self.registered):
            self._register(name)
            self.registered.add(name)
        gone = self.registered - names
        self._forget(sorted(gone))
        self.registered -= gone

    def beat(self) -> None:
        from ..models import Job, Worker

        live = self.state.live_names()
        self.enrol(live)
        sent_at = elapsed()
        Job.objects.using(self.database).extend_leases(live.values(), self.lease)
        for index, name in live.items():
            slot, last = self.state.slot(index), self.sent.get(index)
            previous = last[1] if last and last[0] == name else None
            slot.vouched(sent_at, self.lease, previous)
            self.sent[index] = (name, sent_at)
            Worker.objects.using(self.database).filter(name=name).update(
                last_seen_at=DbNow(), processed=slot.processed, failed=slot.failed
            )
        for index in [i for i in self.sent if i not in live]:
            del self.sent[index]
        self.recover()
        self.pruner.run()

    def recover(self) -> int:
        return recover(self.database, self.outage, self.lease)

    def _register(self, name: str) -> None:
        from ..models import Worker

        host, _, pid = name.partition(":")
        Worker.objects.using(self.database).get_or_create(
            name=name,
            defaults={
                "host": host[:255],
                "pid": int(pid.partition(":")[0] or 0),
                "queues": self.queues,
                # Both on the database's clock, as every later last_seen_at is.
                "started_at": DbNow(),
                "last_seen_at": DbNow(),
            },
        )

    def _forget(self, names: list[str]) -> None:
        """Delete the Worker rows of workers that stopped or died."""
        from ..models import Worker

        if names:
            try:
                Worker.objects.using(self.database).filter(name__in=names).delete()
            except Exception as exc:
                if not is_outage(exc, self.database):
                    logger.exception("The heartbeat could not remove stopped workers' rows.")


def recover(database: str, outage: Outage, lease: float) -> int:
    """Return dead workers' jobs to the queue, unless within the grace."""
    from ..models import Job

    if recovery_grace(database, outage, lease):
        return 0
    # Its locking read may lose to another node's write on Galera (or deadlock): run it again.
    requeued, finished = retry_on_conflict(Job.objects.using(database).recover_expired, database)
    if requeued or finished:
        logger.warning(
            "Recovered %d job%s from dead workers (%d back to READY, %d finished: FAILED on their "
            "last attempt, or CANCELLED as asked).",
            requeued + finished,
            pluralize(requeued + finished),
            requeued,
            finished,
        )
    return requeued + finished


def recovery_grace(database: str, outage: Outage, lease: float) -> float:
    """Seconds left before recovering expired leases is safe (0: it is now)."""
    left = outage.within(lease)
    if left:
        return left
    uptime = server_uptime(database)
    return max(0.0, lease - uptime) if uptime is not None else 0.0


def server_uptime(database: str) -> float | None:
    """Seconds since the database server started, where it says."""
    connection = connections[database]
    if connection.vendor == "mysql":
        # SHOW, not information_schema.GLOBAL_STATUS: MySQL 5.7+ dropped that
        # table (MariaDB kept it); SHOW answers on both.
        sql = "SHOW GLOBAL STATUS LIKE 'Uptime'"
    elif connection.vendor == "postgresql":
        sql = "SELECT EXTRACT(EPOCH FROM (STATEMENT_TIMESTAMP() - pg_postmaster_start_time()))"
    else:
        return None
    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
    return float(row[-1]) if row else None


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
    from ..tasks_api import task_backends

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


def owner_name() -> str:
    """A worker's owner name: host, pid and a random suffix."""
    from django.utils.crypto import get_random_string

    return f"{socket.gethostname()[:80]}:{os.getpid()}:{get_random_string(6)}"
