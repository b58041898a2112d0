"""Which batch an enqueue joins, and which job this worker is running:
context variables, so threads and async tasks each see their own."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..running.control import controls

if TYPE_CHECKING:
    from ..models import Job
    from ..running.control import JobControl

# (database, batch id) of the innermost ``with batch(...)`` block.
joining: ContextVar[tuple[str, int] | None] = ContextVar("dbqueue_batch", default=None)
running: ContextVar[Job | None] = ContextVar("dbqueue_running_job", default=None)


def batch_fields(database: str) -> dict[str, Any]:
    """The Job fields an enqueue on ``database`` gets from the batch block it is in."""
    current = joining.get()
    if current is None:
        return {}
    if current[0] != database:
        raise ValueError(
            f"This task's backend writes to the database {database!r}, but the batch #{current[1]} "
            f"being filled lives in {current[0]!r}; enqueue it outside the batch block, or create "
            "the batch with using= that database's backend."
        )
    return {"batch_id": current[1]}


class running_job:  # noqa: N801 (used as a function: with running_job(job): ...)
    """Mark ``job`` as the one this worker runs (``current_batch()`` reads
    it), and ``control`` as its worker's side (``current_job()`` reads it).
    A class, not a @contextmanager: the worker enters it for every job, and
    the generator's machinery cost a microsecond each time."""

    __slots__ = ("control", "job", "tokens")

    def __init__(self, job: Job, control: JobControl | None = None) -> None:
        self.job, self.control = job, control

    def __enter__(self) -> None:
        self.tokens = running.set(self.job), controls.set(self.control)

    def __exit__(self, *exc: object) -> None:
        running.reset(self.tokens[0])
        controls.reset(self.tokens[1])
