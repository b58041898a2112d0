"""The queue's own task that carries out a big operation chunk by chunk
(operations/big.py). Its own module, imported only by the worker that runs
it: ``@task`` reads the tasks backend when the module is imported."""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction

from ..enqueue.decorator import task
from ..running.job import current_job
from ..tasks_api import TASK_MAX_PRIORITY
from .big import OPERATION_ATTEMPTS, operation


@task(priority=TASK_MAX_PRIORITY, max_attempts=OPERATION_ATTEMPTS)
def run_operation(kind: str, params: dict[str, Any], total: int, chunk: int) -> dict[str, Any]:
    """Carry out the decided operation ``kind``, at most ``chunk`` rows per
    transaction, each with its position; resumes from the last one
    committed. Returns ``{"operation": kind, "rows": changed}``."""
    job = current_job()
    if job is None:
        raise RuntimeError("run_operation() runs in a django_dbqueue worker, which holds its job.")
    op = operation(kind)
    size = max(1, int(chunk))
    using = job._control.database
    # The position is {"at": the operation's cursor, "rows": changed so far}.
    saved = job.cursor if isinstance(job.cursor, dict) else {}
    at, rows, done = saved.get("at"), int(saved.get("rows", 0)), bool(saved.get("done"))
    most = size
    while not done:
        began = time.monotonic()
        with transaction.atomic(using=using):
            step = op.chunk(using, params, at, size)
            at, rows, done = step.cursor, rows + step.rows, step.done
            fraction = 1.0 if done else min(1.0, rows / total) if total > 0 else None
            said = f"{rows:,} rows: done" if done else f"{rows:,} of {total:,} rows"
            job.checkpoint_with({"at": at, "rows": rows, "done": done}, fraction, said)
        size = next_size(size, most, time.monotonic() - began)
        job.check()  # a cancel asked for, or a stop: between chunks
    return {"operation": kind, "rows": rows}


# A chunk's transaction should last about this long: rows cost differently
# (a requeue writes more than a cancel, a busy server is slower), so the
# number of rows per chunk follows the time the last one took.
CHUNK_SECONDS = 0.25
FEWEST_ROWS = 10


def next_size(size: int, most: int, took: float) -> int:
    """The next chunk's rows, after one of ``size`` rows took ``took`` seconds."""
    if took > CHUNK_SECONDS:
        return max(min(FEWEST_ROWS, most), int(size * CHUNK_SECONDS / took))
    if took < CHUNK_SECONDS / 2:
        return min(most, size * 2)
    return size
