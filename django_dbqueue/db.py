"""What the claim, the transitions and the worker need from the database
layer, and nothing of the worker: lock conflicts and their retry, telling a
lost connection from a statement the server refused, riding out an outage,
and the SQLite claim lock. (The database's clock is in clock.py.)

A worker that lets an outage escape dies, and its supervisor restarts it
into the same outage: a crash loop that also forgets the outcome of the job
in hand. Instead the worker keeps what it knows in memory, waits, reconnects
and carries on. But a statement the server refuses (too big a packet, a
value a CHECK rejects) fails the same way every time, so it must never be
taken for an outage: retrying it would wedge the worker for good.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connections

T = TypeVar("T")

logger = logging.getLogger("django_dbqueue")

DB_ERRORS = (OperationalError, InterfaceError)
# MySQL/MariaDB: ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT. Galera reports a
# transaction that lost to another node's (certification failure at commit,
# or aborted by a write set applied from another node) as 1213 too, and
# MySQL Group Replication its certification failure as 3101: a conflict to
# run again, like a deadlock, never an outage or a failed attempt.
MYSQL_CONFLICTS = {1213, 1205, 3101}
# Group Replication also aborts a local transaction that holds a row a write
# certified on another member needs (multi-primary mode): its COMMIT fails
# with 1180 "Got error 149 - 'Lock deadlock; Retry transaction' during
# COMMIT" (149: the storage engine's deadlock), a conflict as well, unlike
# the 1180 of a Galera node outside the primary component (MYSQL_NOT_READY).
COMMIT_DEADLOCK = (1180, "Got error 149 ")
# PostgreSQL: deadlock_detected, serialization_failure, lock_not_available.
POSTGRES_CONFLICTS = {"40P01", "40001", "55P03"}
# MySQL/MariaDB client and server codes that mean the connection is gone:
# can't connect (2002, 2003), gone away (2006), lost during a query (2013),
# server shutting down (1053), connection killed (1927), query interrupted
# by KILL (1317), disconnected for inactivity (4031).
MYSQL_DISCONNECTS = {2002, 2003, 2006, 2013, 1053, 1927, 1317, 4031}
# Servers that answer pings but take no writes for now, an outage (wait for
# the server, or for the proxy to move on): a Galera node outside the
# primary component (cut off, joining, left alone) fails statements with
# 1047 "WSREP has not yet prepared node" and commits with 1180; a writer
# made read-only by a switchover (MaxScale, Group Replication) with 1290.
MYSQL_NOT_READY = {1047, 1180, 1290}
# Codes by which the server refuses a statement itself; the same statement
# fails again however often it is sent. 1153: bigger than max_allowed_packet
# (the server also drops the connection, which is why the code is checked
# before the connection is).
MYSQL_REFUSALS = {1153, 1301, 1366, 1406, 3140, 4025}
FIRST_DELAY = 0.5
# How many times a write that "loses the connection" is sent again while a
# fresh connection answers at once: then it is the statement, not the server.
REFUSED_AFTER = 3


# -- lock conflicts ------------------------------------------------------------


def _code(exc: BaseException) -> object:
    cause = exc.__cause__
    if cause is not None and getattr(cause, "args", None):
        return cause.args[0]
    return exc.args[0] if exc.args else None


def _message(exc: BaseException) -> str:
    cause = exc.__cause__ if exc.__cause__ is not None and getattr(exc.__cause__, "args", None) else exc
    return str(cause.args[1]) if len(cause.args) > 1 else ""


def _commit_deadlock(exc: BaseException) -> bool:
    code, message = COMMIT_DEADLOCK
    return _code(exc) == code and message in _message(exc)


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a deadlock or lock timeout that a retry may cure."""
    if not isinstance(exc, OperationalError):
        return False
    if _code(exc) in MYSQL_CONFLICTS or (exc.args and exc.args[0] in MYSQL_CONFLICTS):
        return True
    if _commit_deadlock(exc):
        return True
    if getattr(exc.__cause__, "sqlstate", None) in POSTGRES_CONFLICTS:
        return True
    # SQLite serialises writers; a busy database is worth another try.
    return "database is locked" in str(exc)


def retry_on_conflict(fn: Callable[[], T], using: str, tries: int = 8) -> T:
    """Run ``fn`` (one whole transaction) again when the database picks it as
    a deadlock victim. Only safe outside the caller's own transaction: InnoDB
    has already rolled back everything the caller did, so there we re-raise."""
    for attempt in range(1, tries + 1):
        try:
            return fn()
        except OperationalError as exc:
            if connections[using].in_atomic_block or not is_conflict(exc) or attempt == tries:
                raise
            logger.debug(
                "Retrying after a lock conflict or certification failure (%s), try %d.", exc, attempt
            )
            time.sleep(random.uniform(0, 0.01 * 2**attempt))
    raise AssertionError("unreachable")


def nothing_if_lost(claim: Callable[[], list[T]]) -> list[T]:
    """Run a claim (retried on conflicts already); one that lost on every
    try claimed nothing (its transaction rolled back): the caller claims
    again after its idle pause instead of dying. Seen on Galera when
    workers on several nodes take the same head of a queue."""
    try:
        return claim()
    except OperationalError as exc:
        if not is_conflict(exc):
            raise
        logger.debug("A claim lost to other claimers on every try (%s); claiming again later.", exc)
        return []


# -- outages -----------------------------------------------------------------------


def is_refusal(exc: BaseException) -> bool:
    """Whether the server refused the statement itself (sending it again fails again)."""
    return _code(exc) in MYSQL_REFUSALS


def is_outage(exc: BaseException, using: str) -> bool:
    """Whether ``exc`` means the database connection was lost (worth a
    reconnect), rather than a statement the database refused (worth a traceback)."""
    if is_refusal(exc):
        return False
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError) or is_conflict(exc):
        return False
    if _code(exc) in MYSQL_DISCONNECTS or not_ready(exc):
        return True
    sqlstate = str(getattr(exc.__cause__, "sqlstate", "") or "")
    if sqlstate.startswith("08") or sqlstate in {"57P01", "57P02", "57P03"}:
        return True  # PostgreSQL: connection exception, admin shutdown
    # Anything else: ask the connection itself whether it still answers.
    try:
        return not connections[using].is_usable()
    except Exception:
        return True


def not_ready(exc: BaseException) -> bool:
    """Whether the server answers but takes no writes for now (see MYSQL_NOT_READY)."""
    return _code(exc) in MYSQL_NOT_READY and not _commit_deadlock(exc)


def check_writable(using: str, table: str) -> None:
    """Raise what the server says to a write, if it takes none: one made
    read-only answers reads all the same, so an outage over for reads may
    not be over for writes."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {connection.ops.quote_name(table)} SET id = id WHERE 1 = 0")


def drop_connection(using: str) -> None:
    """Forget a broken connection so the next query opens a fresh one."""
    try:
        connections[using].close()
    except Exception:  # closing a dead socket may fail too; it is gone either way
        connections[using].connection = None


def server_answers(using: str) -> bool:
    """Whether a fresh connection to ``using`` opens and answers now."""
    drop_connection(using)
    try:
        connections[using].ensure_connection()
        return connections[using].is_usable()
    except Exception:
        return False
    finally:
        drop_connection(using)


def doubled(base: float, times: int, cap: float) -> float:
    """``base`` doubled ``times`` times, at most ``cap``: an exponential
    backoff. The doublings are bounded first: 2.0 ** 1024 overflows a
    float, which a few hours' reconnects of an outage reached, and a row
    with thousands of attempts too."""
    return min(cap, base * 2.0 ** min(max(times, 0), 60))


class Outage:
    """One process's view of the database being away, shared by its threads,
    so an outage is logged once however many threads run into it."""

    def __init__(self, who: str, max_delay: float) -> None:
        self.who = who
        self.max_delay = max_delay
        self.lock = threading.Lock()
        self.since: float | None = None
        self.back_at: float | None = None
        self.failures = 0

    def lost(self, exc: BaseException) -> float:
        """Record a failed attempt; return how long to wait before the next."""
        with self.lock:
            self.failures += 1
            delay = doubled(FIRST_DELAY, self.failures - 1, self.max_delay)
            # Jitter: workers that lost the database together must not all
            # knock on the restarted server in the same instant.
            delay *= random.uniform(0.5, 1.0)
            if self.since is None:
                self.since = time.monotonic()
                logger.warning(
                    "%s lost the database connection: %s; retrying in %.1fs.", self.who, brief(exc), delay
                )
            else:
                logger.debug("%s: database still away (%s); retrying in %.1fs.", self.who, brief(exc), delay)
            return delay

    def restored(self) -> None:
        with self.lock:
            if self.since is None:
                return
            logger.warning(
                "%s: the database is back after %.1fs; carrying on.", self.who, time.monotonic() - self.since
            )
            self.since, self.back_at, self.failures = None, time.monotonic(), 0

    def within(self, seconds: float) -> float:
        """How long until ``seconds`` have passed since the database came back
        (0: they have, or it was never away); the rest of a lease if it is away."""
        if self.since is not None:
            return seconds
        if self.back_at is None:
            return 0.0
        return max(0.0, seconds - (time.monotonic() - self.back_at))


class StatementRefused(Exception):
    """The database refused a write however often it was sent."""


def persist(
    fn: Callable[[], T], using: str, outage: Outage | None, give_up: Callable[[], bool] = lambda: False
) -> T:
    """Run ``fn`` (one short write, such as recording an outcome) until the
    database takes it. The caller keeps what it is writing in memory, so an
    outage delays the write instead of losing it.

    Never loops on a statement the server refuses: a refusal raises at once,
    and a write that keeps "losing the connection" while a fresh connection
    answers at once raises :class:`StatementRefused`. ``give_up()`` ends the
    wait through a real outage (the worker is stopping); that raises the
    last error."""
    dropped_while_up = 0
    while True:
        try:
            result = fn()
        except DB_ERRORS as exc:
            if outage is None or not is_outage(exc, using):
                raise
            # A node that says it is not ready answers pings all the same.
            if not not_ready(exc) and server_answers(using):
                dropped_while_up += 1
                if dropped_while_up >= REFUSED_AFTER:
                    raise StatementRefused(
                        f"The database dropped the connection {REFUSED_AFTER} times on the same "
                        f"write although it answers: {brief(exc)}."
                    ) from exc
                continue
            drop_connection(using)
            if give_up():
                raise
            time.sleep(outage.lost(exc))
            continue
        if outage is not None:
            outage.restored()
        return result


class DurableWrites:
    """One worker's writes of what it knows only in memory (outcomes, an
    interruption): ``writes(fn)`` runs ``fn`` through :func:`persist`, each
    try retried on lock conflicts."""

    def __init__(self, using: str, outage: Outage | None, give_up: Callable[[], bool]) -> None:
        self.using = using
        self.outage = outage
        self.give_up = give_up

    def __call__(self, fn: Callable[[], T]) -> T:
        return persist(lambda: retry_on_conflict(fn, self.using), self.using, self.outage, self.give_up)


def brief(exc: BaseException) -> str:
    text = f"{type(exc).__name__}{exc.args!r}" if exc.args else type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"


# -- SQLite ------------------------------------------------------------------------


def lock_if_serialised(using: str, table: str) -> None:
    """SQLite has no row locks or SKIP LOCKED. A no-op write takes its single
    write lock first, so concurrent claims queue up instead of sharing rows."""
    if not connections[using].features.has_select_for_update:
        check_writable(using, table)  # the same no-op write
