"""Per-job time limits, in two layers.

The soft limit is a SIGALRM whose handler raises :class:`JobTimeout` in the
worker's main thread, where the job runs. That covers Python code and every
blocking call Python retries after a signal (sleep, sockets, locks): the job
fails its attempt, is recorded, and the process goes on with the next job.

A signal handler only runs between bytecodes, so code stuck inside one C
call (a regex backtracking, a C extension looping with the GIL held) never
sees it, and no thread of that process can run either. So the worker also
publishes a hard deadline in memory shared with its supervisor, a separate
process, which SIGKILLs the worker once the deadline passes. The supervisor
then starts a fresh worker in its place, and the job comes back through the
dead-worker path (suspect, claimed alone, attempt counted in the claim).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .exceptions import JobTimeout

# How long past its limit a job may ignore the alarm before its process is killed.
HARD_GRACE = 5.0

# (shared array of deadlines, this worker's slot), set by a supervised worker.
_board: tuple[Any, int] | None = None


def publish_to(deadlines: Any, slot: int) -> None:
    global _board
    _board = (deadlines, slot) if deadlines is not None else None


def hard_deadline(now: float, seconds: float) -> float:
    return now + seconds + HARD_GRACE


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`JobTimeout` in the block after ``seconds`` (None: no limit)."""
    if not seconds:
        yield
        return
    soft = threading.current_thread() is threading.main_thread()
    previous: Any = None
    if soft:

        def expire(signum: int, frame: Any) -> None:
            raise JobTimeout(f"The job ran for longer than its timeout of {seconds:g}s.")

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    if _board is not None:
        # CLOCK_MONOTONIC is one clock for every process on the machine.
        _board[0][_board[1]] = hard_deadline(time.monotonic(), seconds)
    try:
        yield
    finally:
        if _board is not None:
            _board[0][_board[1]] = 0.0
        if soft:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
