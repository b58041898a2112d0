"""The queue dashboard: its view, the numbers behind it (its chart is in
chart.py), and its link in the admin's app list.

Each figure is one grouped query that an index serves: counts by the claim
index (status, queue), lag by the READY range of the same index, throughput by
the finished_at index. No figure reads the table row by row.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin
from django.contrib.admin.exceptions import NotRegistered
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Min, QuerySet
from django.db.models.functions import TruncMinute
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.safestring import SafeString

from ..models import Dashboard, Job, Status, Worker
from .chart import round_up, throughput_svg
from .database import queue_lease
from .pauses import may_pause, with_pauses
from .readonly import ReadOnlyAdminMixin
from .running import DASHBOARD_RUNNING, running_jobs

UTC = dt_timezone.utc  # datetime.UTC is Python 3.11+

if TYPE_CHECKING:
    from ..transitions import JobQuerySet
    from .jobs import JobAdmin

MINUTES = 60


@dataclass
class QueueStats:
    name: str
    counts: dict[str, int] = field(default_factory=dict)
    lag: timedelta | None = None  # how long the oldest due READY job has waited
    per_minute: list[int] = field(default_factory=lambda: [0] * MINUTES)
    # The top of the chart's axis, shared by every chart on the page.
    scale: int = 1
    paused: bool = False

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
        return throughput_svg(self.per_minute, self.scale)


def queue_stats(jobs: JobQuerySet | None = None, now: datetime | None = None) -> list[QueueStats]:
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


def alive_workers(using: str) -> QuerySet:
    return Worker.objects.using(using).alive(within=queue_lease()).order_by("host", "pid")


def dashboard_view(job_admin: JobAdmin, request: HttpRequest) -> HttpResponse:
    if not job_admin.has_view_permission(request):
        raise PermissionDenied
    jobs = cast("JobQuerySet", job_admin.get_queryset(request))
    queues = with_pauses(queue_stats(jobs), jobs.db)
    total = totals(queues)
    # One scale for every chart, so that bars compare across queues.
    scale = round_up(max((n for queue in [*queues, total] for n in queue.per_minute), default=0))
    for queue in [*queues, total]:
        queue.scale = scale
    context = {
        **job_admin.admin_site.each_context(request),
        "title": "Queue dashboard",
        "opts": job_admin.opts,
        "queues": queues,
        "total": total,
        "statuses": Status.values,
        "running": running_jobs(jobs, DASHBOARD_RUNNING),
        "running_total": total.counts.get(Status.RUNNING, 0),
        # Hosts and PIDs only for whoever may open the workers list too.
        "workers": alive_workers(jobs.db) if may_view_workers(job_admin, request) else None,
        "may_pause": may_pause(request),
        "pause_url": reverse(f"{job_admin.admin_site.name}:django_dbqueue_pausedqueue_pause"),
        "resume_url": reverse(f"{job_admin.admin_site.name}:django_dbqueue_pausedqueue_resume"),
    }
    return TemplateResponse(request, "admin/django_dbqueue/dashboard.html", context)


def may_view_workers(job_admin: JobAdmin, request: HttpRequest) -> bool:
    try:
        worker_admin = job_admin.admin_site.get_model_admin(Worker)
    except NotRegistered:
        return False
    return worker_admin.has_view_permission(request)


@admin.register(Dashboard)
class DashboardAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Only a link in the app list to JobAdmin's dashboard, for whoever may view jobs."""

    def get_urls(self) -> list[URLPattern]:
        # The app list links to this URL name.
        view = self.admin_site.admin_view(self.changelist_view)
        return [path("", view, name=f"{self.opts.app_label}_{self.opts.model_name}_changelist")]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:django_dbqueue_job_dashboard"))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("django_dbqueue.view_job")
