"""The one clock: the database's. Due times, leases and their expiry are
compared with the database's time inside each statement (``DbNow``), and the
times a worker records come from the database too (``DatabaseClock``), so
hosts whose clocks disagree still agree on who holds what. ``elapsed()`` is
for durations on this host only.

Times are in Django's form, as ``timezone.now()`` gives them: aware, in UTC,
with ``USE_TZ = True``; naive local time in ``TIME_ZONE`` with ``USE_TZ =
False``. The database's UTC clock is shifted by the zone's offset at that
moment (on PostgreSQL the columns hold absolute times and need no shift).
Local wall time is not monotonic: see "USE_TZ = False" in docs/databases.md.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.conf import settings
from django.db import connections
from django.db.models import DateTimeField, Func
from django.utils import timezone

UTC = dt_timezone.utc  # datetime.UTC is Python 3.11+


class DbNow(Func):
    """The database's current time, in Django's form, inside a statement.
    Due times, leases and their expiry are all compared with this, never
    with a worker host's clock, so hosts whose clocks disagree still agree
    on who holds what. MySQL's CURRENT_TIMESTAMP follows the session time
    zone; its UTC_TIMESTAMP does not."""

    template = "CURRENT_TIMESTAMP"
    output_field = DateTimeField()

    def as_mysql(self, compiler, connection, **extra_context):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        sql, params = self.as_sql(compiler, connection, template="UTC_TIMESTAMP(6)", **extra_context)
        offset = local_offset()
        if offset is None:
            return sql, params
        # DATETIME columns hold local time when USE_TZ is False. A fixed
        # offset, not CONVERT_TZ(): that needs the server's zone tables.
        return f"({sql} + INTERVAL %s MICROSECOND)", [*params, offset]

    def as_postgresql(self, compiler, connection, **extra_context):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        return self.as_sql(compiler, connection, template="STATEMENT_TIMESTAMP()", **extra_context)

    def as_sqlite(self, compiler, connection, **extra_context):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        # SQLite's own clock reads milliseconds only, and its text would not
        # compare with the microseconds Django stores; it runs on this host
        # anyway, so this host's time (taken as the statement runs) is the
        # database's.
        return "%s", [connection.ops.adapt_datetimefield_value(as_stored(datetime.now(UTC)))]


def elapsed() -> float:
    """Seconds on a clock that never jumps and keeps counting while the host
    is suspended (CLOCK_BOOTTIME on Linux), for lease book-keeping that must
    notice a paused process."""
    return time.clock_gettime(_ELAPSED_CLOCK)


_ELAPSED_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


class DatabaseClock:
    """The database's time in Python, for the times a worker or a producer
    records (when a job was enqueued, started, finished), in Django's form.
    Read from the server now and then, and carried forward on
    :func:`elapsed`, so it neither costs a query per job nor follows this
    host's wall clock.

    An estimate is never ahead of the clock it estimates (a job stamped in
    the database's future is not due when it should be): the read's moment
    is taken after the server answered, and the carried time runs slower
    than this host's clock by as much as two hosts' clocks may drift apart."""

    RESYNC = 30.0
    DRIFT = 5e-4  # NTP slews a clock's rate by at most 500 ppm

    def __init__(self, using: str) -> None:
        self.using = using
        self.base: tuple[float, datetime] | None = None

    def now(self) -> datetime:
        here = elapsed()
        if self.base is None or here - self.base[0] > self.RESYNC:
            read = read_utc(self.using)
            self.base = (elapsed(), read)
            return as_stored(read)
        since, read = self.base
        # Whole microseconds, rounded down: rounding up may pass the clock.
        moment = read + timedelta(microseconds=int((here - since) * (1 - self.DRIFT) * 1e6))
        return moment if settings.USE_TZ else as_stored(moment)


def read_database_now(using: str) -> datetime:
    """One read of the database's current time, in Django's form (see the module)."""
    return as_stored(read_utc(using))


def read_utc(using: str) -> datetime:
    """One read of the database's current time, aware, in UTC."""
    connection = connections[using]
    if connection.vendor not in _NOW_SQL:
        return datetime.now(UTC)  # SQLite: see DbNow.as_sqlite
    with connection.cursor() as cursor:
        cursor.execute(_NOW_SQL[connection.vendor])
        raw = cursor.fetchone()[0]
    return raw.replace(tzinfo=UTC)


# Both read UTC as a naive time, whatever the session's time zone.
_NOW_SQL = {
    "mysql": "SELECT UTC_TIMESTAMP(6)",
    "postgresql": "SELECT STATEMENT_TIMESTAMP() AT TIME ZONE 'UTC'",
}


def as_stored(moment: datetime) -> datetime:
    """An aware time as Django stores and compares it: unchanged with
    ``USE_TZ``, else naive local time in ``TIME_ZONE``. A naive one is
    taken to be in that form already."""
    if settings.USE_TZ or timezone.is_naive(moment):
        return moment
    return timezone.make_naive(moment, timezone.get_default_timezone())


def as_aware(moment: datetime) -> datetime:
    """A time in Django's form as an aware one, for arithmetic in UTC (a
    naive one is local time in ``TIME_ZONE``)."""
    if timezone.is_aware(moment):
        return moment
    return timezone.make_aware(moment, timezone.get_default_timezone())


def local_offset() -> int | None:
    """Microseconds to add to UTC for Django's naive local time now; None
    with ``USE_TZ`` or a zone at UTC's offset."""
    if settings.USE_TZ:
        return None
    offset = datetime.now(UTC).astimezone(timezone.get_default_timezone()).utcoffset()
    return offset // timedelta(microseconds=1) if offset else None
