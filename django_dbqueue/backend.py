"""The django.tasks backend: enqueue writes a Job row, get_result reads one."""

from __future__ import annotations

from dataclasses import dataclass
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

from .options import QueueOptions
from .payload import encode_arguments
from .retry import retry_on_conflict


@dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseTask(Task):
    """A django.tasks Task that also takes ``max_attempts``:
    ``@task(max_attempts=5)``. ``None`` means the backend's MAX_ATTEMPTS."""

    max_attempts: int | None = None


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
        super().validate_task(task)
        max_attempts = getattr(task, "max_attempts", None)
        if max_attempts is not None and (
            isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
        ):
            raise InvalidTask(f"max_attempts must be a whole number of at least 1, not {max_attempts!r}.")

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Insert the job. Inside the caller's transaction it commits or rolls
        back with it; in autocommit mode a deadlocked INSERT is retried."""
        from .models import Job

        if self.options_error:
            raise ImproperlyConfigured(self.options_error)
        self.validate_task(task)
        args, kwargs = encode_arguments(args, kwargs, self.config.MAX_ARGUMENTS_BYTES)
        now = timezone.now()
        job = Job(
            task_path=task.module_path,
            queue_name=task.queue_name,
            priority=task.priority,
            args=args,
            kwargs=kwargs,
            run_after=task.run_after or now,
            max_attempts=getattr(task, "max_attempts", None) or self.config.MAX_ATTEMPTS,
            enqueued_at=now,
        )
        retry_on_conflict(lambda: job.save(using=self.database, force_insert=True), self.database)
        result = self.to_result(job, task)
        task_enqueued.send(type(self), task_result=result)
        return result

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


def load_task(task_path: str) -> Task:
    """Resolve a stored task path to a django.tasks Task, and nothing else:
    a row written by hand must not make a worker call an arbitrary function."""
    try:
        task = import_string(task_path)
    except ImportError as exc:
        raise LookupError(f"The task path {task_path!r} does not import: {exc}.") from exc
    if not isinstance(task, Task):
        raise LookupError(
            f"The task path {task_path!r} names a {type(task).__name__}, not a "
            "task; only functions decorated with @task can be run from the queue."
        )
    return task
