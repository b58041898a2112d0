"""The numbers behind the admin dashboard, and its chart drawn as inline SVG.

Each figure is one grouped query that an index serves: counts by the claim
index (status, queue), lag by the READY range of the same index, throughput by
the finished_at index. No figure reads the table row by row.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db.models import Count, Min, QuerySet
from django.db.models.functions import TruncMinute
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from .models import Job, Status, Worker

MINUTES = 60
CHART_WIDTH, CHART_HEIGHT, BAR_GAP = 300, 48, 1


@dataclass
class QueueStats:
    name: str
    counts: dict[str, int] = field(default_factory=dict)
    lag: timedelta | None = None  # how long the oldest due READY job has waited
    per_minute: list[int] = field(default_factory=lambda: [0] * MINUTES)

    @property
    def finished_last_hour(self) -> int:
        return sum(self.per_minute)

    @property
    def status_counts(self) -> list[tuple[str, int]]:
        return [(status, self.counts.get(status, 0)) for status in Status.values]

    @property
    def lag_text(self) -> str:
        if self.lag is None:
            return "-"
        seconds = max(int(self.lag.total_seconds()), 0)
        if seconds < 120:
            return f"{seconds} s"
        if seconds < 7200:
            return f"{seconds // 60} min"
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"

    @property
    def chart(self) -> SafeString:
        return throughput_svg(self.per_minute)


def queue_stats(jobs: QuerySet | None = None, now: datetime | None = None) -> list[QueueStats]:
    jobs = Job.objects.all() if jobs is None else jobs
    now = now or timezone.now()
    queues: dict[str, QueueStats] = {}

    def stats(name: str) -> QueueStats:
        return queues.setdefault(name, QueueStats(name))

    for name, status, n in jobs.order_by().values_list("queue_name", "status").annotate(Count("pk")):
        stats(name).counts[status] = n
    for name, oldest in jobs.due(now).order_by().values_list("queue_name").annotate(Min("run_after")):
        stats(name).lag = now - oldest
    # Minutes are bucketed in UTC, which needs no time zone tables in MySQL.
    start = (now - timedelta(minutes=MINUTES - 1)).replace(second=0, microsecond=0)
    finished = (
        jobs.filter(finished_at__gte=start)
        .annotate(minute=TruncMinute("finished_at", tzinfo=UTC))
        .order_by()
        .values_list("queue_name", "minute")
        .annotate(Count("pk"))
    )
    for name, minute, n in finished:
        index = int((minute - start).total_seconds() // 60)
        if 0 <= index < MINUTES:
            stats(name).per_minute[index] += n
    return sorted(queues.values(), key=lambda queue: queue.name)


def totals(queues: list[QueueStats]) -> QueueStats:
    total = QueueStats("All queues")
    counts: dict[str, int] = defaultdict(int)
    for queue in queues:
        for status, n in queue.counts.items():
            counts[status] += n
        total.per_minute = [a + b for a, b in zip(total.per_minute, queue.per_minute, strict=True)]
        if queue.lag is not None and (total.lag is None or queue.lag > total.lag):
            total.lag = queue.lag
    total.counts = dict(counts)
    return total


def alive_workers() -> QuerySet:
    return Worker.objects.alive().order_by("host", "pid")


def throughput_svg(per_minute: list[int]) -> SafeString:
    """A bar per minute, oldest on the left; each bar's tooltip gives its count."""
    peak = max(per_minute, default=0) or 1
    width = CHART_WIDTH / len(per_minute)
    bars = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
        (
            (
                f"{i * width:.1f}",
                f"{CHART_HEIGHT - CHART_HEIGHT * n / peak:.1f}",
                f"{width - BAR_GAP:.1f}",
                f"{CHART_HEIGHT * n / peak:.1f}",
                f"{n} finished {len(per_minute) - 1 - i} min ago",
            )
            for i, n in enumerate(per_minute)
        ),
    )
    return format_html(
        '<svg class="dbqueue-chart" role="img" viewBox="0 0 {} {}" width="{}" height="{}">'
        "<title>{}</title>{}</svg>",
        CHART_WIDTH,
        CHART_HEIGHT,
        CHART_WIDTH,
        CHART_HEIGHT,
        f"Jobs finished per minute over the last hour, peak {max(per_minute, default=0)}",
        bars,
    )
