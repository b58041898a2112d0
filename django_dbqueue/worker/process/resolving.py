"""Which task a claimed job's row names, and whether its stored call fits
the task's signature: checked before the job runs, so that a row no call
can satisfy (written by hand, or enqueued before the task changed) fails
as not runnable instead of being retried. Both answers are cached, as they
showed in the worker's profile when made per job."""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING

from ...enqueue.loading import TaskMissing, load_task
from ...exceptions import JobNotRunnable, TaskNotDeployed
from ...jsonfield import Undecodable
from ...limits import COLUMN_MAX
from ...shown import shown
from ...tasks_api import TASK_MAX_PRIORITY as MAX_PRIORITY
from ...tasks_api import TASK_MIN_PRIORITY as MIN_PRIORITY
from ...tasks_api import Task

if TYPE_CHECKING:
    from ...models import Job


@functools.lru_cache(maxsize=1024)
def _load(task_path: str) -> tuple[Task, inspect.Signature]:
    # Importing and inspecting once per task, not once per job: both showed
    # in the worker's profile. A path that fails to load raises, which
    # lru_cache does not remember, so a fixed deploy is picked up.
    task = load_task(task_path)
    return task, inspect.signature(task.func)


def resolve(job: Job) -> Task:
    """The task a job row names, with its arguments checked against it."""
    problem = _row_problem(job)
    if problem is not None:
        raise JobNotRunnable(problem)
    try:
        task, signature = _load(job.task_path)
    except TaskMissing:  # not a bad row: this worker's code may be older (undeployed.py)
        module, _, name = job.task_path.rpartition(".")
        raise TaskNotDeployed(
            f"This worker's code does not define the task {job.task_path!r}: its module {module} "
            f"imports, but has no {name!r}."
        ) from None
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


def _row_problem(job: Job) -> str | None:
    """What makes a row written by SQL unfit to run, beside its task and
    arguments: a value outside the SQL contract (docs/sql-contract.md), or a
    time Python could not read. Such a row fails alone, naming the column."""
    priority, most = job.priority, job.max_attempts
    # One test for a fit row (every job passes here: half a microsecond), the
    # sentences only for an unfit one. type() is int: a bool is no priority.
    if (
        type(priority) is int
        and MIN_PRIORITY <= priority <= MAX_PRIORITY
        and type(most) is int
        and most >= 1
        and job.attempts < COLUMN_MAX
        and job.run_after is not None
        and job.enqueued_at is not None
    ):
        return None
    for name in ("run_after", "enqueued_at"):
        if getattr(job, name) is None:  # never NULL: the driver's reading of a zero date
            return (
                f"The job's {name} holds a time Python cannot read (such as MySQL's zero date "
                "0000-00-00, which its driver reads as none), so it cannot run."
            )
    if type(priority) is not int or not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        return (
            f"The job's priority is {shown(priority)}, outside {MIN_PRIORITY} to {MAX_PRIORITY}, the range "
            "of the SQL contract, so it is not run."
        )
    if type(most) is not int or most < 1:
        return f"The job's max_attempts is {shown(most)}; a job may run at least once: write 1 or more."
    return (
        f"The job's attempts is {shown(job.attempts)}, as many as its column holds, so no run of it "
        "can be counted."
    )


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
