"""The worker's side of stopping its job in hand on purpose.

A task learns of a cancel, or of its worker stopping past STOP_TIMEOUT,
where it looks (``current_job().check()``, progress, checkpoints). A task
that never looks is stopped by its worker: :class:`SoftStopWatch`, a thread
of the worker process, reads the shared slot a few times a second and

- cancels an ``async def`` task's coroutine at once, when the worker
  learns of it (its awaits are its checkpoints);
- raises JobCancelled in a plain task's thread once CANCEL_GRACE_SECONDS
  have passed since the worker learned of the cancel, or JobInterrupted
  ``min(CANCEL_GRACE_SECONDS, 5)`` s after the stop deadline. That thread is
  the main one, which a signal reaches (SIGUSR1, as the soft time limit's
  SIGALRM): it interrupts ``time.sleep()`` and socket waits too.

A task stuck in one C call sees neither; under ``runqueue`` the supervisor
kills its process HARD_GRACE later and ends the job itself (supervisor/supervisor.py).
A ``Worker`` without a supervisor has only this soft stop. The outcomes
(CANCELLED; interrupted: READY, its attempt unspent) are written by the
runner (stops.py).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

from ...clock import elapsed
from ...exceptions import JobCancelled, JobInterrupted
from ...running.control import JobControl
from ..threads import main_thread_signals

logger = logging.getLogger("django_dbqueue")

# How often the watch reads the slot: a cancel the heartbeat posted reaches
# an async task within this, on top of CONTROL_INTERVAL.
WATCH_INTERVAL = 0.1
# The longest a task may ignore a stop past STOP_TIMEOUT before it is stopped.
INTERRUPT_GRACE = 5.0
SOFT_STOP = signal.SIGUSR1


class SoftStopWatch(threading.Thread):
    """Stops the job in hand when it ignores a cancel, or a stop past
    STOP_TIMEOUT (see the module)."""

    def __init__(self, control: JobControl, grace: float) -> None:
        super().__init__(name="dbqueue-soft-stop", daemon=True)
        self.control, self.grace = control, grace
        self.done = threading.Event()
        self.previous: Any = None
        self.installed = False  # its SIGUSR1 handler (only from the main thread)
        self.signalled = 0  # the job this watch last signalled

    def start(self) -> None:
        # Signal handlers are installed from the main thread only; a worker
        # run in another thread keeps the coroutine cancel and the checks.
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(SOFT_STOP, self._on_signal)
            self.installed = True
        super().start()

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)
        if self.installed:
            signal.signal(SOFT_STOP, self.previous if self.previous is not None else signal.SIG_DFL)
            self.installed = False

    def run(self) -> None:
        main_thread_signals()  # or two signals at once may never wake the task (signals.py)
        while not self.done.wait(WATCH_INTERVAL):
            try:
                self.check()
            except Exception:
                logger.exception("The worker's soft-stop watch failed; it will look again.")

    def check(self) -> None:
        control, slot = self.control, self.control.slot
        job = control.job
        if job is None or slot is None or not control.in_task:
            return
        now = elapsed()
        posted, since = slot.cancel_posted()
        if posted == job.pk:
            self._stop_task(JobCancelled, job.pk, now >= since + self.grace)
            return
        deadline = slot.stop_deadline
        if deadline and now >= deadline:
            self._stop_task(JobInterrupted, job.pk, now >= deadline + min(self.grace, INTERRUPT_GRACE))

    # Not _stop: threading.Thread has its own _stop (before Python 3.13), which join() calls.
    def _stop_task(self, kind: type[BaseException], job_id: int, grace_over: bool) -> None:
        control = self.control
        coroutine = control.coroutine
        if coroutine is not None:
            if control.stopping is None:
                control.stopping = kind
                _cancel(*coroutine)
            return
        if grace_over and self.signalled != job_id and self.installed:
            control.stopping = kind
            self.signalled = job_id
            # To the main thread itself: a signal to the process may go to another thread.
            signal.pthread_kill(threading.main_thread().ident or 0, SOFT_STOP)

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Only while the task runs, and only for the job the watch meant: the
        # signal may arrive after that job ended and the next one began.
        control = self.control
        kind, job = control.stopping, control.job
        if kind is not None and control.in_task and job is not None and job.pk == self.signalled:
            raise kind(stopped_message(kind, job.pk, after_grace=True))


def _cancel(loop: asyncio.AbstractEventLoop, task: asyncio.Task) -> None:
    try:
        loop.call_soon_threadsafe(task.cancel)
    except RuntimeError:  # the coroutine ended and its loop closed meanwhile
        pass


def stopped_message(kind: type[BaseException], job_id: int, after_grace: bool) -> str:
    if kind is JobCancelled:
        how = "after the grace period" if after_grace else "at once (an async task)"
        return f"Job {job_id} was cancelled while running, and stopped by its worker {how}."
    how = "it reached no checkpoint within the grace period" if after_grace else "an async task, at once"
    return (
        f"Job {job_id} was interrupted by its worker, which is stopping past STOP_TIMEOUT ({how}). "
        "It goes back to the queue, its attempt unspent."
    )


def controlled(func: Callable[..., Any], control: JobControl) -> Callable[..., Any]:
    """An ``async def`` task's function, whose coroutine the watch may
    cancel: the cancellation it asked for becomes JobCancelled or
    JobInterrupted; any other stays the task's own CancelledError."""

    async def run(*args: Any, **kwargs: Any) -> Any:
        task = asyncio.current_task()
        control.coroutine = (asyncio.get_running_loop(), task) if task is not None else None
        try:
            return await func(*args, **kwargs)
        except asyncio.CancelledError:
            kind = control.stopping
            if kind is not None and control.job is not None:
                raise kind(stopped_message(kind, control.job.pk, after_grace=False)) from None
            raise
        finally:
            control.coroutine = None

    return run
