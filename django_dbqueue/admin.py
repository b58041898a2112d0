"""The queue console: the Job changelist and detail page, the dashboard and
the worker list. Jobs are read-only here; they change only through the
actions in ``admin_actions``, which call the same JobQuerySet methods as the worker."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.safestring import SafeString

from . import admin_display as show
from .admin_actions import JobActions
from .dashboard import alive_workers, queue_stats, totals
from .models import Dashboard, Job, Status, Worker
from .paginator import EstimatedCountPaginator


@admin.register(Job)
class JobAdmin(JobActions, admin.ModelAdmin):
    list_display = (
        "id",
        "task_path",
        "queue",
        "status_badge",
        "priority",
        "attempts_of_max",
        "due",
        "owner",
        "age",
    )
    list_display_links = ("id", "task_path")
    list_filter = ("status", "queue_name", "task_path")
    # Searching is get_search_results(); these only make the admin draw the box.
    search_fields = ("=id", "task_path", "args", "kwargs")
    search_help_text = "A number finds the job with that id; other text searches task paths and arguments."
    # Newest first, and no other sort: each filter has an index ending in id,
    # any other order would sort every matching row.
    ordering = ("-id",)
    sortable_by = ("id",)
    # No COUNT(*) of the whole table per page view (see paginator.py).
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = EstimatedCountPaginator
    list_per_page = 50
    fieldsets = (
        (None, {"fields": ("task_path", "queue_name", "status_badge", "priority", "attempts_of_max")}),
        ("Timeline", {"fields": ("timeline", "run_after", "owner", "lease_expires_at", "worker_ids")}),
        ("Call", {"fields": ("arguments", "keyword_arguments")}),
        ("Outcome", {"fields": ("result", "error_list")}),
    )
    readonly_fields = (
        "task_path",
        "queue_name",
        "status_badge",
        "priority",
        "attempts_of_max",
        "timeline",
        "run_after",
        "owner",
        "lease_expires_at",
        "worker_ids",
        "arguments",
        "keyword_arguments",
        "result",
        "error_list",
    )

    class Media:
        css = {"all": ("django_dbqueue/admin.css",)}

    # -- columns and detail fields ------------------------------------------

    @admin.display(description="queue")
    def queue(self, job: Job) -> str:
        return job.queue_name

    @admin.display(description="status")
    def status_badge(self, job: Job) -> SafeString:
        return show.status_badge(job.status)

    @admin.display(description="attempts")
    def attempts_of_max(self, job: Job) -> str:
        return f"{job.attempts} / {job.max_attempts}"

    @admin.display(description="run after")
    def due(self, job: Job) -> str:
        return show.timestamp(job.run_after)

    @admin.display(description="age", ordering="id")
    def age(self, job: Job) -> str:
        return show.age(job.enqueued_at)

    @admin.display(description="timeline")
    def timeline(self, job: Job) -> SafeString:
        return show.timeline_html(job)

    @admin.display(description="args")
    def arguments(self, job: Job) -> SafeString:
        return show.pretty_json(job.args)

    @admin.display(description="kwargs")
    def keyword_arguments(self, job: Job) -> SafeString:
        return show.pretty_json(job.kwargs)

    @admin.display(description="return value")
    def result(self, job: Job) -> SafeString:
        return show.pretty_json(job.return_value)

    @admin.display(description="errors")
    def error_list(self, job: Job) -> SafeString:
        return show.errors_html(job.errors)

    # -- searching ----------------------------------------------------------

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        # An id is a primary key lookup; text has no index to use and reads
        # the whole table, about a second per million jobs on MariaDB.
        if term.isdigit():
            return queryset.filter(pk=int(term)), False
        match = Q(task_path__icontains=term) | Q(args__icontains=term) | Q(kwargs__icontains=term)
        return queryset.filter(match), False

    # -- permissions: jobs come from enqueue() and change only by actions ---

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        if obj is not None and obj.status == Status.RUNNING:
            return False
        return super().has_delete_permission(request, obj)

    # -- the dashboard --------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_dashboard"
        dashboard = path("dashboard/", self.admin_site.admin_view(self.dashboard_view), name=name)
        return [dashboard, *super().get_urls()]

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        queues = queue_stats(self.get_queryset(request))
        context = {
            **self.admin_site.each_context(request),
            "title": "Queue dashboard",
            "opts": self.opts,
            "queues": queues,
            "total": totals(queues),
            "statuses": Status.values,
            "workers": alive_workers(),
        }
        return TemplateResponse(request, "admin/django_dbqueue/dashboard.html", context)


@admin.register(Dashboard)
class DashboardAdmin(admin.ModelAdmin):
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    """Rows written by the workers' heartbeats; stale ones may be deleted."""

    list_display = ("name", "host", "pid", "queues", "started_at", "last_seen_at", "processed", "failed")
    ordering = ("-last_seen_at",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Worker | None = None) -> bool:
        return False
