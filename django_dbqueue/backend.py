"""The django.tasks backend: enqueue writes a Job row, get_result reads one.

``django_dbqueue.backend.DatabaseBackend`` is the BACKEND path users write in
``TASKS``, so the class lives here, at the top of the enqueue side: it puts
together the parts in enqueue/ (the task class, validation, keys, inserting,
bulk, the row-as-result view it holds as ``results``), and none of them
imports this module. The rooms below ask ``routing.is_queue_backend()``
whether a backend is one of ours. ``DatabaseTask`` and ``bulk_enqueue`` are
importable from here too.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.apps import apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from .backend_checks import backend_messages, not_installed_message
from .clock import DatabaseClock
from .enqueue.bulk import DEFAULT_BATCH_SIZE, Call, build_jobs, insert_jobs, results_for
from .enqueue.keys import check_key_options
from .enqueue.plan import Plan, Plans
from .enqueue.results import JobResult, ResultView
from .enqueue.tasks import DatabaseTask
from .enqueue.validation import check_arguments, task_module_allowed, validate_fields
from .enqueue.writing import as_planned, check_combination, one_by_one, write
from .options import OptionsError, QueueOptions, database_problem, entry_problems
from .routing import MARK
from .schema import schema_required
from .tasks_api import BaseTaskBackend, InvalidTask, Task, TaskResult, task_enqueued
from .workflows.calls import passed_results


class DatabaseBackend(BaseTaskBackend):
    """The ``django.tasks`` backend that stores each job as a row of
    :class:`~django_dbqueue.models.Job` for ``runqueue`` workers to claim.
    Configure it in ``TASKS`` with ``"BACKEND":
    "django_dbqueue.backend.DatabaseBackend"``; its ``OPTIONS`` are listed
    on the settings page. An ``enqueue()`` inside a transaction commits or
    rolls back with it."""

    task_class = DatabaseTask
    _plans: Plans | None = None  # made at the first enqueue
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self._clock: DatabaseClock | None = None
        self.results = ResultView(self)
        # Each reported by check() under its own id; enqueue and the
        # commands refuse to run on a bad config (options_error says why).
        self.entry_problems = entry_problems(alias, params)
        self.options_problems: list[str] = []
        try:
            self.config = QueueOptions.parse(self.options)
        except OptionsError as exc:
            self.options_problems = exc.problems
            self.config = QueueOptions()
        missing = database_problem(alias, self.raw_database())
        problems = [*self.entry_problems, *self.options_problems, *([missing] if missing else [])]
        self.options_error: str | None = " ".join(problems) or None

    @property
    def database(self) -> str:
        return self.config.DATABASE

    def raw_database(self) -> Any:
        # As written: a bad OPTIONS leaves self.config at its defaults.
        return self.options.get("DATABASE", "default") if isinstance(self.options, dict) else None

    def validate_task(self, task: Task) -> None:
        if self.options_error:
            # A broken TASKS entry (a QUEUES spelt QUEUE) would fail every
            # @task at import, and hide check()'s message; enqueue refuses.
            return
        # Checked first so that a wrong type gets a message, not a TypeError.
        validate_fields(task, self.queues)
        check_key_options(task)
        super().validate_task(task)
        # A task module imported while apps load (a single-module app, an
        # apps.py that imports its tasks) cannot ask the app registry yet:
        # the module is checked at enqueue instead, which validates again.
        if not apps.apps_ready:
            return
        if not task_module_allowed(task.func.__module__, self.config.ALLOWED_TASK_MODULES):
            raise InvalidTask(
                f"The task {task.module_path} is defined in {task.func.__module__}, which is not "
                "the module of an installed app nor in OPTIONS ALLOWED_TASK_MODULES, so no "
                "worker would run it."
            )

    def get_result(self, result_id: str) -> JobResult:
        """The job of ``result_id``, whichever backend made it (enqueue/results.py)."""
        return self.results.get_result(result_id)

    def to_result(self, job: Any, task: Task | None = None) -> JobResult:
        """The django.tasks view of a Job row (enqueue/results.py)."""
        return self.results.to_result(job, task)

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Insert the job. Inside the caller's transaction it commits or rolls
        back with it; in autocommit mode a deadlocked INSERT is retried."""
        plan = self.plan(task)
        job = plan.job(args, kwargs, self.now())
        # A chain's step gets its parents' results first (workflows).
        check_arguments(task, [*passed_results(task), *job.args], job.kwargs)
        return self.insert(job, task, plan)

    def insert(self, job: Any, task: Task, plan: Plan | None = None) -> TaskResult:
        """Write one built job; with a unique key, the key's holder may come
        back instead (and no ``task_enqueued`` is sent for it). Before
        ``migrate``: QueueNotMigrated, which says to run it. With the
        ``plan`` that made the job, its INSERT writes only what an enqueue
        decides (enqueue/inserting.py)."""
        check_combination(job, task)
        with schema_required(self.alias, self.database):
            holder = write(self, job, task, plan)
        if holder is not job:
            return self.to_result(holder, task if holder.task_path == task.module_path else None)
        # A dependant's row may differ from the job its plan made (workflows).
        result = (
            plan.result(self, job)
            if plan is not None and as_planned(job, task, plan)
            else self.to_result(job, task)
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def bulk_enqueue(
        self, task: Task, calls: Iterable[tuple[Any, Any]], *, batch_size: int = 1000
    ) -> list[TaskResult]:
        """Enqueue ``task`` once per ``(args, kwargs)`` in ``calls``, with one
        multi-row INSERT per ``batch_size`` jobs; see django_dbqueue.enqueue.bulk."""
        jobs = build_jobs(self, task, calls)
        if getattr(task, "depends_on", ()) or any(one_by_one(job) for job in jobs):
            # A dependant is written with its parents locked, one at a time.
            # Each key may meet a holder (another producer's, or an earlier
            # call of this batch), a job of a sequence waits for the one
            # before, a tagged one has its tags: one INSERT per job.
            return [self.insert(job, task) for job in jobs]
        with schema_required(self.alias, self.database):
            insert_jobs(self, task, jobs, batch_size)
        return results_for(self, task, jobs)

    def check_enqueue(self, task: Task) -> None:
        """What every enqueue checks once per task: the backend's own config
        and the task itself."""
        self.plan(task)

    def plan(self, task: Task) -> Plan:
        """What every enqueue of ``task`` shares (enqueue/plan.py), made once
        the task passed :meth:`check_enqueue`'s checks. Kept per task object
        once the app registry is ready: validate_task() checks the task's
        module only then."""
        plans = self._plans
        if plans is None:
            plans = self._plans = Plans(self)
        plan = plans.get(task)
        if plan is not None:
            return plan
        if self.options_error:
            raise ImproperlyConfigured(self.options_error)
        self.validate_task(task)
        return plans.make(task, keep=apps.apps_ready)

    def job_model(self) -> Any:
        try:
            from .models import Job
        except RuntimeError as exc:  # Django: "... isn't in an application in INSTALLED_APPS"
            raise ImproperlyConfigured(not_installed_message(self.alias)) from exc
        return Job

    def now(self) -> datetime:
        """The database's time, for a new job's ``enqueued_at`` and an
        immediate job's ``run_after``: a producer whose clock runs ahead of
        the database must not delay its jobs by the difference."""
        if self._clock is None or self._clock.using != self.database:
            self._clock = DatabaseClock(self.database)
        return self._clock.now()

    def build_job(self, task: Task, args: Any, kwargs: Any, now: datetime, keys: bool = True) -> Any:
        """An unsaved Job for one call of a checked task, its arguments
        checked as JSON; with its unique and concurrency keys unless ``keys``
        is false."""
        return self.plan(task).job(args, kwargs, now, keys)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(**kwargs), *backend_messages(self)]


# routing.is_queue_backend() reads it, on this class and every subclass.
setattr(DatabaseBackend, MARK, True)


def bulk_enqueue(
    task: Task, calls: Iterable[Call], *, batch_size: int = DEFAULT_BATCH_SIZE
) -> list[TaskResult]:
    """Enqueue ``task`` once per ``(args, kwargs)`` pair in ``calls`` through
    the task's own backend, which must be a DatabaseBackend.

    Every call is validated before anything is written, so a bad call raises
    and enqueues nothing. Returns one TaskResult per call, in order, each with
    its job id; ``task_enqueued`` is sent for each.
    """
    backend = task.get_backend()
    if not isinstance(backend, DatabaseBackend):
        raise TypeError(
            f"bulk_enqueue() needs a django_dbqueue DatabaseBackend; the task's backend "
            f"{task.backend!r} is a {type(backend).__name__}."
        )
    return backend.bulk_enqueue(task, calls, batch_size=batch_size)
