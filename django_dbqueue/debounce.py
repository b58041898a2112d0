"""Debounce: calls of a task with the same unique key within a quiet period
make one run, with the latest call's arguments (``@task(unique_key=...,
debounce=...)``; docs/scheduling.md, "Debounce").

Each enqueue makes the key's pending job due ``seconds`` after it, so a
burst of calls runs once, when it has been quiet that long; ``max_wait``
caps how long the first call of a burst waits in all, so a stream that
never goes quiet still runs that often. A pending job is a READY one: not
yet claimed by a worker. A job that has started is left to finish with the
arguments it has; the key passes to a new job for the calls that come
while it runs (enqueue/unique.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .retries import as_delay
from .shown import shown
from .tasks_api import InvalidTask


@dataclass(frozen=True)
class Debounce:
    """``seconds``: the quiet period, from 0.001 s to 366 days; each call
    makes the job due that long after it. ``max_wait``: at most this long
    from the first call of a burst to the job's start (default ``None``: no
    cap). ``replace``: the pending job takes each later call's arguments
    (the default); ``False`` keeps the first call's, and only moves its
    start."""

    seconds: float
    max_wait: float | None = None
    replace: bool = True

    def __post_init__(self) -> None:
        seconds = _seconds("debounce", self.seconds)
        object.__setattr__(self, "seconds", seconds)
        if self.max_wait is not None:
            max_wait = _seconds("Debounce's max_wait", self.max_wait)
            if max_wait < seconds:
                raise InvalidTask(
                    f"Debounce's max_wait ({max_wait:g} s) must be at least its quiet period "
                    f"({seconds:g} s): a cap shorter than one period would make it the period."
                )
            object.__setattr__(self, "max_wait", max_wait)
        if not isinstance(self.replace, bool):
            raise InvalidTask(f"Debounce's replace must be True or False, not {shown(self.replace)}.")

    def __str__(self) -> str:
        cap = f", {self.max_wait:g} s at most from a burst's first call" if self.max_wait is not None else ""
        kept = "the latest call's arguments" if self.replace else "the first call's arguments"
        return f"runs {self.seconds:g} s after the last call of a burst{cap}, with {kept}"


def as_debounce(value: Any) -> Debounce | None:
    """A task's ``debounce`` option: a :class:`Debounce`, or its quiet period
    alone (seconds or a ``timedelta``); None for none."""
    if value is None or isinstance(value, Debounce):
        return value
    return Debounce(value)


def check_debounced(options: dict[str, Any]) -> None:
    """What ``debounce`` needs of the task's other options: a unique key,
    which says which calls are one, and holders returned, not raised."""
    if options.get("debounce") is None:
        return
    if options.get("unique_key") is None:
        raise InvalidTask(
            "debounce needs a unique_key: calls with the same key are the ones made into one run."
        )
    if options.get("on_duplicate", "return") != "return":
        raise InvalidTask(
            'debounce returns the pending job where on_duplicate="raise" would raise: give one of them.'
        )


def _seconds(name: str, value: Any) -> float:
    seconds = as_delay(value)
    if seconds is None or seconds < 0.001:
        raise InvalidTask(
            f"{name} must be a number of seconds (or a timedelta) from 0.001 to 31,622,400 (366 days), "
            f"not {shown(value)}."
        )
    return seconds


def due(debounce: Debounce, now: Any, first_enqueued: Any) -> Any:
    """When the key's job is due after a call at ``now``, its burst begun at
    ``first_enqueued`` (times in Django's form)."""
    at = now + timedelta(seconds=debounce.seconds)
    if debounce.max_wait is not None:
        at = min(at, first_enqueued + timedelta(seconds=debounce.max_wait))
    return at
