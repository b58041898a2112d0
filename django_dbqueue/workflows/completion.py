"""What a finished job sets off, decided INSIDE the transaction that
records it (or cancels it, or fails it in lease recovery): its batch's
completion and callbacks, its dependants' release or cancellation, and so
on down the workflow. Whatever crashes, that transaction commits all of it
or none of it, so each callback is inserted and each dependant released
exactly once.

The last finisher, without a hot row. A finishing member does not update
its batch: it asks whether any unfinished member is left.

1. ``FOR UPDATE SKIP LOCKED`` of one unfinished member: found, so this is
   not the last (that member's own finisher asks again later).
2. None found: the unfinished members, if any, are being written by other
   transactions right now. Lock the batch row, then read the unfinished
   members with a blocking locking read, which waits for those writers and
   reads what they committed. Two last finishers that wait for each other
   deadlock; the database rolls one back and the worker's write is retried
   whole (db.retry_on_conflict): by then the survivor has committed.
3. None unfinished: ``UPDATE batch ... WHERE status = 'OPEN'``; the one
   transaction whose UPDATE changes the row inserts the callbacks.

A child's parents are checked the same way on Dependency rows. SQLite has
one writer at a time, so plain reads are the latest there. Cascades are a
work list, not recursion: a 1,000-step chain is not 1,000 stack frames.

Every status change here is a conditional queryset UPDATE from one state
(WAITING → READY or CANCELLED; batch OPEN → finished), so repeating a step
changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connections
from django.db.models import Count

from ..clock import DbNow
from ..status import FINISHED, Status
from .models import Batch, BatchStatus, Dependency

UNFINISHED = (Status.READY, Status.RUNNING, Status.WAITING)
FAILURES = (Status.FAILED, Status.CANCELLED)


def jobs_finished(using: str, ids: Iterable[int]) -> None:
    """Follow up the jobs ``ids`` that may have just finished, in the
    caller's transaction. Ids of jobs not finished are ignored."""
    Cascade(using).run(list(ids))


def members_finished(using: str, batch_ids: Iterable[int]) -> None:
    """Members of ``batch_ids`` have just finished (none with dependants):
    complete any batch they were the last of, in the caller's transaction."""
    cascade = Cascade(using)
    for batch_id in batch_ids:
        cascade.check_batch(batch_id)
    cascade.run([])


def batch_finished(using: str, batch_id: int, failed: bool) -> None:
    """Release or cancel the dependants of a batch that has just finished
    (or been cancelled), in the caller's transaction."""
    cascade = Cascade(using)
    cascade.resolve(Dependency.objects.filter(parent_batch_id=batch_id), failed)
    cascade.run([])


def last_unfinished(using: str, rows: Any) -> bool:
    """Whether no row of ``rows`` (the unfinished ones of some group) is
    left, waiting for whoever is writing one right now (the module's steps 1-2)."""
    if connections[using].vendor == "sqlite":
        return not rows.exists()
    if list(rows.select_for_update(skip_locked=True).values_list("pk", flat=True)[:1]):
        return False
    return not list(rows.select_for_update().values_list("pk", flat=True))


class Cascade:
    def __init__(self, using: str) -> None:
        self.using = using
        self.jobs = _jobs(using)
        self.finished: list[int] = []

    def run(self, ids: list[int]) -> None:
        self.finished.extend(ids)
        while self.finished:
            chunk, self.finished = self.finished[:500], self.finished[500:]
            rows = self.jobs.filter(pk__in=chunk, status__in=FINISHED)
            parents: dict[int, bool] = {}
            batches: set[int] = set()
            # has_dependants as of now: set under the parent's row lock when a
            # dependant is added, so what this transaction reads after its
            # own UPDATE of the row is final.
            found = rows.values_list("pk", "status", "batch_id", "has_dependants")
            for pk, status, batch_id, has_dependants in found:
                if has_dependants:
                    parents[pk] = status in FAILURES
                if batch_id is not None:
                    batches.add(batch_id)
            for failed in (False, True):
                ids = [pk for pk, bad in parents.items() if bad is failed]
                if ids:
                    self.resolve(Dependency.objects.filter(parent_id__in=ids), failed)
            for batch_id in sorted(batches):
                self.check_batch(batch_id)

    def resolve(self, deps: Any, failed: bool) -> None:
        """Mark these parents' dependencies resolved, then see to each child."""
        deps = deps.using(self.using).filter(resolved=False)
        found = list(deps.select_for_update().order_by("pk").values_list("pk", "child_id"))
        if not found:
            return
        Dependency.objects.using(self.using).filter(pk__in=[pk for pk, _ in found]).update(resolved=True)
        for child in sorted({child for _, child in found}):
            self.child(child, failed)

    def child(self, child: int, parent_failed: bool) -> None:
        waiting = self.jobs.filter(pk=child, status=Status.WAITING)
        row = waiting.values_list("on_parent_failure", "pass_result", "args").first()
        if row is None:
            return  # cancelled, or released by a person's action, already
        policy, pass_result, args = row
        if parent_failed and policy != "run":
            if waiting.update(status=Status.CANCELLED, finished_at=DbNow(), unique_key=None):
                self.finished.append(child)
            return
        unresolved = Dependency.objects.using(self.using).filter(child_id=child, resolved=False)
        if not last_unfinished(self.using, unresolved):
            return
        changes: dict[str, Any] = {"status": Status.READY}
        if pass_result:
            changes["args"] = [*parent_results(self.using, child), *(args if isinstance(args, list) else [])]
        waiting.update(**changes)

    def check_batch(self, batch_id: int) -> None:
        unfinished = self.jobs.filter(batch_id=batch_id, status__in=UNFINISHED)
        if connections[self.using].vendor != "sqlite" and self.unlocked_member(batch_id):
            return  # the common case: not the last member
        batches = Batch.objects.using(self.using)
        if not batches.filter(pk=batch_id, status=BatchStatus.OPEN, sealed=True).select_for_update().exists():
            return
        if not last_unfinished(self.using, unfinished):
            return
        self.complete(batch_id)

    def unlocked_member(self, batch_id: int) -> bool:
        """Step 1: whether an unfinished member no one is writing is left.
        One status at a time, newest first: the claim takes the oldest READY
        members, so the newest is found at the end of its index range
        instead of past the entries the claims have just moved out of it
        (measured: 1.1-1.9 ms instead of 1.7-9.4 ms on a 20,000-job batch)."""
        for status in UNFINISHED:
            members = self.jobs.filter(batch_id=batch_id, status=status).order_by("-pk")
            if members.select_for_update(skip_locked=True).values_list("pk", flat=True)[:1]:
                return True
        return False

    def complete(self, batch_id: int) -> None:
        counts = dict(
            self.jobs.filter(batch_id=batch_id).order_by().values_list("status").annotate(Count("pk"))
        )
        failed = any(counts.get(status) for status in FAILURES)
        status = BatchStatus.FAILED if failed else BatchStatus.SUCCEEDED
        batches = Batch.objects.using(self.using).filter(pk=batch_id, status=BatchStatus.OPEN)
        if not batches.update(status=status, finished_at=DbNow()):
            return  # completed by someone else (cannot happen under the lock; cheap to say)
        batch = Batch.objects.using(self.using).get(pk=batch_id)
        specs = [batch.on_failure if failed else batch.on_success, batch.on_finish]
        from .calls import insert_callbacks

        ids = insert_callbacks(self.using, batch_id, [spec for spec in specs if spec])
        if ids:
            Batch.objects.using(self.using).filter(pk=batch_id).update(callback_job_ids=ids)
        self.resolve(Dependency.objects.filter(parent_batch_id=batch_id), failed)


def parent_results(using: str, child: int) -> list[Any]:
    """The return values of ``child``'s parent jobs, in the order they were
    given (a batch parent gives none)."""
    parents = Dependency.objects.using(using).filter(child_id=child, parent_id__isnull=False)
    order = list(parents.order_by("pk").values_list("parent_id", flat=True))
    values = dict(_jobs(using).filter(pk__in=order).values_list("pk", "return_value"))
    return [values.get(pk) for pk in order]


def _jobs(using: str) -> Any:
    from ..models import Job

    return Job._base_manager.using(using)
