"""The transaction that consecutive atomic jobs of a batch share (atomic.py
says why and what it guarantees): opened before its first job, each job in
a savepoint of its own, and committed, with one UPDATE that records every
member's success on the condition that this worker still holds them all,
when it is due or before any other outcome is recorded. A group whose
transaction cannot commit is lost: rolled back, its members given back."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, OperationalError, connections, transaction

from ...db import is_conflict, is_outage, retry_on_conflict
from ...transitions import Finished, statements
from . import savepoints

if TYPE_CHECKING:
    from ...tasks_api import Task

logger = logging.getLogger("django_dbqueue")

# Seconds a group stays open, at most, before it commits at the next job's
# end; and a task whose last run took this long or more starts a group of
# its own, so that no member's writes stay locked behind a slow job.
GROUP_AGE = 0.05


class GroupLost(Exception):
    """Rolls an atomic group's transaction back."""


class AtomicGroup:
    """Atomic jobs of ``owner`` on ``database`` sharing one transaction, at
    most ``max_jobs`` of them. ``finished(job, task)`` sends a member's
    ``task_finished`` once the group committed; ``release(ids)`` gives back
    the members of a group that was rolled back."""

    def __init__(
        self,
        database: str,
        owner: str,
        max_jobs: int,
        *,
        finished: Callable[[Any, Task], None],
        release: Callable[[list[int]], int],
    ) -> None:
        self.database = database
        self.owner = owner
        self.max_jobs = max_jobs
        self.finished = finished
        self.release = release
        self.transaction: Any = None  # the open transaction.atomic(), entered by hand
        self.members: list[tuple[Finished, Task]] = []
        self.opened = 0.0
        self.last_run: dict[str, float] = {}  # task path: seconds its last run took
        self.alone: set[str] = set()  # task paths whose success a group write refused

    @property
    def supported(self) -> bool:
        """Where claims lock rows: elsewhere (SQLite) a transaction held open
        holds the whole database's write lock."""
        return bool(connections[self.database].features.has_select_for_update_skip_locked)

    @property
    def is_open(self) -> bool:
        return self.transaction is not None

    def runs_alone(self, job: Any) -> bool:
        return job.suspect or job.task_path in self.alone or not self.supported

    def joins(self, job: Any) -> bool:
        """Whether ``job`` may run in the open group: the group is young and
        not full, and the job's task ran quickly last time."""
        return (
            len(self.members) < self.max_jobs
            and time.monotonic() - self.opened < GROUP_AGE
            and self.last_run.get(job.task_path, GROUP_AGE) < GROUP_AGE
        )

    def open(self) -> None:
        atomic = transaction.atomic(using=self.database)
        atomic.__enter__()
        self.transaction, self.opened = atomic, time.monotonic()

    def savepoint(self) -> Any:
        # Never released: a group holds at most max_jobs of them, and its
        # commit ends them all (one round trip fewer per job).
        return savepoints.savepoint(self.database)

    def roll_back_to(self, savepoint: Any) -> bool:
        """Undo one member's writes, keeping the group's. False when the
        member committed the group's transaction itself: then the group is
        closed, what that commit made durable kept (``keep_committed``)."""
        if savepoints.roll_back_to(self.database, savepoint):
            return True
        self.keep_committed()
        return False

    def keep_committed(self) -> None:
        """A member's own COMMIT made the writes of the members before it
        durable without their successes: record those now, in a transaction
        of their own, or they would run again and repeat their effects. What
        was written after that COMMIT (the member's own) is rolled back."""
        atomic, members = self._close()
        atomic.__exit__(GroupLost, GroupLost("a member committed the transaction"), None)
        if not members:
            return
        logger.warning(
            "An atomic task committed the transaction its group shared (a raw COMMIT, or a statement "
            "that commits implicitly): the %d jobs before it in the group keep their effects and are "
            "recorded SUCCESSFUL.",
            len(members),
        )
        successes = [success for success, _ in members]
        written = retry_on_conflict(lambda: self._write_committed(successes), self.database)
        if written < len(members):
            logger.warning(
                "%d of %d atomic jobs whose writes another job's COMMIT made durable had lost their "
                "lease: the runs that hold them may repeat their effects.",
                len(members) - written,
                len(members),
            )
            return
        for success, task in members:
            self.finished(success.job, task)

    def _write_committed(self, successes: list[Finished]) -> int:
        from ...models import Job

        jobs = Job.objects.using(self.database)
        with transaction.atomic(using=self.database):
            return sum(jobs.record_successes(self.owner, group) for group in statements(successes))

    def add(self, success: Finished, task: Task, took: float) -> None:
        self.members.append((success, task))
        self.took(success.job, took)

    def took(self, job: Any, seconds: float) -> None:
        self.last_run[job.task_path] = seconds

    def due(self) -> bool:
        return self.is_open and (
            len(self.members) >= self.max_jobs or time.monotonic() - self.opened >= GROUP_AGE
        )

    def commit(self) -> None:
        """Record the members' successes and commit, then send their
        ``task_finished``. Nothing of the group commits unless every
        member's success is written: a member whose lease was lost, a
        conflict or a refusal loses the group, and its members run again.
        An outage raises, the members still RUNNING under this worker: it
        gives them back once it reconnects (outage.py)."""
        if self.transaction is None:
            return
        connection = connections[self.database]
        if connection.needs_rollback or connection.closed_in_transaction:
            self.lose("its transaction could no longer commit")
            return
        try:
            written = self._write()
        except DatabaseError as exc:
            if isinstance(exc, OperationalError) and is_outage(exc, self.database):
                self.lose("the database went away")
                raise
            if not is_conflict(exc):
                # Refused, never a retry loop: those tasks run alone from now on,
                # where a refused outcome becomes that job's failure.
                self.alone.update(success.job.task_path for success, _ in self.members)
            self.lose(f"recording their successes failed: {exc}")
            return
        if written < len(self.members):
            logger.warning(
                "%d of %d atomic jobs finished after their lease was lost, so the transaction they "
                "shared was rolled back: their database effects are those of the runs that hold them.",
                len(self.members) - written,
                len(self.members),
            )
            self.lose("a lease was lost")
            return
        atomic, members = self._close()
        try:
            atomic.__exit__(None, None, None)
        except OperationalError as exc:
            if not is_conflict(exc):
                raise
            self._give_back(members, f"its commit lost to another transaction ({exc})")
            return
        for success, task in members:
            self.finished(success.job, task)

    def _write(self) -> int:
        from ...models import Job

        jobs = Job.objects.using(self.database)
        successes = [success for success, _ in self.members]
        return sum(jobs.record_successes(self.owner, group) for group in statements(successes))

    def lose(self, why: str) -> None:
        """Roll the open group back and give its members back."""
        if self.transaction is None:
            return
        atomic, members = self._close()
        try:
            atomic.__exit__(GroupLost, GroupLost(why), None)
        except Exception:  # noqa: S110 - the connection is gone: the server rolled it back
            pass
        self._give_back(members, why)

    def _close(self) -> tuple[Any, list[tuple[Finished, Task]]]:
        atomic, members = self.transaction, self.members
        self.transaction, self.members = None, []
        return atomic, members

    def _give_back(self, members: list[tuple[Finished, Task]], why: str) -> None:
        if not members:
            return
        ids = [success.job.pk for success, _ in members]
        try:
            released = self.release(ids)
        except Exception as exc:
            # Still RUNNING under this worker: given back after an outage
            # (outage.py), or recovered once their lease runs out.
            logger.warning("Could not give back %d atomic jobs rolled back together (%s).", len(ids), exc)
            return
        if not released:
            return  # none was this worker's any more
        logger.warning(
            "%d atomic jobs ran in a transaction that was rolled back (%s); their effects were "
            "undone, and they go back to the queue to run again, their attempts unspent.",
            released,
            why,
        )
