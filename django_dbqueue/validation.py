"""What a task may ask of the queue, checked at enqueue with messages that
name the problem; and which modules workers may import tasks from."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from django.apps import apps
from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY
from django.tasks.exceptions import InvalidTask

QUEUE_NAME_MAX = 64  # Job.queue_name's max_length


def validate_fields(task: Any, queues: set[str]) -> None:
    """The checks Django's own validate_task leaves out or words vaguely."""
    name = task.queue_name
    if not isinstance(name, str) or not name or len(name) > QUEUE_NAME_MAX:
        raise InvalidTask(
            f"The queue name {name!r} is not valid: it must be a non-empty string of at most "
            f"{QUEUE_NAME_MAX} characters."
        )
    if queues and name not in queues:
        raise InvalidTask(
            f"The queue {name!r} is not one of this backend's QUEUES ({', '.join(sorted(queues))})."
        )
    priority = task.priority
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidTask(
            f"priority must be a whole number between {TASK_MIN_PRIORITY} and {TASK_MAX_PRIORITY}, "
            f"not {priority!r}."
        )
    if task.run_after is not None and not isinstance(task.run_after, datetime):
        raise InvalidTask(f"run_after must be a datetime, not {task.run_after!r}.")
    max_attempts = getattr(task, "max_attempts", None)
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
    ):
        raise InvalidTask(f"max_attempts must be a whole number of at least 1, not {max_attempts!r}.")
    timeout = getattr(task, "timeout", None)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf
    ):
        raise InvalidTask(f"timeout must be a positive number of seconds or None, not {timeout!r}.")


def task_module_allowed(module: str, allowed: tuple[str, ...]) -> bool:
    """Whether ``module`` is an installed app's (or inside one), or is or is
    inside one of the ``allowed`` modules."""
    if not module:
        return False
    if any(module == prefix or module.startswith(prefix + ".") for prefix in allowed):
        return True
    return apps.get_containing_app_config(module) is not None
