"""Enqueueing many calls of one task at once: django.tasks has no bulk API.

``django_dbqueue.bulk_enqueue(task, calls)`` (defined in backend.py, beside
the backend whose ``bulk_enqueue()`` uses this module) validates every call exactly as
``task.enqueue()`` does, then writes the jobs with one multi-row INSERT per
``batch_size`` calls, each chunk in one short transaction, instead of one
INSERT and one commit per job.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction

from ..db import retry_on_conflict
from ..payload import encode_arguments
from ..tasks_api import Task, TaskResult, task_enqueued
from .inserting import insert_job, insert_rows, job_fields, prepared_values, rows_per_statement
from .keys import call_keys, is_keyed
from .validation import check_arguments

if TYPE_CHECKING:
    from ..backend import DatabaseBackend
    from ..models import Job

Call = tuple[Sequence[Any], Mapping[str, Any]]
DEFAULT_BATCH_SIZE = 1000
PER_CALL_KEYS = ("concurrency_key", "rate_key", "fairness_key")


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
    for args, kwargs in calls:
        job = type(template).__new__(type(template))
        job.__dict__.update(template.__dict__)
        job._state = copy.copy(template._state)
        job.args, job.kwargs = encode_arguments(args, kwargs, limit)
        check_arguments(task, job.args, job.kwargs)
        if keyed:
            job.__dict__.update(call_keys(task, args, kwargs, rate_limits))
        jobs.append(job)
    return jobs


def insert_jobs(backend: DatabaseBackend, jobs: list[Job], batch_size: int) -> None:
    """Insert ``jobs`` in chunks, one multi-row INSERT per chunk, and set their
    primary keys. In autocommit mode each chunk commits on its own and a chunk
    that loses a deadlock is retried; inside the caller's transaction the rows
    commit or roll back with it."""
    if batch_size < 1:
        raise ValueError("bulk_enqueue() needs a batch_size of at least 1.")
    if not jobs:
        return
    db = backend.database
    connection = connections[db]
    # Every column but args and kwargs is the same in every row: prepare once.
    template = prepared_values(jobs[0], connection)
    names = [f.attname for f in job_fields()]
    args_at, kwargs_at = names.index("args"), names.index("kwargs")
    # A concurrency, rate or fairness key may differ from call to call (a function of the arguments).
    # (One call's key function may return None where another's returns a key.)
    keys_at = [names.index(name) for name in PER_CALL_KEYS]
    json_field = job_fields()[args_at]
    size = rows_per_statement(connection, batch_size)
    for start in range(0, len(jobs), size):
        chunk = jobs[start : start + size]
        values = []
        for job in chunk:
            row = list(template)
            row[args_at] = json_field.get_db_prep_save(job.args, connection)
            row[kwargs_at] = json_field.get_db_prep_save(job.kwargs, connection)
            for at in keys_at:
                row[at] = getattr(job, names[at])
            values.append(row)

        def write(chunk: list[Job] = chunk, values: list[list[Any]] = values) -> None:
            with transaction.atomic(using=db):
                if connection.features.can_return_rows_from_bulk_insert:
                    insert_rows(chunk, values, db)
                else:
                    # MySQL has no INSERT ... RETURNING: one INSERT per row,
                    # still one commit per chunk.
                    for job in chunk:
                        insert_job(job, db)

        retry_on_conflict(write, db)


def results_for(backend: DatabaseBackend, task: Task, jobs: list[Job]) -> list[TaskResult]:
    results: list[TaskResult] = [backend.to_result(job, task) for job in jobs]
    if task_enqueued.has_listeners(type(backend)):
        for result in results:
            task_enqueued.send(type(backend), task_result=result)
    return results
