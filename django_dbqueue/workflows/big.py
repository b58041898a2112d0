"""The workflows' big operations (operations/big.py): cancel a batch, retry
its failed members, and carry on a cascade that outgrew the transaction
that set it off. Their state writes are transitions/batches.py's and the
cascade's (transitions/cascade.py); each ``chunk()`` runs in its caller's transaction."""

from __future__ import annotations

from typing import Any

from ..operations.big import Step
from ..transitions.batches import (
    RETRIED,
    UNSTARTED,
    cancel_unstarted,
    decide_cancel,
    decide_retry,
    members,
    seal,
    still,
)
from ..transitions.cascade import Budget, Cascade, batch_finished, jobs_finished
from ..transitions.rows import of_batch
from .models import BatchStatus

# How long one chunk of a cascade may run, at most, whatever its rows.
CHUNK_SECONDS = 0.5


class CancelBatch:
    """``{"batch": id}``: the batch CANCELLED first (no claim takes its
    members from then on), then its READY and WAITING members, in id order
    per status, then its dependants, by their policy. RUNNING members
    finish, as they always have."""

    def decide(self, using: str, params: dict[str, Any]) -> int | None:
        batch_id = int(params["batch"])
        if not decide_cancel(using, batch_id):
            return None
        return int(of_batch(_jobs(using), batch_id, UNSTARTED).count())

    def chunk(self, using: str, params: dict[str, Any], cursor: Any, size: int) -> Step:
        batch_id = int(params["batch"])
        phase, after = cursor or (0, 0)
        if phase >= len(UNSTARTED):
            batch_finished(using, batch_id)
            return Step(None, 0, done=True)
        if not still(using, batch_id, BatchStatus.CANCELLED):
            return Step(None, 0, done=True)  # retried meanwhile: its members are its own again
        found = members(using, batch_id, UNSTARTED[phase], after, size)
        ids = [pk for pk, _ in found]
        changed = cancel_unstarted(using, ids) if ids else 0
        followed = [pk for pk, has_dependants in found if has_dependants]
        if followed:
            jobs_finished(using, followed, settled=[batch_id])
        return Step([phase + 1, 0] if len(found) < size else [phase, ids[-1]], changed)


class RetryBatch:
    """``{"batch": id}``: the batch OPEN again and unsealed first (so it
    cannot complete while some failed members are still to requeue), then
    its FAILED and CANCELLED members requeued, in id order per status, then
    sealed again if it was: it completes, and runs its callbacks, once they
    have finished."""

    def decide(self, using: str, params: dict[str, Any]) -> int | None:
        batch_id = int(params["batch"])
        count = int(of_batch(_jobs(using), batch_id, RETRIED).count())
        if not count:
            return None  # reopened with no member left to finish, it would never complete
        sealed = decide_retry(using, batch_id)
        if sealed is None:
            return None
        params["sealed"] = sealed
        return count

    def chunk(self, using: str, params: dict[str, Any], cursor: Any, size: int) -> Step:
        batch_id = int(params["batch"])
        phase, after = cursor or (0, 0)
        if phase >= len(RETRIED):
            if params.get("sealed"):
                seal(using, batch_id)
            return Step(None, 0, done=True)
        found = members(using, batch_id, RETRIED[phase], after, size)
        ids = [pk for pk, _ in found]
        changed = _jobs(using).filter(pk__in=ids).requeue() if ids else 0
        return Step([phase + 1, 0] if len(found) < size else [phase, ids[-1]], changed)


class FollowCascade:
    """``{"jobs": [...], "batches": [...]}``: finished jobs and batches whose
    dependants (and batches) are left to see to; the position is what is
    still left, as the cascade's work list (transitions/cascade.py)."""

    def decide(self, using: str, params: dict[str, Any]) -> int | None:
        return len(params.get("jobs", [])) + len(params.get("batches", []))

    def chunk(self, using: str, params: dict[str, Any], cursor: Any, size: int) -> Step:
        left = cursor if cursor is not None else params
        budget = Budget(size, CHUNK_SECONDS)
        cascade = Cascade(using, budget=budget)
        cascade.batches = [int(pk) for pk in left.get("batches", [])]
        cascade.run([int(pk) for pk in left.get("jobs", [])])
        now_left = cascade.left()
        done = not now_left["jobs"] and not now_left["batches"]
        return Step(now_left, size - max(budget.rows, 0), done)


def _jobs(using: str) -> Any:
    from ..models import Job

    return Job.objects.using(using)
