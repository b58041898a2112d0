"""One job row in one INSERT, without the ORM's per-save compile.

Measured on MariaDB, ``Job.save(force_insert=True)`` spent more time building
its statement (and reading back the 13 columns that have database defaults)
than the database spent inserting. The statement depends only on the model
and the database vendor, so it is built once per connection vendor; the
values go through each field's own ``get_db_prep_save``, exactly as save()
would prepare them. Like ``bulk_create()``, this sends no pre_save/post_save.

A new READY job from an enqueue writes only the columns its task or its
call sets, in a statement its plan made (enqueue/plan.py), with the task's
constants as literals where they need no escaping: every other column
starts at its database default, which is the model's default too, so the
row and the instance agree. Preparing the 33 columns took more Python than the
INSERT's round trip; the plain-SQL INSERT it is measured against leaves
those columns to their defaults as well.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, cast

from django.db import connections

if TYPE_CHECKING:
    from ..models import Job


@functools.cache
def job_fields() -> tuple[Any, ...]:
    from ..models import Job

    return tuple(f for f in Job._meta.concrete_fields if not f.primary_key)


@functools.cache
def column_field(attname: str) -> Any:
    """The Job field whose column is ``attname``."""
    return next(f for f in job_fields() if f.attname == attname)


def _insert_sql(
    connection: Any, rows: int, returning: bool, fields: tuple[Any, ...] = (), marks: tuple[str, ...] = ()
) -> str:
    """The INSERT of ``rows`` rows of ``fields`` (every column by default),
    each value a parameter, or in a single row the SQL ``marks`` give."""
    from ..models import Job

    quote, meta = connection.ops.quote_name, Job._meta
    fields = fields or job_fields()
    row = "({})".format(", ".join(marks or ["%s"] * len(fields)))
    sql = "INSERT INTO {} ({}) VALUES {}".format(
        quote(meta.db_table), ", ".join(quote(f.column) for f in fields), ", ".join([row] * rows)
    )
    return sql + f" RETURNING {quote(meta.pk.column)}" if returning else sql


def returns_id(connection: Any) -> bool:
    """Whether an INSERT reads the new id back with ``RETURNING``: MySQL,
    MariaDB and SQLite hand it back with the INSERT itself."""
    return connection.vendor not in ("mysql", "sqlite")


def insert_statement(connection: Any, columns: tuple[str, ...], marks: tuple[str, ...]) -> str:
    """A one-row INSERT of ``columns`` (attnames), each written as its
    entry in ``marks``: a parameter (``%s``) or an SQL literal."""
    fields = tuple(column_field(name) for name in columns)
    return _insert_sql(connection, 1, returns_id(connection), fields, marks)


def insert_rows_statement(
    connection: Any, columns: tuple[str, ...], marks: tuple[str, ...], rows: int
) -> str:
    """A ``rows``-row INSERT of ``columns``, each row written as ``marks``
    say, that reads the new ids back with ``RETURNING``."""
    fields = tuple(column_field(name) for name in columns)
    return _insert_sql(connection, rows, True, fields, marks)


@functools.lru_cache(maxsize=8)
def _every_column_sql(vendor: str, alias: str) -> str:
    return _insert_sql(connections[alias], 1, returns_id(connections[alias]))


def prepared_values(job: Job, connection: Any) -> list[Any]:
    """The row's column values, each prepared by its field as save() would."""
    return [f.get_db_prep_save(f.pre_save(job, True), connection) for f in job_fields()]


def insert_job(
    job: Job, using: str, statement: tuple[str, list[Any]] | None = None, connection: Any = None
) -> None:
    """INSERT ``job`` and set its primary key, as ``job.save(force_insert=True)`` would.
    ``statement``: a new READY job's INSERT and its parameters (from
    Plan.statement()), which write only the columns an enqueue decides;
    without it, every column. ``connection``: ``using``'s, if the caller
    has it at hand."""
    connection = connection or connections[using]
    returning = returns_id(connection)
    if statement is None:
        statement = _every_column_sql(connection.vendor, using), prepared_values(job, connection)
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        if returning:
            job.pk = cursor.fetchone()[0]
        else:
            job.pk = connection.ops.last_insert_id(cursor, job._meta.db_table, _pk_column())
    _saved(job, using)


@functools.cache
def _pk_column() -> str:
    from ..models import Job

    return cast(str, Job._meta.pk.column)


def insert_rows(jobs: list[Job], sql: str, params: list[Any], using: str) -> None:
    """Run ``sql``, an INSERT of ``jobs``' rows with ``RETURNING`` (from
    insert_rows_statement()), and set each job's primary key from what it
    returns: the new rows in VALUES order (Django's bulk_create relies on
    the same)."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for job, (pk,) in zip(jobs, cursor.fetchall(), strict=True):
            job.pk = pk
            _saved(job, using)


def rows_per_statement(connection: Any, wanted: int, columns: tuple[str, ...] = ()) -> int:
    """``wanted``, cut to what the database accepts in one statement's
    parameters, for rows of ``columns`` (attnames; every column by default)."""
    fields = [column_field(name) for name in columns] if columns else list(job_fields())
    return max(1, min(wanted, connection.ops.bulk_batch_size(fields, [None] * wanted)))


def _saved(job: Job, using: str) -> None:
    job._state.adding = False
    job._state.db = using
