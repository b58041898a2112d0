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

It lives in transitions/ (it was enqueue/inserting.py, which re-exports
it) because two floors insert jobs through it: the enqueue path above,
and the workflow cascade here, which inserts a batch's callbacks and an
operation job inside an outcome's transaction (own_jobs.py). transitions/
imports nothing from enqueue/, so the one INSERT sits on the lower floor.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, cast

from django.db import connections

from .. import tables

if TYPE_CHECKING:
    from ..models import Job


@functools.cache
def job_fields() -> tuple[Any, ...]:
    Job = tables.job()

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
    Job = tables.job()

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
    connection: Any, columns: tuple[str, ...], marks: tuple[str, ...], rows: int, returning: bool = True
) -> str:
    """A ``rows``-row INSERT of ``columns``, each row written as ``marks``
    say, that reads the new ids back with ``RETURNING`` unless told not to."""
    fields = tuple(column_field(name) for name in columns)
    return _insert_sql(connection, rows, returning, fields, marks)


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
    Job = tables.job()

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


def insert_tokened_rows(jobs: list[Job], sql: str, params: list[Any], token: int, using: str) -> None:
    """Run ``sql``, an INSERT of ``jobs``' rows without ``RETURNING`` whose
    every row writes ``token`` as its bulk_token, and set each job's
    primary key: MySQL's way, which has no INSERT ... RETURNING.

    With ``innodb_autoinc_lock_mode=2`` (MySQL 8's default) the ids of a
    multi-row INSERT are unique and increase in VALUES order, but another
    connection's INSERT may take ids between them, so the first id plus k
    is not the k-th row's. What is relied on: every id of the INSERT is at
    least LAST_INSERT_ID() (the first row's, which the INSERT hands back
    itself), they increase in VALUES order, and no concurrent chunk draws
    the same random 63-bit token. The read walks the primary key from the
    first id, so the column needs no index; it runs in the INSERT's
    transaction, which sees its own rows."""
    connection = connections[using]
    quote, pk = connection.ops.quote_name, _pk_column()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        first = connection.ops.last_insert_id(cursor, _table(), pk)
        cursor.execute(
            f"SELECT {quote(pk)} FROM {quote(_table())} WHERE {quote(pk)} >= %s AND "
            f"{quote('bulk_token')} = %s ORDER BY {quote(pk)} LIMIT %s",
            [first, token, len(jobs)],
        )
        ids = cursor.fetchall()
    if len(ids) != len(jobs):
        raise RuntimeError(f"A bulk INSERT of {len(jobs)} jobs read back {len(ids)} ids by its token.")
    for job, (pk_value,) in zip(jobs, ids, strict=True):
        job.pk, job.bulk_token = pk_value, token
        _saved(job, using)


@functools.cache
def _table() -> str:
    Job = tables.job()

    return Job._meta.db_table


def rows_per_statement(connection: Any, wanted: int, columns: tuple[str, ...] = ()) -> int:
    """``wanted``, cut to what the database accepts in one statement's
    parameters, for rows of ``columns`` (attnames; every column by default)."""
    fields = [column_field(name) for name in columns] if columns else list(job_fields())
    return max(1, min(wanted, connection.ops.bulk_batch_size(fields, [None] * wanted)))


def _saved(job: Job, using: str) -> None:
    job._state.adding = False
    job._state.db = using
