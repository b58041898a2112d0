"""A job's story on its page: the timeline and the list of errors, told
from what its row records, so that "why did this job take two minutes?"
is answered there.

A batch claim records nothing per job until the outcome: the row keeps
when the latest claim took the job (``claimed_at``), its first start, its
last attempt's start, and one entry in ``errors`` per event that ended a
run. Each entry written since this version says which attempt it is about
and whether that attempt counts (``attempt``, ``spent``): a failure counts;
an interruption by a stopping worker, a dead worker's job that nobody knew
had started (recovered as a suspect) and a cancel before the start do not,
and the next run has the same number. An entry written before (or by SQL)
without them is numbered as the attempts that failed, latest last.

Times alone cannot order the events, since the worker stamps an entry by
its own estimate of the database's clock and the database stamps the
rest: each event has its place in the job's life, ``(attempt, step)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..status import Status
from .display import parse_time, pretty_json, printable, timestamp

if TYPE_CHECKING:
    from ..models import Job

# The steps of one attempt, in order: runs of it that did not count, its
# due time, its claim, its start, its failure.
UNCOUNTED, DUE, CLAIMED, START, FAILED = -3, -2, -1, 0, 1
CLASS_PATHS = {
    "interrupted": "django_dbqueue.exceptions.JobInterrupted",
    "lost": "django_dbqueue.exceptions.WorkerLost",
    "cancelled": "django_dbqueue.exceptions.JobCancelled",
    "snoozed": "django_dbqueue.exceptions.Snooze",
    "expired": "django_dbqueue.exceptions.JobExpired",
}


@dataclass(frozen=True)
class Event:
    at: datetime
    what: str
    order: tuple[float, float] = (0, 0)


@dataclass(frozen=True)
class Entry:
    """One of a job's ``errors``, read: which attempt, whether it counts."""

    number: int
    spent: bool
    path: str
    at: datetime | None
    worker: str
    retry_in: float | None
    raw: Any
    not_retried: str = ""  # why a retry policy ended the job with attempts left (retries.py)


def running_attempt(job: Job) -> int:
    """The number of the attempt a RUNNING job is in: a suspect's was counted in its claim."""
    return job.attempts if job.suspect else job.attempts + 1


def attempts_text(job: Job, short: bool = False) -> str:
    """The job's attempts: "1 / 3", or for a running job "attempt 1 of 3
    running" ("1 / 3", counting the one running, when ``short``)."""
    snoozes = 0 if short else job.snoozes  # the list's column stays short (and reads no more)
    snoozed = f", snoozed {snoozes} time{'s' if snoozes != 1 else ''}" if snoozes else ""
    if job.status != Status.RUNNING:
        return f"{job.attempts} / {job.max_attempts}{snoozed}"
    if short:
        return f"{running_attempt(job)} / {job.max_attempts}"
    return f"attempt {running_attempt(job)} of {job.max_attempts} running{snoozed}"


def entries(job: Job) -> list[Entry]:
    errors = job.errors if isinstance(job.errors, list) else []
    # Entries without a number: the attempts that failed, latest last.
    failed = job.attempts - (job.status in (Status.SUCCESSFUL, Status.RUNNING))
    legacy = max(1, failed - len(errors) + 1)
    found = []
    for position, error in enumerate(errors):
        if not isinstance(error, dict):
            found.append(Entry(legacy + position, True, "", None, "", None, error))
            continue
        number = error.get("attempt")
        if isinstance(number, bool) or not isinstance(number, int):
            number = legacy + position
        retry_in = error.get("retry_in")
        found.append(
            Entry(
                number=number,
                spent=error.get("spent") is not False,
                path=str(error.get("exception_class_path", "(unknown exception)")),
                at=parse_time(error.get("at")),
                worker=str(error.get("worker") or ""),
                retry_in=float(retry_in) if isinstance(retry_in, int | float) else None,
                raw=error,
                not_retried=str(error.get("not_retried") or ""),
            )
        )
    return found


def timeline(job: Job) -> list[Event]:
    """Enqueued, each attempt as far as the row records it, and the end."""
    events = [Event(job.enqueued_at, "Enqueued")]
    for entry in entries(job):
        if entry.at is not None:
            events.append(Event(entry.at, _told(entry), (entry.number, FAILED if entry.spent else UNCOUNTED)))
    if job.started_at:
        events.append(Event(job.started_at, "Started (first attempt)", (1, START)))
    # A suspect's claim records its start, then its outcome the worker's own
    # start: the first attempt's start is started_at either way.
    if job.attempts > 1 and job.last_attempted_at and job.last_attempted_at != job.started_at:
        events.append(Event(job.last_attempted_at, f"Attempt {job.attempts} started", (job.attempts, START)))
    claim = _claim(job)
    if claim is not None:
        events.append(claim)
    if job.status == Status.READY and job.run_after and job.run_after > job.enqueued_at:
        events.append(Event(job.run_after, "Due", (job.attempts + 1, DUE)))
    if job.finished_at:
        events.append(Event(job.finished_at, f"Finished: {job.status}", (float("inf"), 0)))
    return sorted(events, key=lambda event: (event.order, event.at))


def _claim(job: Job) -> Event | None:
    """The latest claim, where it belongs to the run in progress or to the
    last run (a later claim that never started it, such as a cancel before
    the start, has that run's entry instead)."""
    when = job.claimed_at
    if when is None:
        return None
    if job.status == Status.RUNNING:
        number, worker = running_attempt(job), job.owner or "?"
        if job.suspect:
            return Event(when, f"Attempt {number} claimed alone by {worker}, as a suspect", (number, CLAIMED))
        how = "in a batch: its start is recorded with its outcome"
        return Event(when, f"Attempt {number} claimed by {worker} ({how})", (number, CLAIMED))
    ran = job.last_attempted_at
    workers = job.worker_ids if isinstance(job.worker_ids, list) else []
    if ran is None or not workers:
        return None
    if job.status in (Status.READY, Status.WAITING):
        # Waiting again: a claim after the last start was given back unstarted.
        if when > ran:
            return None
    elif any(not entry.spent and entry.number > job.attempts for entry in entries(job)):
        # Finished by a run that never started (a cancel before the start):
        # the claim is that run's, told by its entry. Otherwise the claim is
        # the last run's even when it reads a little after the start: the
        # worker stamps the start by its estimate of the database's clock,
        # which may lag the database's own stamp of the claim.
        return None
    return Event(when, f"Attempt {job.attempts} claimed by {workers[-1]}", (job.attempts, CLAIMED))


def _told(entry: Entry) -> str:
    """What an entry says happened, in one line."""
    name = entry.path.rsplit(".", 1)[-1]
    on = f" {entry.worker}" if entry.worker else ""
    if entry.spent:
        if entry.path == CLASS_PATHS["cancelled"]:
            return f"Attempt {entry.number} cancelled while running"
        if entry.path == CLASS_PATHS["lost"]:
            return f"Attempt {entry.number} failed with WorkerLost: its worker{on} died running it alone"
        told = f"Attempt {entry.number} failed with {name}"
        if entry.not_retried:
            return f"{told}; not retried: {entry.not_retried}"
        return f"{told}; retry due {entry.retry_in:g} s later" if entry.retry_in is not None else told
    if entry.path == CLASS_PATHS["interrupted"]:
        back = "back to the queue, not counted"
        return f"Attempt {entry.number} interrupted by its stopping worker{on}: {back}"
    if entry.path == CLASS_PATHS["lost"]:
        return (
            f"Attempt {entry.number} lost: its worker{on} stopped heartbeating while holding it; back to "
            "the queue as a suspect, not counted"
        )
    if entry.path == CLASS_PATHS["cancelled"]:
        return f"Cancelled before attempt {entry.number} started"
    if entry.path == CLASS_PATHS["expired"]:
        return f"Expired before attempt {entry.number} started: cancelled without running"
    if entry.path == CLASS_PATHS["snoozed"] and isinstance(entry.raw.get("snoozed"), int | float):
        seconds = entry.raw["snoozed"]
        return f"Attempt {entry.number} snoozed for {seconds:g} s: back to the queue, not counted"
    return f"Attempt {entry.number} not run: {name}"


def timeline_html(job: Job) -> SafeString:
    return format_html(
        '<ol class="dbqueue-timeline">{}</ol>',
        format_html_join(
            "",
            '<li><time datetime="{}">{}</time> {}</li>',
            ((e.at.isoformat(), timestamp(e.at), printable(e.what)) for e in timeline(job)),
        ),
    )


def errors_html(job: Job) -> SafeString:
    """The job's errors, each with the attempt it is about (and whether it counts)."""
    found = entries(job)
    if not found:
        if job.errors and not isinstance(job.errors, list):  # a hand-written row may hold anything
            return pretty_json(job.errors)
        return format_html("<p>{}</p>", "No errors.")
    return format_html_join(
        "",
        '<div class="dbqueue-error"><p><strong>{}</strong> <span class="quiet">{}{}</span></p>'
        '<pre class="dbqueue-traceback">{}</pre></div>',
        (_error_parts(entry) for entry in found),
    )


def _error_parts(entry: Entry) -> tuple[str, str, str, str]:
    error = entry.raw
    if not isinstance(error, dict):
        return (f"Attempt {entry.number}: (unreadable error)", "", "", printable(str(error)))
    label = f"Attempt {entry.number}" if entry.spent else f"Attempt {entry.number}, not counted"
    when = timestamp(entry.at) if entry.at else str(error.get("at", ""))
    on = f" on {entry.worker}" if entry.worker else ""
    trace = str(error.get("traceback", ""))
    return tuple(printable(part) for part in (f"{label}: {entry.path}", when, on, trace))  # type: ignore[return-value]
