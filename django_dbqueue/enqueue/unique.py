"""Enqueueing a job that holds a unique key.

``Job.unique_key`` has an ordinary unique index and is NULL for every job
that holds no key. MySQL and MariaDB have no partial unique index ("unique
while unfinished"), so the transitions that finish a job (success, final
failure, cancel, a dead worker's last attempt) clear the key in the same
UPDATE: from then on the key is free for the next job. Whoever inserts
second, whatever the number of producers and hosts, hits the index: InnoDB
makes a second INSERT of an uncommitted key wait for the first transaction,
then fail (it committed) or succeed (it rolled back). The holder is looked
up before the INSERT, so a refused duplicate takes no id; only a producer
that races the holder's own uncommitted INSERT still spends one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connections, transaction

from ..debounce import due
from ..exceptions import JobAlreadyQueued
from ..status import Status
from ..transitions.debounced import pass_key, take_call
from ..transitions.inserts import insert_job

if TYPE_CHECKING:
    from ..debounce import Debounce
    from ..models import Job

# A holder can finish between our failed INSERT and our read of it; then the
# key is free and the INSERT is tried again. More than a few rounds would
# take a key enqueued and finished in a tight loop by someone else.
ROUNDS = 5


def insert_or_holder(
    job: Job,
    using: str,
    on_duplicate: str,
    result_id: Callable[[object], str] = str,
    debounce: Debounce | None = None,
) -> Job:
    """Insert ``job`` (which holds ``job.unique_key``) and return it, or
    return the unfinished job that holds the key already (``on_duplicate
    ="return"``), or raise :class:`JobAlreadyQueued` (``"raise"``) with the
    holder's ``result_id`` (the backend's: ``"reports:17"`` off the home
    database, routing.py). With ``debounce``, a holder not yet claimed
    takes this call and comes back; a started one gives the key up to
    ``job`` (:func:`debounced`)."""
    rows = type(job)._base_manager.using(using)
    for _ in range(ROUNDS):
        # Look first: an INSERT refused by the index has taken an
        # AUTO_INCREMENT id (a sequence value on PostgreSQL) all the same,
        # and the index read costs less than the INSERT and its savepoint.
        holder = rows.filter(unique_key=job.unique_key).first() if _held(job, using) else None
        if holder is None:
            if _inserted(job, using):
                return job
            holder = rows.filter(unique_key=job.unique_key).first()  # not committed when we looked
        if holder is None:
            continue  # finished meanwhile: the key is free again
        if debounce is not None and holder.status in (Status.READY, Status.RUNNING):
            taken = debounced(job, holder, rows, debounce)
            if taken is None:
                continue  # claimed, finished or freed meanwhile, or its key passed to job: again
            return taken
        if on_duplicate == "raise":
            holder_id = result_id(holder.pk)
            raise JobAlreadyQueued(
                f"The unfinished job {holder_id} ({holder.status}) holds the unique key {job.unique_key!r}.",
                job_id=holder_id,
            )
        return holder
    raise IntegrityError(
        f"The unique key {job.unique_key!r} was taken and freed {ROUNDS} times while enqueueing."
    )


def debounced(job: Job, holder: Job, rows: Any, debounce: Debounce) -> Job | None:
    """The holder, READY, after it took ``job``'s call (debounce.py); None
    when the key must be tried again: the holder was claimed or finished
    meanwhile, or had started and gave its key up for ``job`` to take."""
    key = job.unique_key
    if holder.status == Status.RUNNING:
        pass_key(rows, holder.pk, key)
        return None
    arguments = None
    if debounce.replace:
        arguments = {"args": job.args, "kwargs": job.kwargs, "expires_at": job.expires_at}
    when = due(debounce, job.enqueued_at, holder.enqueued_at)
    if not take_call(rows, holder.pk, key, when, arguments):
        return None
    return rows.get(pk=holder.pk)


def _inserted(job: Job, using: str) -> bool:
    """INSERT ``job``; False if the unique index refused its key."""
    connection = connections[using]
    try:
        if connection.in_atomic_block or not connection.get_autocommit():
            # A savepoint inside the caller's transaction: a duplicate key
            # must not spoil the rest of it (PostgreSQL aborts the transaction).
            with transaction.atomic(using=using):
                insert_job(job, using)
        else:
            # In autocommit a refused INSERT spoils nothing, and a
            # transaction of its own would cost three more round trips.
            insert_job(job, using)
    except IntegrityError:
        return False
    return True


def _held(job: Job, using: str) -> bool:
    """Whether a job holds ``job.unique_key``: one read of the unique index
    in plain SQL, as the ORM's compile of a query cost more than the read
    (measured: an ORM lookup made enqueueing a new key twice as slow)."""
    connection = connections[using]
    quote = connection.ops.quote_name
    sql = f"SELECT 1 FROM {quote(job._meta.db_table)} WHERE {quote('unique_key')} = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [job.unique_key])
        return cursor.fetchone() is not None
