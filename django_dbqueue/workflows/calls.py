"""A task with its arguments, as workflows take them: a batch's callbacks
and a chain's steps. ``call(task, *args, **kwargs)`` reads like the call it
stands for; a bare task (no arguments) and a ``(task, args)`` or
``(task, args, kwargs)`` tuple are taken too. A batch's callbacks are stored
as ``callback_spec()`` makes them, and inserted as jobs when the batch
completes (transitions/own_jobs.py)."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..tasks_api import Task
from ..transitions.own_jobs import CALLBACK_KEY

# CALLBACK_KEY: where a callback job's metadata names the callback it is;
# the callbacks' jobs are inserted by transitions/own_jobs.py, through the
# enqueue plan's INSERT, when their batch completes.
__all__ = ["CALLBACK_KEY", "Call", "as_call", "call", "callback_spec", "passed_results"]


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


def passed_results(task: Any) -> list[None]:
    """Stand-ins for the results a ``pass_result`` job gets first, one per
    parent job, for checking its arguments at enqueue."""
    if not getattr(task, "pass_result", False):
        return []
    return [None for kind, *_ in getattr(task, "depends_on", ()) if kind == "job"]
