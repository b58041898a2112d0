"""A task with its arguments, as workflows take them: a batch's callbacks
and a chain's steps. ``call(task, *args, **kwargs)`` reads like the call it
stands for; a bare task (no arguments) and a ``(task, args)`` or
``(task, args, kwargs)`` tuple are taken too."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..clock import DbNow
from ..tasks_api import Task


class Call(NamedTuple):
    task: Task
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}


def call(task: Task, /, *args: Any, **kwargs: Any) -> Call:
    """``task`` with the arguments it will be called with: ``call(notify, "done", to=user_id)``."""
    return as_call(Call(task, args, kwargs))


def as_call(value: Any, what: str = "a workflow step") -> Call:
    """``value`` (a Call, a Task, or a tuple of a task and its arguments) as a Call."""
    if isinstance(value, Task):
        return Call(value)
    if isinstance(value, tuple) and 1 <= len(value) <= 3 and isinstance(value[0], Task):
        task = value[0]
        args = value[1] if len(value) > 1 else ()
        kwargs = value[2] if len(value) > 2 else {}
        if isinstance(args, (list, tuple)) and isinstance(kwargs, dict):
            return Call(task, tuple(args), dict(kwargs))
    raise TypeError(
        f"{what} must be a task, call(task, *args, **kwargs), or a (task, args, kwargs) tuple, not {value!r}."
    )


def callback_spec(value: Any, what: str) -> dict[str, Any] | None:
    """A batch callback as stored in its JSON column: the task's path and
    options, and its arguments checked and encoded as an enqueue would."""
    if value is None:
        return None
    task, args, kwargs = as_call(value, what)
    backend = task.get_backend()
    if not hasattr(backend, "build_job"):
        raise TypeError(f"{what}: the task {task.module_path} must use a django_dbqueue DatabaseBackend.")
    backend.check_enqueue(task)
    if "batch_id" in kwargs:
        raise TypeError(f"{what}: batch_id is passed by the batch itself; leave it out of the arguments.")
    job = backend.build_job(task, args, kwargs, backend.now(), keys=False)
    return {
        "task": task.module_path,
        "args": job.args,
        "kwargs": job.kwargs,
        "queue_name": job.queue_name,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
    }


def insert_callbacks(using: str, batch_id: int, specs: list[dict[str, Any]]) -> list[int]:
    """Insert one READY job per callback, with ``batch_id`` among its keyword
    arguments, in the caller's transaction; returns their ids."""
    from ..models import Job

    ids = []
    for spec in specs:
        job = Job(
            task_path=spec["task"],
            args=list(spec.get("args") or []),
            kwargs={**(spec.get("kwargs") or {}), "batch_id": batch_id},
            queue_name=spec.get("queue_name", "default"),
            priority=spec.get("priority", 0),
            max_attempts=spec.get("max_attempts", 3),
            run_after=DbNow(),
            enqueued_at=DbNow(),
        )
        job.save(using=using, force_insert=True)
        ids.append(job.pk)
    return ids


def passed_results(task: Any) -> list[None]:
    """Stand-ins for the results a ``pass_result`` job gets first, one per
    parent job, for checking its arguments at enqueue."""
    if not getattr(task, "pass_result", False):
        return []
    return [None for kind, *_ in getattr(task, "depends_on", ()) if kind == "job"]
