"""``django_dbqueue.task``: Django's ``@task`` plus this queue's per-task
options (``max_attempts``, ``timeout``, ``atomic``), the same on every supported Django.

Django 6.1 and the django-tasks backport (0.11+) pass extra ``@task``
keyword arguments to the backend's ``task_class``; Django 6.0 refuses them;
and Django's own ImmediateBackend and DummyBackend build a plain ``Task``,
which refuses them too, so ``@task(max_attempts=5)`` would stop a task
module from importing under the test settings most projects use. This
decorator builds a ``DatabaseTask`` wherever the backend's task class allows
it, so the options are kept (and checked) under any of those backends."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..tasks_api import DEFAULT_TASK_BACKEND_ALIAS, InvalidTaskBackend, Task, task_backends

DEFAULT_PRIORITY = 0
DEFAULT_QUEUE = "default"


def task(
    function: Callable[..., Any] | None = None,
    *,
    priority: int = DEFAULT_PRIORITY,
    queue_name: str = DEFAULT_QUEUE,
    backend: str = DEFAULT_TASK_BACKEND_ALIAS,
    takes_context: bool = False,
    **options: Any,
) -> Any:
    """Make a task of a module-level function, as Django's ``@task`` does,
    with this queue's own options; use it bare (``@task``) or called
    (``@task(queue_name="email", max_attempts=5)``).

    ``priority``, ``queue_name``, ``backend`` and ``takes_context`` are
    Django's. The queue's own ``options`` are the fields of
    :class:`~django_dbqueue.backend.DatabaseTask`: ``max_attempts``,
    ``timeout``, ``atomic``, ``unique_key``, ``on_duplicate``,
    ``concurrency_key``, ``concurrency_limit``, ``metadata``, ``retry_on``,
    ``fail_on``, ``backoff`` and the rest. They are checked here,
    so a wrong one fails at import with a clear message, and kept under
    Django's ImmediateBackend and DummyBackend too, so a task module imports
    under test settings. ``run_after`` is refused: it is a time, so set it
    per call with ``.using(run_after=...)``."""

    def wrapper(func: Callable[..., Any]) -> Task:
        task_class = _task_class(backend, options)
        return task_class(
            func=func,
            priority=priority,
            queue_name=queue_name,
            backend=backend,
            takes_context=takes_context,
            run_after=None,
            **options,
        )

    from ..debounce import as_debounce
    from ..retries import normalized

    options = normalized(options)
    if "debounce" in options:
        options["debounce"] = as_debounce(options["debounce"])
    if "tags" in options and not callable(options["tags"]):
        from .tags import as_tags

        options["tags"] = as_tags(options["tags"])
    if "run_after" in options:
        raise TypeError(
            "run_after cannot be set in @task: it is a time, not a default. "
            "Use task.using(run_after=...).enqueue(...) for one call."
        )
    if function is not None:
        return wrapper(function)
    return wrapper


def no_default_message(aliases: list[str]) -> str:
    """What a TASKS without a "default" alias does to a task that names no backend."""
    return (
        f"TASKS has no 'default' alias (it has {', '.join(map(repr, aliases))}): a task that names no "
        "backend uses 'default', so defining one raises InvalidTaskBackend."
    )


def _task_class(backend: str, options: dict[str, Any]) -> type[Task]:
    from .tasks import DatabaseTask
    from .validation import validate_options

    try:
        task_class: type[Task] = task_backends[backend].task_class
    except InvalidTaskBackend:
        if backend != DEFAULT_TASK_BACKEND_ALIAS or not task_backends.settings:
            raise
        # Django says only "The connection 'default' doesn't exist."
        raise InvalidTaskBackend(
            f"{no_default_message(list(task_backends.settings))} Give the task backend=..., or name "
            "one of TASKS 'default' (manage.py check: django_dbqueue.W007)."
        ) from None
    if issubclass(task_class, DatabaseTask):
        chosen: type[Task] = task_class
    elif issubclass(DatabaseTask, task_class):
        # Django's ImmediateBackend or DummyBackend (or any backend whose
        # task class is Django's Task): a DatabaseTask is a Task they run as
        # their own, and it keeps the options for tests to read.
        chosen = DatabaseTask
    else:
        return task_class  # another backend's own class takes what it takes
    known = {f.name for f in dataclasses.fields(chosen)} - {f.name for f in dataclasses.fields(Task)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(
            f"@task got {', '.join(map(repr, unknown))}, which django_dbqueue does not know; "
            f"its per-task options are {', '.join(sorted(known))}."
        )
    validate_options(options)
    return chosen
