"""Per-job time limits, in two layers.

The soft limit stops the job inside its own process. For a plain function
it is a SIGALRM whose handler raises :class:`JobTimeout` in the worker's
main thread, where the job runs: that covers Python code and every blocking
call Python retries after a signal (sleep, sockets, locks). An ``async def``
task runs in an event loop on another thread (Django's ``async_to_sync``),
where an alarm in the main thread cannot reach it: there the coroutine is
cancelled at the limit instead, so it stops rather than running on beside
its own retry.

A signal handler only runs between bytecodes, so code stuck inside one C
call (a regex backtracking, a C extension looping with the GIL held) never
sees it, and a coroutine may ignore its cancellation. So the worker also
publishes a hard deadline in memory shared with its supervisor, a separate
process, which SIGKILLs the worker once the deadline passes. The supervisor
then starts a fresh worker in its place, and the job comes back through the
dead-worker path (suspect, claimed alone, attempt counted in the claim).
"""

from __future__ import annotations

import asyncio
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction

from ...clock import elapsed
from ...exceptions import JobTimeout
from ...running.control import JobControl
from ..shared import Slot
from .softstop import controlled

# How long past its limit a job may ignore the soft limit before its process is killed.
HARD_GRACE = 5.0


def hard_deadline(now: float, seconds: float) -> float:
    return now + seconds + HARD_GRACE


def call_with_limit(
    func: Callable[..., Any], args: list, kwargs: dict, seconds: float | None, control: JobControl
) -> Any:
    """Call ``func`` (sync or async) with the soft limit of ``seconds`` (None:
    none), and the hard one published in the control's slot if there is one.
    An async task's coroutine may be cancelled by its worker (softstop.py)."""
    slot = control.slot
    if _is_async(func):
        limited = _cancelled_after(func, seconds) if seconds else func
        run = async_to_sync(controlled(limited, control) if slot is not None else limited)
        with _hard_limit(seconds, slot):
            return run(*args, **kwargs)
    if not seconds:  # no limit to set: the context managers would do nothing, at a cost per job
        return func(*args, **kwargs)
    with _hard_limit(seconds, slot), _alarm(seconds):
        return func(*args, **kwargs)


def _is_async(func: Callable[..., Any]) -> bool:
    """Whether ``func`` is async, asked once per task function (asgiref's
    check unwraps partials and reads code flags: per job, it showed in the
    worker's profile); each time for a callable that cannot be a key."""
    try:
        return _async_function(func)
    except TypeError:  # unhashable
        return iscoroutinefunction(func)


@functools.lru_cache(maxsize=1024)
def _async_function(func: Callable[..., Any]) -> bool:
    return iscoroutinefunction(func)


def _cancelled_after(func: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    if not hasattr(asyncio, "timeout"):  # Python 3.10
        return _waited_for(func, seconds)

    async def limited(*args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(seconds) as scope:
                return await func(*args, **kwargs)
        except TimeoutError:
            if scope.expired():
                raise JobTimeout(f"The job ran for longer than its timeout of {seconds:g}s.") from None
            raise

    return limited


def _waited_for(func: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    """Python 3.10 has no asyncio.timeout(): wait_for() cancels the same way,
    but cannot tell its own expiry from an asyncio.TimeoutError the task raised."""

    async def limited(*args: Any, **kwargs: Any) -> Any:
        try:
            return await asyncio.wait_for(func(*args, **kwargs), seconds)
        except asyncio.TimeoutError:
            raise JobTimeout(f"The job ran for longer than its timeout of {seconds:g}s.") from None

    return limited


@contextmanager
def _hard_limit(seconds: float | None, slot: Slot | None) -> Iterator[None]:
    if not seconds or slot is None:
        yield
        return
    slot.deadline = hard_deadline(elapsed(), seconds)
    try:
        yield
    finally:
        slot.deadline = 0.0


@contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """Raise :class:`JobTimeout` in the block after ``seconds`` (main thread only)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise JobTimeout(f"The job ran for longer than its timeout of {seconds:g}s.")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
