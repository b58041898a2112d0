"""Running one claimed job and recording what happened, in one UPDATE."""

from __future__ import annotations

import functools
import inspect
import logging
import traceback
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.tasks import Task, TaskContext
from django.tasks.signals import task_finished, task_started
from django.utils import timezone

from .backend import load_task
from .dbfaults import persist
from .exceptions import InvalidTaskArguments, JobNotRunnable
from .payload import check_return_value
from .retry import retry_delay, retry_on_conflict
from .timeouts import time_limit

if TYPE_CHECKING:
    from .backend import DatabaseBackend
    from .models import Job
    from .outcomes import OutcomeBuffer

logger = logging.getLogger("django_dbqueue")


@dataclass
class Outcome:
    status: str  # SUCCESSFUL, READY (to be retried) or FAILED
    recorded: bool  # False if the job's lease had been lost to recovery


def run_job(backend: DatabaseBackend, job: Job, owner: str, outcomes: OutcomeBuffer | None = None) -> Outcome:
    """Run a claimed job and record its outcome. Never raises for anything the
    job does; only ``BaseException``s that must stop the worker pass through.

    With ``outcomes``, a success of a batch job is left there to be written
    with its batch-mates (see outcomes.py); any other outcome first flushes
    it, so outcomes reach the database and the signals in the order they
    happened."""
    started = timezone.now()
    try:
        task = _resolve(job)
    except JobNotRunnable as exc:
        _flush(outcomes)
        return _record_failure(backend, job, owner, started, exc, final=True)
    result = backend.to_result(_started_view(job, started), task)
    task_started.send(type(backend), task_result=result)
    try:
        with time_limit(getattr(task, "timeout", None) or backend.config.JOB_TIMEOUT):
            if task.takes_context:
                value = task.call(TaskContext(task_result=result), *job.args, **job.kwargs)
            else:
                value = task.call(*job.args, **job.kwargs)
    except Exception as exc:
        _flush(outcomes)
        outcome = _record_failure(backend, job, owner, started, exc, final=False)
        _send_finished(backend, job, task)
        return outcome
    try:
        value = check_return_value(value)
    except InvalidTaskArguments as exc:
        # Running it again would return the same kind of value.
        _flush(outcomes)
        outcome = _record_failure(backend, job, owner, started, exc, final=True)
    else:
        if outcomes is not None and not job.suspect:
            outcomes.add(job, task, started, value)
            # Written, and task_finished sent, at the buffer's next flush.
            return Outcome(status="SUCCESSFUL", recorded=True)
        outcome = _record(backend, job, owner, started, "SUCCESSFUL", return_value=value)
    _send_finished(backend, job, task)
    return outcome


def _flush(outcomes: OutcomeBuffer | None) -> None:
    if outcomes is not None:
        outcomes.flush()


@functools.lru_cache(maxsize=1024)
def _load(task_path: str) -> tuple[Task, inspect.Signature]:
    # Importing and inspecting once per task, not once per job: both showed
    # in the worker's profile. A path that fails to load raises, which
    # lru_cache does not remember, so a fixed deploy is picked up.
    task = load_task(task_path)
    return task, inspect.signature(task.func)


def _resolve(job: Job) -> Task:
    try:
        task, signature = _load(job.task_path)
    except LookupError as exc:
        raise JobNotRunnable(str(exc)) from exc
    except Exception as exc:  # the module itself is broken
        raise JobNotRunnable(f"Importing the task path {job.task_path!r} failed: {exc!r}.") from exc
    if not isinstance(job.args, list) or not isinstance(job.kwargs, dict):
        raise JobNotRunnable(
            f"The job's args must be a JSON list and its kwargs a JSON object, "
            f"not {type(job.args).__name__} and {type(job.kwargs).__name__}."
        )
    params = [object()] if task.takes_context else []
    try:
        signature.bind(*params, *job.args, **job.kwargs)
    except TypeError as exc:
        raise JobNotRunnable(f"The job's arguments no longer fit {job.task_path}{signature}: {exc}.") from exc
    return task


def _started_view(job: Job, started: datetime) -> Job:
    """A copy of the job as it looks while running, for the signals."""
    # A shallow copy through __dict__: copy.copy() of a model goes through
    # pickling hooks and showed in the worker's profile.
    view = type(job).__new__(type(job))
    view.__dict__.update(job.__dict__)
    view.started_at = job.started_at or started
    view.last_attempted_at = started
    if not job.suspect:  # a suspect's attempt was counted in its claim
        view.worker_ids = [*job.worker_ids, job.owner]
        view.attempts = job.attempts + 1
    return view


def _record_failure(
    backend: DatabaseBackend, job: Job, owner: str, started: datetime, exc: Exception, final: bool
) -> Outcome:
    error = {
        "exception_class_path": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "traceback": "".join(traceback.format_exception(exc)),
        "at": timezone.now().isoformat(),
        "worker": owner,
    }
    attempts = _attempts_after(job)
    if final or attempts >= job.max_attempts:
        return _record(backend, job, owner, started, "FAILED", error=error)
    config = backend.config
    delay = retry_delay(attempts, config.RETRY_BACKOFF_BASE, config.RETRY_BACKOFF_MAX)
    return _record(backend, job, owner, started, "READY", error=error, run_after=timezone.now() + delay)


def _attempts_after(job: Job) -> int:
    return job.attempts if job.suspect else job.attempts + 1


def _record(
    backend: DatabaseBackend,
    job: Job,
    owner: str,
    started: datetime,
    status: str,
    *,
    error: dict[str, str] | None = None,
    run_after: datetime | None = None,
    return_value: Any = None,
) -> Outcome:
    from .models import Job

    now = timezone.now()
    changes: dict[str, Any] = {
        "status": status,
        "attempts": _attempts_after(job),
        "started_at": job.started_at or started,
        "last_attempted_at": started,
        "worker_ids": job.worker_ids if job.suspect else [*job.worker_ids, owner],
        "owner": None,
        "lease_expires_at": None,
        "suspect": False,
        "return_value": return_value,
        "finished_at": now if status != "READY" else None,
    }
    if error is not None:
        changes["errors"] = [*job.errors, error]
    if run_after is not None:
        changes["run_after"] = run_after
    rows = Job.objects.using(backend.database).filter(pk=job.pk, owner=owner, status="RUNNING")
    # persist(): through a database outage, keep the outcome and retry it.
    updated = persist(
        lambda: retry_on_conflict(lambda: rows.update(**changes), backend.database), backend.database
    )
    for name, value in changes.items():
        setattr(job, name, value)
    if not updated:
        logger.warning(
            "Job %s finished (%s) after its lease was lost, so the outcome was not "
            "recorded; the job will run again (delivery is at least once).",
            job.pk,
            status,
        )
    return Outcome(status=status, recorded=bool(updated))


def _send_finished(backend: DatabaseBackend, job: Job, task: Task) -> None:
    task_finished.send(type(backend), task_result=backend.to_result(job, task))
