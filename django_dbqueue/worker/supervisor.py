"""Runs N worker processes and their heartbeat: starts them, restarts the
ones that crash, relays stop requests without escalating them, kills a
worker stuck past its hard time limit, and logs progress."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from django.db import connections
from django.template.defaultfilters import pluralize

from ..clock import elapsed
from ..tasks_api import task_backends
from .heartbeat import heartbeat_process_main
from .shared import SharedState, name_process

if TYPE_CHECKING:
    from ..backend import DatabaseBackend

logger = logging.getLogger("django_dbqueue")

TICK = 0.2  # seconds between looks at the children
MAX_RESTART_DELAY = 30.0


@dataclass
class Slot:
    index: int
    process: Any = None
    done: bool = False  # stopped for good: on a stop request, or a clean burst exit
    # How it ended: cleanly, or as a crash that was reported and awaited its restart.
    clean: bool = True
    restart_at: float = 0.0
    restart_delay: float = 1.0
    started_at: float = field(default_factory=time.monotonic)
    processed_at_start: int = 0


def _child_main(
    alias: str, queues: list[str], batch: int, burst: bool, state: SharedState, slot: int
) -> None:
    from .loop import Worker

    name_process("dbqueue-worker")
    backend = cast("DatabaseBackend", task_backends[alias])
    sys.exit(Worker(backend, queues, batch=batch, burst=burst, state=state, slot=slot).run())


class Supervisor:
    def __init__(self, alias: str, queues: list[str], *, processes: int, batch: int, burst: bool) -> None:
        self.alias, self.queues, self.batch, self.burst = alias, queues, batch, burst
        self.backend = cast("DatabaseBackend", task_backends[alias])
        # fork: children inherit the configured Django; no re-import of settings.
        self.context = multiprocessing.get_context("fork")
        self.state = SharedState(processes, self.context)
        self.slots = [Slot(index=i) for i in range(processes)]
        self.heartbeat: Any = None
        self.signals = 0
        self.forced = False
        self.started = time.monotonic()
        self.restarts = 0

    def run(self) -> int:
        previous = {
            signum: signal.signal(signum, self._on_signal) for signum in (signal.SIGTERM, signal.SIGINT)
        }
        previous[signal.SIGQUIT] = signal.signal(signal.SIGQUIT, self._on_force)
        try:
            self._start_heartbeat()
            for slot in self.slots:
                self._start(slot)
            status = _StatusLine(self)
            while not self._all_exited():
                time.sleep(TICK)
                self._kill_overdue()
                self._reap()
                self._watch_heartbeat()
                status.maybe_log()
            status.summary()
        finally:
            self._stop_heartbeat()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return 0 if all(slot.clean for slot in self.slots) and not self.forced else 1

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.signals += 1
        if self.signals == 1:
            logger.info("%s received: workers finish the job in hand and stop.", signal.Signals(signum).name)
            self.state.stop.value = 1
        else:
            self._on_force(signum, frame)

    def _on_force(self, signum: int, frame: Any) -> None:
        """A second signal, or SIGQUIT: every worker stops at once (exit 1)."""
        self.signals += 1
        self.state.stop.value = 1
        if self.forced:
            return
        self.forced = True
        logger.warning("%s: stopping the workers at once.", signal.Signals(signum).name)
        for slot in self.slots:
            if slot.process is not None and slot.process.is_alive():
                os.kill(slot.process.pid, signal.SIGQUIT)

    def _start_heartbeat(self) -> None:
        connections.close_all()
        self.heartbeat = self.context.Process(
            target=heartbeat_process_main,
            args=(self.alias, self.state, self.queues),
            name="runqueue-heartbeat",
        )
        self.heartbeat.start()

    def _watch_heartbeat(self) -> None:
        if not self.heartbeat.is_alive() and not self.state.heartbeat_stop.value:
            logger.error("The heartbeat process exited with code %s; restarting it.", self.heartbeat.exitcode)
            self._start_heartbeat()

    def _stop_heartbeat(self) -> None:
        if self.heartbeat is None:
            return
        self.state.heartbeat_stop.value = 1
        self.heartbeat.join(15)
        if self.heartbeat.is_alive():
            self.heartbeat.kill()

    def _start(self, slot: Slot) -> None:
        connections.close_all()  # never share a connection with a child
        slot.process = self.context.Process(
            target=_child_main,
            args=(self.alias, self.queues, self.batch, self.burst, self.state, slot.index),
            name=f"runqueue-worker-{slot.index}",
        )
        self.state.slot(slot.index).reset("")
        slot.process.start()
        slot.started_at = time.monotonic()
        slot.processed_at_start = self.state.slot(slot.index).processed

    def _kill_overdue(self) -> None:
        """Kill a worker whose job ignored its timeout's alarm: it is stuck in
        a C call, where no thread of its own process can interrupt it."""
        now = elapsed()
        for slot in self.slots:
            deadline = self.state.slot(slot.index).deadline
            if deadline and now > deadline and slot.process.is_alive():
                logger.error(
                    "Worker process %d is stuck in a job past its timeout and did not react "
                    "to the alarm; killing it (its job returns as a dead worker's does).",
                    slot.process.pid,
                )
                self.state.slot(slot.index).deadline = 0.0
                os.kill(slot.process.pid, signal.SIGKILL)
                # No more heartbeats for it: its jobs come back after one lease.
                self.state.slot(slot.index).name = ""

    def _reap(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            proc = slot.process
            if slot.done or proc.is_alive():
                continue
            # Dead: the heartbeat stops vouching for its leases at once.
            self.state.slot(slot.index).name = ""
            # Stopping: every exit is final. Burst: a clean exit means nothing is due.
            if self.signals or (self.burst and proc.exitcode == 0):
                slot.done = True
                # A crash already reported and waiting for its restart is not
                # the stop's doing; a worker that failed to stop cleanly is.
                slot.clean = proc.exitcode == 0 or bool(slot.restart_at)
                continue
            if not slot.restart_at:
                # Back off if it keeps dying young without getting anything
                # done, so a crash loop does not spin; one killed from outside
                # after doing work is simply replaced.
                progressed = self.state.slot(slot.index).processed > slot.processed_at_start
                young = now - slot.started_at < 10 and not progressed
                slot.restart_delay = min(slot.restart_delay * 2, MAX_RESTART_DELAY) if young else 1.0
                slot.restart_at = now + (slot.restart_delay if young else 0)
                logger.error(
                    "Worker process %d exited with code %s; restarting it%s.",
                    proc.pid,
                    proc.exitcode,
                    f" in {slot.restart_delay:.0f}s" if young else "",
                )
            if now >= slot.restart_at:
                slot.restart_at = 0.0
                self.restarts += 1
                self._start(slot)

    def _all_exited(self) -> bool:
        return all(slot.done for slot in self.slots)

    def totals(self) -> tuple[int, int]:
        return self.state.totals()


class _StatusLine:
    """A one-line status every STATUS_INTERVAL seconds while there is work."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.interval = supervisor.backend.config.STATUS_INTERVAL
        self.last_time = time.monotonic()
        self.last_processed = 0

    def maybe_log(self) -> None:
        now = time.monotonic()
        if now - self.last_time < self.interval:
            return
        processed, failed = self.supervisor.totals()
        backlog = self._backlog()
        if processed != self.last_processed or backlog:
            rate = (processed - self.last_processed) / (now - self.last_time)
            logger.info(
                "processed=%d failed=%d rate=%.1f jobs/s ready_backlog=%s",
                processed,
                failed,
                rate,
                "?" if backlog is None else backlog,
            )
        self.last_time, self.last_processed = now, processed

    def _backlog(self) -> int | None:
        from ..models import Job

        try:
            jobs = Job.objects.using(self.supervisor.backend.database).filter(
                queue_name__in=self.supervisor.queues
            )
            return jobs.due().count()
        except Exception as exc:
            logger.warning("Could not count the backlog: %s", exc)
            return None
        finally:
            connections.close_all()  # the next restart forks; hold nothing

    def summary(self) -> None:
        sup = self.supervisor
        processed, failed = sup.totals()
        elapsed = time.monotonic() - sup.started
        logger.info(
            "Done: processed %d job%s (%d failed) in %.1fs, %.1f jobs/s, %d worker restart%s.",
            processed,
            pluralize(processed),
            failed,
            elapsed,
            processed / elapsed if elapsed else 0.0,
            sup.restarts,
            pluralize(sup.restarts),
        )
