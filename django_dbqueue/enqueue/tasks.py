"""The task class of the database backend: Django's ``Task`` with the
queue's own options (attempts, timeout, atomic, unique, concurrency, rate
and fairness keys, metadata)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..debounce import Debounce
from ..tasks_api import Task


@dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseTask(Task):
    """The task class of :class:`DatabaseBackend`: Django's ``Task`` with the
    queue's own options. Set them in ``@task(...)`` (see
    :func:`django_dbqueue.task`); the key options and ``metadata`` may also be set for
    one call with ``.using(...)``.

    ``max_attempts``
        Runs before the job ends FAILED; ``None`` means the backend's
        ``MAX_ATTEMPTS``.
    ``timeout``
        Seconds one run may take before it fails with ``JobTimeout``;
        ``None`` means the backend's ``JOB_TIMEOUT``.
    ``atomic``
        Run the body and record the job's success in one transaction on the
        queue's database, conditioned on the worker still holding the job:
        the body's writes through that database happen exactly once.
    ``unique_key``
        A string, or a function of the call's arguments returning one (or
        ``None`` for no key). While an unfinished job holds the key,
        enqueueing another returns that job, or raises
        :class:`~django_dbqueue.exceptions.JobAlreadyQueued` when
        ``on_duplicate="raise"``.
    ``tags``
        A string or a list of them (at most 16, each 1 to 64 characters
        without spaces), or a function of the call's arguments returning
        them: labels the admin finds the job by through an index
        (``tag:NAME``); ``.using(tags=...)`` replaces the task's own.
    ``unique_period``
        With a ``unique_key``: seconds or a ``timedelta`` (1 s to 366 days).
        The key holds for the window of that length its job is due in,
        even after the job finished, while the job's row is kept (see
        docs/scheduling.md, "Unique for a period").
    ``sequence_key``, ``on_sequence_failure``
        A string, or a function of the call's arguments returning one (or
        ``None`` for no sequence): jobs with the same key run one at a
        time, in the order they were enqueued; a FAILED one holds the rest
        (``"hold"``, the default) or not (``"continue"``). See
        docs/workflows.md, "Sequences".
    ``concurrency_key``, ``concurrency_limit``
        At most ``concurrency_limit`` jobs with the same key (a string or a
        function of the arguments) run at once, across every worker; the
        others wait without spending an attempt.
    ``metadata``
        A small JSON object (at most 8 KB) stored with each job, which the
        task reads as ``current_job().metadata``; ``.using(metadata=...)``
        replaces the task's own.
    ``fairness_key``
        A string, or a function of the call's arguments returning one (or
        ``None`` for no key), such as a tenant's id. When several keys have
        due jobs, claims take them in turns, in proportion to their
        ``OPTIONS["FAIRNESS_WEIGHTS"]`` (see docs/fairness.md). Not with a
        ``concurrency_key`` or a ``rate_limit``.
    ``rate_limit``, ``rate_key``
        At most N jobs claimed in any window of the period (``"100/m"``;
        also ``"N/s"``, ``"N/h"``, ``"N/d"``, ``"N/5m"``; a period of at
        most 366 days), across every
        worker, per ``rate_key`` (a string or a function of the arguments;
        default: the task as a whole). The others wait READY without
        spending an attempt. Not with a ``concurrency_key``.
    ``expires``
        The deadline for a run to start: seconds or a ``timedelta`` counted
        from each enqueue, or (for one call, with ``.using(...)``) a
        datetime. A job no run started by then ends CANCELLED, expired,
        without running (see docs/tasks.md, "Expiry").
    ``debounce``
        With a ``unique_key``: calls with the same key within a quiet period
        make one run (:class:`~django_dbqueue.debounce.Debounce`, or its
        seconds alone); each call makes the key's pending job due that long
        after it, with the call's arguments (see docs/scheduling.md, "Debounce").
    ``max_snoozes``
        Times a job may snooze (raise :class:`~django_dbqueue.exceptions.Snooze`)
        before it ends FAILED; ``None`` means the backend's ``MAX_SNOOZES``.
    ``retry_on``, ``fail_on``, ``backoff``
        The retry policy (see :mod:`django_dbqueue.retries`): the exception
        classes whose failures are retried (default: every exception), those
        that fail the job at once (they win over ``retry_on``), and how long
        a retry waits: seconds, a function of the failed attempt's number
        returning seconds, or :class:`~django_dbqueue.retries.Exponential`
        (default ``None``: the backend's ``RETRY_BACKOFF_BASE`` doubling).
    ``depends_on``, ``on_parent_failure``, ``pass_result``
        For one call, with ``.using(...)``: the jobs (TaskResults or ids)
        and batches this job waits for; ``"cancel"`` (the default) or
        ``"run"`` when one of them fails or is cancelled; and whether their
        return values come first in its arguments (see workflows).
    """

    max_attempts: int | None = None
    timeout: float | None = None
    atomic: bool = False
    unique_key: str | Callable[..., str] | None = None
    on_duplicate: str = "return"  # or "raise": JobAlreadyQueued
    unique_period: float | timedelta | None = None
    # Not hashed: a function of the call's arguments need not be hashable.
    tags: tuple[str, ...] | Callable[..., Any] = dataclasses.field(default=(), hash=False)
    sequence_key: str | Callable[..., str] | None = None
    on_sequence_failure: str = "hold"  # or "continue"
    concurrency_key: str | Callable[..., str] | None = None
    concurrency_limit: int | None = None
    # Not hashed: a Task is a frozen dataclass, and a dict has no hash.
    metadata: dict[str, Any] | None = dataclasses.field(default=None, hash=False)
    fairness_key: str | Callable[..., str] | None = None
    rate_limit: str | None = None
    rate_key: str | Callable[..., str] | None = None
    max_snoozes: int | None = None
    expires: float | timedelta | datetime | None = None
    debounce: Debounce | None = None
    retry_on: tuple[type[BaseException], ...] = ()
    fail_on: tuple[type[BaseException], ...] = ()
    # Not hashed: a callable object need not be hashable.
    backoff: float | Callable[[int], Any] | None = dataclasses.field(default=None, hash=False)
    # Workflows, for one call through .using(): the parents (jobs, their
    # ids, or batches) this job waits for, what their failure does to it
    # ("cancel", "run" or "hold"), and whether their return values are passed on.
    depends_on: tuple[Any, ...] = ()
    on_parent_failure: str = "cancel"
    pass_result: bool = False

    def using(self, **changes: Any) -> Task:
        # None keeps the task's own value (docs/tasks.md), as Django's using() does for its own.
        given = {name: changes.pop(name) for name in OWN_USING if name in changes}
        ours = {name: value for name, value in given.items() if value is not None}
        if "depends_on" in ours:
            from ..workflows.dependencies import parent_ids

            ours["depends_on"] = tuple(parent_ids(ours["depends_on"]))
        if "metadata" in ours:
            from .metadata import check_metadata

            ours["metadata"] = check_metadata(ours["metadata"])
        if "tags" in ours and not callable(ours["tags"]):
            from .tags import as_tags

            ours["tags"] = as_tags(ours["tags"])
        if "expires" in ours:
            from .expiry import check_expires

            check_expires(ours["expires"], per_call=True)
        if "on_parent_failure" in ours:
            from ..workflows.dependencies import check_policy

            check_policy(ours["on_parent_failure"])
        task = Task.using(self, **changes)
        return dataclasses.replace(task, **ours) if ours else task


OWN_USING = (
    "unique_key",
    "on_duplicate",
    "concurrency_key",
    "concurrency_limit",
    "fairness_key",
    "rate_limit",
    "rate_key",
    "depends_on",
    "on_parent_failure",
    "pass_result",
    "metadata",
    "expires",
    "sequence_key",
    "tags",
)
