"""The threads of the worker side, in a worker process or the heartbeat's:
each blocks the signals that only the main thread must receive.

Here, below both halves of worker/, because a worker process's threads
(giving back, soft stop) and the housekeeping's (the heartbeat's thread, the
scheduler) all start with it.
"""

from __future__ import annotations

import signal
import threading

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
