"""Runs N worker processes: starts them, restarts the ones that crash,
relays stop requests without escalating them, and logs progress."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import connections
from django.tasks import task_backends

logger = logging.getLogger("django_dbqueue")

TICK = 0.2  # seconds between looks at the children
MAX_RESTART_DELAY = 30.0


@dataclass
class Slot:
    index: int
    process: Any = None
    done: bool = False  # burst mode: exited 0, nothing left to do
    restart_at: float = 0.0
    restart_delay: float = 1.0
    started_at: float = field(default_factory=time.monotonic)
    processed_at_start: int = 0


class StopFlag:
    """A stop request shared with the children, with an Event's ``set`` and
    ``wait``. Not a multiprocessing Event: its condition variable counts
    waiters in semaphores, and a worker SIGKILLed while waiting never
    acknowledges, so the supervisor's next ``set()`` hung for ever (the
    chaos run found it). A raw shared byte has no lock to leave held."""

    POLL = 0.1

    def __init__(self, context: Any) -> None:
        self.flag = context.RawValue("b", 0)

    def set(self) -> None:
        self.flag.value = 1

    def is_set(self) -> bool:
        return bool(self.flag.value)

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.flag.value and time.monotonic() < deadline:
            time.sleep(self.POLL)
        return self.is_set()


def _child_main(
    alias: str,
    queues: list[str],
    batch: int,
    burst: bool,
    counters: Any,
    slot: int,
    stop: Any,
    deadlines: Any,
) -> None:
    from .worker import Worker

    code = Worker(
        task_backends[alias],
        queues,
        batch=batch,
        burst=burst,
        counters=counters,
        slot=slot,
        stop_event=stop,
        deadlines=deadlines,
    ).run()
    sys.exit(code)


class Supervisor:
    def __init__(self, alias: str, queues: list[str], *, processes: int, batch: int, burst: bool) -> None:
        self.alias, self.queues, self.batch, self.burst = alias, queues, batch, burst
        self.backend = task_backends[alias]
        # fork: children inherit the configured Django; no re-import of settings.
        self.context = multiprocessing.get_context("fork")
        self.counters = self.context.Array("q", 2 * processes, lock=False)
        # Each worker's hard deadline for the job in hand (0: none); see timeouts.py.
        self.deadlines = self.context.Array("d", processes, lock=False)
        self.stop_event = StopFlag(self.context)
        self.slots = [Slot(index=i) for i in range(processes)]
        self.signals = 0
        self.started = time.monotonic()
        self.restarts = 0

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        for slot in self.slots:
            self._start(slot)
        status = _StatusLine(self)
        while not self._all_exited():
            time.sleep(TICK)
            self._kill_overdue()
            self._reap()
            status.maybe_log()
        status.summary()
        return 0 if all(slot.process.exitcode == 0 for slot in self.slots) else 1

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.signals += 1
        if self.signals == 1:
            logger.info("%s received: workers finish the job in hand and stop.", signal.Signals(signum).name)
            self.stop_event.set()
        else:
            logger.warning("Second signal: stopping the workers at once.")
            for slot in self.slots:
                if slot.process is not None and slot.process.is_alive():
                    os.kill(slot.process.pid, signal.SIGQUIT)

    def _start(self, slot: Slot) -> None:
        connections.close_all()  # never share a connection with a child
        slot.process = self.context.Process(
            target=_child_main,
            args=(
                self.alias,
                self.queues,
                self.batch,
                self.burst,
                self.counters,
                slot.index,
                self.stop_event,
                self.deadlines,
            ),
            name=f"runqueue-worker-{slot.index}",
        )
        self.deadlines[slot.index] = 0.0
        slot.process.start()
        slot.started_at = time.monotonic()
        slot.processed_at_start = self.counters[2 * slot.index]

    def _kill_overdue(self) -> None:
        """Kill a worker whose job ignored its timeout's alarm: it is stuck in
        a C call, where no thread of its own process can interrupt it."""
        now = time.monotonic()
        for slot in self.slots:
            deadline = self.deadlines[slot.index]
            if deadline and now > deadline and slot.process.is_alive():
                logger.error(
                    "Worker process %d is stuck in a job past its timeout and did not react "
                    "to the alarm; killing it (its job returns as a dead worker's does).",
                    slot.process.pid,
                )
                self.deadlines[slot.index] = 0.0
                os.kill(slot.process.pid, signal.SIGKILL)

    def _reap(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            proc = slot.process
            if slot.done or proc.is_alive():
                continue
            # Stopping: every exit is final. Burst: a clean exit means nothing is due.
            if self.signals or (self.burst and proc.exitcode == 0):
                slot.done = True
                continue
            if not slot.restart_at:
                # Back off if it keeps dying young without getting anything
                # done, so a crash loop does not spin; one killed from outside
                # after doing work is simply replaced.
                progressed = self.counters[2 * slot.index] > slot.processed_at_start
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
        counts = list(self.counters)
        return sum(counts[0::2]), sum(counts[1::2])


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
        from .models import Job

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
            "Done: processed %d jobs (%d failed) in %.1fs, %.1f jobs/s, %d worker restarts.",
            processed,
            failed,
            elapsed,
            processed / elapsed if elapsed else 0.0,
            sup.restarts,
        )
