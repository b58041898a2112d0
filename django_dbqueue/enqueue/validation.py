"""What a task may ask of the queue, checked at enqueue with messages that
name the problem; and which modules workers may import tasks from."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.apps import apps
from django.utils.timezone import is_aware

from ..debounce import check_debounced
from ..exceptions import InvalidTaskArguments
from ..limits import COLUMN_MAX, EARLIEST, LATEST, MAX_SECONDS, MIN_SECONDS
from ..shown import shown
from ..tasks_api import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, InvalidTask
from .expiry import check_expires
from .sequences import check_sequence
from .windows import check_period

QUEUE_NAME_MAX = 64  # Job.queue_name's max_length


def validate_fields(task: Any, queues: set[str]) -> None:
    """The checks Django's own validate_task leaves out or words vaguely."""
    name = task.queue_name
    if not isinstance(name, str) or not name or len(name) > QUEUE_NAME_MAX:
        raise InvalidTask(
            f"The queue name {shown(name)} is not valid: it must be a non-empty string of at most "
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
            f"not {shown(priority)}."
        )
    if task.run_after is not None:
        check_run_after(task.run_after)
    validate_options({name: getattr(task, name, None) for name in ("max_attempts", "timeout", "metadata")})
    check_expires(getattr(task, "expires", None), per_call=True)
    check_period({name: getattr(task, name, None) for name in ("unique_period", "unique_key", "debounce")})
    check_sequence({name: getattr(task, name, None) for name in ("sequence_key", "unique_key")})
    atomic = getattr(task, "atomic", False)
    validate_options({"atomic": atomic})
    if atomic and iscoroutinefunction(task.func):
        raise InvalidTask(
            "atomic=True needs a plain function: an async task's database calls run outside "
            "the worker's transaction."
        )


def validate_options(options: Mapping[str, Any]) -> None:
    """The per-task options of ``@task`` (checked by django_dbqueue.task even
    when the backend is one of Django's test backends)."""
    max_attempts = options.get("max_attempts")
    if max_attempts is not None and (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, int)
        or not 1 <= max_attempts <= COLUMN_MAX
    ):
        raise InvalidTask(
            f"max_attempts must be a whole number from 1 to {COLUMN_MAX:,}, not {shown(max_attempts)}."
        )
    max_snoozes = options.get("max_snoozes")
    if max_snoozes is not None and (
        isinstance(max_snoozes, bool)
        or not isinstance(max_snoozes, int)
        or not 0 <= max_snoozes <= COLUMN_MAX
    ):
        raise InvalidTask(
            f"max_snoozes must be a whole number from 0 to {COLUMN_MAX:,}, not {shown(max_snoozes)}."
        )
    check_expires(options.get("expires"), per_call=False)
    check_debounced(dict(options))
    check_period(dict(options))
    check_sequence(dict(options))
    if options.get("metadata") is not None:
        from .metadata import check_metadata

        check_metadata(options["metadata"])
    atomic = options.get("atomic", False)
    if not isinstance(atomic, bool):
        raise InvalidTask(f"atomic must be True or False, not {shown(atomic)}.")
    timeout = options.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not MIN_SECONDS <= timeout <= MAX_SECONDS
    ):
        raise InvalidTask(
            f"timeout must be a number of seconds from {MIN_SECONDS:g} to {MAX_SECONDS:,} (366 days), "
            f"or None, not {shown(timeout)}."
        )


def check_run_after(moment: Any) -> None:
    """A run_after a datetime within EARLIEST and LATEST (in UTC if aware)."""
    if not isinstance(moment, datetime):
        raise InvalidTask(f"run_after must be a datetime, not {shown(moment)}.")
    try:
        utc = moment.astimezone(dt_timezone.utc).replace(tzinfo=None) if is_aware(moment) else moment
    except OverflowError:  # an offset that takes it past the year 1 or 9999
        utc = None
    if utc is None or not EARLIEST <= utc <= LATEST:
        raise InvalidTask(
            f"run_after must be between {EARLIEST.date()} and {LATEST.date()} (UTC), a day inside "
            f"the years every database holds, not {moment.isoformat()}."
        )


def task_module_allowed(module: str, allowed: tuple[str, ...]) -> bool:
    """Whether ``module`` is an installed app's (or inside one), or is or is
    inside one of the ``allowed`` modules."""
    if not module:
        return False
    if any(module == prefix or module.startswith(prefix + ".") for prefix in allowed):
        return True
    return apps.get_containing_app_config(module) is not None


def check_arguments(task: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidTaskArguments` unless ``args`` and ``kwargs`` bind
    to the task function's parameters, so that a call the function cannot
    take is refused at enqueue, not found by a worker later."""
    shape = _call_shape(task.func, task.takes_context)
    if shape.fits(args, kwargs):
        return
    try:
        shape.signature.bind(*args, **kwargs)
    except TypeError as exc:
        context = " (its first parameter, context, is passed by the worker)" if task.takes_context else ""
        raise InvalidTaskArguments(
            f"The arguments do not fit the task {task.module_path}{shape.signature}{context}: {exc}."
        ) from None


class CallShape:
    """A task function's parameters as a caller passes them. For the
    common shape, parameters that may each be passed by position or by
    name, :meth:`fits` answers what ``Signature.bind`` would, in a fraction
    of its time; for any other, it leaves the answer to ``bind``."""

    __slots__ = ("names", "position", "required", "signature")

    def __init__(self, signature: inspect.Signature) -> None:
        self.signature = signature
        parameters = list(signature.parameters.values())
        plain = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters)
        self.names = [p.name for p in parameters] if plain else None
        self.position = {name: at for at, name in enumerate(self.names or ())}
        self.required = [
            (at, p.name) for at, p in enumerate(parameters) if p.default is inspect.Parameter.empty
        ]

    def fits(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        """True if the call binds; False if it may not (``bind`` then tells)."""
        if self.names is None or len(args) > len(self.names):
            return False
        given = len(args)
        for name in kwargs:
            at = self.position.get(name)
            if at is None or at < given:  # unknown, or given by position already
                return False
        return all(name in kwargs for at, name in self.required if at >= given)


@functools.lru_cache(maxsize=1024)
def _call_shape(func: Callable[..., Any], takes_context: bool) -> CallShape:
    # inspect.signature() costs about four times the bind itself (8 µs
    # against 2, measured): once per task function, not once per call.
    signature = inspect.signature(func)
    parameters = list(signature.parameters.values())
    # What the caller passes: everything after the context; the return
    # annotation says nothing about arguments and only lengthens the message.
    return CallShape(
        signature.replace(
            parameters=parameters[1:] if takes_context else parameters,
            return_annotation=inspect.Signature.empty,
        )
    )
