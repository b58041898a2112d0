"""Riding out database outages: telling a lost connection from a bad query,
logging it once, backing off, and keeping an outcome until it is recorded.

A worker that lets an outage escape dies, and its supervisor restarts it
into the same outage: a crash loop that also forgets the outcome of the job
in hand. Instead the worker keeps what it knows in memory, waits, reconnects
and carries on from where it was.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from django.db import InterfaceError, OperationalError, connections

from .retry import is_conflict

logger = logging.getLogger("django_dbqueue")

DB_ERRORS = (OperationalError, InterfaceError)
# MySQL/MariaDB client and server codes that mean the connection is gone:
# can't connect (2002, 2003), gone away (2006), lost during a query (2013),
# server shutting down (1053), connection killed (1927), query interrupted
# by KILL (1317), disconnected for inactivity (4031).
MYSQL_DISCONNECTS = {2002, 2003, 2006, 2013, 1053, 1927, 1317, 4031}
FIRST_DELAY = 0.5


def is_outage(exc: BaseException, using: str) -> bool:
    """Whether ``exc`` means the database connection was lost (worth a
    reconnect), rather than a query the database refused (worth a traceback)."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError) or is_conflict(exc):
        return False
    cause = exc.__cause__
    code = getattr(cause, "args", (None,))[0] if cause is not None else exc.args[0] if exc.args else None
    if code in MYSQL_DISCONNECTS:
        return True
    sqlstate = str(getattr(cause, "sqlstate", "") or "")
    if sqlstate.startswith("08") or sqlstate in {"57P01", "57P02", "57P03"}:
        return True  # PostgreSQL: connection exception, admin shutdown
    # Anything else: ask the connection itself whether it still answers.
    try:
        return not connections[using].is_usable()
    except Exception:
        return True


def drop_connection(using: str) -> None:
    """Forget a broken connection so the next query opens a fresh one."""
    try:
        connections[using].close()
    except Exception:  # closing a dead socket may fail too; it is gone either way
        connections[using].connection = None


class Outage:
    """One process's view of the database being away, shared by its threads,
    so an outage is logged once however many threads run into it."""

    def __init__(self, who: str, max_delay: float) -> None:
        self.who = who
        self.max_delay = max_delay
        self.lock = threading.Lock()
        self.since: float | None = None
        # A process that just started cannot know whose leases ran out while
        # the database (or this host) was away: its start counts as a return.
        self.back_at: float | None = time.monotonic()
        self.failures = 0

    def lost(self, exc: BaseException) -> float:
        """Record a failed attempt; return how long to wait before the next."""
        with self.lock:
            self.failures += 1
            delay = min(self.max_delay, FIRST_DELAY * 2 ** (self.failures - 1))
            # Jitter: workers that lost the database together must not all
            # knock on the restarted server in the same instant.
            delay *= random.uniform(0.5, 1.0)
            if self.since is None:
                self.since = time.monotonic()
                logger.warning(
                    "%s lost the database connection: %s; retrying in %.1fs.", self.who, _brief(exc), delay
                )
            else:
                logger.debug("%s: database still away (%s); retrying in %.1fs.", self.who, _brief(exc), delay)
            return delay

    def restored(self) -> None:
        with self.lock:
            if self.since is None:
                return
            logger.warning(
                "%s: the database is back after %.1fs; carrying on.", self.who, time.monotonic() - self.since
            )
            self.since, self.back_at, self.failures = None, time.monotonic(), 0

    @property
    def active(self) -> bool:
        return self.since is not None

    def within(self, seconds: float) -> bool:
        """Whether the database is away, or came back less than ``seconds`` ago."""
        if self.since is not None:
            return True
        return self.back_at is not None and time.monotonic() - self.back_at < seconds


# The running worker's outage, if any: outside a worker, errors just raise.
_current: Outage | None = None


def watch(outage: Outage | None) -> None:
    global _current
    _current = outage


def persist[T](fn: Callable[[], T], using: str) -> T:
    """Run ``fn`` (one short write, such as recording an outcome) until the
    database takes it. The caller keeps what it is writing in memory, so an
    outage delays the write instead of losing it. Only a forced stop (a
    ``BaseException`` from a signal handler) ends the wait early."""
    outage = _current
    while True:
        try:
            result = fn()
        except DB_ERRORS as exc:
            if outage is None or not is_outage(exc, using):
                raise
            drop_connection(using)
            time.sleep(outage.lost(exc))
            continue
        if outage is not None:
            outage.restored()
        return result


def _brief(exc: BaseException) -> str:
    return f"{type(exc).__name__}{exc.args!r}" if exc.args else type(exc).__name__
