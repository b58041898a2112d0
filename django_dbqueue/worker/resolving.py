"""Which task a claimed job's row names, and whether its stored call fits
the task's signature: checked before the job runs, so that a row no call
can satisfy (written by hand, or enqueued before the task changed) fails
as not runnable instead of being retried. Both answers are cached, as they
showed in the worker's profile when made per job."""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING

from ..enqueue.loading import load_task
from ..exceptions import JobNotRunnable
from ..jsonfield import Undecodable
from ..tasks_api import Task

if TYPE_CHECKING:
    from ..models import Job


@functools.lru_cache(maxsize=1024)
def _load(task_path: str) -> tuple[Task, inspect.Signature]:
    # Importing and inspecting once per task, not once per job: both showed
    # in the worker's profile. A path that fails to load raises, which
    # lru_cache does not remember, so a fixed deploy is picked up.
    task = load_task(task_path)
    return task, inspect.signature(task.func)


def resolve(job: Job) -> Task:
    """The task a job row names, with its arguments checked against it."""
    try:
        task, signature = _load(job.task_path)
    except LookupError as exc:
        raise JobNotRunnable(str(exc)) from exc
    except Exception as exc:  # the module itself is broken
        raise JobNotRunnable(f"Importing the task path {job.task_path!r} failed: {exc!r}.") from exc
    for stored in (job.args, job.kwargs):
        if isinstance(stored, Undecodable):
            raise JobNotRunnable(
                f"The job's {stored.reason}, so it cannot run. Enqueue the call again with "
                "values Python can read; the row keeps the stored text (see the job's admin page)."
            )
    if not isinstance(job.args, list) or not isinstance(job.kwargs, dict):
        raise JobNotRunnable(
            f"The job's args must be a JSON list and its kwargs a JSON object, "
            f"not {type(job.args).__name__} and {type(job.kwargs).__name__}."
        )
    misfit = _misfit(job.task_path, len(job.args), tuple(job.kwargs))
    if misfit is not None:
        raise JobNotRunnable(f"The job's arguments do not fit {job.task_path}{signature}: {misfit}.")
    return task


@functools.lru_cache(maxsize=4096)
def _misfit(task_path: str, positional: int, names: tuple[str, ...]) -> str | None:
    """Why a call of the task with that many positional arguments and
    those keyword names does not bind to its signature; None if it does.
    Binding looks at neither value, so it is checked once per shape, not
    once per job (it showed in the worker's profile)."""
    task, signature = _load(task_path)
    try:
        signature.bind(*[None] * (positional + task.takes_context), **dict.fromkeys(names))
    except TypeError as exc:
        return str(exc)
    return None
