"""Every state change of a job, and nowhere else: small methods on the
queryset, each one short conditional UPDATE (or one transaction).

claim ─> RUNNING ─> SUCCESSFUL (one or many) | READY again (retry) | FAILED
         RUNNING ─> READY (release: never started; recover: its worker died)
finished ─> READY (requeue)      READY, WAITING ─> CANCELLED (cancel)
RUNNING ─> CANCELLED (a cancel asked for, honoured)  RUNNING ─> READY (interrupt: a deploy)
RUNNING ─> READY (give_back_undeployed: this worker's code lacks the task)
WAITING ─> READY | CANCELLED | FAILED (its parents finished)   READY ─> WAITING (wait_again)
batch OPEN ─> SUCCEEDED | FAILED (its last member finished) | CANCELLED; finished ─> OPEN (retry)

The worker, the admin and user code all go through these, so there is one
state machine and one claim path. Times that decide anything (due, lease,
expiry) are the database's (``DbNow``), never a worker host's clock.

One module a step (JobQuerySet is put together from their querysets):

rows.py      which jobs are in which state (ready, due, running, finished)

Every claim shape, one file each (which of them a worker tries, and in what
order, is its policy: worker/process/claims.py):

claim.py        claim (by any filter) and release
candidates.py   the loop every claim shares: read ids, lock those, read past what others took
shapes.py       the worker's claim of ordinary jobs from its queues (claim_from_queues)
limited.py      concurrency keys: claim_limited, and LimitedClaims (when to look)
rated.py        rate keys: claim_rated, busy_rate_keys, and RateClaims (which keys to try)
rated_slots.py  a rate slot given back with a job released unstarted
fair.py         fair share among fairness keys: FairClaims
review.py       claim-for-review on any model: ClaimQuerySetMixin (django_dbqueue.moderation)

The rest of the state machine:

leases.py    extend and check leases; recover a dead worker's jobs
recovered.py what recovery writes of a dead worker's job, and its WorkerLost entry
outcomes.py  record one outcome, or many successes in one UPDATE (Finished)
running.py   control over running jobs: cancel requests, progress,
             checkpoints, cancel_running, interrupt
deploys.py   give_back_undeployed: a job whose task the worker's code lacks
actions.py   people's actions: requeue, cancel, run_now, prune
debounced.py a debounced call: its key's READY holder takes it, a started one passes the key
unreadable.py  fail READY rows holding a time Python cannot read, unread
pruning.py   retention's deletes (finished jobs, empty batches, idle slots and keys),
             which operations/retention.py schedules

and the workflows' cascade, which the outcomes, cancels and recoveries
above set off in their own transactions (workflows/ keeps the public API
and the tables, and transitions/ imports nothing else of it):

cascade.py     what a finished job sets off: a work list over its batch and dependants
completion.py  a batch's last finisher, its completion and its callbacks
dependants.py  a dependant released, cancelled or failed by its parents; wait_again
fan_in.py      the arguments a pass_result dependant is released with
batches.py     a batch's cancel and retry as big operations decide them, and its members'
own_jobs.py    the jobs the queue inserts for itself: callbacks, operation jobs
inserts.py     the one-row and many-row INSERT of a job, the enqueue plan's and theirs
"""

from __future__ import annotations

from datetime import timedelta

from django.db import models

from ..clock import DbNow
from .actions import MAX_HISTORY, ActionQuerySet
from .candidates import CANDIDATE_ROUNDS
from .claim import CLAIM_ORDER, ClaimQuerySet, claim_key, ids_in_claim_order
from .deploys import TASK_NOT_DEPLOYED, DeployQuerySet, undeployed_note, without_undeployed_note
from .leases import LeaseQuerySet
from .limited import LimitedQuerySet
from .outcomes import STATEMENT_BUDGET, UNCHANGED, Finished, attempts_after, retry_delay, statements
from .rated import RateQuerySet
from .recovered import WORKER_LOST, worker_lost_error
from .rows import DEFAULT_LEASE
from .running import cancelled_error, clamp
from .unreadable import UnreadableQuerySet

__all__ = [
    "CANDIDATE_ROUNDS",
    "CLAIM_ORDER",
    "DEFAULT_LEASE",
    "MAX_HISTORY",
    "STATEMENT_BUDGET",
    "TASK_NOT_DEPLOYED",
    "UNCHANGED",
    "WORKER_LOST",
    "Finished",
    "JobQuerySet",
    "WorkerQuerySet",
    "attempts_after",
    "cancelled_error",
    "claim_key",
    "clamp",
    "ids_in_claim_order",
    "retry_delay",
    "statements",
    "undeployed_note",
    "without_undeployed_note",
    "worker_lost_error",
]


# django-stubs gives each QuerySet class an as_manager() of its own type.
class JobQuerySet(  # type: ignore[override]
    ClaimQuerySet,
    LimitedQuerySet,
    RateQuerySet,
    LeaseQuerySet,
    ActionQuerySet,
    DeployQuerySet,
    UnreadableQuerySet,
):
    """``Job.objects``: the filters of rows.py and every transition."""


class WorkerQuerySet(models.QuerySet):
    def alive(self, within: float = 120.0) -> WorkerQuerySet:
        return self.filter(last_seen_at__gte=DbNow() - timedelta(seconds=within))
