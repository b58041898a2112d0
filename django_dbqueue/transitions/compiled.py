"""The worker's ordinary claim as statements the ORM compiles once per
process, not once per claim: the read of candidate ids, and the locking
read of the claimed rows by those ids.

In a profile of a worker draining no-op jobs at WARNING, building and
compiling those two querysets per claim (filters, lookups, converters)
took about a tenth of the worker's CPU. A :class:`Compiled` holds what
the ORM made of a ``values_list`` queryset: its SQL and parameters, and
the converters Django applies to its columns (time zones, the tolerant
JSON decoder); it runs with any thread's connection to the same database.

Compiled once only where the statement is the same at every claim: where
:class:`~django_dbqueue.clock.DbNow` is the server's own clock in the SQL.
On SQLite, and on MySQL or MariaDB with ``USE_TZ = False``, it binds a
value (this host's time, or the local offset), and each claim compiles its
statements as before (``now_binds``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from django.conf import settings
from django.db import connections
from django.db.models.expressions import RawSQL
from django.db.models.query import FlatValuesListIterable
from django.db.models.sql import Query

from ..clock import DbNow

if TYPE_CHECKING:
    from django.db.models import QuerySet

Kept = TypeVar("Kept")

# Where the ids of one read go, in a statement compiled once: a comment,
# which no identifier or value of the ORM's SQL can hold.
IDS = "/*dbqueue:ids*/"


class Compiled:
    """A ``values_list`` queryset, compiled: ``rows(ids)`` runs it on the
    current thread's connection to its database, with ``ids`` (digits) in
    place of :data:`IDS` if it holds them, and gives its rows converted as
    the ORM would (lists, or plain values for a flat ``values_list``)."""

    def __init__(self, rows: QuerySet[Any, Any]) -> None:
        self.using = rows.db
        compiler = rows.query.get_compiler(using=self.using)
        self.sql, params = compiler.as_sql()
        self.params = tuple(params)
        fields = [column for column, _, _ in compiler.select[: compiler.col_count]]
        self.converters = list(compiler.get_converters(fields).items())
        self.flat = rows._iterable_class is FlatValuesListIterable
        self.holds_ids = self.sql.count(IDS) == 1

    def rows(self, ids: list[int] | None = None) -> list[Any]:
        sql = self.sql
        if ids is not None:
            if not self.holds_ids:
                raise ValueError("This statement takes no ids.")
            sql = sql.replace(IDS, ", ".join([str(int(pk)) for pk in ids]) or "NULL")
        connection = connections[self.using]
        with connection.cursor() as cursor, _times_decoded_in_c(connection):
            cursor.execute(sql, self.params)
            rows = cursor.fetchall()
        if self.converters:
            rows = _converted(rows, self.converters, connection)
        if self.flat:
            return [row[0] for row in rows]
        return list(rows)


def by_ids() -> RawSQL:
    """The place of the ids in a ``pk__in=`` lookup compiled once."""
    return RawSQL(IDS, [])


def now_binds(using: str) -> bool:
    """Whether :class:`DbNow` binds a value on ``using`` (SQLite, and
    MySQL or MariaDB with ``USE_TZ = False``): then a statement that holds
    it cannot be compiled once. MySQL's local offset binds even while it
    is zero (a zone at UTC's offset in winter): it moves with daylight
    saving, and a statement kept from winter would compare summer's due
    times with UTC."""
    vendor = connections[using].vendor
    if vendor == "mysql" and not settings.USE_TZ:
        return True
    return _now_binds(using, vendor, settings.USE_TZ)


@functools.cache
def _now_binds(using: str, vendor: str, use_tz: bool) -> bool:
    from ..tables import job

    query = Query(job())
    _, params = query.get_compiler(using=using).compile(DbNow().resolve_expression(query))
    return bool(params)


def once(build: Callable[[], QuerySet[Any, Any]], key: tuple[Any, ...]) -> Compiled:
    """``build()`` compiled, once per ``key`` (which names the database)
    where :func:`now_binds` allows it, or else afresh each time."""
    return kept(key, lambda: Compiled(build()))


def kept(key: tuple[Any, ...], make: Callable[[], Kept]) -> Kept:
    """``make()``, what was compiled for a statement or a part of one: made
    once per ``key`` (its first item the database's alias) where
    :func:`now_binds` allows it, or else afresh each time."""
    using = key[0]
    if now_binds(using):
        return make()
    full = (*key, connections[using].vendor, settings.USE_TZ)
    if full not in _KEPT:
        if len(_KEPT) >= KEPT_MAX:
            _KEPT.clear()
        _KEPT[full] = make()
    return _KEPT[full]


# A few entries a worker (its queues, the claim sizes it asks for, the
# mark's lease); the bound only keeps a process that claims every size and
# queue in check.
KEPT_MAX = 512
_KEPT: dict[tuple[Any, ...], Any] = {}


def _converted(rows: Any, converters: list[Any], connection: Any) -> list[list[Any]]:
    """Django's converters on ``rows``, as ``SQLCompiler.apply_converters``
    applies them, with this thread's connection; but a NULL is left None
    without asking them, as every converter of a job's columns would leave
    it (a test asks each)."""
    out = []
    for row in rows:
        row = list(row)
        for position, (functions, expression) in converters:
            value = row[position]
            if value is None:
                continue
            for function in functions:
                value = function(value, expression, connection)
            row[position] = value
        out.append(row)
    return out


@contextmanager
def _times_decoded_in_c(connection: Any) -> Iterator[None]:
    """On MySQL and MariaDB, the driver's connection decodes DATETIMEs with
    :func:`decoded_time` for the block: MySQLdb's own decoder is Python
    (about 2.3 µs a value on this machine, 0.3 for ``fromisoformat``), and
    every claimed row holds two (``run_after``, ``enqueued_at``). The
    driver reads its connection's converters when a statement's result
    arrives, so the block's statement alone is decoded so."""
    converters = getattr(connection.connection, "converter", None) if connection.vendor == "mysql" else None
    if converters is None:
        yield
        return
    from MySQLdb.constants.FIELD_TYPE import DATETIME  # type: ignore[import-untyped]

    before = converters.get(DATETIME)
    converters[DATETIME] = decoded_time
    try:
        yield
    finally:
        converters[DATETIME] = before


def decoded_time(text: str) -> Any:
    """A DATETIME as MySQLdb decodes it. The server's form of a time is
    ``YYYY-MM-DD HH:MM:SS`` or ``YYYY-MM-DD HH:MM:SS.ffffff``, for which
    ``datetime.fromisoformat`` gives the same naive time, in C; anything
    else (MySQL's zero date, a day that does not exist, text of another
    shape) goes to MySQLdb's decoder, which reads a bad time as None."""
    if len(text) in (19, 26) and text[4] == "-" and text[7] == "-":
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            moment = None
        if moment is not None and moment.tzinfo is None:
            return moment
    from MySQLdb.times import DateTime_or_None  # type: ignore[import-untyped]

    return DateTime_or_None(text)
