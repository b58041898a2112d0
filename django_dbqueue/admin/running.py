"""What a running job reports, as the admin shows it: its progress (a bar,
its message and when it was written), a cancel request until the worker
honours it, its checkpoint and its interruptions. The job page's *Progress*
section, the job list's progress column and the dashboard's running jobs
all draw them from here.

The bar is a ``<progress>`` element: browsers and screen readers know it
as a progress bar with its value, it needs no script and no inline style,
and without a value (a task that reported a message only) it is shown as
"in progress" without a figure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import ngettext

from ..jsonfield import Undecodable
from ..models import Job, Status
from . import display as show

# Fields the job page's Progress section may show, in order.
RUNNING_FIELDS = ("progress_bar", "cancel_request", "saved_checkpoint", "interruption_count")
# The job list reads these columns for its progress cells; the dashboard
# shows when the progress was written too.
LIST_PROGRESS_COLUMNS = ("progress", "progress_message", "cancel_requested_at")
PROGRESS_COLUMNS = (*LIST_PROGRESS_COLUMNS, "progress_at")
# A checkpoint is user data of any size: the page shows this much of it.
CHECKPOINT_SHOWN = 10_000
# The running jobs the dashboard lists, newest first.
DASHBOARD_RUNNING = 50


def percent(fraction: float | None) -> str:
    """ "42%", or "" when no fraction was reported (or a row holds nonsense)."""
    if fraction is None or not 0.0 <= fraction <= 1.0:
        return ""
    return f"{fraction * 100:.0f}%"


def progress_bar(fraction: float | None, label: str) -> SafeString:
    """A ``<progress>`` element named ``label`` for assistive technology;
    indeterminate when there is no fraction."""
    shown = percent(fraction)
    if not shown:
        return format_html('<progress class="dbqueue-bar" max="100" aria-label="{}"></progress>', label)
    value = f"{fraction * 100:.1f}"  # type: ignore[operator]  # percent() checked it
    return format_html(
        '<progress class="dbqueue-bar" max="100" value="{}" aria-label="{}">{}</progress>',
        value,
        label,
        shown,
    )


def progress_html(job: Job, *, compact: bool = False) -> SafeString | str:
    """The bar, its percentage and message, and how long ago it was written
    (the message only as a tooltip when ``compact``); "-" when the job
    reported nothing. A cancel request is said beside it."""
    fraction, message = job.progress, job.progress_message or ""
    stopping = job.status == Status.RUNNING and job.cancel_requested_at is not None
    if fraction is None and not message and not stopping:
        return "-"
    reported = fraction is not None or message
    parts = [progress_bar(fraction, f"Progress of job {job.pk}") if reported else ""]
    parts.append(format_html('<span class="dbqueue-percent">{}</span>', percent(fraction)))
    if not compact and message:
        parts.append(format_html('<span class="dbqueue-progress-message">{}</span>', show.printable(message)))
    if not compact and job.progress_at:
        # Its worker writes the latest report every CONTROL_INTERVAL while the
        # job runs, not with the outcome: a finished job keeps the last one written.
        when = "reported {} ago" if job.status == Status.RUNNING else "last reported while it ran, {} ago"
        parts.append(format_html('<span class="quiet">{}</span>', when.format(show.age(job.progress_at))))
    if stopping:
        parts.append(format_html('<span class="dbqueue-stopping">{}</span>', "stopping"))
    return format_html(
        '<div class="dbqueue-job-progress"{}>{}</div>',
        format_html(' title="{}"', show.printable(message)) if compact and message else "",
        format_html_join("", "{}", ((part,) for part in parts)),
    )


def cancel_request_html(job: Job) -> SafeString | str:
    """When a cancel was asked for, and what became of it."""
    requested = job.cancel_requested_at
    if requested is None:
        return "-"
    at = show.time_tag(requested)
    if job.status == Status.RUNNING:
        return format_html("Cancel requested at {}, waiting for the worker to stop the task.", at)
    if job.status in (Status.READY, Status.WAITING):
        return format_html("Cancel requested at {}; the worker that claims the job cancels it.", at)
    if job.status == Status.CANCELLED:
        return format_html("Cancel requested at {}, and done.", at)
    return format_html("Cancel requested at {}; the job ended {} first.", at, show.printable(job.status))


def checkpoint_html(value: Any) -> SafeString:
    """What the saved checkpoint says (steps done, the step in progress),
    then the document as indented JSON, cut after CHECKPOINT_SHOWN characters."""
    if value is None:
        return format_html("<p>{}</p>", "None saved.")
    if isinstance(value, Undecodable):
        return show.pretty_json(value)
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=repr)
    if len(text) <= CHECKPOINT_SHOWN:
        document = show.pretty_json(value)
    else:
        document = format_html(
            '<pre class="dbqueue-json">{}</pre><p class="help">{}</p>',
            show.printable(text[:CHECKPOINT_SHOWN]) + "…",
            f"The first {CHECKPOINT_SHOWN:,} of {len(text):,} characters.",
        )
    summary = checkpoint_summary(value)
    return format_html("<p>{}</p>{}", summary, document) if summary else document


def checkpoint_summary(value: Any) -> str:
    """One sentence for a checkpoint as RunningJob writes it,
    ``{"steps_done": [...], "step": ..., "cursor": ...}``; "" for any other
    shape (a row written by hand), which the JSON shows as it is."""
    if not isinstance(value, dict) or not set(value) <= {"steps_done", "step", "cursor"}:
        return ""
    done, step = value.get("steps_done") or [], value.get("step")
    if not isinstance(done, list) or not all(isinstance(name, str) for name in done):
        return ""
    parts = [f"Steps done: {', '.join(done)}." if done else "No step done yet."]
    if isinstance(step, str):
        parts.append(f"Step in progress: {step}.")
    elif value.get("cursor") is not None:
        parts.append("A cursor saved outside any step.")
    return show.printable(" ".join(parts))


def has_running_facts(job: Job) -> bool:
    """Whether the job page needs its Progress section."""
    return (
        job.status == Status.RUNNING
        or job.progress is not None
        or bool(job.progress_message)
        or job.cancel_requested_at is not None
        or job.checkpoint is not None
        or bool(job.interruptions)
    )


@dataclass(frozen=True)
class RunningRow:
    job: Job
    task: SafeString  # wraps at its dots, as in the job list
    worker: SafeString | str
    progress: SafeString | str


def running_jobs(jobs: QuerySet, limit: int = DASHBOARD_RUNNING) -> list[RunningRow]:
    """The newest running jobs, with only what the dashboard shows of them
    (the (status, id) index serves it)."""
    shown = ("pk", "task_path", "queue_name", "status", "owner", *PROGRESS_COLUMNS)
    running = jobs.filter(status=Status.RUNNING).order_by("-pk").only(*shown)[:limit]
    return [
        RunningRow(job, show.breakable(job.task_path), show.breakable(job.owner or "-"), progress_html(job))
        for job in running
    ]


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


class JobRunningFields(_ModelAdmin):
    """For JobAdmin: the *Progress* section of a running job's page (and of
    a finished one that reported progress, was asked to stop, saved a
    checkpoint or was interrupted), and the job list's progress column."""

    def get_fieldsets(self, request: HttpRequest, obj: Job | None = None) -> Any:
        fieldsets = list(super().get_fieldsets(request, obj))
        if obj is not None and has_running_facts(obj):
            fieldsets.insert(1, ("Progress", {"fields": RUNNING_FIELDS}))
        return fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> Any:
        return (*super().get_readonly_fields(request, obj), *RUNNING_FIELDS)

    @admin.display(description="progress")
    def progress_bar(self, job: Job) -> SafeString | str:
        return progress_html(job)

    # Blank for a job that is not running, "-" for a running one that reported nothing.
    @admin.display(description="progress", empty_value="")
    def progress_column(self, job: Job) -> SafeString | str:
        return progress_html(job, compact=True) if job.status == Status.RUNNING else ""

    @admin.display(description="cancel request")
    def cancel_request(self, job: Job) -> SafeString | str:
        return cancel_request_html(job)

    @admin.display(description="checkpoint")
    def saved_checkpoint(self, job: Job) -> SafeString:
        return checkpoint_html(job.checkpoint)

    @admin.display(description="interruptions")
    def interruption_count(self, job: Job) -> str:
        n = job.interruptions
        if not n:
            return "None."
        return ngettext(
            "%(count)d (a stopping worker gave the job back without spending an attempt).",
            "%(count)d (stopping workers gave the job back, each time without spending an attempt).",
            n,
        ) % {"count": n}
