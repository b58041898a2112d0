"""Big operations as jobs: one way to change many rows (cancel or retry a
batch, a long cascade of cancels, the admin's actions on a big selection)
without one long transaction.

An operation is decided first, then carried out in chunks:

1. ``start()`` opens one short transaction, makes the operation's decision
   in it (a batch CANCELLED before any of its members is: from then on no
   claim takes a member, transitions/batches.py), and counts the rows the
   operation will change. Up to ``OPERATION_INLINE_ROWS`` of them are changed
   in that same transaction, at once, as before (tests and small projects see
   the result at once); more, and the transaction inserts instead a job of
   the queue's own task ``run_operation`` (big_task.py), so the decision and
   the job that carries it out commit together or not at all.
2. The job changes ``OPERATION_CHUNK_ROWS`` rows per transaction. Its position
   (a checkpoint) is written in each chunk's transaction, on the worker's
   lease, so a crash or a SIGKILL between chunks resumes after the last
   chunk that committed: no row is changed twice or skipped. Its progress
   shows on its page in the admin.

A cascade that outgrows the transaction that set it off (a cancelled head of
a 5,000-step chain) hands what is left to such a job too, inserted in that
transaction (transitions/cascade.py). That insert, the operation job's
task path and the limits live in transitions/own_jobs.py, below both the
cascade and this module, and are re-exported here.

An operation is a class with ``decide(using, params)``, which returns how
many rows it will change (None: nothing to do), and ``chunk(using, params,
cursor, size)``, which changes the next rows in the caller's transaction
and returns a :class:`Step`. ``KINDS`` names them; a job's row may only
name one of these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils.module_loading import import_string

from ..transitions.own_jobs import (
    METADATA_KEY,
    OPERATION_ATTEMPTS,
    TASK_PATH,
    Limits,
    enqueue_operation,
    limits,
    operations_queue,
)

__all__ = [
    "KINDS",
    "METADATA_KEY",
    "OPERATION_ATTEMPTS",
    "TASK_PATH",
    "Limits",
    "Started",
    "Step",
    "enqueue_operation",
    "limits",
    "operation",
    "operations_queue",
    "run_inline",
    "start",
]

KINDS = {
    "cancel_batch": "django_dbqueue.workflows.big.CancelBatch",
    "retry_batch": "django_dbqueue.workflows.big.RetryBatch",
    "cascade": "django_dbqueue.workflows.big.FollowCascade",
    "change_jobs": "django_dbqueue.operations.selections.ChangeJobs",
    "change_matching": "django_dbqueue.operations.matching.ChangeMatching",
}


@dataclass(frozen=True)
class Step:
    """What one chunk did: the position after it (None: back at the
    start is never returned; ``done`` says the operation has finished),
    and how many rows it changed."""

    cursor: Any
    rows: int
    done: bool = False


def operation(kind: str) -> Any:
    """The operation ``kind`` names; LookupError for any other name."""
    if kind not in KINDS:
        raise LookupError(f"{kind!r} is not an operation of django_dbqueue; they are {', '.join(KINDS)}.")
    return import_string(KINDS[kind])()


class Started(int):
    """What ``start()`` did, as the number of rows the operation changes
    (an int, as ``BatchHandle.cancel()`` returned before operations ran as
    jobs). ``job_id``: the operation's job, when it runs in the queue (the
    rows change chunk by chunk, after this returns); None when the rows
    were changed at once. ``decided``: False when there was nothing to do."""

    job_id: int | None
    database: str
    decided: bool

    def __new__(cls, rows: int, job_id: int | None, database: str, decided: bool = True) -> Started:
        made = super().__new__(cls, rows)
        made.job_id, made.database, made.decided = job_id, database, decided
        return made

    @property
    def inline(self) -> bool:
        return self.job_id is None

    def __repr__(self) -> str:
        where = "at once" if self.job_id is None else f"by the operation job #{self.job_id}"
        return f"<{int(self)} rows, changed {where}>"


def start(kind: str, using: str, params: dict[str, Any], *, inline: int | None = None) -> Started:
    """Decide the operation ``kind`` and carry it out: at once, in the same
    transaction, if it changes at most ``inline`` rows (default:
    OPERATION_INLINE_ROWS), else by an operation job inserted in it."""
    op = operation(kind)
    options = limits(using)
    threshold = options.inline if inline is None else inline
    with transaction.atomic(using=using):
        total = op.decide(using, params)
        if total is None:
            return Started(0, None, using, decided=False)
        if total <= threshold:
            return Started(run_inline(op, using, params, options.chunk), None, using)
        job_id = enqueue_operation(using, kind, params, total)
    return Started(total, job_id, using)


def run_inline(op: Any, using: str, params: dict[str, Any], size: int) -> int:
    """Every chunk of ``op``, in the caller's transaction; returns the rows changed."""
    cursor, rows = None, 0
    while True:
        step = op.chunk(using, params, cursor, size)
        rows += step.rows
        if step.done:
            return rows
        cursor = step.cursor
