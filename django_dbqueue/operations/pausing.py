"""Pausing a queue: while a ``PausedQueue`` row names it, workers leave it
out of the queues they claim from. Jobs already claimed run to the end;
deleting the row resumes the queue, with no worker restart.

A worker reads the paused set at most once per ``POLL_INTERVAL_MAX``
(:class:`PauseCache`), so a pause takes effect within one idle poll and
costs a busy worker one tiny query every couple of seconds, not one per
claim. A claim that ends after the set it used went stale reads it again
and gives back what it took from a queue paused meanwhile. So once a pause
is ``POLL_INTERVAL_MAX`` old (:func:`settle_seconds`), no worker claims from
that queue: ``pausequeue`` waits that long before it returns.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from ..clock import read_database_now

if TYPE_CHECKING:
    from ..backend import DatabaseBackend


SETTLE_MARGIN = 0.5  # seconds


class UnknownQueue(ValueError):
    """A queue name the backend does not serve."""


def check_queue(backend: DatabaseBackend, name: str) -> str:
    """``name`` if ``backend`` serves it, else :class:`UnknownQueue`."""
    if not isinstance(name, str) or not name or len(name) > 64:
        raise UnknownQueue(f"{name!r} is not a queue name (1 to 64 characters).")
    if backend.queues and name not in backend.queues:
        raise UnknownQueue(
            f"Unknown queue {name!r} for backend {backend.alias!r}; "
            f"its QUEUES are {', '.join(sorted(backend.queues))}."
        )
    return name


def settle_seconds(backend: DatabaseBackend) -> float:
    """How long after a pause every worker of ``backend``'s database has left
    the queue out: the longest a worker keeps the paused set it read (the
    largest POLL_INTERVAL_MAX of the backends on that database), and a
    little for the clocks of the database and the hosts."""
    from ..routing import is_queue_backend
    from ..tasks_api import InvalidTaskBackend, task_backends

    ttl = backend.config.POLL_INTERVAL_MAX
    for alias in task_backends.settings:
        try:
            other = task_backends[alias]
        except InvalidTaskBackend:
            continue  # reported by its own checks; it runs no worker
        if is_queue_backend(other) and other.database == backend.database:
            ttl = max(ttl, other.config.POLL_INTERVAL_MAX)
    return ttl + SETTLE_MARGIN


def pause(backend: DatabaseBackend, name: str, by: str = "") -> bool:
    """Pause queue ``name``; False if it was paused already."""
    from ..models import PausedQueue

    check_queue(backend, name)
    using = backend.database
    try:
        with transaction.atomic(using=using):
            PausedQueue.objects.using(using).create(
                queue_name=name, paused_at=read_database_now(using), paused_by=by[:150]
            )
    except IntegrityError:
        return False
    return True


def resume(backend: DatabaseBackend, name: str) -> bool:
    """Resume queue ``name``; False if it was not paused."""
    from ..models import PausedQueue

    check_queue(backend, name)
    return bool(PausedQueue.objects.using(backend.database).filter(queue_name=name).delete()[0])


def paused_queues(using: str) -> set[str]:
    from ..models import PausedQueue

    return set(PausedQueue.objects.using(using).values_list("queue_name", flat=True))


class PauseCache:
    """A worker's view of the paused queues, read again once ``ttl`` passed."""

    def __init__(self, using: str, ttl: float) -> None:
        self.using, self.ttl = using, ttl
        self.paused: set[str] = set()
        self.read_at: float | None = None

    def unpaused(self, queues: list[str]) -> list[str]:
        if self.stale():
            self.refresh()
        return [name for name in queues if name not in self.paused]

    def stale(self) -> bool:
        return self.read_at is None or time.monotonic() - self.read_at >= self.ttl

    def refresh(self) -> set[str]:
        # The time before the read: the set is known to hold from then on.
        now = time.monotonic()
        self.paused = paused_queues(self.using)
        self.read_at = now
        return self.paused
