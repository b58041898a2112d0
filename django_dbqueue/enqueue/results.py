"""The django.tasks view of a job row: :class:`ResultView`, which every
:class:`~django_dbqueue.backend.DatabaseBackend` holds as its ``results``
and its ``get_result()`` and ``to_result()`` call; the errors as a row
stores them; and :class:`JobResult`,
Django's TaskResult with what a running job reports (progress, a cancel
request)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..exceptions import JobCancelled, JobExpired, TaskResultNotLoadable
from ..payload import as_list
from ..routing import home_backend, is_queue_backend, result_prefix, split_result_id
from ..status import Status
from ..tasks_api import (
    InvalidTaskBackend,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_backends,
)
from .loading import load_task
from .validation import task_module_allowed

if TYPE_CHECKING:
    from ..backend import DatabaseBackend

JOB_CANCELLED = f"{JobCancelled.__module__}.{JobCancelled.__qualname__}"
JOB_EXPIRED = f"{JobExpired.__module__}.{JobExpired.__qualname__}"
CANCELLED_TRACEBACK = (
    f"{JOB_CANCELLED}: the job was cancelled before it ran (in the admin, or by Job.objects.cancel()).\n"
)


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


# The fields a refresh leaves as they are: what the job was enqueued as.
# Everything else (Django's status, times, errors, return value, and ours)
# is read again from the row.
IDENTITY = frozenset({"task", "id", "args", "kwargs", "backend"})


# Django's TaskResult fields, which live in slots: vars() does not hold them.
_TASK_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(TaskResult))

# JobResult's own fields, and their defaults.
RUNNING_FIELDS = {"progress": None, "progress_message": "", "progress_at": None, "cancel_requested_at": None}


# init=False: TaskResult's own __init__, and each of these fields a class
# attribute until a row sets it. A job that reports nothing, as most do,
# costs nothing more than a TaskResult (the worker makes two per job).
@dataclass(frozen=True, kw_only=True, init=False, repr=False)
class JobResult(TaskResult):  # type: ignore[misc]  # frozen at run time; the stubs say otherwise
    """Django's TaskResult, with what a running job reports: ``progress``
    (0.0 to 1.0, None until the task reports one), ``progress_message``,
    ``progress_at`` (when the worker last wrote them, by the database's
    clock) and ``cancel_requested_at`` (None unless a cancel was asked for);
    and ``metadata``, what the job was enqueued with.
    ``refresh()`` reads them again with the rest. Made by ``to_result()``
    from a row, not by hand: it takes TaskResult's arguments only."""

    progress: float | None = None
    progress_message: str = ""
    progress_at: datetime | None = None
    cancel_requested_at: datetime | None = None

    def __repr__(self) -> str:
        # The dataclass's repr spells out the task, its arguments, errors and
        # return value: a screenful for one job in the shell.
        progress = "" if self.progress is None else f" progress={self.progress:.0%}"
        return f"<JobResult {self.id} {self.task.module_path} {self.status}{progress}>"

    @property
    def metadata(self) -> dict[str, Any]:
        """The job's metadata as enqueued (``{}`` for none), with the
        enqueuing trace context under ``"trace_context"`` if it had one."""
        return dict(vars(self).get("_metadata", {}))

    def refresh(self) -> None:
        """Read the job's row again: its status, times, errors and return
        value, and its progress and cancel request, in one query."""
        self._take(self.task.get_backend().get_result(self.id))

    async def arefresh(self) -> None:
        """``refresh()`` for async code."""
        self._take(await self.task.get_backend().aget_result(self.id))

    def _take(self, fresh: TaskResult) -> None:
        # Not super().refresh(): it would read the row once for Django's
        # fields and once more for ours.
        for name in (f.name for f in dataclasses.fields(self)):
            if name not in IDENTITY:
                object.__setattr__(self, name, getattr(fresh, name, getattr(self, name)))


class ResultView:
    """One backend's job rows as ``TaskResult`` objects: held by the backend
    (its ``results``), not inherited, so that the backend class is the
    django.tasks contract and this the reading of rows."""

    def __init__(self, backend: DatabaseBackend) -> None:
        self.backend = backend
        # What result ids start with (routing.result_prefix); None until the first one.
        self._result_prefix: str | None = None

    def get_result(self, result_id: str) -> JobResult:
        """The job of ``result_id``, whichever backend made it: a bare id
        is a job on the home database, ``"alias:17"`` one on the backend
        ``alias``'s (routing.py)."""
        alias, pk = split_result_id(result_id)
        if alias is None and self.result_id(""):  # a prefix: this backend is not on the home database
            return home_backend().get_result(result_id)
        if alias is not None and alias != self.backend.alias:
            return self._backend_of(alias, result_id).get_result(result_id)
        Job = self.backend.job_model()
        try:
            job = Job.objects.using(self.backend.database).get(pk=int(pk))
        except (ValueError, TypeError, Job.DoesNotExist):
            raise TaskResultDoesNotExist(f"No job with id {result_id!r}.") from None
        try:
            task = load_task(job.task_path)
        except LookupError as exc:
            raise TaskResultNotLoadable(
                f"The job {job.pk} exists, but get_result() cannot return it without its task: {exc}"
            ) from exc
        return self.to_result(job, task)

    def _backend_of(self, alias: str, result_id: str) -> DatabaseBackend:
        try:
            backend = task_backends[alias]
        except InvalidTaskBackend:
            backend = None
        if not is_queue_backend(backend):
            raise TaskResultDoesNotExist(
                f"No job with id {result_id!r}: its id names the task backend {alias!r}, which is not "
                "a django_dbqueue backend in settings.TASKS."
            )
        return backend

    def result_id(self, pk: object) -> str:
        """The result id of this backend's job ``pk``."""
        if self._result_prefix is None:
            self._result_prefix = result_prefix(self.backend.alias, self.backend.database)
        return f"{self._result_prefix}{pk}"

    def to_result(self, job: Any, task: Task | None = None) -> JobResult:
        """The django.tasks view of a Job row. Its ``task`` is ``task`` (by
        default the one the row's task path names) as the row has it: with
        the row's priority, queue and run_after, as ``.using()`` made them."""
        if task is None:
            task = load_task(job.task_path)
        errors: list[TaskError] = [
            StoredTaskError(
                exception_class_path=str(error.get("exception_class_path", "")),
                traceback=str(error.get("traceback", "")),
                allowed_modules=self.backend.config.ALLOWED_TASK_MODULES,
            )
            for error in as_list(job.errors)
            if isinstance(error, dict)
        ]
        status = job.status
        if status == Status.WAITING:
            status = TaskResultStatus.READY  # for its parents (workflows): Django's API has no such state
        if status == Status.CANCELLED:
            # Django's API has no cancelled state; FAILED is finished, so a
            # caller waiting for is_finished stops waiting.
            status = TaskResultStatus.FAILED
            if not errors or errors[-1].exception_class_path not in (JOB_CANCELLED, JOB_EXPIRED):
                # A job cancelled while running, or expired, has the worker's entry already.
                errors.append(
                    StoredTaskError(exception_class_path=JOB_CANCELLED, traceback=CANCELLED_TRACEBACK)
                )
        result = new_result(
            task=self._task_as_stored(task, job),
            id=self.result_id(job.pk),
            status=status,
            enqueued_at=job.enqueued_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            last_attempted_at=job.last_attempted_at,
            args=job.args if isinstance(job.args, list) else [],
            kwargs=job.kwargs if isinstance(job.kwargs, dict) else {},
            backend=self.backend.alias,
            errors=errors,
            worker_ids=[str(worker) for worker in as_list(job.worker_ids)],
            _return_value=job.return_value,
        )
        # vars(): a worker's claim may leave these columns unread (deferred),
        # and reading one then would cost a query per job.
        row = vars(job)
        metadata = row.get("metadata")
        if metadata and isinstance(metadata, dict):
            object.__setattr__(result, "_metadata", metadata)
        # Every progress write stamps progress_at: most rows have neither, and
        # the worker makes two results per job, so look at the rest only then.
        if row.get("progress_at") is not None or row.get("cancel_requested_at") is not None:
            for name, default in RUNNING_FIELDS.items():
                value = row.get(name, default)
                if value != default and value is not None:
                    object.__setattr__(result, name, value)
        return result

    def succeeded(self, running: JobResult, job: Any) -> JobResult:
        """The result ``task_finished`` carries for ``job``'s success, made
        from ``running``, the one its ``task_started`` carried: the same but
        for its status, finish and return value (a batched success writes
        exactly the start, attempt and worker the running view showed).
        Equal to ``to_result(job, task)`` after the success is recorded
        (tests/test_outcomes.py), without TaskResult's ``__init__``, which
        normalises the arguments again: the worker makes one per job."""
        done = object.__new__(type(running))
        for name in _TASK_RESULT_FIELDS:
            object.__setattr__(done, name, getattr(running, name))
        vars(done).update(vars(running))
        object.__setattr__(done, "status", TaskResultStatus.SUCCESSFUL)
        object.__setattr__(done, "finished_at", job.finished_at)
        object.__setattr__(done, "_return_value", job.return_value)
        return done

    def _task_as_stored(self, task: Task, job: Any) -> Task:
        # enqueue() stores run_after=enqueued_at for a task without one.
        run_after = None if job.run_after == job.enqueued_at else job.run_after
        if (
            task.priority == job.priority
            and task.queue_name == job.queue_name
            and task.run_after == run_after
            and task.backend == self.backend.alias
        ):
            return task  # enqueue()'s own task: nothing to rebuild
        stored = {
            "priority": job.priority,
            "queue_name": job.queue_name,
            "run_after": run_after,
            "backend": self.backend.alias,
        }
        # Not task.using(): that validates the task again, and a row may hold
        # what validation refuses (a queue since removed from QUEUES, a row
        # written by hand), yet its result must still be readable. Enqueueing
        # this task again validates it then.
        rebuilt = object.__new__(type(task))
        for name in (f.name for f in dataclasses.fields(task)):
            object.__setattr__(rebuilt, name, stored.get(name, getattr(task, name)))
        return rebuilt


def new_result(*, args: list[Any], kwargs: dict[str, Any], **fields: Any) -> JobResult:
    """A JobResult with TaskResult's fields set as its ``__init__`` and
    ``__post_init__`` would set them (tests/test_results.py compares the
    two), without their keyword binding and generic normalisation: the
    worker makes one per job it starts, an enqueue one per job. ``args`` and
    ``kwargs`` are copied as ``normalize_json`` would (``_json_copy``)."""
    result = object.__new__(JobResult)
    put = object.__setattr__  # frozen
    put(result, "args", _json_copy(args))
    put(result, "kwargs", _json_copy(kwargs))
    for name, value in fields.items():
        put(result, name, value)
    return result


def _json_copy(value: Any) -> Any:
    """What Django's ``normalize_json`` makes of a value decoded from JSON
    (a copy of its lists and dicts, the rest as it is), at a fraction of
    its cost; anything JSON does not decode to goes through it."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list:
        return [item if type(item) in _SCALARS else _json_copy(item) for item in value]
    if kind is dict and all(type(key) is str for key in value):
        return {key: item if type(item) in _SCALARS else _json_copy(item) for key, item in value.items()}
    return normalize_json(value)


# What json.loads() decodes a JSON scalar to.
_SCALARS = frozenset({str, int, float, bool, type(None)})
