"""Enqueueing many calls of one task at once: django.tasks has no bulk API.

``django_dbqueue.bulk_enqueue(task, calls)`` (defined in backend.py, beside
the backend whose ``bulk_enqueue()`` uses this module) validates every call exactly as
``task.enqueue()`` does, then writes the jobs with one multi-row INSERT per
``batch_size`` calls, each chunk in one short transaction, instead of one
INSERT and one commit per job.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction
from django.db.models.base import ModelState

from ..db import retry_on_conflict
from ..payload import encode_arguments, exact_integers
from ..tasks_api import Task, TaskResult, task_enqueued
from ..transitions.inserts import (
    insert_job,
    insert_rows,
    insert_rows_statement,
    insert_tokened_rows,
    rows_per_statement,
)
from .keys import call_keys, is_keyed
from .validation import check_arguments

if TYPE_CHECKING:
    from ..backend import DatabaseBackend
    from ..models import Job

Call = tuple[Sequence[Any], Mapping[str, Any]]
DEFAULT_BATCH_SIZE = 1000


def build_jobs(backend: DatabaseBackend, task: Task, calls: Iterable[Call]) -> list[Job]:
    """Validated, unsaved Job rows for ``calls``; raises on the first bad one.

    Only the arguments differ between the calls, so one Job is built the
    ordinary way and the others are shallow copies of it with their own
    (checked) arguments: building 20,000 models showed in the profile."""
    backend.check_enqueue(task)
    now = backend.now()
    template: Job = backend.build_job(task, (), {}, now, keys=False)
    limit, jobs = backend.config.MAX_ARGUMENTS_BYTES, []
    rate_limits = backend.config.RATE_LIMITS
    keyed = is_keyed(task, rate_limits)
    integers = exact_integers(connections[backend.database])
    for args, kwargs in calls:
        job = type(template).__new__(type(template))
        job.__dict__.update(template.__dict__)
        # A state of its own, as a new instance has (copy.copy of the
        # template's took 8 µs a job, a tenth of a bulk's Python).
        job._state = ModelState()
        job._state.db = template._state.db
        job.args, job.kwargs = encode_arguments(args, kwargs, limit, integers)
        check_arguments(task, job.args, job.kwargs)
        if keyed:
            job.__dict__.update(call_keys(task, args, kwargs, rate_limits))
        jobs.append(job)
    return jobs


def insert_jobs(backend: DatabaseBackend, task: Task, jobs: list[Job], batch_size: int) -> None:
    """Insert ``jobs`` (from build_jobs()) in chunks, one multi-row INSERT
    per chunk, and set their primary keys. In autocommit mode each chunk
    commits on its own and a chunk that loses a deadlock is retried; inside
    the caller's transaction the rows commit or roll back with it.

    The rows are written as the task's plan writes one (enqueue/plan.py):
    only the columns an enqueue decides, the task's constants as literals
    in the statement, so each row's parameters are its own arguments, times
    and keys (escaping every column of every row was 40 % of a profile)."""
    if batch_size < 1:
        raise ValueError("bulk_enqueue() needs a batch_size of at least 1.")
    if not jobs:
        return
    db = backend.database
    connection = connections[db]
    plan = backend.plan(task)
    # Every job is a copy of one template (one batch, one metadata) and
    # carries its arguments as parameters: one shape of row for them all.
    shape = plan.row(jobs[0], connection, arguments=True)[0]
    columns, marks = plan.written(shape)
    returning = connection.features.can_return_rows_from_bulk_insert
    # MySQL has no INSERT ... RETURNING: its chunks read their ids back by
    # a token each (inserting.insert_tokened_rows()).
    tokened = not returning and connection.vendor == "mysql"
    multi_row = returning or tokened
    size = rows_per_statement(connection, batch_size, columns) if multi_row else batch_size
    for start in range(0, len(jobs), size):
        chunk = jobs[start : start + size]
        rows = [plan.row(job, connection, arguments=True) for job in chunk] if multi_row else []
        if not multi_row or any(row[0] != shape for row in rows):
            # One planned INSERT per row, still one commit per chunk.
            statements = [plan.statement(job, connection) for job in chunk]
            retry_on_conflict(functools.partial(_one_by_one, chunk, statements, db), db)
            continue
        params = [value for _, row in rows for value in row]
        if tokened:
            # Random, so that no two processes (forked ones included) share one.
            token = secrets.randbits(63)
            sql = insert_rows_statement(
                connection, (*columns, "bulk_token"), (*marks, str(token)), len(chunk), returning=False
            )
            retry_on_conflict(functools.partial(_in_one, chunk, sql, params, db, token), db)
        else:
            sql = insert_rows_statement(connection, columns, marks, len(chunk))
            retry_on_conflict(functools.partial(_in_one, chunk, sql, params, db), db)


def _in_one(jobs: list[Job], sql: str, params: list[Any], db: str, token: int | None = None) -> None:
    with transaction.atomic(using=db):
        if token is None:
            insert_rows(jobs, sql, params, db)
        else:
            insert_tokened_rows(jobs, sql, params, token, db)


def _one_by_one(jobs: list[Job], statements: list[tuple[str, list[Any]]], db: str) -> None:
    with transaction.atomic(using=db):
        for job, statement in zip(jobs, statements, strict=True):
            insert_job(job, db, statement)


def results_for(backend: DatabaseBackend, task: Task, jobs: list[Job]) -> list[TaskResult]:
    plan = backend.plan(task)
    results: list[TaskResult] = [plan.result(backend, job) for job in jobs]
    if task_enqueued.has_listeners(type(backend)):
        for result in results:
            task_enqueued.send(type(backend), task_result=result)
    return results
