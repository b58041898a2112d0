"""How a failed attempt is told in the worker's log: a retry as a WARNING,
a final failure as an ERROR, each with the task's traceback (and, for a
failure a retry policy did not retry, why not: retries.py)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...status import Status

if TYPE_CHECKING:
    from ...models import Job
    from ...transitions import Finished

logger = logging.getLogger("django_dbqueue")


def log_failure(
    job: Job, attempts: int, outcome: Finished, exc: BaseException, not_retried: str | None = None
) -> None:
    attempt = f"attempt {attempts} of {job.max_attempts}"
    if not_retried:
        attempt = f"{attempt}, not retried: {not_retried}"
    if outcome.status == Status.READY:
        wait = outcome.retry_in.total_seconds() if outcome.retry_in else 0
        logger.warning(
            "Job %s (%s) failed on %s; retrying in %.1fs.",
            job.pk,
            job.task_path,
            attempt,
            wait,
            exc_info=(type(exc), exc, exc.__traceback__),
        )
    else:
        logger.error(
            "Job %s (%s) FAILED on %s.",
            job.pk,
            job.task_path,
            attempt,
            exc_info=(type(exc), exc, exc.__traceback__),
        )
