"""A batch's own states, as big operations change them (operations/big.py):
the decision that comes first, then the members chunk by chunk.

    OPEN ─> CANCELLED   (cancel decided; its READY and WAITING members follow in chunks)
    finished ─> OPEN, unsealed (retry decided; its failed members are requeued in
                        chunks, then it is sealed again and may complete)

Decided first: between two chunks of a cancel, no claim may take a member
the operation is going to cancel. The claim reads the status of its
members' batches with a shared lock (``stopped_members``): the decision's
UPDATE waits for a claim that read the batch OPEN, and every claim after
it reads CANCELLED and cancels, instead of claiming, the members it
locked. A retry needs no such guard (FAILED and CANCELLED members are not
claimable), but an unsealed batch does not complete, so members finishing
before the last chunk do not complete it early."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import connections

from .. import tables
from ..clock import DbNow
from ..status import Status
from .rows import of_batch

if TYPE_CHECKING:
    from ..models import Job

UNSTARTED = (Status.READY, Status.WAITING)
RETRIED = (Status.FAILED, Status.CANCELLED)


def decide_cancel(using: str, batch_id: int) -> bool:
    """OPEN → CANCELLED, in the caller's transaction; False if it was not OPEN."""
    from ..workflows.models import Batch, BatchStatus

    rows = Batch.objects.using(using).filter(pk=batch_id, status=BatchStatus.OPEN)
    return bool(rows.update(status=BatchStatus.CANCELLED, finished_at=DbNow()))


def decide_retry(using: str, batch_id: int) -> bool | None:
    """Open the batch again, unsealed, in the caller's transaction; returns
    whether it was sealed (to seal it again once its failed members are
    back in the queue), or None if there is no such batch."""
    from ..workflows.models import Batch, BatchStatus

    rows = Batch.objects.using(using).filter(pk=batch_id)
    sealed = rows.select_for_update().values_list("sealed", flat=True).first()
    if sealed is None:
        return None
    rows.update(status=BatchStatus.OPEN, finished_at=None, sealed=False)
    return sealed


def seal(using: str, batch_id: int) -> None:
    """Seal the batch and complete it if no member is unfinished, in the caller's transaction."""
    from ..workflows.models import Batch
    from .cascade import members_finished

    Batch.objects.using(using).filter(pk=batch_id, sealed=False).update(sealed=True)
    members_finished(using, [batch_id])


def still(using: str, batch_id: int, status: str) -> bool:
    """Whether the batch is still ``status`` (an operation stops when
    someone changed its batch meanwhile: a retry of a batch being cancelled)."""
    from ..workflows.models import Batch

    return Batch.objects.using(using).filter(pk=batch_id, status=status).exists()


def members(using: str, batch_id: int, status: str, after: int, size: int) -> list[tuple[int, bool]]:
    """Lock the next ``size`` members of ``status`` past the id ``after``,
    in id order (one range of the (batch, status) index); returns their
    ``(id, has_dependants)``."""
    rows = of_batch(_jobs(using), batch_id, [status]).filter(pk__gt=after).order_by("pk")
    return list(rows.select_for_update().values_list("pk", "has_dependants")[:size])


def cancel_unstarted(using: str, ids: list[int]) -> int:
    """READY or WAITING jobs ``ids`` (locked) → CANCELLED. The caller
    follows up those with dependants (cascade.py)."""
    return (
        _jobs(using)
        .filter(pk__in=ids, status__in=UNSTARTED)
        .update(status=Status.CANCELLED, finished_at=DbNow(), unique_key=None, cancel_requested_at=None)
    )


def stopped_members(using: str, batch: list[Job]) -> list[Job]:
    """The jobs of a claim (locked, READY) that must not run: members of a
    cancelled batch, which are cancelled here, in the claim's transaction,
    and members of a batch whose row another transaction holds right now
    (a cancel being decided, say), which stay READY for a later claim.
    One read of the batch rows by primary key, only for a claim that holds
    members; with a shared lock (see the module's docstring)."""
    batch_ids = sorted({job.batch_id for job in batch if job.batch_id is not None})
    if not batch_ids:
        return []
    statuses = _shared_statuses(using, batch_ids)
    stopped = {pk for pk, status in statuses.items() if status == "CANCELLED"}
    cancelled = [job for job in batch if job.batch_id in stopped]
    busy = [job for job in batch if job.batch_id is not None and job.batch_id not in statuses]
    if cancelled:
        ids = [job.pk for job in cancelled]
        cancel_unstarted(using, ids)
        followed = [job.pk for job in cancelled if job.has_dependants]
        if followed:
            from .cascade import jobs_finished

            jobs_finished(using, followed, settled=stopped)
    return cancelled + busy


def _shared_statuses(using: str, batch_ids: list[int]) -> dict[int, str]:
    """``{id: status}`` of the batches whose rows this transaction could
    share-lock at once; a row another transaction writes is left out."""
    from ..workflows.models import Batch

    connection = connections[using]
    table = connection.ops.quote_name(Batch._meta.db_table)
    listed = ", ".join(str(int(pk)) for pk in batch_ids)
    sql = f"SELECT id, status FROM {table} WHERE id IN ({listed})"
    if connection.vendor == "mysql":
        mariadb = getattr(connection, "mysql_is_mariadb", False)
        sql += " LOCK IN SHARE MODE SKIP LOCKED" if mariadb else " FOR SHARE SKIP LOCKED"
    elif connection.vendor == "postgresql":
        sql += " FOR SHARE SKIP LOCKED"
    # SQLite: one writer at a time, so the read is the latest already.
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return {int(pk): status for pk, status in cursor.fetchall()}


def _jobs(using: str) -> Any:
    Job = tables.job()

    return Job._base_manager.using(using)
