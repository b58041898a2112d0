"""A dependant's own states, as its parents move them:

    WAITING ─> READY       (its last parent finished; with pass_result, their results first)
    WAITING ─> CANCELLED   (a parent failed or was cancelled, and its policy is "cancel")
    WAITING ─> WAITING     (a parent FAILED and its policy is "hold": unresolved until it succeeds)
    WAITING ─> FAILED      (its parents' results cannot be passed on: fan_in.py)
    READY   ─> WAITING     (requeued while a parent it waits for is unfinished again)

Each is a conditional UPDATE from one state, so repeating a step changes
nothing. The cascade (cascade.py) calls these in the transaction that
finished a parent; a requeue (actions.py) calls ``wait_again``.
"""

from __future__ import annotations

from typing import Any

from .. import tables
from ..clock import DbNow
from ..status import FINISHED, Status
from .completion import last_unfinished
from .fan_in import not_passed, parent_results, passed_arguments


def release(using: str, child: int, parent_failed: bool) -> bool:
    """See to the WAITING job ``child`` after one of its parents finished
    (``parent_failed``: failed or was cancelled), in the caller's
    transaction, whose Dependency rows for that parent are resolved
    already. True if the child has finished (cancelled or failed): its own
    dependants and batch follow, as for any finished job."""
    from ..workflows.models import Dependency

    waiting = _jobs(using).filter(pk=child, status=Status.WAITING)
    row = waiting.values_list("on_parent_failure", "pass_result").first()
    if row is None:
        return False  # cancelled, or released by a person's action, already
    policy, pass_result = row
    if parent_failed and policy == "cancel":
        return bool(waiting.update(status=Status.CANCELLED, finished_at=DbNow(), unique_key=None))
    if parent_failed and policy == "hold" and held(using, child):
        return False
    unresolved = Dependency.objects.using(using).filter(child_id=child, resolved=False)
    if not last_unfinished(using, unresolved):
        return False
    if not pass_result:
        waiting.update(status=Status.READY)
        return False
    # Read only now: a fan-in's own arguments are not needed until its last parent.
    row = waiting.annotate(now=DbNow()).values_list("args", "kwargs", "errors", "now")[0]
    args, kwargs, errors, now = row
    combined, why = passed_arguments(using, parent_results(using, child), args, kwargs)
    if why is None:
        waiting.update(status=Status.READY, args=combined)
        return False
    return bool(waiting.update(**not_passed(errors, why, now)))


def held(using: str, child: int) -> bool:
    """Whether a parent of ``child`` (a job or a batch) ended FAILED: its
    dependency is unresolved again, so that the parent's requeue and
    success release the child, as a "hold" policy asks."""
    from ..workflows.models import Batch, BatchStatus, Dependency

    deps = Dependency.objects.using(using).filter(child_id=child)
    failed_jobs = _jobs(using).filter(pk__in=deps.values("parent_id"), status=Status.FAILED)
    failed_batches = Batch.objects.using(using).filter(
        pk__in=deps.values("parent_batch_id"), status=BatchStatus.FAILED
    )
    holding = deps.filter(parent_id__in=list(failed_jobs.values_list("pk", flat=True)))
    holding_batches = deps.filter(parent_batch_id__in=list(failed_batches.values_list("pk", flat=True)))
    return bool(holding.update(resolved=False) + holding_batches.update(resolved=False))


def wait_again(using: str, ids: list[int]) -> None:
    """Requeued jobs ``ids`` (now READY) that have a parent not finished
    (requeued with them, say) wait for it again, in the caller's transaction:
    a retried child must not run before its retried parent."""
    from ..workflows.models import Batch, BatchStatus, Dependency

    jobs = _jobs(using)
    deps = Dependency.objects.using(using).filter(child_id__in=ids)
    parents = {pk for pk in deps.values_list("parent_id", flat=True) if pk is not None}
    open_jobs = list(
        jobs.filter(pk__in=parents)
        .exclude(status__in=FINISHED)
        .select_for_update()
        .values_list("pk", flat=True)
    )
    batch_ids = {pk for pk in deps.values_list("parent_batch_id", flat=True) if pk is not None}
    open_batches = Batch.objects.using(using).filter(pk__in=batch_ids, status=BatchStatus.OPEN)
    deps.filter(parent_id__in=open_jobs).update(resolved=False)
    deps.filter(parent_batch_id__in=list(open_batches.values_list("pk", flat=True))).update(resolved=False)
    waiting = deps.filter(resolved=False).values_list("child_id", flat=True)
    jobs.filter(pk__in=list(waiting), status=Status.READY).update(status=Status.WAITING)


def _jobs(using: str) -> Any:
    Job = tables.job()

    return Job._base_manager.using(using)
