"""The per-call keys a task may carry: its unique key, its concurrency key
and its rate key, each a string or a function of the call's arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..rates import QUEUE_PREFIX, TASK_PREFIX, parse_rate
from ..tasks_api import InvalidTask, Task

KEY_MAX = 255  # Job.unique_key's, Job.concurrency_key's and Job.rate_key's max_length
# Options that give a job key columns of its own.
KEYED = ("unique_key", "concurrency_key", "rate_limit")
ON_DUPLICATE = ("return", "raise")


def check_key_option(name: str, value: Any) -> None:
    """A task's ``unique_key`` or ``concurrency_key`` as declared."""
    if value is None or callable(value):
        return
    if not isinstance(value, str) or not value or len(value) > KEY_MAX:
        raise InvalidTask(
            f"{name} must be a non-empty string of at most {KEY_MAX} characters, or a function "
            f"of the call's arguments that returns one, not {value!r}."
        )


def check_key_options(task: Any) -> None:
    check_key_option("unique_key", getattr(task, "unique_key", None))
    check_key_option("concurrency_key", getattr(task, "concurrency_key", None))
    on_duplicate = getattr(task, "on_duplicate", "return")
    if on_duplicate not in ON_DUPLICATE:
        raise InvalidTask(f"on_duplicate must be 'return' or 'raise', not {on_duplicate!r}.")
    key, limit = getattr(task, "concurrency_key", None), getattr(task, "concurrency_limit", None)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidTask(
            f"concurrency_limit must be a whole number of at least 1, not {limit!r}: a limit of 0 "
            "would keep the task's jobs waiting for ever."
        )
    if (key is None) != (limit is None):
        raise InvalidTask("concurrency_key and concurrency_limit go together: give both or neither.")
    check_rate_options(task)


def check_rate_options(task: Any) -> None:
    rate_key, rate_limit = getattr(task, "rate_key", None), getattr(task, "rate_limit", None)
    check_key_option("rate_key", rate_key)
    if rate_limit is not None:
        try:
            parse_rate(rate_limit)
        except ValueError as exc:
            raise InvalidTask(str(exc)) from None
    elif rate_key is not None:
        raise InvalidTask("rate_key needs a rate_limit, such as rate_limit='100/m': give both.")
    if rate_limit is not None and getattr(task, "concurrency_key", None) is not None:
        raise InvalidTask(
            "A task cannot have both a concurrency_key and a rate_limit: its jobs are claimed by "
            "one limit or the other. Use a queue or a separate task for the second limit."
        )


def resolve_key(
    name: str, value: str | Callable[..., Any] | None, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> str | None:
    """The key for one call: the string, or what the function returns for
    the call's arguments, checked like a declared string."""
    if value is None or isinstance(value, str):
        return value
    key = value(*args, **kwargs)
    if not isinstance(key, str) or not key or len(key) > KEY_MAX:
        raise InvalidTask(
            f"The {name} function returned {key!r}; it must return a non-empty string of at most "
            f"{KEY_MAX} characters."
        )
    return key


def is_keyed(task: Task, rate_limits: Mapping[str, str]) -> bool:
    """Whether the task's jobs get key columns: its own keys, or its queue's rate limit."""
    return any(getattr(task, name, None) is not None for name in KEYED) or (
        QUEUE_PREFIX + task.queue_name in rate_limits
    )


def call_keys(task: Task, args: Any, kwargs: Any, rate_limits: Mapping[str, str]) -> dict[str, Any]:
    """The unique, concurrency and rate keys of one call, as Job fields.
    A task's ``rate_limit`` without a ``rate_key`` limits the task as a
    whole (key ``task:<module path>``); a task without a ``rate_limit``
    (nor a concurrency key) on a queue that OPTIONS RATE_LIMITS limits
    takes the queue's key."""
    keys: dict[str, Any] = {}
    for name in ("unique_key", "concurrency_key"):
        declared = getattr(task, name, None)
        if declared is not None:
            keys[name] = resolve_key(name, declared, args, kwargs)
    if keys.get("concurrency_key") is not None:
        keys["concurrency_limit"] = task.concurrency_limit
    rate_limit = getattr(task, "rate_limit", None)
    if rate_limit is not None:
        declared = getattr(task, "rate_key", None)
        keys["rate_key"] = resolve_key("rate_key", declared, args, kwargs) or TASK_PREFIX + task.module_path
        keys["rate_limit"] = rate_limit
    elif keys.get("concurrency_key") is None and (queue := QUEUE_PREFIX + task.queue_name) in rate_limits:
        # A job is claimed under one limit: a concurrency key wins over its queue's rate.
        keys["rate_key"], keys["rate_limit"] = queue, rate_limits[queue]
    return keys
