"""The tasks API, wherever this Django has it: ``django.tasks`` (Django 6.0
and later) or the ``django-tasks`` backport's ``django_tasks`` (Django 5.2).
Every module of django_dbqueue imports the tasks API from here, and from
nowhere else, so the two never mix in one process."""

from __future__ import annotations

import django

try:
    from django import tasks as _api
except ImportError:  # Django 5.2: the backport
    try:
        import django_tasks as _api  # type: ignore[no-redef]
    except ImportError:
        raise ImportError(
            f"django-dbqueue needs a tasks API: Django {django.get_version()} has no django.tasks "
            "(it came with Django 6.0), and the django-tasks backport is not installed. "
            'Install it with: pip install "django-dbqueue[backport]"'
        ) from None
    # The backport registers its system checks and the receiver that resets
    # task_backends on override_settings(TASKS=...) in its AppConfig.ready(),
    # which runs only if 'django_tasks' is in INSTALLED_APPS; Django 6 does
    # both when django.tasks is imported. Import them so that neither depends
    # on INSTALLED_APPS (importing twice registers once).
    from django_tasks import checks as _checks  # noqa: F401
    from django_tasks import signals as _signals  # noqa: F401

    BACKPORT = True
    from django_tasks import exceptions as _exceptions
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.backends.dummy import DummyBackend
    from django_tasks.backends.immediate import ImmediateBackend
    from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    # Django's names; the backport's releases up to 0.12 end them in "Error".
    InvalidTask = getattr(_exceptions, "InvalidTask", None) or _exceptions.InvalidTaskError
    InvalidTaskBackend = getattr(_exceptions, "InvalidTaskBackend", None) or (
        _exceptions.InvalidTaskBackendError
    )
    TaskResultDoesNotExist = _exceptions.TaskResultDoesNotExist
else:
    BACKPORT = False
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.backends.dummy import DummyBackend
    from django.tasks.backends.immediate import ImmediateBackend
    from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

API_MODULE: str = _api.__name__  # "django.tasks" or "django_tasks"
DEFAULT_TASK_BACKEND_ALIAS: str = _api.DEFAULT_TASK_BACKEND_ALIAS
TaskContext = _api.TaskContext
TaskResult = _api.TaskResult
TaskResultStatus = _api.TaskResultStatus
default_task_backend = _api.default_task_backend
task = _api.task
task_backends = _api.task_backends

__all__ = [
    "API_MODULE",
    "BACKPORT",
    "DEFAULT_TASK_BACKEND_ALIAS",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "DummyBackend",
    "ImmediateBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "default_task_backend",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
