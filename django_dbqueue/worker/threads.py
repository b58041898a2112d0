"""The threads of the worker side, in a worker process or the heartbeat's:
each blocks the signals that only the main thread must receive.

Here, below both halves of worker/, because a worker process's threads
(giving back, soft stop) and the housekeeping's (the heartbeat's thread, the
scheduler) all start with it.
"""

from __future__ import annotations

import math
import os
import select
import signal
import threading
import weakref

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# What the main thread of a worker must receive itself: the stop signals,
# the soft time limit's alarm and the soft stop's SIGUSR1 (process/softstop.py).
MAIN_THREAD_SIGNALS = frozenset({*STOP_SIGNALS, signal.SIGQUIT, signal.SIGALRM, signal.SIGUSR1})


def main_thread_signals() -> None:
    """Block, in the calling thread (any but the main one), the signals
    meant for the main thread; every thread a worker starts calls it first.

    A signal sent to a process goes to any of its threads that does not
    block it. When two arrive together (a stop signal to the process group
    and the supervisor's SIGQUIT), the kernel gives the second to another
    thread, which then takes both; the main thread, asleep in a task's
    ``time.sleep()``, is not even woken, and the Python handlers, which only
    the main thread runs, wait until it runs Python code again: a second
    signal did not stop the worker at once (tests/test_processes.py, about
    1 run in 50). Blocked here, they can only go to the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, MAIN_THREAD_SIGNALS)


class Wake:
    """An event that a signal handler may set: a flag and a pipe.

    ``threading.Event.set()`` takes the lock that ``Event.wait()`` holds for
    an instant as it wakes. Python runs a signal handler in the main thread,
    between two bytecodes of whatever it interrupted; a handler that sets an
    Event in that instant of the main thread's own wait() waits for itself
    forever (a worker SIGTERMed while idle never stopped: about once in a few
    hundred rolling restarts). Here set() takes no lock: it writes a byte,
    and wait() polls the pipe. Once set it stays set, like an Event nobody
    clears."""

    def __init__(self) -> None:
        self._set = False
        read, write = os.pipe()
        os.set_blocking(write, False)
        self._read, self._write = read, write
        self._poll = select.poll()
        self._poll.register(read, select.POLLIN)
        # Closed with the object, never before: a late set() from another
        # thread must not write into a descriptor the process reused.
        weakref.finalize(self, _close, read, write)

    def set(self) -> None:
        self._set = True
        try:
            os.write(self._write, b"\0")
        except BlockingIOError:
            pass  # the pipe is full of earlier wake-ups: it is readable already

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it is set, after waiting at most ``timeout`` seconds for it."""
        if not self._set:
            self._poll.poll(None if timeout is None else max(0, math.ceil(timeout * 1000)))
        return self._set


def _close(*fds: int) -> None:
    for fd in fds:
        os.close(fd)
