"""Which write one built job takes, by what its task asks: a dependant
(workflows), a job of a sequence, a plain job (its plan's INSERT), a job
unique for a period, or a job with a unique key (which may meet the key's
holder, and with debounce change it). Each write is retried once more
after a deadlock, as any autocommitted enqueue is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction

from ..db import retry_on_conflict
from ..tasks_api import InvalidTask
from ..transitions.inserts import insert_job
from .sequences import insert_in_sequence
from .tags import insert_tags
from .unique import insert_or_holder
from .windows import insert_in_window

if TYPE_CHECKING:
    from ..backend import DatabaseBackend
    from ..tasks_api import Task
    from .plan import Plan


def check_combination(job: Any, task: Task) -> None:
    """What a job with parents cannot have yet: a sequence or a unique key."""
    if not getattr(task, "depends_on", ()):
        return
    if getattr(job, "sequence_key", None) is not None:
        raise InvalidTask(
            f"The task {task.module_path} has a sequence_key, whose jobs wait for the key's previous "
            "job; a job with depends_on cannot be in a sequence too."
        )
    if job.unique_key is not None:
        raise InvalidTask(
            f"The task {task.module_path} has a unique_key, which a job with depends_on "
            "cannot have yet; enqueue the dependant through a task without unique_key, "
            "and give its first parent the key instead."
        )


def write(backend: DatabaseBackend, job: Any, task: Task, plan: Plan | None) -> Any:
    """Write ``job``; returns it, or the job that holds its key instead. A
    job with tags is written with them in one transaction (enqueue/tags.py);
    a call that met a holder adds none to it."""
    tags = getattr(job, "tags", ())  # this call's (Plan.job)
    if not tags:
        return _write(backend, job, task, plan)
    with transaction.atomic(using=backend.database):
        holder = _write(backend, job, task, plan)
        if holder is job:
            insert_tags(backend.database, job.pk, tags)
    return holder


def _write(backend: DatabaseBackend, job: Any, task: Task, plan: Plan | None) -> Any:
    database = backend.database
    parents = getattr(task, "depends_on", ())
    sequence = getattr(job, "sequence_key", None)
    if parents:
        # Here, not at the top: the backend is imported while apps load
        # (tasks defined in a models module), before any model can be.
        from ..workflows.dependencies import insert_dependant

        retry_on_conflict(lambda: insert_dependant(job, list(parents), database), database)
        return job
    if sequence is not None:
        policy = getattr(task, "on_sequence_failure", "hold")
        retry_on_conflict(lambda: insert_in_sequence(job, sequence, policy, database), database)
        return job
    if job.unique_key is None:
        if plan is not None:
            retry_on_conflict(lambda: plan.insert(job), database)
        else:
            retry_on_conflict(lambda: insert_job(job, database), database)
        return job
    on_duplicate, result_id = getattr(task, "on_duplicate", "return"), backend.results.result_id
    period = getattr(task, "unique_period", None)
    if period is not None:
        # The key holds the window, not the job's row (enqueue/windows.py).
        key, job.unique_key = job.unique_key, None
        return retry_on_conflict(
            lambda: insert_in_window(job, key, period, database, on_duplicate, result_id), database
        )
    debounce = getattr(task, "debounce", None)
    return retry_on_conflict(
        lambda: insert_or_holder(job, database, on_duplicate, result_id, debounce), database
    )


def as_planned(job: Any, task: Task, plan: Plan | None) -> bool:
    """Whether the written job is READY as its plan made it (a dependant or
    a job of a sequence may be WAITING, or finished already)."""
    return (
        plan is not None
        and not getattr(task, "depends_on", ())
        and getattr(job, "sequence_key", None) is None
    )


def one_by_one(job: Any) -> bool:
    """Whether a job of a bulk enqueue is written alone: one with a unique
    key, a sequence key or tags (enqueue/bulk.py writes the others together)."""
    return (
        job.unique_key is not None
        or getattr(job, "sequence_key", None) is not None
        or bool(getattr(job, "tags", ()))
    )
