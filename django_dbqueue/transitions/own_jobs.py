"""The jobs the queue inserts for itself, inside the transaction that
decided them: a completed batch's callbacks, and the operation job that
carries on a cascade (or a batch's cancel, or an admin action) too big
for one transaction (operations/big.py).

Why here, below enqueue/ and operations/: the workflow cascade that
inserts them runs inside an outcome's transaction, which is
transitions/' (cascade.py), and transitions/ imports nothing from
enqueue/ or operations/ (docs/development.md's import rules). So the
lower primitives live on the lower floor and the upper ones use them: a
callback job goes through ``insert_job`` (inserts.py), the INSERT the
enqueue plan uses, instead of an ORM save of its own; operations/big.py
re-exports the operation job's insert and its limits, which it decides with.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from .. import tables
from ..clock import DbNow
from .inserts import insert_job

# Where a callback job's metadata names the callback it is ("on_success",
# "on_failure" or "on_finish"), for its batch's page and for the task.
CALLBACK_KEY = "batch_callback"

# The queue's own task that runs an operation (operations/big_task.py).
TASK_PATH = "django_dbqueue.operations.big_task.run_operation"
# A crash or a kill between chunks costs an attempt (the job ran): enough
# for a few of them, as the work done is kept.
OPERATION_ATTEMPTS = 10
# Where an operation job's metadata names its kind, for its page and the tests.
METADATA_KEY = "operation"


def insert_callbacks(
    using: str, batch_id: int, specs: list[tuple[str, dict[str, Any]]], now: datetime
) -> list[int]:
    """Insert one READY job per ``(name, spec)`` callback, due ``now`` (the
    database's time), with ``batch_id`` among its keyword arguments and
    ``name`` in its metadata, in the caller's transaction; returns their ids."""
    Job = tables.job()

    ids = []
    for name, spec in specs:
        job = Job(
            metadata={CALLBACK_KEY: name},
            task_path=spec["task"],
            args=list(spec.get("args") or []),
            kwargs={**(spec.get("kwargs") or {}), "batch_id": batch_id},
            queue_name=spec.get("queue_name", "default"),
            priority=spec.get("priority", 0),
            max_attempts=spec.get("max_attempts", 3),
            run_after=now,
            enqueued_at=now,
        )
        insert_job(job, using)
        ids.append(job.pk)
    return ids


class Limits(NamedTuple):
    inline: int  # rows changed at once, without a job
    chunk: int  # rows per chunk of an operation job
    queue: str  # the queue operation jobs go to


def limits(using: str) -> Limits:
    """The options of the first django_dbqueue backend on ``using``."""
    from ..options import QueueOptions
    from ..routing import queue_backends

    for backend in queue_backends():
        if backend.database == using:
            config = backend.config
            queue = operations_queue(backend)
            return Limits(config.OPERATION_INLINE_ROWS, config.OPERATION_CHUNK_ROWS, queue)
    return Limits(QueueOptions.OPERATION_INLINE_ROWS, QueueOptions.OPERATION_CHUNK_ROWS, "default")


def operations_queue(backend: Any) -> str:
    """OPERATIONS_QUEUE, or else ``default`` if the backend serves it (or
    lists no queues), or else the first of its QUEUES in name order."""
    chosen = backend.config.OPERATIONS_QUEUE
    if chosen:
        return chosen
    queues = sorted(backend.queues or ())
    return "default" if not queues or "default" in queues else queues[0]


def enqueue_operation(using: str, kind: str, params: dict[str, Any], total: int) -> int:
    """Insert the job that carries out the decided operation ``kind``, in
    the caller's transaction; returns its id."""
    Job = tables.job()
    from ..tasks_api import TASK_MAX_PRIORITY

    options = limits(using)
    job = Job(
        task_path=TASK_PATH,
        args=[],
        kwargs={"kind": kind, "params": params, "total": total, "chunk": options.chunk},
        queue_name=options.queue,
        # Before the queue's own work: a cancel's members wait unclaimed meanwhile.
        priority=TASK_MAX_PRIORITY,
        max_attempts=OPERATION_ATTEMPTS,
        metadata={METADATA_KEY: kind},
        run_after=DbNow(),
        enqueued_at=DbNow(),
    )
    # An ORM save, as before the move: its times are the database's own
    # (DbNow in the INSERT), which insert_job's prepared values cannot hold.
    job.save(using=using, force_insert=True)
    return int(job.pk)
