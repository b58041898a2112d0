"""What every enqueue of one task through one backend shares, worked out
once per task instead of once per call.

A profile of one-by-one ``Task.enqueue()`` on MariaDB put as much Python
around the INSERT as the INSERT's own round trip: the task validated again
(queue, priority, options, its module against the app registry), a ``Job``
built through ``Model.__init__`` (33 fields, each with its default), and
every column prepared by its field. None of that depends on the call but
the arguments, the keys, the batch and the time. A :class:`Plan` holds the
rest: it is made after the task passed ``check_enqueue()``, and keeps the
new job's instance dictionary and its constant columns, prepared by their
fields, for the calls that follow.

Plans are kept per backend, by the task object's identity (a Task is a
frozen dataclass), and dropped whenever a setting changes: Django's own
validation reads ``USE_TZ``, and the module check reads the app registry.
"""

from __future__ import annotations

import re
import weakref
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.core.signals import setting_changed
from django.db import connections
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from ..clock import as_stored
from ..payload import encode_arguments, exact_integers
from ..tasks_api import TaskResultStatus
from ..tracing import trace_context
from ..transitions.inserts import column_field, insert_job, insert_statement
from ..workflows.context import batch_fields
from .expiry import deadline
from .keys import call_keys, is_keyed, resolve_key
from .metadata import TRACE_KEY, check_metadata
from .results import JobResult, new_result
from .tags import call_tags

if TYPE_CHECKING:
    from datetime import datetime

    from ..backend import DatabaseBackend
    from ..models import Job
    from ..tasks_api import Task

# Plans kept per backend: a task made per call by .using() is a new object
# each time, and must not grow the cache without bound.
KEPT = 256
# JSON defaults a job must not share with its siblings.
FRESH_LISTS = ("errors", "worker_ids", "history")


class Plan:
    """One validated task on one backend: its new job's instance dictionary
    and the columns its INSERT writes, the constant ones prepared."""

    __slots__ = (
        "adapted",
        "as_is",
        "columns",
        "constant",
        "database",
        "debounce",
        "expires",
        "sequence",
        "tags",
        "empty",
        "empty_marks",
        "integers",
        "keyed",
        "limit",
        "marks",
        "metadata",
        "model",
        "rate_limits",
        "run_after",
        "statements",
        "task",
        "template",
    )

    def __init__(self, backend: DatabaseBackend, task: Task) -> None:
        Job = backend.job_model()
        self.task, self.model, self.database = task, Job, backend.database
        self.limit = backend.config.MAX_ARGUMENTS_BYTES
        # The integers the database keeps exactly: MySQL's JSON rounds wider ones.
        self.integers = exact_integers(connections[self.database])
        self.rate_limits = backend.config.RATE_LIMITS
        self.keyed = is_keyed(task, self.rate_limits)
        self.expires = getattr(task, "expires", None)  # None: the job's row has no deadline
        # A debounced call is due a quiet period after it (debounce.py).
        self.debounce = getattr(task, "debounce", None)
        self.sequence = getattr(task, "sequence_key", None)  # enqueue/sequences.py
        self.tags = getattr(task, "tags", ())  # a tuple, or a function of the call's arguments (tags.py)
        self.metadata = check_metadata(getattr(task, "metadata", None), self.integers) or {}
        # An aware run_after with USE_TZ = False: the local time it names.
        self.run_after = as_stored(task.run_after) if task.run_after else None
        # Whether to_result() gives a new job's result the task itself,
        # rather than a copy with the row's values.
        self.as_is = (
            task.backend == backend.alias
            and (task.run_after is None or self.run_after == task.run_after)
            and self.debounce is None
        )
        job = Job(
            task_path=task.module_path,
            queue_name=task.queue_name,
            priority=task.priority,
            max_attempts=getattr(task, "max_attempts", None) or backend.config.MAX_ATTEMPTS,
            on_parent_failure=getattr(task, "on_parent_failure", "cancel"),
            pass_result=getattr(task, "pass_result", False),
        )
        self.template = {name: value for name, value in vars(job).items() if name != "_state"}
        # The last enqueue's time, the connection it was adapted for, and
        # the adapted value (see row()).
        self.adapted: tuple[Any, Any, Any] = (None, None, None)
        # The task's columns, then the call's, then the keys a keyed task
        # writes (NULL when a key function returns None).
        own = [*TASK_COLUMNS, *(name for name, default in WORKFLOW_DEFAULTS if getattr(job, name) != default)]
        self.columns = (
            *own,
            *CALL_COLUMNS,
            *(KEY_COLUMNS if self.keyed else ()),
            *(("expires_at",) if self.expires is not None else ()),
        )
        connection = connections[self.database]
        # Prepared by each field exactly as save() would; written into the
        # statement as literals where they need no escaping (see literal()).
        constant = [column_field(name).get_db_prep_save(getattr(job, name), connection) for name in own]
        self.marks = tuple(literal(value) or "%s" for value in constant)
        self.constant = [value for value in constant if literal(value) is None]
        self.empty = [
            column_field(name).get_db_prep_save(getattr(job, name), connection) for name in ("args", "kwargs")
        ]
        self.empty_marks = tuple(literal(value) for value in self.empty)
        self.statements: dict[tuple[bool, ...], str] = {}

    def job(self, args: Any, kwargs: Any, now: datetime, keys: bool = True) -> Job:
        """An unsaved Job for one call, its arguments checked as JSON; with
        its unique, concurrency, rate and fairness keys unless ``keys`` is false."""
        # Key functions get the call's own arguments, as the task function would.
        call = call_keys(self.task, args, kwargs, self.rate_limits) if keys and self.keyed else {}
        sequence = resolve_key("sequence_key", self.sequence, args, kwargs) if self.sequence else None
        tags = call_tags(self.tags, args, kwargs) if self.tags else ()
        args, kwargs = encode_arguments(args, kwargs, self.limit, self.integers)
        fields = {
            **self.template,
            "args": args,
            "kwargs": kwargs,
            "run_after": self.run_after or now,
            "enqueued_at": now,
            **batch_fields(self.database),
            **call,
        }
        if self.debounce is not None:
            fields["run_after"] = max(fields["run_after"], now + timedelta(seconds=self.debounce.seconds))
        if self.expires is not None:
            fields["expires_at"] = deadline(self.expires, now, fields["run_after"])
        for name in FRESH_LISTS:
            fields[name] = []
        # The task's metadata, and the trace this enqueue runs in (unless
        # the metadata names one already); each job its own dict.
        metadata, context = self.metadata, trace_context()
        if context is not None and TRACE_KEY not in metadata:
            metadata = {**metadata, TRACE_KEY: context}
        fields["metadata"] = dict(metadata) if metadata else {}
        Job = self.model
        # .receivers first: has_listeners() looks the sender up, and most
        # projects connect neither signal at all.
        if (pre_init.receivers and pre_init.has_listeners(Job)) or (
            post_init.receivers and post_init.has_listeners(Job)
        ):
            job = Job(**fields)  # a receiver hears of every instance, as before
            return with_extras(job, sequence, tags)
        # What Model.__init__ leaves behind for these values, without walking
        # every field for its default again.
        job = Job.__new__(Job)
        job.__dict__ = fields
        job._state = ModelState()
        return with_extras(job, sequence, tags)

    def insert(self, job: Job) -> None:
        """Write a new READY job made by :meth:`job` (see :meth:`statement`)."""
        connection = connections[self.database]
        insert_job(job, self.database, self.statement(job, connection), connection)

    def statement(self, job: Job, connection: Any = None) -> tuple[str, list[Any]]:
        """The INSERT of a new READY job made by :meth:`job`, and its
        parameters, prepared as save() would: the task's columns once (most
        of them literals in the statement), the call's now. Every other
        column is left to its database default."""
        connection = connection or connections[self.database]
        shape, params = self.row(job, connection)
        sql = self.statements.get(shape)
        if sql is None:
            sql = self.statements[shape] = insert_statement(connection, *self.written(shape))
        return sql, params

    def row(self, job: Job, connection: Any, arguments: bool = False) -> tuple[tuple[bool, ...], list[Any]]:
        """The shape of :meth:`job`'s new job's INSERT (see :meth:`written`)
        and its parameters. ``arguments``: its args and kwargs are
        parameters even when empty, so that every job of a bulk enqueue
        has one shape (enqueue/bulk.py)."""
        args, kwargs, now = job.args, job.kwargs, job.enqueued_at
        # The database clock's time (backend.now()), in Django's form already:
        # what the field's get_prep_value() checks holds, so only the
        # backend's adaptation is left. A bulk's jobs share one time: it is
        # adapted once (kept with its time as one tuple, which threads
        # sharing the plan replace whole).
        adapted = self.adapted
        if adapted[0] is now and adapted[1] is connection:
            enqueued_at = adapted[2]
        else:
            enqueued_at = connection.ops.adapt_datetimefield_value(now)
            self.adapted = (now, connection, enqueued_at)
        params = [*self.constant]
        # An empty list or dict is the template's, prepared already (and
        # most often a literal in the statement).
        if args:
            params.append(column_field("args").get_db_prep_save(args, connection))
        elif arguments or self.empty_marks[0] is None:
            params.append(self.empty[0])
        if kwargs:
            params.append(column_field("kwargs").get_db_prep_save(kwargs, connection))
        elif arguments or self.empty_marks[1] is None:
            params.append(self.empty[1])
        params.append(
            enqueued_at if job.run_after is now else _prepared("run_after", job.run_after, connection)
        )
        params.append(enqueued_at)
        if self.keyed:
            params += [_prepared(name, getattr(job, name), connection) for name in KEY_COLUMNS]
        if self.expires is not None:
            params.append(_prepared("expires_at", job.expires_at, connection))
        batch, metadata = job.batch_id, job.metadata
        if batch is not None:
            params.append(column_field("batch_id").get_db_prep_save(batch, connection))
        if metadata:
            params.append(column_field("metadata").get_db_prep_save(metadata, connection))
        return (bool(args) or arguments, bool(kwargs) or arguments, batch is not None, bool(metadata)), params

    def written(self, shape: tuple[bool, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The columns a statement of ``shape`` (whether the call has args,
        kwargs, a batch, metadata) writes, and how each is written: a
        parameter or a literal."""
        has_args, has_kwargs, in_batch, has_metadata = shape
        columns = (
            *self.columns,
            *(("batch_id",) if in_batch else ()),
            *(("metadata",) if has_metadata else ()),
        )
        marks = (
            *self.marks,
            "%s" if has_args else self.empty_marks[0] or "%s",
            "%s" if has_kwargs else self.empty_marks[1] or "%s",
            *["%s"] * (len(columns) - len(self.marks) - 2),
        )
        return columns, marks

    def result(self, backend: DatabaseBackend, job: Job) -> JobResult:
        """What ``backend.to_result(job, task)`` makes of the new READY job
        :meth:`job` made and the INSERT wrote, without looking for what a
        new row cannot hold yet: errors, workers, a return value, progress,
        a cancel request (tests/test_enqueue_plan.py compares the two)."""
        # to_result() reads a run_after equal to enqueued_at as none at all.
        if not self.as_is or (self.run_after is not None and self.run_after == job.enqueued_at):
            return backend.results.to_result(job, self.task)
        result = new_result(
            task=self.task,
            id=backend.results.result_id(job.pk),
            status=TaskResultStatus.READY,
            enqueued_at=job.enqueued_at,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=job.args,
            kwargs=job.kwargs,
            backend=backend.alias,
            errors=[],
            worker_ids=[],
            _return_value=None,
        )
        if job.metadata:
            object.__setattr__(result, "_metadata", job.metadata)
        return result


# What a constant string may hold to be written into the statement as it
# is, between single quotes: nothing any of the databases' string syntaxes
# or the drivers' parameter markers (%s, and SQLite's ?) give a meaning to,
# in any character set or SQL mode. Anything else stays a parameter.
PLAIN = re.compile(r"[A-Za-z0-9_.<>\[\]{}\- ]*")


def with_extras(job: Job, sequence: str | None, tags: tuple[str, ...]) -> Job:
    """``job`` with what its call gives besides columns: its sequence key
    (the tail table holds it, sequences.py) and its tags (JobTag rows, tags.py)."""
    if sequence is not None:
        job.sequence_key = sequence  # type: ignore[attr-defined]
    if tags:
        job.tags = tags  # type: ignore[attr-defined]
    return job


def literal(value: Any) -> str | None:
    """``value`` as an SQL literal, if it is an int or a string that needs
    no escaping (``PLAIN``); None for anything else, which stays a
    parameter for the driver to escape."""
    if type(value) is int:
        return str(value)
    if type(value) is str and PLAIN.fullmatch(value):
        return f"'{value}'"
    return None


def _prepared(name: str, value: Any, connection: Any) -> Any:
    return None if value is None else column_field(name).get_db_prep_save(value, connection)


# The columns of a new job an enqueue writes (attnames), in the order
# Plan.row() gives them: the task's, the workflow options a task may
# set away from their defaults, the call's, and a keyed task's keys. Every
# other column starts at its database default, which is the model's too.
TASK_COLUMNS = ("task_path", "queue_name", "priority", "max_attempts")
WORKFLOW_DEFAULTS = (("on_parent_failure", "cancel"), ("pass_result", False))
CALL_COLUMNS = ("args", "kwargs", "run_after", "enqueued_at")
KEY_COLUMNS = ("unique_key", "concurrency_key", "concurrency_limit", "rate_key", "rate_limit", "fairness_key")


class Plans:
    """A backend's plans, by task identity; see the module."""

    __slots__ = ("__weakref__", "backend", "kept")

    def __init__(self, backend: DatabaseBackend) -> None:
        self.backend = backend
        self.kept: dict[int, Plan] = {}
        _all.add(self)

    def get(self, task: Task) -> Plan | None:
        plan = self.kept.get(id(task))
        return plan if plan is not None and plan.task is task else None

    def make(self, task: Task, keep: bool) -> Plan:
        """The plan of a task that passed the backend's checks."""
        plan = Plan(self.backend, task)
        if keep:
            kept = self.kept
            if len(kept) >= KEPT:
                # Started afresh rather than trimmed: no other thread can
                # meet a dictionary changing under its iteration.
                kept = self.kept = {}
            kept[id(task)] = plan  # the plan holds the task: its id stays its own
        return plan


_all: weakref.WeakSet[Plans] = weakref.WeakSet()


def _forget(**kwargs: Any) -> None:
    for plans in _all:
        plans.kept.clear()


setting_changed.connect(_forget, dispatch_uid="django_dbqueue.enqueue.plan")
