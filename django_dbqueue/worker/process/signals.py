"""How a worker process hears that it must stop.

One SIGTERM or SIGINT is one graceful stop: finish the job in hand, give the
unstarted claims back, exit 0. Ctrl-C and service managers signal the whole
process group, so the worker hears the signal itself and its supervisor
hears it too; the supervisor passes its own request on through shared
memory, never as a signal, and that request is *not* counted as a signal
here. Only a second signal the worker itself receives, or a SIGQUIT, stops
it at once.

Python runs signal handlers in the main thread only, so every other thread
of a worker blocks the signals meant for it (worker/threads.py).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from ..threads import STOP_SIGNALS, main_thread_signals

logger = logging.getLogger("django_dbqueue")

WATCH_INTERVAL = 0.2


class ForcedStop(BaseException):
    """Raised in the worker's main thread by a second stop signal or SIGQUIT.
    A BaseException, so that the job runner, which records anything a task
    raises, lets this one through."""


class StopSignals:
    """Installs the worker's handlers (and restores the previous ones), and
    watches the supervisor's stop flag and the supervisor itself."""

    def __init__(self, who: str, on_stop: Callable[[], None]) -> None:
        self.who = who
        self.on_stop = on_stop
        self.received = 0
        self.forcing = False
        self.previous: dict[int, Any] = {}
        self.watching = threading.Event()

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread only; a worker in a thread is stopped by request_stop()
        for signum in STOP_SIGNALS:
            self.previous[signum] = signal.signal(signum, self._on_signal)
        self.previous[signal.SIGQUIT] = signal.signal(signal.SIGQUIT, self._on_force)

    def restore(self) -> None:
        self.watching.set()
        for signum, handler in self.previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self.previous.clear()

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Only a flag, so that the job in hand finishes; a second one forces.
        self.received += 1
        if self.received > 1:
            self._on_force(signum, frame)
        logger.info("Worker %s: %s, stopping after the job in hand.", self.who, signal.Signals(signum).name)
        self.on_stop()

    def _on_force(self, signum: int, frame: Any) -> None:
        # Raise once: a further signal (Ctrl-C to the group and the
        # supervisor's SIGQUIT both arrive) must not cut short the give-back.
        if self.forcing:
            return
        self.forcing = True
        self.on_stop()
        raise ForcedStop()

    def watch_parent(self, stop_flag: Any) -> None:
        """Stop when the supervisor asks (``stop_flag``) or disappears."""
        parent = os.getppid()

        def watch() -> None:
            main_thread_signals()
            while not self.watching.wait(WATCH_INTERVAL):
                if stop_flag.value or os.getppid() != parent:
                    self.on_stop()
                    return

        threading.Thread(target=watch, name="dbqueue-parent-watch", daemon=True).start()
