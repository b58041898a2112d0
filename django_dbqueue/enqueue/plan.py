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

import weakref
from typing import TYPE_CHECKING, Any

from django.core.signals import setting_changed
from django.db import connections
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from ..clock import as_stored
from ..payload import encode_arguments
from ..workflows.context import batch_fields
from .inserting import ENQUEUED, enqueued_fields
from .keys import call_keys

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
    and its constant INSERT values."""

    __slots__ = ("constant", "database", "keyed", "limit", "model", "run_after", "task", "template")

    def __init__(self, backend: DatabaseBackend, task: Task) -> None:
        Job = backend.job_model()
        self.task, self.model, self.database = task, Job, backend.database
        self.limit = backend.config.MAX_ARGUMENTS_BYTES
        self.keyed = any(getattr(task, name, None) is not None for name in ("unique_key", "concurrency_key"))
        # An aware run_after with USE_TZ = False: the local time it names.
        self.run_after = as_stored(task.run_after) if task.run_after else None
        job = Job(
            task_path=task.module_path,
            queue_name=task.queue_name,
            priority=task.priority,
            max_attempts=getattr(task, "max_attempts", None) or backend.config.MAX_ATTEMPTS,
            on_parent_failure=getattr(task, "on_parent_failure", "cancel"),
            pass_result=getattr(task, "pass_result", False),
        )
        self.template = {name: value for name, value in vars(job).items() if name != "_state"}
        connection = connections[self.database]
        # Prepared by each field exactly as save() would; the per-call
        # columns are overwritten by values().
        self.constant = [f.get_db_prep_save(getattr(job, f.attname), connection) for f in enqueued_fields()]

    def job(self, args: Any, kwargs: Any, now: datetime, keys: bool = True) -> Job:
        """An unsaved Job for one call, its arguments checked as JSON; with
        its unique and concurrency keys unless ``keys`` is false."""
        # Key functions get the call's own arguments, as the task function would.
        call = call_keys(self.task, args, kwargs) if keys and self.keyed else {}
        args, kwargs = encode_arguments(args, kwargs, self.limit)
        fields = {
            **self.template,
            "args": args,
            "kwargs": kwargs,
            "run_after": self.run_after or now,
            "enqueued_at": now,
            **batch_fields(self.database),
            **call,
        }
        Job = self.model
        if pre_init.has_listeners(Job) or post_init.has_listeners(Job):
            return Job(**fields)  # a receiver hears of every instance, as before
        for name in FRESH_LISTS:
            fields[name] = []
        # What Model.__init__ leaves behind for these values, without walking
        # every field for its default again.
        job = Job.__new__(Job)
        job.__dict__.update(fields)
        job._state = ModelState()
        return job

    def values(self, job: Job) -> list[Any]:
        """The ENQUEUED columns of a new READY job made by :meth:`job`,
        prepared as save() would: the constant ones once, the rest now."""
        connection = connections[self.database]
        fields, row = enqueued_fields(), list(self.constant)
        for at in VARYING:
            value = getattr(job, ENQUEUED[at])
            if value is not None:
                row[at] = fields[at].get_db_prep_save(value, connection)
        if job.run_after is job.enqueued_at:
            row[RUN_AFTER] = row[ENQUEUED_AT]
        else:
            row[RUN_AFTER] = fields[RUN_AFTER].get_db_prep_save(job.run_after, connection)
        return row


# The columns that differ from call to call (run_after: when it is not the
# enqueue's own time); the other ENQUEUED columns hold the task's values.
VARYING = tuple(
    ENQUEUED.index(name)
    for name in (
        "args",
        "kwargs",
        "enqueued_at",
        "unique_key",
        "concurrency_key",
        "concurrency_limit",
        "batch_id",
    )
)
RUN_AFTER, ENQUEUED_AT = ENQUEUED.index("run_after"), ENQUEUED.index("enqueued_at")


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
            if len(self.kept) >= KEPT:
                del self.kept[next(iter(self.kept))]
            self.kept[id(task)] = plan  # the plan holds the task: its id stays its own
        return plan


_all: weakref.WeakSet[Plans] = weakref.WeakSet()


def _forget(**kwargs: Any) -> None:
    for plans in _all:
        plans.kept.clear()


setting_changed.connect(_forget, dispatch_uid="django_dbqueue.enqueue.plan")
