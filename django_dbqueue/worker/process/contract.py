"""What the parts that record a run (stops.py, atomic.py) need of the job
runner (execution.py), as a type: they are handed the runner, and import
this, not execution.py, which imports them. And the error entry every
recorded failure carries."""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any, Protocol

from ...payload import Integers, bounded_text

if TYPE_CHECKING:
    from ...backend import DatabaseBackend
    from ...clock import DatabaseClock
    from ...db import DurableWrites
    from ...models import Job
    from ...options import QueueOptions
    from ...running.control import JobControl
    from ...tasks_api import Task
    from ...transitions import Finished
    from ..shared import Slot
    from .groups import AtomicGroup
    from .outcomes import OutcomeBuffer


class Runner(Protocol):
    backend: DatabaseBackend
    config: QueueOptions
    owner: str
    clock: DatabaseClock
    control: JobControl
    slot: Slot | None
    outcomes: OutcomeBuffer
    atomic: AtomicGroup
    writes: DurableWrites

    def settle(self) -> None: ...

    def integers(self) -> Integers: ...

    def call(self, job: Job, task: Task, started: Any) -> tuple[Any, BaseException | None]: ...

    def fail(
        self,
        job: Job,
        started: Any,
        exc: BaseException,
        *,
        final: bool,
        task: Task | None = None,
        why: str | None = None,
    ) -> str: ...

    def record(self, outcome: Finished) -> int: ...

    def finished(self, job: Job, task: Task, exc: BaseException | None = None) -> None: ...


def error_entry(exc: BaseException, runner: Runner) -> dict[str, str]:
    """A failed attempt's entry in the job's ``errors``."""
    return {
        "exception_class_path": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "traceback": bounded_text("".join(traceback.format_exception(exc))),
        "at": runner.clock.now().isoformat(),
        "worker": runner.owner,
    }
