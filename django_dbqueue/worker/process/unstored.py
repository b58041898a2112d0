"""What becomes of an outcome the database will not take as it stands.

A failed, cancelled or interrupted attempt's outcome carries the last
checkpoint the task took and had not written yet (running/checkpoints.py).
That position must never cost the job its outcome, nor the task's own
error: a checkpoint that cannot be stored is dropped (``unsaved()`` checks
it), and an outcome the database refuses with a checkpoint is written again
without it. Either way the error entry says the position was not saved and
why, and the next attempt resumes from the last checkpoint saved.

Only an outcome refused without any checkpoint ends the job FAILED here
(a return value or error the database will not take): with the task's own
error kept, and saying why the job ends there.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from ...db import DB_ERRORS, brief, drop_connection, is_outage
from ...exceptions import ResultNotStorable
from ...payload import bounded_text
from ...status import Status
from ...transitions import UNCHANGED, Finished
from .contract import error_entry
from .outcomes import REFUSED

if TYPE_CHECKING:
    from ...models import Job
    from ...running.control import JobControl
    from .contract import Runner

logger = logging.getLogger("django_dbqueue")


def note_dropped(outcome: Finished, control: JobControl) -> None:
    """Say in ``outcome``'s error that the attempt's last position was
    dropped as one that cannot be stored, if it was."""
    why = control.dropped(outcome.job)
    if why is not None and outcome.error is not None:
        outcome.error = not_saved(outcome.error, why)


def not_storable(exc: Exception) -> ResultNotStorable:
    """What checking a return value raised, as the failure to record."""
    if isinstance(exc, ResultNotStorable):
        return exc
    return ResultNotStorable(f"Checking the return value failed: {bounded_text(repr(exc), 2000)}")


def not_saved(error: dict[str, str], why: str) -> dict[str, str]:
    """``error`` saying that the attempt's last checkpoint was not saved, and why."""
    note = (
        f"\n\nThe attempt's last checkpoint was not saved: {why} The next attempt resumes from the "
        "last checkpoint saved before it.\n"
    )
    return {**error, "traceback": bounded_text(error.get("traceback", "") + note)}


def record_refused(runner: Runner, outcome: Finished, refused: BaseException) -> int:
    """Write ``outcome`` that the database refused: without its checkpoint
    if it carried one; else (or refused again) FAILED, keeping the
    attempt's own error. Returns the rows written (0: lease lost)."""
    from ...models import Job

    jobs = Job.objects.using(runner.backend.database)
    if outcome.checkpoint is not UNCHANGED:
        lighter = dataclasses.replace(outcome, checkpoint=UNCHANGED)
        why = f"the database refused it ({brief(refused)})."
        lighter.error = not_saved(outcome.error, why) if outcome.error is not None else None
        logger.warning("Job %s: its checkpoint was not saved, %s", outcome.job.pk, why)
        try:
            return runner.writes(lambda: jobs.record(runner.owner, lighter))
        except REFUSED as again:
            _give_up_on_connection(runner, again)
            refused, outcome = again, lighter
    fallback = Finished(outcome.job, outcome.started, outcome.finished, status=Status.FAILED)
    fallback.error = _failed_error(runner, outcome, refused)
    logger.error(
        "Job %s: the database refused its outcome (%s); it ends FAILED.", outcome.job.pk, brief(refused)
    )
    return runner.writes(lambda: jobs.record(runner.owner, fallback))


def _failed_error(runner: Runner, outcome: Finished, refused: BaseException) -> dict[str, str]:
    """The error of a job whose outcome could not be written: the attempt's
    own (its exception class stays the task's), saying why the job ends
    FAILED; ResultNotStorable for a success, which has none."""
    why = f"The database refused to store this job's outcome: {brief(refused)}"
    if outcome.error is None:
        return error_entry(ResultNotStorable(why), runner)
    note = f"\n\n{why}. So the job ends FAILED here, whatever its attempts left.\n"
    return {**outcome.error, "traceback": bounded_text(outcome.error.get("traceback", "") + note)}


def interrupt_refused(
    runner: Runner, job: Job, note: dict[str, str], refused: BaseException, checkpoint: Any
) -> int | None:
    """Give back an interrupted job whose interruption the database refused:
    without the checkpoint it carried. If that is refused too, the job is
    left RUNNING for lease recovery, and the stopping worker goes on
    stopping. Returns the rows written; None for that refusal (logged)."""
    from ...models import Job

    jobs = Job.objects.using(runner.backend.database)
    if checkpoint is not None:
        note = not_saved(note, f"the database refused it ({brief(refused)}).")
        try:
            return runner.writes(lambda: jobs.interrupt(runner.owner, [job.pk], note))
        except REFUSED as again:
            _give_up_on_connection(runner, again)
            refused = again
    logger.error(
        "Job %s: the database refused to give it back (%s); it stays RUNNING until lease recovery "
        "returns it to the queue.",
        job.pk,
        brief(refused),
    )
    return None


def _give_up_on_connection(runner: Runner, exc: BaseException) -> None:
    """Raise ``exc`` again if it is an outage (DurableWrites' to handle);
    else forget the connection, which MySQL drops after a packet too big."""
    database = runner.backend.database
    if isinstance(exc, DB_ERRORS) and is_outage(exc, database):
        raise exc
    drop_connection(database)
