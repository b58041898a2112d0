"""The schedules page: every backend's OPTIONS["SCHEDULES"] with its last
and next run, and "run now" for whoever holds ``run_schedule_now``.

Schedules live in settings, not in a table, so this is the ScheduledRun
admin with a changelist of its own; a schedule removed from settings shows
only while its recorded runs remain, marked as removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Max
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_POST

from ..backend import DatabaseBackend
from ..clock import read_database_now
from ..models import ScheduledRun
from ..schedules import Schedule, enqueue_run
from .database import queue_backends, queue_database
from .readonly import ReadOnlyAdminMixin

RUN_NOW = "django_dbqueue.run_schedule_now"


@dataclass
class Row:
    name: str
    backend: str
    schedule: Schedule | None  # None: removed from settings
    last: ScheduledRun | None
    next_run: datetime | None


@admin.register(ScheduledRun)
class ScheduleAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        wrap = self.admin_site.admin_view
        return [
            path("", wrap(self.changelist_view), name="{}_{}_changelist".format(*info)),
            path(
                "run/<str:alias>/<str:name>/",
                wrap(require_POST(self.run_now_view)),
                name="{}_{}_run".format(*info),
            ),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            # The page's name is its name in the admin's app list.
            "title": capfirst(self.opts.verbose_name_plural),
            "opts": self.opts,
            "rows": schedule_rows(),
            "may_run": request.user.has_perm(RUN_NOW),
        }
        return TemplateResponse(request, "admin/django_dbqueue/schedules.html", context)

    def run_now_view(self, request: HttpRequest, alias: str, name: str) -> HttpResponse:
        if not request.user.has_perm(RUN_NOW):
            raise PermissionDenied
        backend, schedule = find(alias, name)
        job = enqueue_run(backend, schedule, read_database_now(backend.database), manual=True)
        if job is None:  # its task's unique key is held by an unfinished job
            self.message_user(request, f"Schedule {name!r}: its task's unique key is held.", messages.WARNING)
            return HttpResponseRedirect(
                reverse(f"{self.admin_site.name}:django_dbqueue_scheduledrun_changelist")
            )
        run = ScheduledRun.objects.using(backend.database).get(job_id=job.pk)
        self.log_addition(request, run, f"Ran schedule {name!r} now as job {job.pk}.")
        self.message_user(request, f"Schedule {name!r} enqueued as job {job.pk}.", messages.SUCCESS)
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:django_dbqueue_scheduledrun_changelist"))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("django_dbqueue.view_job") or super().has_view_permission(request, obj)


def find(alias: str, name: str) -> tuple[DatabaseBackend, Schedule]:
    for backend in queue_backends():
        if backend.alias == alias:
            for schedule in backend.config.SCHEDULES:
                if schedule.name == name:
                    return backend, schedule
    raise Http404(f"No schedule {name!r} in the task backend {alias!r}.")


def schedule_rows() -> list[Row]:
    database = queue_database()
    runs = ScheduledRun.objects.using(database).filter(manual=False)
    latest = runs.values_list("schedule").annotate(last=Max("scheduled_at")).order_by()
    # One read per schedule, by the unique (schedule, scheduled_at) index.
    last = {name: runs.filter(schedule=name, scheduled_at=when).first() for name, when in latest}
    now = read_database_now(database)
    rows = [
        Row(schedule.name, backend.alias, schedule, last.get(schedule.name), schedule.next_run(now))
        for backend in queue_backends()
        for schedule in backend.config.SCHEDULES
    ]
    configured = {row.name for row in rows}
    rows += [Row(name, "", None, run, None) for name, run in sorted(last.items()) if name not in configured]
    return rows
