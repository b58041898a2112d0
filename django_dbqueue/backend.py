"""The django.tasks backend: enqueue writes a Job row, get_result reads one."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.tasks import Task, TaskResult
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone
from django.utils.module_loading import import_string

from .inserting import insert_job
from .options import QueueOptions
from .payload import encode_arguments
from .retry import retry_on_conflict
from .validation import task_module_allowed, validate_fields


@dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseTask(Task):
    """A django.tasks Task that also takes ``max_attempts`` and ``timeout``
    (seconds): ``@task(max_attempts=5, timeout=30)``. ``None`` means the
    backend's MAX_ATTEMPTS and JOB_TIMEOUT."""

    max_attempts: int | None = None
    timeout: float | None = None


class DatabaseBackend(BaseTaskBackend):
    task_class = DatabaseTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.options_error: str | None = None
        try:
            self.config = QueueOptions.parse(self.options)
        except ImproperlyConfigured as exc:
            # Reported by check(); enqueue refuses to run on a bad config.
            self.options_error = str(exc)
            self.config = QueueOptions()

    @property
    def database(self) -> str:
        return self.config.DATABASE

    def validate_task(self, task: Task) -> None:
        # Checked first so that a wrong type gets a message, not a TypeError.
        validate_fields(task, self.queues)
        super().validate_task(task)
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
        job = self.build_job(task, args, kwargs, timezone.now())
        retry_on_conflict(lambda: insert_job(job, self.database), self.database)
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
        insert_jobs(self, jobs, batch_size)
        return results_for(self, task, jobs)

    def check_enqueue(self, task: Task) -> None:
        """What every enqueue checks once per task: the backend's own config
        and the task itself."""
        if self.options_error:
            raise ImproperlyConfigured(self.options_error)
        self.validate_task(task)

    def build_job(self, task: Task, args: Any, kwargs: Any, now: datetime) -> Any:
        """An unsaved Job for one call, its arguments checked as JSON."""
        from .models import Job

        args, kwargs = encode_arguments(args, kwargs, self.config.MAX_ARGUMENTS_BYTES)
        return Job(
            task_path=task.module_path,
            queue_name=task.queue_name,
            priority=task.priority,
            args=args,
            kwargs=kwargs,
            run_after=task.run_after or now,
            max_attempts=getattr(task, "max_attempts", None) or self.config.MAX_ATTEMPTS,
            enqueued_at=now,
        )

    def get_result(self, result_id: str) -> TaskResult:
        from .models import Job

        try:
            job = Job.objects.using(self.database).get(pk=int(result_id))
        except (ValueError, TypeError, Job.DoesNotExist):
            raise TaskResultDoesNotExist(f"No job with id {result_id!r}.") from None
        return self.to_result(job)

    def to_result(self, job: Any, task: Task | None = None) -> TaskResult:
        """The django.tasks view of a Job row."""
        if task is None:
            task = load_task(job.task_path)
        result = TaskResult(
            task=task,
            id=str(job.pk),
            status=job.status,
            enqueued_at=job.enqueued_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            last_attempted_at=job.last_attempted_at,
            args=job.args if isinstance(job.args, list) else [],
            kwargs=job.kwargs if isinstance(job.kwargs, dict) else {},
            backend=self.alias,
            errors=[
                TaskError(
                    exception_class_path=error.get("exception_class_path", ""),
                    traceback=error.get("traceback", ""),
                )
                for error in job.errors or []
                if isinstance(error, dict)
            ],
            worker_ids=list(job.worker_ids or []),
        )
        object.__setattr__(result, "_return_value", job.return_value)
        return result

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        messages = list(super().check(**kwargs))
        if self.options_error:
            messages.append(
                checks.Error(
                    self.options_error,
                    hint=f"Fix TASKS[{self.alias!r}]['OPTIONS'].",
                    id="django_dbqueue.E003",
                )
            )
        return messages


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
    from django.tasks import task_backends

    allowed: list[str] = []
    for backend in task_backends.all():
        if isinstance(backend, DatabaseBackend):
            allowed.extend(backend.config.ALLOWED_TASK_MODULES)
    return tuple(allowed)
