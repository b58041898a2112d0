"""The one clock: the database's. Due times, leases and their expiry are
compared with the database's time inside each statement (``DbNow``), and the
times a worker records come from the database too (``DatabaseClock``), so
hosts whose clocks disagree still agree on who holds what. ``elapsed()`` is
for durations on this host only.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.db import connections
from django.db.models import DateTimeField, Func

UTC = dt_timezone.utc  # datetime.UTC is Python 3.11+


class DbNow(Func):
    """The database's current time, in UTC, inside a statement. Due times,
    leases and their expiry are all compared with this, never with a worker
    host's clock, so hosts whose clocks disagree still agree on who holds
    what. MySQL's CURRENT_TIMESTAMP follows the session time zone; its
    UTC_TIMESTAMP does not."""

    template = "CURRENT_TIMESTAMP"
    output_field = DateTimeField()

    def as_mysql(self, compiler, connection, **extra_context):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        return self.as_sql(compiler, connection, template="UTC_TIMESTAMP(6)", **extra_context)

    def as_postgresql(self, compiler, connection, **extra_context):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        return self.as_sql(compiler, connection, template="STATEMENT_TIMESTAMP()", **extra_context)

    def as_sqlite(self, compiler, connection, **extra_context):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        # SQLite's own clock reads milliseconds only, and its text would not
        # compare with the microseconds Django stores; it runs on this host
        # anyway, so this host's time (taken as the statement runs) is the
        # database's.
        return "%s", [connection.ops.adapt_datetimefield_value(datetime.now(UTC))]


def elapsed() -> float:
    """Seconds on a clock that never jumps and keeps counting while the host
    is suspended (CLOCK_BOOTTIME on Linux), for lease book-keeping that must
    notice a paused process."""
    return time.clock_gettime(_ELAPSED_CLOCK)


_ELAPSED_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


class DatabaseClock:
    """The database's time in Python, for the times a worker records (when a
    job started and finished). Read from the server now and then, and carried
    forward on :func:`elapsed`, so it neither costs a query per job nor
    follows this host's wall clock."""

    RESYNC = 30.0

    def __init__(self, using: str) -> None:
        self.using = using
        self.base: tuple[float, datetime] | None = None

    def now(self) -> datetime:
        here = elapsed()
        if self.base is None or here - self.base[0] > self.RESYNC:
            self.base = (here, read_database_now(self.using))
        return self.base[1] + timedelta(seconds=here - self.base[0])


def read_database_now(using: str) -> datetime:
    """One read of the database's current time (UTC, aware)."""
    connection = connections[using]
    if connection.vendor not in _NOW_SQL:
        return datetime.now(UTC)  # SQLite: see DbNow.as_sqlite
    with connection.cursor() as cursor:
        cursor.execute(_NOW_SQL[connection.vendor])
        raw = cursor.fetchone()[0]
    return raw if raw.tzinfo else raw.replace(tzinfo=UTC)


_NOW_SQL = {"mysql": "SELECT UTC_TIMESTAMP(6)", "postgresql": "SELECT STATEMENT_TIMESTAMP()"}
