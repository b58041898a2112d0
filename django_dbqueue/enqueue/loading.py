"""Loading a task from the path a job row stores, and the allow-list that
keeps a row written by hand from importing or running anything else."""

from __future__ import annotations

from importlib import import_module

from ..options import QueueOptions
from ..tasks_api import Task, task_backends
from .validation import task_module_allowed


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
        found = import_module(module)
    except ImportError as exc:
        raise LookupError(f"The task path {task_path!r} does not import: {exc}.") from exc
    name = task_path.rpartition(".")[2]
    try:
        task = getattr(found, name)
    except AttributeError:
        raise TaskMissing(
            f'The task path {task_path!r} does not import: Module "{module}" does not define a "{name}" '
            "attribute/class."
        ) from None
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


class TaskMissing(LookupError):
    """The task path's module imports but does not define the name: on a
    worker, its code may predate the task (a rolling deploy)."""


def _default_allowed() -> tuple[str, ...]:
    """Every database backend's ALLOWED_TASK_MODULES: a worker resolving a
    row does not know which backend enqueued it."""
    allowed: list[str] = []
    for backend in task_backends.all():
        # A DatabaseBackend, known by its parsed OPTIONS: importing the
        # backend module here would make a circle (backend -> results -> here).
        config = getattr(backend, "config", None)
        if isinstance(config, QueueOptions):
            allowed.extend(config.ALLOWED_TASK_MODULES)
    return tuple(allowed)
