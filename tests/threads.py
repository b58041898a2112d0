"""Threads for the race tests, each with its own database connection.

Django gives every thread a connection of its own, so a thread is the
cheapest "second client": one holding rows locked while the test claims
past them, several released at once to race for one row. Three shapes:

- ``together(work, n)``: ``work(0)`` … ``work(n - 1)`` released at once by a barrier;
- ``elsewhere(work)``: ``work()`` on another connection, waited for;
- ``holding(lock)``: ``lock()`` runs in a transaction of another connection
  that stays open (its row locks held) until the ``with`` block ends;
- ``alongside(work)``: ``work()`` on another connection while the ``with`` block runs.

Each closes its thread's connection (a thread's connection is never closed
by Django's request cycle, and an open one holds a server thread and, in a
transaction, its locks), and re-raises in the test what a thread raised:
an error in a thread must fail the test, not vanish with the thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.db import close_old_connections, connections, transaction

T = TypeVar("T")


class Threads:
    """Started threads and what each returned or raised."""

    def __init__(self, count: int) -> None:
        self.results: list[object] = [None] * count
        self.errors: list[BaseException] = []
        self.threads: list[threading.Thread] = []

    def start(
        self, index: int, work: Callable[[], object], before: Callable[[], object] = lambda: None
    ) -> None:
        def run() -> None:
            try:
                before()
                self.results[index] = work()
            except BaseException as exc:  # re-raised in the test by join()
                self.errors.append(exc)
            finally:
                close_old_connections()
                connections.close_all()

        thread = threading.Thread(target=run, name=f"race-{index}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def join(self, timeout: float) -> None:
        for thread in self.threads:
            thread.join(timeout)
        stuck = [thread.name for thread in self.threads if thread.is_alive()]
        if self.errors:
            # A thread that failed may have broken a barrier the others waited at: its error first.
            own = [e for e in self.errors if not isinstance(e, threading.BrokenBarrierError)]
            raise (own or self.errors)[0]
        assert not stuck, f"{', '.join(stuck)} still running after {timeout}s"


def together(work: Callable[[int], T], count: int, timeout: float = 120.0) -> list[T]:
    """``work(i)`` for each ``i`` below ``count``, each in its own thread,
    all released at once; their results in order."""
    barrier = threading.Barrier(count, timeout=timeout)
    threads = Threads(count)
    for index in range(count):
        threads.start(index, lambda index=index: work(index), before=barrier.wait)  # type: ignore[misc]
    threads.join(timeout)
    return threads.results  # type: ignore[return-value]


def elsewhere(work: Callable[[], T], timeout: float = 30.0) -> T:
    """``work()`` on another connection, in a thread; what it returned.
    Fails if it is still running after ``timeout`` (it waited for a lock
    the test holds, say, where it should have skipped past it)."""
    threads = Threads(1)
    threads.start(0, work)
    threads.join(timeout)
    return threads.results[0]  # type: ignore[return-value]


@contextmanager
def holding(lock: Callable[[], object], using: str = "default", timeout: float = 30.0) -> Iterator[object]:
    """Run ``lock()`` (a ``select_for_update()``, say) in a transaction on
    another connection and keep that transaction open, its locks held,
    while the ``with`` block runs; yields what ``lock()`` returned. The
    transaction ends when the block does, however it ends."""
    locked, release = threading.Event(), threading.Event()
    held: list[object] = []

    def hold() -> None:
        with transaction.atomic(using=using):
            held.append(lock())
            locked.set()
            release.wait(timeout * 4)

    threads = Threads(1)
    threads.start(0, hold)
    try:
        while not locked.wait(0.05):
            if threads.errors or not threads.threads[0].is_alive():
                threads.join(timeout)  # raises the holder's own error
                raise AssertionError("the holder ended without taking its locks")
        yield held[0]
    finally:
        release.set()
        threads.join(timeout)


@contextmanager
def alongside(work: Callable[[], object], timeout: float = 30.0) -> Iterator[None]:
    """Run ``work()`` on another connection, in a thread, while the ``with``
    block runs in this one; at its end wait for ``work`` and raise what it raised."""
    threads = Threads(1)
    threads.start(0, work)
    try:
        yield
    finally:
        threads.join(timeout)
