"""An UPDATE of job rows by primary key, written as SQL rather than
compiled by the ORM: the claim's mark and the batched success write, one
statement each per batch.

In a profile of a worker draining no-op jobs, compiling those two
``QuerySet.update()`` calls (an ``IN`` of 200 ids, each prepared as a
lookup value, and three ``CASE`` expressions of 200 branches) took more
CPU than the database spent running them. Here each value is prepared by
its field once (a JSON list for PostgreSQL's ``jsonb``, a datetime for the
backend), ids go in as they are, and the statement is plain SQL that
MariaDB, MySQL, PostgreSQL and SQLite all take; on MySQL and MariaDB the
times of ``set_by_pk`` are written into it as text too.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models import DateTimeField
from django.db.models.sql import Query

from .compiled import kept


class RowUpdate:
    """``UPDATE <model's table> SET ... WHERE pk IN (ids) AND ...``, built up
    by ``set`` (one value for every row), ``set_by_pk`` (a value per row),
    ``set_expression`` and ``set_sql`` (an expression), ``coalesce`` (a
    value kept, or another column's new one), and run by ``run``."""

    def __init__(self, model: Any, using: str) -> None:
        self.model = model
        self.using = using
        self.connection = connections[using]
        self.quote = self.connection.ops.quote_name
        # Each assignment's SQL and its parameters, in order.
        self.assignments: list[tuple[str, list[Any]]] = []

    def set(self, name: str, value: Any) -> RowUpdate:
        field = self.model._meta.get_field(name)
        if value is None:
            self.assignments.append((f"{self.quote(field.column)} = NULL", []))
        else:
            prepared = field.get_db_prep_save(value, self.connection)
            self.assignments.append((f"{self.quote(field.column)} = %s", [prepared]))
        return self

    def set_expression(self, name: str, expression: Any, once: Hashable | None = None) -> RowUpdate:
        """``name = expression``, an ORM expression of no column (``DbNow()
        + timedelta(...)``), compiled for this database; with ``once``, a
        key for the expression, compiled once per database where DbNow is
        the server's clock in the SQL (compiled.py)."""
        if once is None:
            sql, params = self._compiled(expression)
        else:
            key = (self.using, "expression", self.model, once)
            sql, params = kept(key, lambda: self._compiled(expression))
        self.assignments.append((f"{self.column(name)} = {sql}", list(params)))
        return self

    def _compiled(self, expression: Any) -> tuple[str, list[Any]]:
        query = Query(self.model)
        resolved = expression.resolve_expression(query, allow_joins=False, for_save=True)
        sql, params = query.get_compiler(connection=self.connection).compile(resolved)
        return sql, list(params)

    def set_sql(self, name: str, sql: str) -> RowUpdate:
        """``name = sql``, where ``sql`` may name the row's columns (quoted
        with ``column()``) and holds no parameters."""
        self.assignments.append((f"{self.column(name)} = {sql}", []))
        return self

    def set_by_pk(self, name: str, values: dict[int, Any]) -> RowUpdate:
        """``name = CASE pk WHEN 1 THEN v1 WHEN 2 THEN v2 ... END``."""
        field = self.model._meta.get_field(name)
        # Ids are written into the SQL as digits (int() admits nothing else):
        # escaping each as a parameter showed in the profile too.
        pk = self.column("pk")
        params: list[Any] = []
        if isinstance(field, DateTimeField):
            # Times as the backend's adapter gives them, written into the SQL
            # where that is plain text of digits (_datetime_literal).
            literal = _datetime_literal(self.connection)
            whens = []
            for key, value in values.items():
                text = literal(value)
                if text is None:
                    whens.append(f"WHEN {int(key)} THEN %s")
                    params.append(self.connection.ops.adapt_datetimefield_value(value))
                else:
                    whens.append(f"WHEN {int(key)} THEN '{text}'")
        else:
            whens = [f"WHEN {int(key)} THEN %s" for key in values]
            params = [field.get_db_prep_save(value, self.connection) for value in values.values()]
        self.assignments.append((f"{self.quote(field.column)} = CASE {pk} {' '.join(whens)} END", params))
        return self

    def coalesce(self, name: str, like: str) -> RowUpdate:
        """``name = COALESCE(name, <what like is set to>)``: the column keeps
        a value it holds, else takes ``like``'s new one; ``like`` is set
        already (by ``set_by_pk``, say), and its SQL is written again here
        rather than read from the row, which databases do not agree on
        (MySQL reads a column assigned earlier in the statement)."""
        prefix = f"{self.column(like)} = "
        sql, params = next((sql, params) for sql, params in self.assignments if sql.startswith(prefix))
        column = self.column(name)
        self.assignments.append((f"{column} = COALESCE({column}, {sql[len(prefix) :]})", list(params)))
        return self

    def column(self, name: str) -> str:
        field = self.model._meta.pk if name == "pk" else self.model._meta.get_field(name)
        return self.quote(field.column)

    def run(self, ids: list[int], **conditions: Any) -> int:
        """Run the UPDATE on the rows of ``ids`` that also match
        ``conditions`` (``column=value`` equalities); returns the rows
        it changed."""
        if not ids:
            return 0
        where = [f"{self.column('pk')} IN ({', '.join(str(int(pk)) for pk in ids)})"]
        params = [param for _, each in self.assignments for param in each]
        for name, value in conditions.items():
            field = self.model._meta.get_field(name)
            where.append(f"{self.quote(field.column)} = %s")
            params.append(field.get_db_prep_value(value, self.connection))
        assignments = ", ".join(sql for sql, _ in self.assignments)
        sql = f"UPDATE {self.quote(self.model._meta.db_table)} SET {assignments} WHERE {' AND '.join(where)}"
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount


def _datetime_literal(connection: Any) -> Callable[[Any], str | None]:
    """For MySQL and MariaDB, the text the backend's adapter gives for a
    time (``str()`` of the naive time), for the SQL itself, or None where
    the adapter must be asked (a time in another zone, or another
    database). ``str()`` of a datetime holds only digits, ``-``, ``:``, ``.``
    and a space, so the text needs no escaping; escaping three such times
    per job, as parameters, showed in the worker's profile."""
    if connection.vendor != "mysql":
        return lambda value: None
    if not settings.USE_TZ:
        return lambda value: str(value) if type(value) is datetime and value.tzinfo is None else None
    zone = connection.timezone
    return lambda value: (
        str(value.replace(tzinfo=None)) if type(value) is datetime and value.tzinfo is zone else None
    )
