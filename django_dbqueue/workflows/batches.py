"""Batches from code: ``batch()`` makes one, ``get_batch(id)`` reads one,
``current_batch()`` is the running job's. A batch is filled inside a
``with`` block (every enqueue on its database there joins it, one by one
or with ``bulk_enqueue``) and sealed when the block that made it ends:
only a sealed batch completes, so its first members finishing early do
not fire its callbacks while it is still being filled. A member job may
add more members (``with current_batch(): ...``) while it runs: the batch
cannot complete meanwhile, as that member has not finished.
"""

from __future__ import annotations

from datetime import datetime
from types import TracebackType
from typing import Any

from django.db import transaction
from django.db.models import Count

from ..db import retry_on_conflict
from ..operations.big import Started, start
from ..status import Status
from ..tasks_api import TaskResult, task_backends
from ..transitions import batches as transitions
from .calls import Call, callback_spec
from .context import joining, running
from .models import Batch, BatchStatus


class BatchHandle:
    """One batch, as read by ``get_batch()``: its fields, and its members'
    counts at the time of reading (``refresh()`` reads them again)."""

    id: int
    status: str
    description: str
    metadata: dict[str, Any]
    sealed: bool
    created_at: datetime
    finished_at: datetime | None
    callback_job_ids: list[int]
    counts: dict[str, int]

    def __init__(self, batch_id: int, database: str) -> None:
        self.id, self.database = batch_id, database
        self._tokens: list[Any] = []
        self.refresh()

    def refresh(self) -> BatchHandle:
        try:
            row = Batch.objects.using(self.database).get(pk=self.id)
        except Batch.DoesNotExist:
            raise LookupError(f"There is no batch #{self.id} in the database {self.database!r}.") from None
        for name in ("status", "description", "metadata", "sealed", "created_at", "finished_at"):
            setattr(self, name, getattr(row, name))
        self.callback_job_ids = list(row.callback_job_ids or [])
        members = _jobs(self.database).filter(batch_id=self.id).order_by()
        self.counts = dict(members.values_list("status").annotate(Count("pk")))
        return self

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def succeeded(self) -> int:
        return self.counts.get(Status.SUCCESSFUL, 0)

    @property
    def failed(self) -> int:
        return self.counts.get(Status.FAILED, 0)

    @property
    def cancelled(self) -> int:
        return self.counts.get(Status.CANCELLED, 0)

    @property
    def pending(self) -> int:
        return sum(self.counts.get(status, 0) for status in (Status.READY, Status.RUNNING, Status.WAITING))

    @property
    def finished(self) -> bool:
        return self.status != BatchStatus.OPEN

    def __repr__(self) -> str:
        return f"<batch #{self.id} {self.status}: {self.succeeded}/{self.total} succeeded>"

    def __enter__(self) -> BatchHandle:
        self.sealed = self._open_sealed()
        self._tokens.append((joining.set((self.database, self.id)), self.sealed))
        return self

    def _open_sealed(self) -> bool:
        """Whether the batch is sealed; ValueError if it has finished."""
        row = Batch.objects.using(self.database).filter(pk=self.id).values_list("status", "sealed").first()
        if row is None or row[0] != BatchStatus.OPEN:
            self.status = row[0] if row else "deleted"
            raise ValueError(
                f"The batch #{self.id} has finished ({self.status}); a finished batch takes no new "
                "jobs. Make a new batch, or retry_failed() this one."
            )
        member = running.get()
        if row[1] and (member is None or member.batch_id != self.id):
            # Only an unfinished member holds a sealed batch open: from
            # anywhere else its last member could finish, and the batch
            # complete, between this look and the new job's INSERT.
            raise ValueError(
                f"The batch #{self.id} is sealed: only its own members, while they run, may add "
                "jobs to it (with current_batch(): ...). Add every member before the batch is "
                "sealed, or make a new batch."
            )
        return row[1]

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        token, was_sealed = self._tokens.pop()
        joining.reset(token)
        if not was_sealed:
            # Sealed whatever happened: the members already written stay
            # (nothing is lost), and the batch completes when they finish.
            self.seal()

    def add(self, task: Any, /, *args: Any, **kwargs: Any) -> TaskResult:
        """Enqueue one member: ``task.enqueue(*args, **kwargs)`` inside this
        batch. It does not seal the batch: ``seal()`` does, once every member
        is added (or the end of the ``with`` block that made it)."""
        self._open_sealed()
        token = joining.set((self.database, self.id))
        try:
            return task.enqueue(*args, **kwargs)
        finally:
            joining.reset(token)

    def seal(self) -> None:
        """Say every member has been added: the batch completes when the last
        finishes, or now if none is unfinished (an empty batch succeeds at once)."""

        def seal() -> None:
            with transaction.atomic(using=self.database):
                transitions.seal(self.database, self.id)

        # Sealing as the last member finishes may deadlock with its outcome
        # (transitions/completion.py's step 2): the database rolls one back, we try again.
        retry_on_conflict(seal, self.database)
        self.refresh()

    def cancel(self) -> Started:
        """Cancel the batch: it is CANCELLED at once (no member is claimed
        from then on), then its READY and WAITING members are, and their
        dependants and the batch's, by their policy; RUNNING members finish.
        No callback runs. Returns how many members it cancels (0 if the
        batch was not open), an int whose ``job_id`` is the operation job
        that cancels them chunk by chunk when there are more than
        OPTIONS ``OPERATION_INLINE_ROWS`` (None: they were cancelled at once)."""
        return self._start("cancel_batch")

    def retry_failed(self) -> Started:
        """Requeue the failed and cancelled members and open the batch
        again: it completes, and its callbacks run, when they finish.
        Returns how many members it requeues, an int whose ``job_id`` is
        the operation job that requeues them chunk by chunk when there are
        more than OPTIONS ``OPERATION_INLINE_ROWS`` (None: requeued at once)."""
        return self._start("retry_batch")

    def _start(self, kind: str) -> Started:
        started = retry_on_conflict(lambda: start(kind, self.database, {"batch": self.id}), self.database)
        self.refresh()
        return started


def batch(
    description: str = "",
    *,
    metadata: dict[str, Any] | None = None,
    on_success: Call | Any = None,
    on_failure: Call | Any = None,
    on_finish: Call | Any = None,
    backend: str = "default",
) -> BatchHandle:
    """Make a batch on the database of the tasks backend ``backend``::

        with batch("import", on_success=call(notify, "import done")) as b:
            for row in rows:
                import_row.enqueue(row)

    Each callback (a task, or ``call(task, *args, **kwargs)``) is enqueued
    once, in the transaction that records the last member's outcome, with
    ``batch_id=`` added to its keyword arguments: ``on_success`` when every
    member succeeded, ``on_failure`` when any failed or was cancelled,
    ``on_finish`` either way.
    """
    database = _database(backend)
    if metadata is not None and not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict (a JSON object), not {type(metadata).__name__}.")
    row = Batch.objects.using(database).create(
        description=description,
        metadata=metadata or {},
        on_success=callback_spec(on_success, "on_success"),
        on_failure=callback_spec(on_failure, "on_failure"),
        on_finish=callback_spec(on_finish, "on_finish"),
    )
    return BatchHandle(row.pk, database)


def get_batch(batch_id: int | str, *, backend: str = "default") -> BatchHandle:
    """The batch ``batch_id``, with its counts as of now; LookupError if there is none."""
    return BatchHandle(int(batch_id), _database(backend))


def current_batch() -> BatchHandle | None:
    """Inside a job this worker runs: its batch (``None`` if it has none).
    Outside: the batch whose ``with`` block this is, if any."""
    job = running.get()
    if job is not None:
        return BatchHandle(job.batch_id, job._state.db or "default") if job.batch_id else None
    filling = joining.get()
    return BatchHandle(filling[1], filling[0]) if filling else None


def _database(backend: str) -> str:
    database = getattr(task_backends[backend], "database", None)
    if not isinstance(database, str):
        raise TypeError(
            f"Batches need a django_dbqueue DatabaseBackend; the tasks backend {backend!r} is not one."
        )
    return database


def _jobs(database: str) -> Any:
    from ..models import Job

    return Job._base_manager.using(database)
