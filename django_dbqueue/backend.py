"""The django.tasks backend: enqueue writes a Job row, get_result reads one."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.apps import apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .clock import DatabaseClock, as_stored
from .db import retry_on_conflict
from .exceptions import JobCancelled, TaskResultNotLoadable
from .inserting import insert_job
from .keys import check_key_options, resolve_key
from .options import OptionsError, QueueOptions, database_problem, entry_problems
from .payload import as_list, encode_arguments
from .schema import schema_required
from .tasks_api import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from .validation import check_arguments, task_module_allowed, validate_fields


@dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseTask(Task):
    """The task class of :class:`DatabaseBackend`: Django's ``Task`` with the
    queue's own options. Set them in ``@task(...)`` (see
    :func:`django_dbqueue.task`); the four key options may also be set for
    one call with ``.using(...)``.

    ``max_attempts``
        Runs before the job ends FAILED; ``None`` means the backend's
        ``MAX_ATTEMPTS``.
    ``timeout``
        Seconds one run may take before it fails with ``JobTimeout``;
        ``None`` means the backend's ``JOB_TIMEOUT``.
    ``atomic``
        Run the body and record the job's success in one transaction on the
        queue's database, conditioned on the worker still holding the job:
        the body's writes through that database happen exactly once.
    ``unique_key``
        A string, or a function of the call's arguments returning one (or
        ``None`` for no key). While an unfinished job holds the key,
        enqueueing another returns that job, or raises
        :class:`~django_dbqueue.exceptions.JobAlreadyQueued` when
        ``on_duplicate="raise"``.
    ``concurrency_key``, ``concurrency_limit``
        At most ``concurrency_limit`` jobs with the same key (a string or a
        function of the arguments) run at once, across every worker; the
        others wait without spending an attempt.
    """

    max_attempts: int | None = None
    timeout: float | None = None
    atomic: bool = False
    unique_key: str | Callable[..., str] | None = None
    on_duplicate: str = "return"  # or "raise": JobAlreadyQueued
    concurrency_key: str | Callable[..., str] | None = None
    concurrency_limit: int | None = None

    def using(self, **changes: Any) -> Task:
        ours = {name: changes.pop(name) for name in OWN_USING if changes.get(name) is not None}
        task = Task.using(self, **changes)
        return dataclasses.replace(task, **ours) if ours else task


JOB_CANCELLED = f"{JobCancelled.__module__}.{JobCancelled.__qualname__}"
CANCELLED_TRACEBACK = (
    f"{JOB_CANCELLED}: the job was cancelled before it ran (in the admin, or by Job.objects.cancel()).\n"
)

OWN_USING = ("unique_key", "on_duplicate", "concurrency_key", "concurrency_limit")


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredTaskError(TaskError):
    """A TaskError read from a job row. Django's ``exception_class`` imports
    whatever module the path names, and importing runs code: here it
    resolves only builtins and the modules a worker may run tasks from."""

    allowed_modules: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def exception_class(self) -> type[BaseException]:
        module = self.exception_class_path.rpartition(".")[0]
        if module != "builtins" and not task_module_allowed(module, self.allowed_modules):
            raise ValueError(
                f"The exception class {self.exception_class_path!r} is not resolved: only "
                "builtins and the modules of installed apps and OPTIONS ALLOWED_TASK_MODULES "
                "are imported from a job row. Its path is in exception_class_path."
            )
        return TaskError.exception_class.fget(self)


class DatabaseBackend(BaseTaskBackend):
    """The ``django.tasks`` backend that stores each job as a row of
    :class:`~django_dbqueue.models.Job` for ``runqueue`` workers to claim.
    Configure it in ``TASKS`` with ``"BACKEND":
    "django_dbqueue.backend.DatabaseBackend"``; its ``OPTIONS`` are listed
    on the settings page. An ``enqueue()`` inside a transaction commits or
    rolls back with it."""

    task_class = DatabaseTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self._clock: DatabaseClock | None = None
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

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Insert the job. Inside the caller's transaction it commits or rolls
        back with it; in autocommit mode a deadlocked INSERT is retried."""
        self.check_enqueue(task)
        job = self.build_job(task, args, kwargs, self.now())
        check_arguments(task, job.args, job.kwargs)
        return self.insert(job, task)

    def insert(self, job: Any, task: Task) -> TaskResult:
        """Write one built job; with a unique key, the key's holder may come
        back instead (and no ``task_enqueued`` is sent for it). Before
        ``migrate``: QueueNotMigrated, which says to run it."""
        with schema_required(self.alias, self.database):
            if job.unique_key is None:
                retry_on_conflict(lambda: insert_job(job, self.database), self.database)
                holder = job
            else:
                from .unique import insert_or_holder

                on_duplicate = getattr(task, "on_duplicate", "return")
                holder = retry_on_conflict(
                    lambda: insert_or_holder(job, self.database, on_duplicate), self.database
                )
        if holder is not job:
            return self.to_result(holder, task if holder.task_path == task.module_path else None)
        result = self.to_result(job, task)
        task_enqueued.send(type(self), task_result=result)
        return result

    def bulk_enqueue(
        self, task: Task, calls: Iterable[tuple[Any, Any]], *, batch_size: int = 1000
    ) -> list[TaskResult]:
        """Enqueue ``task`` once per ``(args, kwargs)`` in ``calls``, with one
        multi-row INSERT per ``batch_size`` jobs; see django_dbqueue.bulk."""
        from .bulk import build_jobs, insert_jobs, results_for

        jobs = build_jobs(self, task, calls)
        if any(job.unique_key is not None for job in jobs):
            # Each key may meet a holder (another producer's, or an earlier
            # call of this batch): one INSERT per job, each told apart.
            return [self.insert(job, task) for job in jobs]
        with schema_required(self.alias, self.database):
            insert_jobs(self, jobs, batch_size)
        return results_for(self, task, jobs)

    def check_enqueue(self, task: Task) -> None:
        """What every enqueue checks once per task: the backend's own config
        and the task itself."""
        if self.options_error:
            raise ImproperlyConfigured(self.options_error)
        self.validate_task(task)

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
        """An unsaved Job for one call, its arguments checked as JSON; with
        its unique and concurrency keys unless ``keys`` is false."""
        Job = self.job_model()
        # Key functions get the call's own arguments, as the task function would.
        call = call_keys(task, args, kwargs) if keys else {}
        args, kwargs = encode_arguments(args, kwargs, self.config.MAX_ARGUMENTS_BYTES)
        return Job(
            task_path=task.module_path,
            queue_name=task.queue_name,
            priority=task.priority,
            args=args,
            kwargs=kwargs,
            # An aware run_after with USE_TZ = False: the local time it names.
            run_after=as_stored(task.run_after) if task.run_after else now,
            max_attempts=getattr(task, "max_attempts", None) or self.config.MAX_ATTEMPTS,
            enqueued_at=now,
            **call,
        )

    def get_result(self, result_id: str) -> TaskResult:
        Job = self.job_model()
        try:
            job = Job.objects.using(self.database).get(pk=int(result_id))
        except (ValueError, TypeError, Job.DoesNotExist):
            raise TaskResultDoesNotExist(f"No job with id {result_id!r}.") from None
        try:
            task = load_task(job.task_path)
        except LookupError as exc:
            raise TaskResultNotLoadable(
                f"The job {job.pk} exists, but get_result() cannot return it without its task: {exc}"
            ) from exc
        return self.to_result(job, task)

    def to_result(self, job: Any, task: Task | None = None) -> TaskResult:
        """The django.tasks view of a Job row. Its ``task`` is ``task`` (by
        default the one the row's task path names) as the row has it: with
        the row's priority, queue and run_after, as ``.using()`` made them."""
        if task is None:
            task = load_task(job.task_path)
        errors: list[TaskError] = [
            StoredTaskError(
                exception_class_path=str(error.get("exception_class_path", "")),
                traceback=str(error.get("traceback", "")),
                allowed_modules=self.config.ALLOWED_TASK_MODULES,
            )
            for error in as_list(job.errors)
            if isinstance(error, dict)
        ]
        status = job.status
        if status == "CANCELLED":
            # Django's API has no cancelled state; FAILED is finished, so a
            # caller waiting for is_finished stops waiting.
            status = TaskResultStatus.FAILED
            errors.append(StoredTaskError(exception_class_path=JOB_CANCELLED, traceback=CANCELLED_TRACEBACK))
        result: TaskResult = TaskResult(
            task=self._task_as_stored(task, job),
            id=str(job.pk),
            status=status,
            enqueued_at=job.enqueued_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            last_attempted_at=job.last_attempted_at,
            args=job.args if isinstance(job.args, list) else [],
            kwargs=job.kwargs if isinstance(job.kwargs, dict) else {},
            backend=self.alias,
            errors=errors,
            worker_ids=[str(worker) for worker in as_list(job.worker_ids)],
        )
        object.__setattr__(result, "_return_value", job.return_value)
        return result

    def _task_as_stored(self, task: Task, job: Any) -> Task:
        # enqueue() stores run_after=enqueued_at for a task without one.
        run_after = None if job.run_after == job.enqueued_at else job.run_after
        stored = {
            "priority": job.priority,
            "queue_name": job.queue_name,
            "run_after": run_after,
            "backend": self.alias,
        }
        if all(getattr(task, name) == value for name, value in stored.items()):
            return task  # enqueue()'s own task: nothing to rebuild
        # Not task.using(): that validates the task again, and a row may hold
        # what validation refuses (a queue since removed from QUEUES, a row
        # written by hand), yet its result must still be readable. Enqueueing
        # this task again validates it then.
        rebuilt = object.__new__(type(task))
        for name in (f.name for f in dataclasses.fields(task)):
            object.__setattr__(rebuilt, name, stored.get(name, getattr(task, name)))
        return rebuilt

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        from .backend_checks import backend_messages

        return [*super().check(**kwargs), *backend_messages(self)]


def call_keys(task: Task, args: Any, kwargs: Any) -> dict[str, Any]:
    """The unique and concurrency keys of one call, as Job fields."""
    keys: dict[str, Any] = {}
    for name in ("unique_key", "concurrency_key"):
        declared = getattr(task, name, None)
        if declared is not None:
            keys[name] = resolve_key(name, declared, args, kwargs)
    if keys.get("concurrency_key") is not None:
        keys["concurrency_limit"] = task.concurrency_limit
    return keys


def not_installed_message(alias: str) -> str:
    return (
        f"The task backend {alias!r} is a django_dbqueue DatabaseBackend, but 'django_dbqueue' "
        "is not in INSTALLED_APPS, so its job table is neither migrated nor usable."
    )


def load_task(task_path: str, allowed: tuple[str, ...] | None = None) -> Task:
    """Resolve a stored task path to a django.tasks Task, and nothing else:
    a row written by hand must not make a worker call an arbitrary function,
    nor import an arbitrary module (importing runs code). ``allowed``: the
    backend's ALLOWED_TASK_MODULES (default: the default backend's)."""
    if allowed is None:
        allowed = _default_allowed()
    module = task_path.rpartition(".")[0]
    if not task_module_allowed(module, allowed):
        raise LookupError(
            f"The task path {task_path!r} is outside every installed app and OPTIONS "
            "ALLOWED_TASK_MODULES, so it is not imported or run."
        )
    try:
        task = import_string(task_path)
    except ImportError as exc:
        raise LookupError(f"The task path {task_path!r} does not import: {exc}.") from exc
    if not isinstance(task, Task):
        raise LookupError(
            f"The task path {task_path!r} names a {type(task).__name__}, not a "
            "task; only functions decorated with @task can be run from the queue."
        )
    # A task defined elsewhere and imported into an app module is refused too.
    if not task_module_allowed(task.func.__module__, allowed):
        raise LookupError(
            f"The task path {task_path!r} names a task defined in {task.func.__module__}, "
            "outside every installed app and OPTIONS ALLOWED_TASK_MODULES."
        )
    return task


def _default_allowed() -> tuple[str, ...]:
    """Every database backend's ALLOWED_TASK_MODULES: a worker resolving a
    row does not know which backend enqueued it."""
    from .tasks_api import task_backends

    allowed: list[str] = []
    for backend in task_backends.all():
        if isinstance(backend, DatabaseBackend):
            allowed.extend(backend.config.ALLOWED_TASK_MODULES)
    return tuple(allowed)
