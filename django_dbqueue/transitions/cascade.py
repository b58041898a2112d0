"""What a finished job sets off, decided INSIDE the transaction that
records it (or cancels it, or fails it in lease recovery): its batch's
completion and callbacks (completion.py), its dependants' release or
cancellation (dependants.py), and so on down the workflow. Whatever
crashes, that transaction commits all of it or none of it, so each
callback is inserted and each dependant released exactly once.

Cascades are a work list, not recursion: a 1,000-step chain is not 1,000
stack frames. One that outgrows its budget in the transaction that set it
off hands what is left to an operation job inserted in that transaction
(own_jobs.py; workflows/big.py's FollowCascade carries it on).

Every status change it makes is a conditional queryset UPDATE from one
state (WAITING → READY or CANCELLED; batch OPEN → finished), so repeating
a step changes nothing. It was workflows/completion.py: the outcomes,
leases, cancels and claims of transitions/ set it off, and only
transitions/ writes a status, so it lives beside them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from .. import tables
from ..status import FINISHED
from .completion import FAILURES, complete_if_last
from .dependants import release
from .own_jobs import enqueue_operation, limits

# How long a cascade may run in the transaction that set it off, at most,
# before the rest is handed on to an operation job.
INLINE_SECONDS = 0.25


def jobs_finished(using: str, ids: Iterable[int], settled: Iterable[int] = ()) -> None:
    """Follow up the jobs ``ids`` that may have just finished, in the
    caller's transaction. Ids of jobs not finished are ignored; ``settled``:
    batches known to be finished already (a cancelled one), not checked."""
    cascade = Cascade(using, budget=inline_budget(using), settled=settled)
    cascade.run(list(ids))
    cascade.hand_on()


def members_finished(using: str, batch_ids: Iterable[int]) -> None:
    """Members of ``batch_ids`` have just finished (none with dependants):
    complete any batch they were the last of, in the caller's transaction."""
    cascade = Cascade(using, budget=inline_budget(using))
    for batch_id in batch_ids:
        cascade.check_batch(batch_id)
    cascade.run([])
    cascade.hand_on()


def batch_finished(using: str, batch_id: int) -> None:
    """Release or cancel the dependants of a batch that has just finished
    (or been cancelled), in the caller's transaction."""
    cascade = Cascade(using, budget=inline_budget(using))
    cascade.batches.append(batch_id)
    cascade.run([])
    cascade.hand_on()


def inline_budget(using: str) -> Budget:
    """What a cascade may do in the transaction that set it off (an outcome,
    a cancel): the rest is handed on to an operation job (operations/big.py)."""
    return Budget(limits(using).inline, INLINE_SECONDS)


class Budget:
    """Rows a cascade may still touch, and until when (a chain's step costs
    a few statements, a batch member's one row: rows alone would not bound
    the transaction's time)."""

    def __init__(self, rows: int, seconds: float) -> None:
        self.rows, self.deadline = rows, time.monotonic() + seconds

    def left(self) -> int:
        return 0 if time.monotonic() >= self.deadline else max(self.rows, 0)

    def spend(self, rows: int) -> None:
        self.rows -= rows


class Cascade:
    """A work list: finished jobs whose dependants and batches are to be
    seen to (``finished``), and finished batches whose dependants are
    (``batches``). With a ``budget``, it stops once the budget is spent;
    what is left is ``left()``, for an operation job to carry on (its
    steps are conditional UPDATEs, so seeing to a job twice changes nothing)."""

    def __init__(self, using: str, budget: Budget | None = None, settled: Iterable[int] = ()) -> None:
        self.using = using
        self.jobs = _jobs(using)
        self.finished: list[int] = []
        self.batches: list[int] = []
        self.budget = budget
        # Batches known to be finished (a cancelled one): not checked again.
        self.settled = set(settled)

    def spent(self) -> bool:
        return self.budget is not None and self.budget.left() <= 0

    def left(self) -> dict[str, list[int]]:
        """What is left to see to, as an operation's parameters."""
        return {"jobs": list(self.finished), "batches": list(self.batches)}

    def hand_on(self) -> None:
        """Insert an operation job for what is left, in the caller's transaction."""
        if self.finished or self.batches:
            enqueue_operation(self.using, "cascade", self.left(), len(self.finished) + len(self.batches))

    def run(self, ids: list[int]) -> None:
        self.finished.extend(ids)
        while (self.finished or self.batches) and not self.spent():
            if self.batches:
                self.follow_batch(self.batches.pop(0))
                continue
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
                if batch_id is not None and batch_id not in self.settled:
                    batches.add(batch_id)
            for failed in (False, True):
                ids = [pk for pk, bad in parents.items() if bad is failed]
                deps = _dependencies().filter(parent_id__in=ids)
                if ids and not self.resolve(deps, failed, ("parent_id", "pk")):
                    self.finished[:0] = ids  # not all their dependants seen to: again, later
            for batch_id in sorted(batches):
                self.check_batch(batch_id)

    def follow_batch(self, batch_id: int) -> None:
        """See to the dependants of the finished batch ``batch_id``."""
        from ..workflows.models import Batch, BatchStatus

        status = Batch.objects.using(self.using).filter(pk=batch_id).values_list("status", flat=True).first()
        if status is None or status == BatchStatus.OPEN:
            return  # reopened by a retry: its dependants wait for it again
        failed = status in (BatchStatus.FAILED, BatchStatus.CANCELLED)
        if not self.resolve(_dependencies().filter(parent_batch_id=batch_id), failed, ("pk",)):
            self.batches.insert(0, batch_id)

    def resolve(self, deps: Any, failed: bool, order: tuple[str, ...]) -> bool:
        """Mark these parents' dependencies resolved, then see to each child;
        False if the budget ran out before all of them were (``order``: the
        index's, so that a limited locking read reads only what it locks)."""
        deps = deps.using(self.using).filter(resolved=False).order_by(*order)
        limit = None if self.budget is None else self.budget.left()
        if limit == 0:
            return False
        locked = deps.select_for_update().values_list("pk", "child_id")
        found = list(locked[:limit] if limit is not None else locked)
        if not found:
            return True
        _dependencies().using(self.using).filter(pk__in=[pk for pk, _ in found]).update(resolved=True)
        for child in sorted({child for _, child in found}):
            self.child(child, failed)
        if self.budget is not None:
            self.budget.spend(len(found))
        return limit is None or len(found) < limit

    def child(self, child: int, parent_failed: bool) -> None:
        if release(self.using, child, parent_failed):
            self.finished.append(child)  # its own dependants and batch follow, as for a failure

    def check_batch(self, batch_id: int) -> None:
        if complete_if_last(self.using, batch_id):
            self.follow_batch(batch_id)


def _dependencies() -> Any:
    from ..workflows.models import Dependency

    return Dependency.objects


def _jobs(using: str) -> Any:
    Job = tables.job()

    return Job._base_manager.using(using)
