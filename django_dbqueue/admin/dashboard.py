"""The queue dashboard: its view, the numbers behind it (its chart is in
chart.py), and its link in the admin's app list.

The numbers are ``operations.stats.snapshot()``'s, as ``queuestats``
prints them: one grouped query per figure that an index serves, every time
the database's own. They are read from OPTIONS READ_DATABASE when the
backend names a replica, and the page says how far behind it is.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin
from django.contrib.admin.exceptions import NotRegistered
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.safestring import SafeString

from ..models import Dashboard, Status, Worker
from ..operations.stats import Snapshot, server_snapshots, server_title, snapshot
from .bulk import bulk_buttons
from .chart import round_up, throughput_svg
from .database import queue_backends, queue_database, queue_lease
from .display import LIVE_SECONDS
from .pauses import may_pause
from .readonly import ReadOnlyAdminMixin
from .reads import admin_read_database, admin_replica_lag, read_from_text
from .running import DASHBOARD_RUNNING, running_jobs

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
    # The (name, label) of the buttons that change every job of a status here (bulk.py).
    bulk: list[tuple[str, str]] = field(default_factory=list)

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


def queue_stats(snap: Snapshot) -> list[QueueStats]:
    """The dashboard's rows from a snapshot taken with ``chart_minutes=MINUTES``."""
    return [
        QueueStats(
            figures.name,
            counts={status: n for status, n in figures.counts.items() if n},
            lag=None if figures.lag_seconds is None else timedelta(seconds=figures.lag_seconds),
            per_minute=figures.finished_per_minute or [0] * MINUTES,
            paused=figures.paused,
        )
        for figures in snap.queues
    ]


def dashboard_snapshot(using: str) -> Snapshot:
    """The figures the dashboard shows, read from ``using``."""
    # Workers heartbeat four times a lease: one unseen for a lease is gone.
    return snapshot(using, alive_within=queue_lease(), chart_minutes=MINUTES)


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


def dashboard_view(job_admin: JobAdmin, request: HttpRequest) -> HttpResponse:
    if not job_admin.has_view_permission(request):
        raise PermissionDenied
    using = admin_read_database()
    jobs = cast("JobQuerySet", job_admin.get_queryset(request).using(using))
    snap = dashboard_snapshot(using)
    queues = queue_stats(snap)
    total = totals(queues)
    # One scale for every chart, so that bars compare across queues.
    scale = round_up(max((n for queue in [*queues, total] for n in queue.per_minute), default=0))
    for queue in [*queues, total]:
        queue.scale = scale
    buttons = bulk_buttons(job_admin, request)
    for queue in queues:  # a button where its status has jobs (bulk.py)
        queue.bulk = [(name, label) for name, label, status in buttons if queue.counts.get(status)]
    context = {
        **job_admin.admin_site.each_context(request),
        "title": "Queue dashboard",
        "opts": job_admin.opts,
        "queues": queues,
        "total": total,
        "statuses": Status.values,
        "running": running_jobs(jobs, DASHBOARD_RUNNING),
        "running_total": total.counts.get(Status.RUNNING, 0),
        **task_rows(using),
        "live_seconds": LIVE_SECONDS,
        # Hosts and PIDs only for whoever may open the workers list too.
        "workers": snap.workers if may_view_workers(job_admin, request) else None,
        "may_pause": may_pause(request),
        # Retry failed, discard ready: per queue, for whoever holds the action's permission (bulk.py).
        "bulk_buttons": buttons,
        "extra_columns": int(may_pause(request) or bool(buttons)),
        "bulk_url": reverse(f"{job_admin.admin_site.name}:django_dbqueue_job_bulk_change"),
        "pause_url": reverse(f"{job_admin.admin_site.name}:django_dbqueue_pausedqueue_pause"),
        "resume_url": reverse(f"{job_admin.admin_site.name}:django_dbqueue_pausedqueue_resume"),
    }
    lag = admin_replica_lag()
    if lag is not None:
        context["subtitle"] = read_from_text(lag)
        context["replica_lag"] = lag
    context.update(other_servers(context["workers"] is not None))
    return TemplateResponse(request, "admin/django_dbqueue/dashboard.html", context)


def other_servers(show_workers: bool) -> dict[str, Any]:
    """The figures of the databases besides the admin's own, one section
    each (``servers``), and the title of the admin's own (``home_title``)
    when there are others. Their counts link nowhere and they have no
    pause buttons: the lists and the pause view act on the admin's own."""
    backends = queue_backends()
    home = queue_database()
    others = server_snapshots([b for b in backends if b.database != home], chart_minutes=MINUTES)
    if not others:
        return {}
    sections = []
    for server in others:
        queues = queue_stats(server.snapshot)
        total = totals(queues)
        scale = round_up(max((n for queue in [*queues, total] for n in queue.per_minute), default=0))
        for queue in [*queues, total]:
            queue.scale = scale
        sections.append(
            {
                "title": server.title,
                "queues": queues,
                "total": total,
                "workers": server.snapshot.workers if show_workers else None,
                "replica": read_from_text(server.replica) if server.replica is not None else "",
            }
        )
    home_title = server_title(home, [b.alias for b in backends if b.database == home])
    return {"servers": sections, "home_title": home_title}


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


# The dashboard's task table: its window, and the busiest tasks it lists.
TASK_MINUTES, TASK_ROWS = 5, 20


def task_rows(using: str) -> dict[str, Any]:
    """The busiest tasks of the last TASK_MINUTES (operations/task_stats.py)."""
    from ..operations.task_stats import REPEATED_SAMPLE, task_figures

    # The page reloads itself every LIVE_SECONDS: it reads the smaller sample.
    found = task_figures(using, TASK_MINUTES, sample=REPEATED_SAMPLE)
    return {"tasks": found[:TASK_ROWS], "tasks_total": len(found), "task_minutes": TASK_MINUTES}
