"""When a worker does not stop its job in time, the supervisor does.

A worker stops a job itself, inside its own process: at the job's timeout
(process/timeouts.py), a cancel request's grace, or a stop's timeout. That reaches
Python code and every call Python retries after a signal, but not a task
stuck in one C call that holds the GIL, nor a worker that was paused
(SIGSTOP). So the supervisor watches the same moments in shared memory,
HARD_GRACE later, and SIGKILLs the worker process if it is still on the
job (kill()); SIGKILL ends a paused process too. The supervisor then writes what the
worker could not, itself: the worker is dead, so nothing races it, and the
write is conditional on the dead worker's lease all the same.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import connections

from ...db import DB_ERRORS
from ...status import Status
from ..process.timeouts import HARD_GRACE
from ..shared import SharedState, Slot

if TYPE_CHECKING:
    from ...options import QueueOptions

logger = logging.getLogger("django_dbqueue")

# A stop's own grace, after STOP_TIMEOUT, before the worker raises
# JobInterrupted in a job that reached no checkpoint: short, since a deploy
# waits for it (docs/deploys.md).
MAX_STOP_GRACE = 5.0


@dataclass(frozen=True)
class Overdue:
    """A job its worker did not stop in time: ``why`` is ``"timeout"``,
    ``"cancel"`` or ``"stop"``; ``job_id`` the job in hand (0: unknown)."""

    why: str
    job_id: int
    owner: str

    def describe(self, pid: int) -> str:
        if self.why == "timeout":
            return (
                f"Worker process {pid} is stuck in a job past its timeout and did not react to the "
                "alarm; killing it (its job returns as a dead worker's does)."
            )
        what, then = {
            "cancel": ("its cancel was asked and it did not stop within the grace", "ends CANCELLED"),
            "stop": ("the stop timeout ran out and it reached no checkpoint", "goes back to the queue"),
        }[self.why]
        return (
            f"Worker process {pid} is still running job {self.job_id}, although {what} (stuck in C code, "
            f"or paused); killing it (the job {then})."
        )


def stop_grace(config: QueueOptions) -> float:
    """How long past the stop timeout a worker waits for a checkpoint before
    raising JobInterrupted in its job itself."""
    return min(config.CANCEL_GRACE_SECONDS, MAX_STOP_GRACE)


class StuckWatch:
    """The supervisor's view of each worker's job against its deadlines."""

    def __init__(self, config: QueueOptions, state: SharedState) -> None:
        self.config = config
        self.state = state
        self.stop_deadline: float | None = None  # elapsed clock; None: not stopping, or no timeout

    def stopping(self, now: float) -> None:
        """The supervisor heard its first stop signal at ``now``."""
        timeout = self.config.STOP_TIMEOUT
        if timeout is not None and self.stop_deadline is None:
            self.stop_deadline = now + timeout

    def overdue(self, index: int, now: float) -> Overdue | None:
        slot = self.state.slot(index)
        job_id, owner = slot.job_id, slot.name
        if slot.deadline and now > slot.deadline:
            return Overdue("timeout", job_id, owner)
        if not job_id:
            return None
        posted, since = slot.cancel_posted()
        if posted == job_id and now > since + self.config.CANCEL_GRACE_SECONDS + HARD_GRACE:
            return Overdue("cancel", job_id, owner)
        stop = self._stop_deadline(slot)
        if stop is not None and now > stop + stop_grace(self.config) + HARD_GRACE:
            return Overdue("stop", job_id, owner)
        return None

    def _stop_deadline(self, slot: Slot) -> float | None:
        # The worker's own deadline when it published one (it may have heard
        # the stop a moment after this process), never an earlier one.
        if self.stop_deadline is None:
            return None
        return max(self.stop_deadline, slot.stop_deadline)


def kill(process: Any, slot: Slot, overdue: Overdue, database: str) -> bool:
    """SIGKILL the worker ``process`` (on ``slot``) that did not stop its job
    in time, and write what it could not (record_killed); whether it died
    (if not, nothing is written)."""
    logger.error(overdue.describe(process.pid))
    slot.deadline = 0.0
    # No more heartbeats for it: without the write below, its job comes
    # back as a dead worker's does, after one lease.
    slot.name = ""
    os.kill(process.pid, signal.SIGKILL)
    process.join(HARD_GRACE)
    if process.is_alive():
        return False  # never write for a worker that may still write itself
    try:
        if record_killed(database, overdue):
            # Counted as the worker would have: the slot has no other writer now.
            # An interrupted job is given back, not processed.
            if overdue.why != "stop":
                slot.count(failed=False)
            slot.count_control(cancelled=overdue.why == "cancel", interrupted=overdue.why == "stop")
    except DB_ERRORS as exc:
        logger.warning(
            "Could not record job %d of the killed worker (%s); it returns to the queue when its "
            "lease expires.",
            overdue.job_id,
            exc,
        )
    except Exception:
        # Whatever the row holds, one job's outcome must not end the supervisor.
        logger.exception(
            "Could not record job %d of the killed worker; it returns to the queue when its lease expires.",
            overdue.job_id,
        )
    finally:
        connections.close_all()  # the supervisor's next restart forks; hold nothing
    return True


def record_killed(database: str, overdue: Overdue) -> bool:
    """Write the outcome the killed worker could not: its cancelled job
    CANCELLED, its interrupted job back READY, attempt unspent; whether the
    worker still held it. (A job past its timeout comes back as any dead
    worker's does, after its lease.)"""
    from ...models import Job

    if overdue.why == "timeout" or not overdue.job_id or not overdue.owner:
        return False
    jobs = Job.objects.using(database)
    if overdue.why == "cancel":
        error = _cancelled_entry(database, overdue)
        done = error is not None and jobs.cancel_running(overdue.owner, overdue.job_id, error)
        outcome = f"{Status.CANCELLED.label.lower()}, not run again"
    else:
        done = bool(jobs.interrupt(overdue.owner, [overdue.job_id]))
        outcome = "given back to the queue, its attempt unspent"
    if done:
        logger.warning("Job %d of the killed worker %s: %s.", overdue.job_id, overdue.owner, outcome)
    else:
        # Deleted, finished, or recovered by another worker since the look
        # that found it overdue: the row is no longer the killed worker's.
        logger.warning(
            "Job %d of the killed worker %s: nothing to record, since its row is no longer that "
            "worker's (deleted, finished or taken over meanwhile).",
            overdue.job_id,
            overdue.owner,
        )
    return done


def _cancelled_entry(database: str, overdue: Overdue) -> dict[str, str] | None:
    """The cancelled attempt's error entry; None if the job's row is gone."""
    from ...clock import read_database_now
    from ...models import Job
    from ...transitions.running import cancelled_error

    job = Job.objects.using(database).only("cancel_requested_at").filter(pk=overdue.job_id).first()
    if job is None:
        return None
    how = "while running; it did not stop within CANCEL_GRACE_SECONDS, so its worker was killed"
    return cancelled_error(job, read_database_now(database), overdue.owner, how)
