"""Atomic tasks: the task's body and its job's success in one transaction.

At least once is the honest guarantee for arbitrary side effects. But a task
whose effects are writes to the queue's own database can have them exactly
once: run the body inside a transaction on that database, and record the
job SUCCESSFUL in the same transaction, on the condition that this worker
still holds the job (owner and RUNNING, as every outcome is recorded). Then
whatever happens, the body's writes and the success commit together or not
at all:

- the worker dies (SIGKILL, OOM, the host) or loses the connection before
  the commit: the server rolls both back; the job is recovered and runs
  again, and its effects happen once, in the run that commits;
- the body raises or times out: both roll back, and the failed attempt is
  recorded afterwards, as for any task;
- the lease was lost meanwhile (the worker was paused, another recovered
  the job): the conditional write finds nothing to update, and the body is
  rolled back; the run that holds the job commits its own.

Not covered: anything outside that transaction (email, HTTP, files, other
databases, or a connection the task opens itself), nor what commits inside
it behind Django's back: a raw ``COMMIT``, or a statement that commits
implicitly (DDL, ``LOCK TABLES`` on MySQL) commits the body's writes so far
on every attempt. A body that commits and then raises is told by its
savepoint being gone (savepoints.py): its attempt fails with
``TransactionCommitted``, and the group members before it, whose writes
that commit made durable, are recorded SUCCESSFUL (groups.py).

Atomic jobs of one batch share a transaction (``AtomicGroup``,
groups.py), each in a savepoint of its own, where claims lock rows
(MariaDB, MySQL, PostgreSQL): at its end one UPDATE records every member's
success, on the same condition as above for all of them, and one COMMIT
makes the whole group durable. That is one statement and one commit per
group rather than per job, which held atomic jobs at about half the plain
rate. Nothing of a group commits unless every member's success is written:

- a member that fails rolls back to its savepoint (its own writes only),
  the group commits what succeeded before it, and its failure is recorded
  as any task's;
- a member whose lease was lost, a conflict (a deadlock rolls the whole
  transaction back), a connection lost or closed by a task, or a forced
  stop loses the group: everything in it rolls back, and its members go
  back to the queue to run again, their attempts unspent.

A group commits after GROUP_AGE, at the end of the batch, before any other
outcome is recorded, and before a task whose last run took GROUP_AGE or
more, so that a slow job never keeps a group's writes locked for long; its
members' success is visible, and their ``task_finished`` sent, once it
commits. Suspects (always alone) and SQLite keep one transaction per job.

A body that returns with its transaction unusable (marked for rollback, or
its connection closed) cannot have its success recorded in it: that is the
attempt's failure (``TransactionUnusable``), and the worker lives on.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from django.db import OperationalError, connections, transaction

from ...db import is_conflict, retry_on_conflict
from ...exceptions import ResultNotStorable, TransactionUnusable
from ...payload import check_return_value
from ...status import Status
from ...tasks_api import Task
from ...transitions import Finished
from . import savepoints

if TYPE_CHECKING:
    from ...models import Job
    from .contract import Runner

logger = logging.getLogger("django_dbqueue")


class _RollBack(Exception):
    """Leaves the transaction with what should become the job's failure."""

    def __init__(self, cause: BaseException, final: bool) -> None:
        super().__init__(str(cause))
        self.cause, self.final = cause, final


class _LeaseLost(Exception):
    pass


def run_atomic(runner: Runner, job: Job, task: Task, started: Any) -> str:
    """Run an ``atomic=True`` task and record its outcome (see the module)."""
    group = runner.atomic
    if group.runs_alone(job):
        runner.settle()  # earlier outcomes first, in the order they happened
        return _alone(runner, job, task, started)
    if group.is_open and not group.joins(job):
        runner.settle()
    if not group.is_open:
        runner.settle()
        group.open()
    savepoint = group.savepoint()
    began = time.monotonic()
    try:
        success = _body(runner, job, task, started)
    except _RollBack as rolled_back:
        group.took(job, time.monotonic() - began)
        cause = rolled_back.cause
        if connections[runner.backend.database].closed_in_transaction:
            group.lose("a task closed the connection")
        elif group.roll_back_to(savepoint):
            group.commit()  # what succeeded before it, then its failure
        else:
            cause = savepoints.committed(cause)  # the group is closed, its members recorded
        return runner.fail(job, started, cause, final=rolled_back.final, task=task)
    except OperationalError as exc:
        if not is_conflict(exc):
            group.lose(f"a statement failed ({exc})")
            raise
        # InnoDB rolls a deadlocked transaction back whole, the group with it.
        group.lose("a deadlock rolled its transaction back")
        return _alone(runner, job, task, started)
    except BaseException as exc:  # a forced stop
        group.lose(f"the worker stopped ({type(exc).__name__})")
        raise
    group.add(success, task, time.monotonic() - began)
    if group.due():
        group.commit()
    return Status.SUCCESSFUL


def _alone(runner: Runner, job: Job, task: Task, started: Any) -> str:
    """The job in a transaction of its own."""
    database = runner.backend.database
    try:
        # A transaction that lost to another (a deadlock, or on Galera a
        # certification failure at commit) was rolled back whole: run it again.
        retry_on_conflict(lambda: _in_transaction(runner, job, task, started), database)
    except OperationalError as exc:
        if not is_conflict(exc):
            raise
        return runner.fail(job, started, exc, final=False, task=task)  # it lost every time
    except _RollBack as rolled_back:
        cause = rolled_back.cause
        return runner.fail(job, started, cause, final=rolled_back.final, task=task)
    except _LeaseLost:
        logger.warning(
            "Job %s finished after its lease was lost, so its transaction was rolled back: its "
            "database effects are those of the run that holds the job.",
            job.pk,
        )
        return Status.RUNNING
    runner.finished(job, task)
    return Status.SUCCESSFUL


def _in_transaction(runner: Runner, job: Job, task: Task, started: Any) -> None:
    from ...models import Job

    database = runner.backend.database
    with transaction.atomic(using=database):
        # Rolled back to only to learn whether the body committed (atomic.py):
        # one statement more for jobs that run alone, which are few but for SQLite.
        mark = savepoints.savepoint(database)
        try:
            success = _body(runner, job, task, started)
        except _RollBack as rolled_back:
            closed = connections[database].closed_in_transaction
            if not closed and not savepoints.roll_back_to(database, mark):
                rolled_back.cause = savepoints.committed(rolled_back.cause)
            raise
        if not Job.objects.using(database).record(runner.owner, success):
            raise _LeaseLost


def _body(runner: Runner, job: Job, task: Task, started: Any) -> Finished:
    """Call the task in the open transaction; its success, to be recorded in
    that transaction, or _RollBack with its failure, or the conflict it met."""
    value, raised = runner.call(job, task, started)
    if raised is not None and is_conflict(raised):
        raise raised  # the body's own statement lost: all of it rolls back
    if raised is None:
        raised = unusable(runner.backend.database)
    if raised is not None:
        raise _RollBack(raised, final=False)
    try:
        value, size = check_return_value(value, runner.config.MAX_RETURN_BYTES, runner.integers())
    except ResultNotStorable as exc:
        raise _RollBack(exc, final=True) from None
    return Finished(job, started, runner.clock.now(), return_value=value, size=size)


def unusable(database: str) -> TransactionUnusable | None:
    """What the body left its transaction unable to do, if anything: any
    query in it, the success's among them, would raise."""
    connection = connections[database]
    if connection.closed_in_transaction:
        did = "closed its database connection (connection.close() or close_old_connections())"
    elif connection.needs_rollback:
        did = (
            "marked its transaction for rollback (transaction.set_rollback(True), as DRF's "
            "exception handler does, or a database error caught without a savepoint)"
        )
    else:
        return None
    return TransactionUnusable(
        f"The atomic task {did} and then returned, so its writes were rolled back and its "
        "success cannot be recorded with them. Let the exception propagate instead, or use a "
        "nested transaction.atomic() block for work that may be rolled back on its own."
    )
