"""Retry policies: which exceptions of a task retry its job, which fail it
at once, and how long a retry waits (``@task(retry_on=..., fail_on=...,
backoff=...)``; docs/tasks.md, "Retries and failures").

A policy is code, not data: it is read from the task the worker runs, never
stored in the row, so a deploy changes it for the jobs already queued too.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .db import doubled
from .limits import MAX_SECONDS
from .shown import shown
from .tasks_api import InvalidTask

EXCEPTION_OPTIONS = ("retry_on", "fail_on")


@dataclass(frozen=True)
class Exponential:
    """A backoff that doubles: the n-th retry waits a random time between
    half and all of ``base * 2 ** (n - 1)`` seconds, at most ``cap``. The
    backend's default backoff is this with its ``RETRY_BACKOFF_BASE`` and
    ``RETRY_BACKOFF_MAX``; give one to a task for another shape, or
    ``jitter=False`` for the exact doubling."""

    base: float = 2.0
    cap: float = 3600.0
    jitter: bool = True

    def __post_init__(self) -> None:
        for name in ("base", "cap"):
            check_seconds(f"Exponential's {name}", getattr(self, name))
        if not isinstance(self.jitter, bool):
            raise InvalidTask(f"Exponential's jitter must be True or False, not {shown(self.jitter)}.")

    def __call__(self, attempt: int) -> float:
        ceiling = doubled(self.base, attempt - 1, self.cap)
        return random.uniform(ceiling / 2, ceiling) if self.jitter else ceiling

    def __str__(self) -> str:
        jitter = ", a random time in its upper half" if self.jitter else ""
        return f"doubling from {self.base:g} s to at most {self.cap:g} s{jitter}"


def as_delay(value: Any) -> float | None:
    """``value`` as a delay in seconds (a number or a ``timedelta`` from 0
    to 366 days); None for anything else: NaN, infinite, negative, a bool,
    a string, None. A backoff's and a snooze's (worker/process/snoozing.py)."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or not 0 <= value <= MAX_SECONDS:
        return None
    return float(value)


def check_seconds(what: str, value: Any) -> None:
    if isinstance(value, timedelta) or as_delay(value) is None:
        raise InvalidTask(
            f"{what} must be a number of seconds from 0 to {MAX_SECONDS:,} (366 days), not {shown(value)}."
        )


def normalized(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with ``retry_on`` and ``fail_on`` as tuples of exception
    classes (one class may be given alone), each checked, and ``backoff``
    checked: a bad one raises InvalidTask when the task is defined."""
    changed = dict(options)
    for name in EXCEPTION_OPTIONS:
        if name not in changed:
            continue
        given = changed[name]
        classes = (given,) if isinstance(given, type) else given
        if not isinstance(classes, (tuple, list)) or not all(
            isinstance(kind, type) and issubclass(kind, BaseException) for kind in classes
        ):
            raise InvalidTask(
                f"{name} must be an exception class or a tuple of them (ConnectionError, say), "
                f"not {shown(given)}."
            )
        changed[name] = tuple(classes)
    backoff = changed.get("backoff")
    if backoff is not None and not callable(backoff):
        check_seconds("backoff", backoff)
    return changed


@dataclass(frozen=True)
class Verdict:
    """What a failed attempt with attempts left comes to: READY again after
    ``delay``, or FAILED now, saying why not retried."""

    delay: timedelta | None
    not_retried: str | None = None


def after_failure(task: Any, exc: BaseException, attempt: int, default: Callable[[int], float]) -> Verdict:
    """The policy of ``task`` for ``exc``, raised by its run number
    ``attempt`` (counted from 1), when attempts are left; ``default`` is the
    backend's backoff. A backoff that raises, or gives what is not a delay
    (NaN, negative, infinite, past 366 days, not a number), fails this job
    alone, saying so, instead of the worker."""
    name = type(exc).__qualname__
    fail_on = getattr(task, "fail_on", ())
    if fail_on and isinstance(exc, fail_on):
        return Verdict(None, f"{name} is in the task's fail_on")
    retry_on = getattr(task, "retry_on", ())
    if retry_on and not isinstance(exc, retry_on):
        return Verdict(None, f"{name} is not in the task's retry_on")
    backoff = getattr(task, "backoff", None)
    if backoff is None:
        return Verdict(timedelta(seconds=default(attempt)))
    try:
        seconds = backoff(attempt) if callable(backoff) else backoff
    except (Exception, SystemExit) as problem:
        return Verdict(None, f"the task's backoff raised {shown(problem)} for attempt {attempt}")
    delay = as_delay(seconds)
    if delay is None:
        return Verdict(
            None,
            f"the task's backoff gave {shown(seconds)} for attempt {attempt}, not a delay "
            f"(a number of seconds from 0 to {MAX_SECONDS:,})",
        )
    return Verdict(timedelta(seconds=delay))


def described(task: Any) -> str:
    """The task's policy in a line, for the job's page."""
    parts = []
    retry_on, fail_on = getattr(task, "retry_on", ()), getattr(task, "fail_on", ())
    names = lambda kinds: ", ".join(kind.__qualname__ for kind in kinds)  # noqa: E731
    parts.append(f"retries {names(retry_on)}" if retry_on else "retries every exception")
    if fail_on:
        parts.append(f"fails at once on {names(fail_on)}")
    backoff = getattr(task, "backoff", None)
    if backoff is None:
        parts.append("waits by the backend's backoff")
    elif isinstance(backoff, Exponential):
        parts.append(f"waits {backoff}")
    elif callable(backoff):
        parts.append(
            f"waits what {getattr(backoff, '__qualname__', type(backoff).__qualname__)}(attempt) says"
        )
    else:
        parts.append(f"waits {backoff:g} s")
    return "; ".join(parts)
