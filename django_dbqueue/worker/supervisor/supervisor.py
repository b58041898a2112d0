"""Runs N worker processes and their heartbeat: starts them, restarts the
ones that crash, relays stop requests without escalating them, kills a
worker stuck past its hard time limit, a cancel's grace or a stop's timeout
(stuck.py), and logs progress (status_line.py)."""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from types import EllipsisType
from typing import TYPE_CHECKING, Any, cast

from django.db import connections

from ... import tracing
from ...clock import elapsed
from ...tasks_api import task_backends
from ..housekeeping.heartbeat import heartbeat_process_main
from ..process.timeouts import HARD_GRACE
from ..shared import SharedState, name_process
from .status_line import StatusLine
from .stuck import StuckWatch, kill

if TYPE_CHECKING:
    from ...backend import DatabaseBackend

logger = logging.getLogger("django_dbqueue")

TICK = 0.2  # seconds between looks at the children
MAX_RESTART_DELAY = 30.0


@dataclass
class WorkerProcess:
    """One of the supervisor's worker processes, by the index of its slot
    in the shared state: the live process (a new one after each restart)
    and what its restarts go by."""

    index: int
    process: Any = None
    done: bool = False  # stopped for good: on a stop request, or a clean burst exit
    # How it ended: cleanly, or as a crash that was reported and awaited its restart.
    clean: bool = True
    restart_at: float = 0.0
    restart_delay: float = 1.0
    started_at: float = field(default_factory=time.monotonic)
    processed_at_start: int = 0
    # Killed by the supervisor for a job it then recorded (a cancel's or a
    # stop's): replaced at once, and not a crash.
    killed: bool = False


def _child_main(
    alias: str, queues: list[str], batch: int, burst: bool, state: SharedState, slot: int
) -> None:
    from ..process.loop import Worker

    name_process("dbqueue-worker")
    backend = cast("DatabaseBackend", task_backends[alias])
    try:
        code = Worker(backend, queues, batch=batch, burst=burst, state=state, slot=slot).run()
    finally:
        # A forked process skips atexit, where OpenTelemetry's SDK exports its last spans.
        tracing.flush()
    sys.exit(code)


class Supervisor:
    """``stop_timeout``: overrides OPTIONS STOP_TIMEOUT for this supervisor
    and its workers (None: no limit; ``...``: the option's value)."""

    def __init__(
        self,
        alias: str,
        queues: list[str],
        *,
        processes: int,
        batch: int,
        burst: bool,
        stop_timeout: float | None | EllipsisType = ...,
    ) -> None:
        self.alias, self.queues, self.batch, self.burst = alias, queues, batch, burst
        self.backend = cast("DatabaseBackend", task_backends[alias])
        if stop_timeout is not ...:
            # On the backend itself, which the workers inherit when forked.
            self.backend.config = dataclasses.replace(self.backend.config, STOP_TIMEOUT=stop_timeout)
        # fork: children inherit the configured Django; no re-import of settings.
        self.context = multiprocessing.get_context("fork")
        self.state = SharedState(processes, self.context)
        self.children = [WorkerProcess(index=i) for i in range(processes)]
        self.heartbeat: Any = None
        self.status: StatusLine  # from start()
        self.signals = 0
        self.forced = False
        self.forced_at: float | None = None  # elapsed clock: when the forced stop was asked
        self.quit_sent = False
        self.stuck = StuckWatch(self.backend.config, self.state)
        self.started = time.monotonic()
        self.restarts = 0

    def run(self) -> int:
        previous = {
            signum: signal.signal(signum, self._on_signal) for signum in (signal.SIGTERM, signal.SIGINT)
        }
        previous[signal.SIGQUIT] = signal.signal(signal.SIGQUIT, self._on_force)
        try:
            self.start()
            while not self.all_exited():
                time.sleep(TICK)
                self.tick()
            self.status.summary()
        finally:
            self.stop_heartbeat()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self.exit_code()

    # start(), tick() and exit_code() are run()'s parts, for a group of
    # supervisors that one process runs (group.py, runqueue with several --backend).
    def start(self) -> None:
        self._start_heartbeat()
        for child in self.children:
            self._start(child)
        self.status = StatusLine(self)

    def tick(self) -> None:
        self._kill_stuck()
        self._force_workers()
        self._reap()
        self._watch_heartbeat()
        self.status.maybe_log()

    def exit_code(self) -> int:
        return 0 if all(child.clean for child in self.children) and not self.forced else 1

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.signals += 1
        if self.signals == 1:
            self.stuck.stopping(elapsed())
            timeout = self.backend.config.STOP_TIMEOUT
            logger.info(
                "%s received: workers finish the job in hand%s and stop.",
                signal.Signals(signum).name,
                "" if timeout is None else f" if it ends within {timeout:g}s (else interrupt it)",
            )
            self.state.stop.value = 1
        else:
            self._on_force(signum, frame)

    def _on_force(self, signum: int, frame: Any) -> None:
        """A second signal, or SIGQUIT: every worker stops at once (exit 1)."""
        self.signals += 1
        self.state.stop.value = 1
        if self.forced:
            return
        self.forced, self.forced_at = True, elapsed()
        logger.warning("%s: stopping the workers at once.", signal.Signals(signum).name)

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

    def stop_heartbeat(self) -> None:
        if self.heartbeat is None:
            return
        self.state.heartbeat_stop.value = 1
        self.heartbeat.join(15)
        if self.heartbeat.is_alive():
            self.heartbeat.kill()

    def _start(self, child: WorkerProcess) -> None:
        connections.close_all()  # never share a connection with a child
        child.process = self.context.Process(
            target=_child_main,
            args=(self.alias, self.queues, self.batch, self.burst, self.state, child.index),
            name=f"runqueue-worker-{child.index}",
        )
        self.state.slot(child.index).reset("")
        child.process.start()
        child.started_at = time.monotonic()
        child.processed_at_start = self.state.slot(child.index).processed

    def _kill_stuck(self) -> None:
        """Kill a worker whose job outlived its timeout, its cancel's grace or
        its stop's timeout, past every chance it had to stop it itself."""
        now = elapsed()
        for child in self.children:
            if child.process is None or not child.process.is_alive():
                continue
            overdue = self.stuck.overdue(child.index, now)
            if overdue is None:
                continue
            if kill(child.process, self.state.slot(child.index), overdue, self.backend.database):
                child.killed = overdue.why != "timeout"  # a cancel's or a stop's: replaced at once

    def _force_workers(self) -> None:
        """A forced stop: SIGQUIT to every worker, a tick after the signal
        (not from the handler): a signal sent to the group reached them
        already, and one that arrives together with another may not wake
        the thread that must handle it (worker/threads.py). A worker that
        did not obey within HARD_GRACE (a job stuck in C code, a paused worker) is
        killed; its jobs come back as a dead worker's do."""
        if self.forced_at is None:
            return
        since = elapsed() - self.forced_at
        if not self.quit_sent:
            self.quit_sent = True
            self._signal_workers(signal.SIGQUIT)
        elif since >= HARD_GRACE:
            self.forced_at = None  # once
            self._signal_workers(signal.SIGKILL)

    def _signal_workers(self, signum: int) -> None:
        for child in self.children:
            if child.process is not None and child.process.is_alive():
                if signum == signal.SIGKILL:
                    logger.error("Worker process %d did not stop at once; killing it.", child.process.pid)
                    self.state.slot(child.index).name = ""
                os.kill(child.process.pid, signum)

    def _reap(self) -> None:
        now = time.monotonic()
        for child in self.children:
            proc = child.process
            if child.done or proc.is_alive():
                continue
            # Dead: the heartbeat stops vouching for its leases at once.
            self.state.slot(child.index).name = ""
            # Stopping: every exit is final. Burst: a clean exit means nothing is due.
            if self.signals or (self.burst and proc.exitcode == 0):
                child.done = True
                # A crash already reported and waiting for its restart is not
                # the stop's doing; a worker that failed to stop cleanly is.
                # One killed past the stop timeout had its job given back.
                child.clean = proc.exitcode == 0 or bool(child.restart_at) or child.killed
                continue
            if child.killed:
                logger.info("Replacing the killed worker process %d.", proc.pid)
                child.killed, child.restart_at = False, now
            if not child.restart_at:
                # Back off if it keeps dying young without getting anything
                # done, so a crash loop does not spin; one killed from outside
                # after doing work is simply replaced.
                progressed = self.state.slot(child.index).processed > child.processed_at_start
                young = now - child.started_at < 10 and not progressed
                child.restart_delay = min(child.restart_delay * 2, MAX_RESTART_DELAY) if young else 1.0
                child.restart_at = now + (child.restart_delay if young else 0)
                logger.error(
                    "Worker process %d exited with code %s; restarting it%s.",
                    proc.pid,
                    proc.exitcode,
                    f" in {child.restart_delay:.0f}s" if young else "",
                )
            if now >= child.restart_at:
                child.restart_at = 0.0
                self.restarts += 1
                self._start(child)

    def all_exited(self) -> bool:
        return all(child.done for child in self.children)

    def totals(self) -> tuple[int, int]:
        return self.state.totals()
