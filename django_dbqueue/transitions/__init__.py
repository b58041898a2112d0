"""Every state change of a job, and nowhere else: small methods on the
queryset, each one short conditional UPDATE (or one transaction).

claim ─> RUNNING ─> SUCCESSFUL (one or many) | READY again (retry) | FAILED
         RUNNING ─> READY (release: never started; recover: its worker died)
finished ─> READY (requeue)      READY, WAITING ─> CANCELLED (cancel)
RUNNING ─> CANCELLED (a cancel asked for, honoured)  RUNNING ─> READY (interrupt: a deploy)

The worker, the admin and user code all go through these, so there is one
state machine and one claim path. Times that decide anything (due, lease,
expiry) are the database's (``DbNow``), never a worker host's clock.

JobQuerySet is put together from one module a step:

rows.py      which jobs are in which state (ready, due, running, finished)
claim.py     claim, claim_limited and release
rates.py     claim_rated and busy_rate_keys: the claim of rate-limited jobs
leases.py    extend and check leases; recover a dead worker's jobs
outcomes.py  record one outcome, or many successes in one UPDATE (Finished)
running.py   control over running jobs: cancel requests, progress,
             checkpoints, cancel_running, interrupt
actions.py   people's actions: requeue, cancel, run_now, prune
"""

from __future__ import annotations

from datetime import timedelta

from django.db import models

from ..candidates import CANDIDATE_ROUNDS
from ..clock import DbNow
from .actions import MAX_HISTORY, ActionQuerySet
from .claim import CLAIM_ORDER, ClaimQuerySet, ids_in_claim_order
from .leases import WORKER_LOST, LeaseQuerySet, worker_lost_error
from .outcomes import STATEMENT_BUDGET, UNCHANGED, Finished, attempts_after, retry_delay, statements
from .rates import RateQuerySet
from .rows import DEFAULT_LEASE
from .running import cancelled_error, clamp

__all__ = [
    "CANDIDATE_ROUNDS",
    "CLAIM_ORDER",
    "DEFAULT_LEASE",
    "MAX_HISTORY",
    "STATEMENT_BUDGET",
    "UNCHANGED",
    "WORKER_LOST",
    "Finished",
    "JobQuerySet",
    "WorkerQuerySet",
    "attempts_after",
    "cancelled_error",
    "clamp",
    "ids_in_claim_order",
    "retry_delay",
    "statements",
    "worker_lost_error",
]


# django-stubs gives each QuerySet class an as_manager() of its own type.
class JobQuerySet(ClaimQuerySet, RateQuerySet, LeaseQuerySet, ActionQuerySet):  # type: ignore[override]
    """``Job.objects``: the filters of rows.py and every transition."""


class WorkerQuerySet(models.QuerySet):
    def alive(self, within: float = 120.0) -> WorkerQuerySet:
        return self.filter(last_seen_at__gte=DbNow() - timedelta(seconds=within))
