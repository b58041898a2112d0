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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connections
from django.db.models.expressions import RawSQL
from django.db.models.query import FlatValuesListIterable
from django.db.models.sql import Query

from ..clock import DbNow

if TYPE_CHECKING:
    from django.db.models import QuerySet

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
        with connection.cursor() as cursor:
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
    it cannot be compiled once."""
    return _now_binds(using, connections[using].vendor, settings.USE_TZ)


@functools.cache
def _now_binds(using: str, vendor: str, use_tz: bool) -> bool:
    from ..tables import job

    query = Query(job())
    _, params = query.get_compiler(using=using).compile(DbNow().resolve_expression(query))
    return bool(params)


def once(build: Callable[[], QuerySet[Any, Any]], key: tuple[Any, ...]) -> Compiled:
    """``build()`` compiled, once per ``key`` (which names the database)
    where :func:`now_binds` allows it, or else afresh each time."""
    using = key[0]
    if now_binds(using):
        return Compiled(build())
    full = (*key, connections[using].vendor, settings.USE_TZ)
    compiled = _ONCE.get(full)
    if compiled is None:
        if len(_ONCE) >= ONCE_MAX:
            _ONCE.clear()
        compiled = _ONCE[full] = Compiled(build())
    return compiled


# A few entries a worker (its queues, the claim sizes it asks for); the
# bound only keeps a process that claims every size and queue in check.
ONCE_MAX = 512
_ONCE: dict[tuple[Any, ...], Compiled] = {}


def _converted(rows: Any, converters: list[Any], connection: Any) -> list[list[Any]]:
    """Django's converters on ``rows``, as ``SQLCompiler.apply_converters``
    applies them, with this thread's connection."""
    out = []
    for row in rows:
        row = list(row)
        for position, (functions, expression) in converters:
            value = row[position]
            for function in functions:
                value = function(value, expression, connection)
            row[position] = value
        out.append(row)
    return out
