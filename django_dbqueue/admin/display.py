"""How the admin shows a job. Everything a job carries is user data, so every
piece of it goes through ``format_html`` / ``escape``; nothing is marked safe
as it stands."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import localtime
from django.utils.translation import ngettext

from ..clock import as_stored
from ..jsonfield import Undecodable

UTC = dt_timezone.utc  # datetime.UTC is Python 3.11+


# How often the pages that follow the queue fetch themselves again (live.js):
# the dashboard, and the page of a job or a batch that has not finished.
LIVE_SECONDS = 5


def printable(text: str) -> str:
    """``text`` with any lone surrogate (which no UTF-8 page can carry, and
    SQLite lets JSON hold) written as its escape, ``\\ud800``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def status_badge(status: str) -> SafeString:
    # The class names are fixed; the label goes through format_html anyway,
    # since a row written by plain SQL may carry any status text.
    status = printable(status)
    return format_html('<span class="dbqueue-badge dbqueue-{}">{}</span>', status.lower(), status)


def pretty_json(value: Any) -> SafeString:
    if isinstance(value, Undecodable):  # shown as stored, with why Python cannot read it
        return format_html(
            '<p class="dbqueue-undecodable">{}</p><pre class="dbqueue-json">{}</pre>',
            f"Python cannot decode this text as stored: {value.reason}.",
            printable(value.raw),
        )
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=repr)
    return format_html('<pre class="dbqueue-json">{}</pre>', printable(text))


def age(since: datetime | None) -> str:
    """How long ago, short enough for a narrow column: "40 s", "5 min", "3 h", "2 d"."""
    if not since:
        return "-"
    seconds = max(int((timezone.now() - since).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


# Every date the admin shows, in one format: compact, sortable by eye, in the
# current time zone. (Django's default long format wraps columns.)
DATE, TIME = "%Y-%m-%d", "%H:%M:%S"


def timestamp(value: datetime | None) -> str:
    return f"{local(value):{DATE} {TIME}}" if value else "-"


def local(value: datetime) -> datetime:
    # With USE_TZ = False rows hold naive local times, which localtime() refuses.
    return localtime(value) if timezone.is_aware(value) else value


def time_tag(value: datetime | None) -> SafeString | str:
    """``timestamp()`` in a <time> element; it may wrap between date and time."""
    if not value:
        return "-"
    shown = local(value)
    return format_html(
        '<time class="dbqueue-time" datetime="{}"><span>{}</span> <span>{}</span></time>',
        shown.isoformat(),
        f"{shown:{DATE}}",
        f"{shown:{TIME}}",
    )


def breakable(text: str) -> SafeString:
    """``text`` escaped, with a line break allowed after each dot or colon, so
    that a dotted task path or a host:pid worker id wraps instead of widening
    its column."""
    parts = re.split(r"(?<=[.:])", printable(text))
    return format_html_join(mark_safe("<wbr>"), "{}", ((part,) for part in parts if part))


def name_list(value: Any) -> SafeString:
    """A JSON list of names (queues, worker ids) as readable text; anything
    else, as a hand-written row may hold, as JSON."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        if not value:
            return format_html("{}", "-")
        return format_html_join(", ", "{}", ((breakable(item),) for item in value))
    return pretty_json(value)


def worker_counts(value: Any) -> SafeString:
    """The workers that ran a job, each once, with how many of its attempts
    each ran when more than one: "web-1:42:0 (3 attempts), web-2:7:1"."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return name_list(value)
    counts = Counter(value)
    return format_html_join(
        ", ",
        "{}{}",
        ((breakable(name), "" if n == 1 else f" ({n} attempts)") for name, n in counts.items()),
    ) or format_html("{}", "-")


def history_html(history: Any) -> SafeString:
    """The summaries of a requeued job's earlier runs, newest last."""
    if not history:
        return format_html("<p>{}</p>", "None: this job was never requeued.")
    if not isinstance(history, list):
        return pretty_json(history)
    return format_html(
        "<ol>{}</ol>",
        format_html_join("", "<li>{}</li>", ((printable(_run_summary(run)),) for run in history)),
    )


def _run_summary(run: Any) -> str:
    if not isinstance(run, dict):
        return json.dumps(run, default=repr)
    times = [parse_time(run.get(key)) for key in ("started_at", "finished_at", "requeued_at")]
    started, finished, requeued = (timestamp(t) if t else "-" for t in times)
    error = run.get("last_error") if isinstance(run.get("last_error"), dict) else {}
    last = f"; last error {error.get('exception_class_path')}" if error else ""
    attempts = run.get("attempts", "?")
    after = ngettext("after %s attempt", "after %s attempts", attempts if isinstance(attempts, int) else 2)
    return (
        f"{run.get('status', '?')} {after % attempts}, "
        f"started {started}, finished {finished}{last}; requeued {requeued}"
    )


def parse_time(value: Any) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    if parsed is None or not settings.USE_TZ:
        # The row's own times are naive local ones: so is an error's.
        return as_stored(parsed) if parsed else None
    # A naive time cannot be sorted among the row's aware ones.
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
