"""Dependencies from code: ``task.using(depends_on=[...]).enqueue(...)``
makes a job that waits (status WAITING, never claimed, no attempt spent)
until every parent has finished; ``chain()`` is the common case.

A parent is a job (its TaskResult, or its id) or a batch (its handle from
``batch()``/``get_batch()``). What a parent's failure or cancellation does
is the child's ``on_parent_failure``: ``"cancel"`` it (the default),
``"run"`` it anyway, or ``"hold"`` it: a FAILED parent keeps it WAITING
until the parent is requeued and succeeds (a cancelled parent lets it run).
With ``pass_result=True`` the parents' return values are put before the
child's own arguments when it is released.

The dependant is written in one transaction that first locks its parent
rows: a parent finishing at that moment either committed before (it is
seen finished, and its dependency written resolved) or waits for this
transaction and then finds the dependency (``has_dependants`` is set on
the parent's row here, which the outcome's UPDATE is conditioned on).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from ..routing import home_database, split_result_id, stored_id
from ..status import FINISHED, Status
from ..tasks_api import InvalidTaskBackend, TaskResult, task_backends
from ..transitions.completion import FAILURES
from ..transitions.fan_in import not_passed, passed_arguments
from .calls import Call, as_call
from .models import Batch, BatchStatus, Dependency

POLICIES = ("cancel", "run", "hold")


def parent_ids(depends_on: Any) -> list[tuple[str, int, str]]:
    """``depends_on`` as ``[("job" | "batch", id, database), ...]``, in
    order. A job's database is its backend's; an id is read as a result id
    is: ``"17"`` on the home database, ``"reports:17"`` on the backend
    ``reports``'s (routing.py)."""
    if depends_on is None:
        return []
    values = [depends_on] if not isinstance(depends_on, (list, tuple, set, frozenset)) else list(depends_on)
    parents: list[tuple[str, int, str]] = []
    for value in values:
        if isinstance(value, TaskResult):
            pk = split_result_id(value.id)[1]
            parents.append(("job", int(pk), _database_of(value.backend, value)))
        elif hasattr(value, "counts") and hasattr(value, "seal"):  # a BatchHandle
            parents.append(("batch", int(value.id), value.database))
        elif isinstance(value, (int, str)) and not isinstance(value, bool) and _is_id(value):
            alias, pk = split_result_id(value)
            database = home_database() if alias is None else _database_of(alias, value)
            parents.append(("job", int(pk), database))
        else:
            raise TypeError(
                f"depends_on takes jobs (their TaskResult or id) and batches (from batch() or "
                f"get_batch()); {value!r} is neither."
            )
    return parents


def _is_id(value: int | str) -> bool:
    return str(split_result_id(value)[1]).isdigit()


def _database_of(alias: str, parent: Any) -> str:
    """The database of the task backend ``alias``, which made ``parent``."""
    from ..routing import is_queue_backend

    try:
        backend = task_backends[alias]
    except InvalidTaskBackend:
        raise TypeError(
            f"depends_on names {parent!r}, a job of the task backend {alias!r}, which settings.TASKS "
            "does not configure."
        ) from None
    if not is_queue_backend(backend):
        raise TypeError(
            f"depends_on takes jobs of django_dbqueue backends; {parent!r} is a job of the task "
            f"backend {alias!r}, a {type(backend).__name__}."
        )
    return backend.database


def check_same_database(job: Any, parents: list[tuple[str, int, str]], using: str) -> None:
    """Refuse parents on another database than the dependant's ``using``:
    each server numbers its own jobs, so the dependant's server would look
    a parent up by its number and could find another job."""
    for kind, pk, database in parents:
        if database != using:
            raise ValueError(
                f"depends_on names the {kind} #{pk} of the database {database!r}, but the job of "
                f"{job.task_path} goes to the database {using!r}: a job's parents must be on its own "
                "database server. Enqueue it through a task backend whose DATABASE is "
                f"{database!r}, or give the parent a backend on {using!r}."
            )


def check_policy(value: Any) -> None:
    if value not in POLICIES:
        raise ValueError(f"on_parent_failure must be 'cancel', 'run' or 'hold', not {value!r}.")


def insert_dependant(job: Any, parents: list[tuple[str, int, str]], using: str) -> None:
    """Insert ``job`` WAITING for ``parents``, or READY (or CANCELLED, by its
    policy) if they have all finished already; in one transaction. Parents
    on another database are refused (ValueError), before anything is written."""
    from ..models import Job
    from ..transitions.inserts import insert_job

    check_same_database(job, parents, using)
    jobs = Job._base_manager.using(using)
    job_ids = [pk for kind, pk, _ in parents if kind == "job"]
    batch_ids = [pk for kind, pk, _ in parents if kind == "batch"]
    with transaction.atomic(using=using):
        # An id past 64 bits names no row (and SQLite cannot bind it): reported missing below.
        rows = {pk: (status, value) for pk, status, value in _locked(jobs, _possible(job_ids))}
        batches = dict(
            Batch.objects.using(using)
            .filter(pk__in=_possible(batch_ids))
            .select_for_update()
            .order_by("pk")
            .values_list("pk", "status")
        )
        missing = [f"job #{pk}" for pk in job_ids if pk not in rows] + [
            f"batch #{pk}" for pk in batch_ids if pk not in batches
        ]
        if missing:
            raise LookupError(f"depends_on names {', '.join(missing)}, which does not exist in {using!r}.")
        open_jobs = [pk for pk in job_ids if rows[pk][0] not in FINISHED]
        open_batches = [pk for pk in batch_ids if batches[pk] == BatchStatus.OPEN]
        failed = any(rows[pk][0] in FAILURES for pk in job_ids) or any(
            batches[pk] in (BatchStatus.FAILED, BatchStatus.CANCELLED) for pk in batch_ids
        )
        # With "hold", a FAILED parent keeps the job waiting (resolved=False) until it succeeds.
        held = (
            [pk for pk in job_ids if rows[pk][0] == Status.FAILED] if job.on_parent_failure == "hold" else []
        )
        held_batches = [
            pk for pk in batch_ids if batches[pk] == BatchStatus.FAILED and job.on_parent_failure == "hold"
        ]
        if failed and job.on_parent_failure == "cancel":
            job.status, job.unique_key = Status.CANCELLED, None
            job.finished_at = job.enqueued_at
        elif open_jobs or open_batches or held or held_batches:
            job.status = Status.WAITING
        elif job.pass_result:
            pass_results(job, [(pk, rows[pk]) for pk in job_ids], using)
        insert_job(job, using)
        resolved = (
            set(job_ids) - set(open_jobs) - set(held),
            set(batch_ids) - set(open_batches) - set(held_batches),
        )
        Dependency.objects.using(using).bulk_create(
            Dependency(
                child_id=job.pk,
                parent_id=pk if kind == "job" else None,
                parent_batch_id=pk if kind == "batch" else None,
                resolved=pk in resolved[kind == "batch"],
            )
            for kind, pk, _ in parents
        )
        if open_jobs or held:
            jobs.filter(pk__in=open_jobs + held, has_dependants=False).update(has_dependants=True)


def pass_results(job: Any, parents: list[tuple[int, tuple[str, Any]]], using: str) -> None:
    """Put the results of ``parents`` (all finished: ``(id, (status,
    return value))``) before ``job``'s own arguments, or end it FAILED if
    they cannot be passed on, as its release would (transitions/fan_in.py)."""
    results = [(pk, value if status == Status.SUCCESSFUL else None) for pk, (status, value) in parents]
    combined, why = passed_arguments(using, results, job.args, job.kwargs)
    if why is None:
        job.args = combined
        return
    for name, value in not_passed(job.errors, why, job.enqueued_at).items():
        setattr(job, name, value)


def _possible(ids: list[int]) -> list[int]:
    return [pk for pk in ids if stored_id(pk) is not None]


def _locked(jobs: Any, ids: list[int]) -> Iterable[tuple[int, str, Any]]:
    rows = jobs.filter(pk__in=ids).select_for_update().order_by("pk")
    return rows.values_list("pk", "status", "return_value") if ids else []


def chain(
    *steps: Call | Any, pass_result: bool = False, on_parent_failure: str = "cancel"
) -> list[TaskResult]:
    """Enqueue ``steps`` (each ``call(task, *args, **kwargs)``) so that each
    runs after the one before it has finished; with ``pass_result`` each gets
    its parent's return value as its first argument. One transaction: all
    the steps are enqueued, or none. Returns their TaskResults, in order."""
    check_policy(on_parent_failure)
    calls = [as_call(step, "a chain's step") for step in steps]
    if not calls:
        raise ValueError("chain() needs at least one step.")
    database = getattr(calls[0].task.get_backend(), "database", "default")
    results: list[TaskResult] = []
    with transaction.atomic(using=database):
        for task, args, kwargs in calls:
            if results:
                task = task.using(
                    depends_on=[results[-1]], pass_result=pass_result, on_parent_failure=on_parent_failure
                )
            results.append(task.enqueue(*args, **kwargs))
    return results
