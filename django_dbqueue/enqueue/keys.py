"""The per-call keys a task may carry: its unique key, its concurrency key
and its fairness key, each a string or a function of the call's arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..tasks_api import InvalidTask, Task

KEY_MAX = 255  # the max_length of Job.unique_key, concurrency_key and fairness_key
# The key options a task may set, each written to the Job column of its name.
KEY_NAMES = ("unique_key", "concurrency_key", "fairness_key")
ON_DUPLICATE = ("return", "raise")


def check_key_option(name: str, value: Any) -> None:
    """A task's ``unique_key``, ``concurrency_key`` or ``fairness_key`` as declared."""
    if value is None or callable(value):
        return
    if not isinstance(value, str) or not value or len(value) > KEY_MAX:
        raise InvalidTask(
            f"{name} must be a non-empty string of at most {KEY_MAX} characters, or a function "
            f"of the call's arguments that returns one, not {value!r}."
        )


def check_key_options(task: Any) -> None:
    for name in KEY_NAMES:
        check_key_option(name, getattr(task, name, None))
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
    if key is not None and getattr(task, "fairness_key", None) is not None:
        # A limited key's jobs are claimed one per key per claim (claim_limited),
        # which leaves nothing for a fair share to divide.
        raise InvalidTask(
            "A task cannot have both a concurrency_key and a fairness_key: a limited key's jobs are "
            "claimed one at a time per key, outside the fair share. Use one of the two."
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


def call_keys(task: Task, args: Any, kwargs: Any) -> dict[str, Any]:
    """The unique, concurrency and fairness keys of one call, as Job fields."""
    keys: dict[str, Any] = {}
    for name in KEY_NAMES:
        declared = getattr(task, name, None)
        if declared is not None:
            keys[name] = resolve_key(name, declared, args, kwargs)
    if keys.get("concurrency_key") is not None:
        keys["concurrency_limit"] = task.concurrency_limit
    return keys
