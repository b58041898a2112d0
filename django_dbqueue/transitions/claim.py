"""The claim: READY, due jobs become RUNNING for one owner with a lease, in
one short transaction; and ``release``, which gives back claimed jobs that
never started. Every other claim shape (limited, rated, fair, from several
queues, for review) sits beside this file; the package's map lists them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.db.models import Case, F, When

from ..clock import DbNow, read_database_now
from ..db import lock_if_serialised, retry_on_conflict
from ..limits import counted
from ..payload import as_list
from .batches import stopped_members
from .candidates import first_free, past
from .compiled import by_ids, once
from .instances import attnames, built_rows, loaded
from .rated_slots import give_back_slots, rated_claims
from .rows import DEFAULT_LEASE, READY, RUNNING, JobRows
from .updates import RowUpdate

if TYPE_CHECKING:
    from ..models import Job

# Higher priority first, then the job that has been due longest.
CLAIM_ORDER = ("-priority", "run_after", "id")


class ClaimQuerySet(JobRows):
    def claim(self, owner: str, limit: int = 100, lease: float = DEFAULT_LEASE) -> list[Job]:
        """Claim up to ``limit`` due READY jobs matching this queryset, in
        priority order, for ``owner``; they come back RUNNING with a lease.

        A batch holds only jobs that never killed a worker. A *suspect* job
        (recovered from a dead worker) is claimed alone, and its attempt is
        counted in the claim itself, so a job that kills every worker that
        runs it runs out of attempts instead of looping.
        """
        if limit < 1:
            raise ValueError("claim() needs a limit of at least 1.")
        due = self.due().unlimited()

        def read_ids(taken: list[int]) -> list[int]:
            return ids_in_claim_order(past(due, taken), limit)

        return retry_on_conflict(lambda: self.claim_candidates(owner, lease, read_ids), using=self.db)

    def claim_candidates(
        self, owner: str, lease: float, read_ids: Callable[[list[int]], list[int]]
    ) -> list[Job]:
        """One claim attempt: ``read_ids(taken)`` picks candidate ids (due
        READY jobs of this table, past ``taken``) by a plain read that locks
        nothing, then just those rows are locked by primary key. A single
        locking SELECT ... ORDER BY ... LIMIT that no index serves (several
        queues, or any filter) would lock every row it sorts, starving every
        other claimer until it commits (candidates.py)."""
        model, using = self.model, self.db

        def lock(ids: list[int]) -> list[Job]:
            return self._mark_locked(lambda: _locked(model, using, ids), owner, lease)

        return first_free(read_ids, lock)

    def lock_and_mark(
        self, candidates: models.QuerySet, owner: str, lease: float, limit: int | None = None
    ) -> list[Job]:
        """Lock the rows of ``candidates`` (due READY jobs) that nobody else
        holds (SKIP LOCKED), and mark them RUNNING for ``owner``, in one
        transaction."""

        def read() -> list[Job]:
            locked = candidates.annotate(db_now=DbNow()).select_for_update(skip_locked=True)
            return loaded(locked[:limit] if limit else locked, "db_now")

        return self._mark_locked(read, owner, lease)

    def _mark_locked(self, read: Callable[[], list[Job]], owner: str, lease: float) -> list[Job]:
        """Mark RUNNING for ``owner`` what ``read()`` locks, in one transaction."""
        rows = self.model._base_manager.using(self.db)
        with transaction.atomic(using=self.db):
            lock_if_serialised(self.db, self.model._meta.db_table)
            batch = _claimable(sorted(read(), key=_claim_key))
            if batch:
                _mark_claimed(rows, batch, owner, lease)
        return batch

    def release(self, owner: str, ids: list[int], rate_limits: Mapping[str, str] | None = None) -> int:
        """Give claimed jobs that never started back to the queue at once,
        without costing them an attempt, and a rate-limited job's slot
        back to its key (rated_slots.py; ``rate_limits``: OPTIONS RATE_LIMITS)."""
        if not ids:
            return 0
        mine = self.filter(pk__in=ids, owner=owner, status=RUNNING)
        with transaction.atomic(using=self.db):
            rated = rated_claims(mine)
            released = mine.update(
                status=READY,
                owner=None,
                lease_expires_at=None,
                # A suspect's attempt was counted in its claim; it never ran.
                attempts=Case(
                    When(suspect=True, then=F("attempts") - 1),
                    default=F("attempts"),
                    output_field=models.PositiveIntegerField(),
                ),
            )
            if rated:
                give_back_slots(self.db, rated, rate_limits or {})
        return released


def _locked(model: Any, using: str, ids: list[int]) -> list[Job]:
    """The due READY jobs among ``ids`` that nobody else holds, locked, as
    instances: by a statement compiled once per database (compiled.py),
    in the caller's transaction. The rows carry no ``db_now``: the mark
    takes the database's now in its own UPDATE (``_mark_claimed``), as
    decoding a datetime on every row cost more than a microsecond a job."""
    names = attnames(model)

    def due_by_id() -> models.QuerySet:
        rows = model._base_manager.using(using).filter(status=READY, run_after__lte=DbNow())
        return rows.filter(pk__in=by_ids()).select_for_update(skip_locked=True).values_list(*names)

    statement = once(due_by_id, (using, "locked", model))
    return built_rows(model, using, statement.rows(ids), names)


def ids_in_claim_order(due: JobRows, limit: int) -> list[int]:
    return list(due.order_by(*CLAIM_ORDER).values_list("pk", flat=True)[:limit])


def _mark_claimed(rows: models.QuerySet, batch: list[Job], owner: str, lease: float) -> None:
    """Mark a locked batch RUNNING for ``owner``, in the caller's transaction.
    A suspect (always alone) has its attempt and start recorded here.

    Members of a cancelled workflow batch are not claimed: they are taken
    out of ``batch`` (in place: every claim shape returns the list it
    passed) and cancelled instead, and members of a batch being changed
    right now are left for a later claim (transitions/batches.py).

    The lease and ``claimed_at`` run from the database's now: the one the
    rows were read with (``db_now``), or else the UPDATE's own, and then
    the instances leave both unread (each loads on access, as a deferred
    field does; the worker's own proof of its lease is hand.py's)."""
    stopped = stopped_members(rows.db, batch)
    if stopped:
        gone = {job.pk for job in stopped}
        batch[:] = [job for job in batch if job.pk not in gone]
        if not batch:
            return
    now = vars(batch[0]).get("db_now")
    if now is None and batch[0].suspect:
        now = read_database_now(rows.db)
    update = RowUpdate(rows.model, rows.db)
    changes: dict[str, Any] = {"status": RUNNING, "owner": owner}
    if now is None:
        update.set_expression("lease_expires_at", DbNow() + timedelta(seconds=lease), once=("lease", lease))
        update.set_expression("claimed_at", DbNow(), once="now")
    else:
        changes["lease_expires_at"] = now + timedelta(seconds=lease)
        changes["claimed_at"] = now
    if batch[0].suspect:
        job = batch[0]
        changes.update(
            attempts=counted(job.attempts),
            started_at=job.started_at or now,
            last_attempted_at=now,
            worker_ids=[*as_list(job.worker_ids), owner],
        )
    for name, value in changes.items():
        update.set(name, value)
    update.run([job.id for job in batch])
    # The instances hold plain attributes (instances.py): their __dict__ takes the changes at once.
    for job in batch:
        row = vars(job)
        row.update(changes)
        if now is None:
            del row["lease_expires_at"], row["claimed_at"]


def _claim_key(job: Job) -> ClaimKey:
    return claim_key(job.priority, job.run_after, job.id)


ClaimKey = tuple[int, bool, "datetime | None", int]


def claim_key(priority: int, run_after: datetime | None, pk: int) -> ClaimKey:
    """CLAIM_ORDER as a key for Python's sort. A run_after read as None
    (MySQL's zero date, which its driver reads so, in a row written by SQL)
    sorts first, as the database orders it, instead of failing the sort
    of the whole claim; the worker then fails that job alone (resolving.py)."""
    return (-priority, run_after is not None, run_after, pk)


def _claimable(locked: list[Job]) -> list[Job]:
    """A suspect alone, or the run of trusted jobs before the first suspect."""
    if locked and locked[0].suspect:
        return locked[:1]
    batch = []
    for job in locked:
        if job.suspect:
            break
        batch.append(job)
    return batch
