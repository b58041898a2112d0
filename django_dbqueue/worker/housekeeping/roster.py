"""Housekeeping: the Worker rows, one per live worker process.

A worker is visible to ``queuehealth``, ``queuestats``, the metrics and the
admin, with its start time, from the moment it starts: the heartbeat enrols
new workers within a tick of their start, not a quarter lease later at the
next beat, and deletes the rows of those that stopped or died. Every beat
refreshes each row's ``last_seen_at`` and the counts of its jobs.

A worker's owner name (``owner_name()``) is also its row's name: host, pid
and a random suffix.
"""

from __future__ import annotations

import logging
import os
import socket

from ...clock import DbNow
from ...db import is_outage
from ..shared import SharedState

logger = logging.getLogger("django_dbqueue")


def owner_name() -> str:
    """A worker's owner name: host, pid and a random suffix."""
    from django.utils.crypto import get_random_string

    return f"{socket.gethostname()[:80]}:{os.getpid()}:{get_random_string(6)}"


class Roster:
    def __init__(self, database: str, state: SharedState, queues: list[str]) -> None:
        self.database = database
        self.state = state
        self.queues = queues
        self.registered: set[str] = set()  # the live workers whose Worker row this heartbeat wrote

    def changed(self) -> bool:
        """Whether a worker started or stopped since the last enrolment."""
        return set(self.state.live_names().values()) != self.registered

    def enrol(self, live: dict[int, str]) -> None:
        """Write the rows of workers that started since the last look, and
        delete those of workers that stopped or died."""
        names = set(live.values())
        for name in sorted(names - self.registered):
            self._register(name)
            self.registered.add(name)
        gone = self.registered - names
        self.forget(sorted(gone))
        self.registered -= gone

    def run_once(self, live: dict[int, str]) -> None:
        """Stamp each live worker's row as seen now, with its counts."""
        for index, name in live.items():
            self.stamp(index, name)

    def stamp(self, index: int, name: str) -> None:
        """Stamp the row of the worker ``name`` (in slot ``index``)."""
        from ...models import Worker

        slot = self.state.slot(index)
        seen = (
            Worker.objects.using(self.database)
            .filter(name=name)
            .update(last_seen_at=DbNow(), processed=slot.processed, failed=slot.failed)
        )
        if not seen:  # deleted under it (the admin deletes rows that look stale): write it again
            self._register(name)

    def forget(self, names: list[str]) -> None:
        """Delete the Worker rows of workers that stopped or died."""
        from ...models import Worker

        if names:
            try:
                Worker.objects.using(self.database).filter(name__in=names).delete()
            except Exception as exc:
                if not is_outage(exc, self.database):
                    logger.exception("The heartbeat could not remove stopped workers' rows.")

    def _register(self, name: str) -> None:
        from ...models import Worker

        host, _, pid = name.partition(":")
        Worker.objects.using(self.database).get_or_create(
            name=name,
            defaults={
                "host": host[:255],
                "pid": int(pid.partition(":")[0] or 0),
                "queues": self.queues,
                # Both on the database's clock, as every later last_seen_at is.
                "started_at": DbNow(),
                "last_seen_at": DbNow(),
            },
        )
