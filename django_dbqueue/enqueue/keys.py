"""The per-call keys a task may carry: its unique key and its concurrency
key, each a string or a function of the call's arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..tasks_api import InvalidTask, Task

KEY_MAX = 255  # Job.unique_key's and Job.concurrency_key's max_length
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


def call_keys(task: Task, args: Any, kwargs: Any) -> dict[str, Any]:
    """The unique and concurrency keys of one call, as Job fields."""
    keys: dict[str, Any] = {}
    for name in ("unique_key", "concurrency_key"):
        declared = getattr(task, name, None)
        if declared is not None:
            keys[name] = resolve_key(name, declared, args, kwargs)
    if keys.get("concurrency_key") is not None:
        keys["concurrency_limit"] = task.concurrency_limit
    return keys
