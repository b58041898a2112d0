"""The per-call keys a task may carry: its unique key, its concurrency key
and its rate and fairness keys, each a string or a function of the call's
arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..limits import COLUMN_MAX
from ..rates import QUEUE_PREFIX, TASK_PREFIX, parse_rate
from ..shown import shown
from ..tasks_api import InvalidTask, Task

KEY_MAX = 255  # the max_length of Job.unique_key and concurrency_key
# Rate and fairness keys are shorter: the claim index holds the concurrency,
# rate and fairness keys together, and MySQL/MariaDB allow 3072 bytes an index
# key (4 a character in utf8mb4; 191 is the longest that keeps them within it).
SHORT_KEY_MAX = 191
KEY_MAXES = {"rate_key": SHORT_KEY_MAX, "fairness_key": SHORT_KEY_MAX}
# The key options a task may set, each written to the Job column of its name.
KEY_NAMES = ("unique_key", "concurrency_key", "fairness_key")
# Options that give a job key columns of its own.
KEYED = (*KEY_NAMES, "rate_limit")
ON_DUPLICATE = ("return", "raise")


def check_key_option(name: str, value: Any) -> None:
    """A task's ``unique_key``, ``concurrency_key`` or ``fairness_key`` as declared."""
    if value is None or callable(value):
        return
    most = KEY_MAXES.get(name, KEY_MAX)
    if not isinstance(value, str) or not value or len(value) > most:
        raise InvalidTask(
            f"{name} must be a non-empty string of at most {most} characters, or a function "
            f"of the call's arguments that returns one, not {shown(value)}."
        )


def check_key_options(task: Any) -> None:
    for name in KEY_NAMES:
        check_key_option(name, getattr(task, name, None))
    on_duplicate = getattr(task, "on_duplicate", "return")
    if on_duplicate not in ON_DUPLICATE:
        raise InvalidTask(f"on_duplicate must be 'return' or 'raise', not {shown(on_duplicate)}.")
    key, limit = getattr(task, "concurrency_key", None), getattr(task, "concurrency_limit", None)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidTask(
            f"concurrency_limit must be a whole number of at least 1, not {shown(limit)}: a limit of 0 "
            "would keep the task's jobs waiting for ever."
        )
    if limit is not None and limit > COLUMN_MAX:
        raise InvalidTask(
            f"concurrency_limit must be at most {COLUMN_MAX:,} (what its column holds on every "
            f"database), not {shown(limit)}."
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
    path = getattr(task, "module_path", "")
    if rate_limit is not None and rate_key is None and len(TASK_PREFIX + path) > SHORT_KEY_MAX:
        raise InvalidTask(
            f"The task {path} is limited as a whole, under the rate key 'task:<its path>', which would "
            f"be longer than {SHORT_KEY_MAX} characters: give it a shorter rate_key."
        )
    if rate_limit is not None and getattr(task, "concurrency_key", None) is not None:
        raise InvalidTask(
            "A task cannot have both a concurrency_key and a rate_limit: its jobs are claimed by "
            "one limit or the other. Use a queue or a separate task for the second limit."
        )
    if rate_limit is not None and getattr(task, "fairness_key", None) is not None:
        raise InvalidTask(
            "A task cannot have both a rate_limit and a fairness_key: a rate key's jobs are claimed "
            "as its rate allows, outside the fair share. Use one of the two."
        )


def resolve_key(
    name: str, value: str | Callable[..., Any] | None, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> str | None:
    """The key for one call: the string, or what the function returns for
    the call's arguments, checked like a declared string."""
    if value is None or isinstance(value, str):
        return value
    key = value(*args, **kwargs)
    if key is None and name in ("fairness_key", "sequence_key"):
        return None  # this call's job is an ordinary one
    most = KEY_MAXES.get(name, KEY_MAX)
    if not isinstance(key, str) or not key or len(key) > most:
        raise InvalidTask(
            f"The {name} function returned {shown(key)}; it must return a non-empty string of at most "
            f"{most} characters."
        )
    return key


def is_keyed(task: Task, rate_limits: Mapping[str, str]) -> bool:
    """Whether the task's jobs get key columns: its own keys, or its queue's rate limit."""
    return any(getattr(task, name, None) is not None for name in KEYED) or (
        QUEUE_PREFIX + task.queue_name in rate_limits
    )


def call_keys(task: Task, args: Any, kwargs: Any, rate_limits: Mapping[str, str]) -> dict[str, Any]:
    """The unique, concurrency, fairness and rate keys of one call, as Job fields.
    A task's ``rate_limit`` without a ``rate_key`` limits the task as a
    whole (key ``task:<module path>``); a task without a ``rate_limit``
    (nor a concurrency key) on a queue that OPTIONS RATE_LIMITS limits
    takes the queue's key."""
    keys: dict[str, Any] = {}
    for name in KEY_NAMES:
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
