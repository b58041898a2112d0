"""A task that raises ``Snooze(seconds)`` gives its job back for that long
without spending an attempt ("the partner said 429: try in 30 s"): READY
again, due then, its ``snoozes`` one more. Past the task's ``max_snoozes``
(or the backend's ``MAX_SNOOZES``), or with a time that is not a delay, the
job ends FAILED instead, saying why, so a task cannot snooze for ever.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ...limits import MAX_SECONDS
from ...retries import as_delay
from ...shown import shown
from ...status import Status
from ...transitions import Finished
from .contract import error_entry

if TYPE_CHECKING:
    from ...exceptions import Snooze
    from ...models import Job
    from ...tasks_api import Task
    from .contract import Runner

logger = logging.getLogger("django_dbqueue")


def snooze_or_fail(runner: Runner, job: Job, started: Any, snooze: Snooze, task: Task | None) -> str:
    """Record the snooze, or the job's failure when it may not snooze."""
    bound = getattr(task, "max_snoozes", None)
    if bound is None:
        bound = runner.config.MAX_SNOOZES
    seconds = as_delay(snooze.seconds)
    if seconds is None:
        why = (
            f"Snooze({shown(snooze.seconds)}) is not a delay: give a number of seconds from 0 to "
            f"{MAX_SECONDS:,} (366 days), or a timedelta"
        )
        return runner.fail(job, started, snooze, final=True, task=task, why=why)
    if job.snoozes >= bound:
        why = f"it snoozed {job.snoozes} times, the most it may (max_snoozes {bound})"
        return runner.fail(job, started, snooze, final=True, task=task, why=why)
    runner.settle()
    entry: dict[str, Any] = {**error_entry(snooze, runner), "snoozed": seconds}
    outcome = Finished(
        job,
        started,
        runner.clock.now(),
        status=Status.READY,
        error=entry,
        retry_in=timedelta(seconds=seconds),
        ran=False,
        snoozed=True,
    )
    runner.record(outcome)
    logger.info(
        "Job %s (%s) snoozed for %gs (%d of at most %d snoozes); its attempt is not spent.",
        job.pk,
        job.task_path,
        seconds,
        job.snoozes,
        bound,
    )
    if task is not None:
        runner.finished(job, task, snooze)
    return Status.READY
