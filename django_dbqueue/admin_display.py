"""How the admin shows a job. Everything a job carries is user data, so every
piece of it goes through ``format_html`` / ``escape``; nothing is marked safe
as it stands."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.timesince import timesince
from django.utils.timezone import localtime

if TYPE_CHECKING:
    from .models import Job


def status_badge(status: str) -> SafeString:
    # The class names are fixed; the label goes through format_html anyway,
    # since a row written by plain SQL may carry any status text.
    return format_html('<span class="dbqueue-badge dbqueue-{}">{}</span>', status.lower(), status)


def pretty_json(value: Any) -> SafeString:
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=repr)
    return format_html('<pre class="dbqueue-json">{}</pre>', text)


def age(since: datetime | None) -> str:
    return timesince(since, depth=1) if since else "-"


def timestamp(value: datetime | None) -> str:
    # Compact and sortable by eye; Django's default long format wraps columns.
    return f"{localtime(value):%Y-%m-%d %H:%M:%S}" if value else "-"


def errors_html(errors: Any) -> SafeString:
    if not errors:
        return format_html("<p>{}</p>", "No errors.")
    if not isinstance(errors, list):  # hand-written rows may hold anything
        return pretty_json(errors)
    return format_html_join(
        "",
        '<div class="dbqueue-error"><p><strong>{}</strong> <span class="quiet">{}{}</span></p>'
        '<pre class="dbqueue-traceback">{}</pre></div>',
        (_error_parts(number, error) for number, error in enumerate(errors, start=1)),
    )


def _error_parts(number: int, error: Any) -> tuple[str, str, str, str]:
    if not isinstance(error, dict):
        return (f"{number}. (unreadable error)", "", "", json.dumps(error, default=repr))
    worker = f" on {error['worker']}" if error.get("worker") else ""
    return (
        f"{number}. {error.get('exception_class_path', '(unknown exception)')}",
        str(error.get("at", "")),
        worker,
        str(error.get("traceback", "")),
    )


@dataclass(frozen=True)
class Event:
    at: datetime
    what: str


def timeline(job: Job) -> list[Event]:
    """Enqueued, each attempt as far as the row records it, and the end.

    A batch claim writes nothing per job until the outcome, so a job keeps its
    first start, its last attempt and one error per failed attempt; the
    timeline shows exactly those."""
    events = [Event(job.enqueued_at, "Enqueued")]
    if job.started_at:
        events.append(Event(job.started_at, "Started (first attempt)"))
    for number, error in enumerate(job.errors if isinstance(job.errors, list) else [], start=1):
        at = _parse_time(error.get("at")) if isinstance(error, dict) else None
        if at:
            name = str(error.get("exception_class_path", "an error")).rsplit(".", 1)[-1]
            events.append(Event(at, f"Attempt {number} failed with {name}"))
    if job.last_attempted_at and job.last_attempted_at != job.started_at:
        events.append(Event(job.last_attempted_at, f"Attempt {job.attempts} started"))
    if job.status == "READY" and job.run_after and job.run_after > job.enqueued_at:
        events.append(Event(job.run_after, "Due"))
    if job.finished_at:
        events.append(Event(job.finished_at, f"Finished: {job.status}"))
    return sorted(events, key=lambda event: event.at)


def timeline_html(job: Job) -> SafeString:
    return format_html(
        '<ol class="dbqueue-timeline">{}</ol>',
        format_html_join(
            "",
            '<li><time datetime="{}">{}</time> {}</li>',
            ((e.at.isoformat(), f"{e.at:%Y-%m-%d %H:%M:%S}", e.what) for e in timeline(job)),
        ),
    )


def _parse_time(value: Any) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    # A naive time cannot be sorted among the row's aware ones.
    return parsed if parsed is None or parsed.tzinfo else parsed.replace(tzinfo=UTC)
