"""The scheduled runs page: every backend's OPTIONS["SCHEDULES"] and the
database's schedules (stored_schedules.py edits those) with their last and
next run, and "run now" for whoever holds ``run_schedule_now``.

This is the ScheduledRun admin with a changelist of its own; a schedule
removed from settings or from the database shows only while its recorded
runs remain, marked as removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.db.models import Max
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, URLPattern, path, reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_POST

from ..clock import read_database_now, read_utc
from ..models import Schedule as StoredSchedule
from ..models import ScheduledRun
from ..schedules.runs import enqueue_run
from ..schedules.spec import Schedule
from ..tasks_api import InvalidTask
from .database import queue_backends, queue_database
from .readonly import ReadOnlyAdminMixin

if TYPE_CHECKING:
    from ..backend import DatabaseBackend

RUN_NOW = "django_dbqueue.run_schedule_now"


@dataclass
class Row:
    name: str
    backend: str
    schedule: Schedule | None  # None: removed from settings
    last: ScheduledRun | None
    next_run: datetime | None
    run_url: str | None = None  # "Run now"; None where the name makes no URL
    stored: StoredSchedule | None = None  # a schedule in the database, not in settings


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
        rows = schedule_rows()
        may_run = request.user.has_perm(RUN_NOW)
        if may_run:
            for row in rows:
                row.run_url = self.run_url(row)
        context = {
            **self.admin_site.each_context(request),
            # The page's name is its name in the admin's app list.
            "title": capfirst(self.opts.verbose_name_plural),
            "opts": self.opts,
            "rows": rows,
            "may_run": may_run,
        }
        return TemplateResponse(request, "admin/django_dbqueue/schedules.html", context)

    def run_url(self, row: Row) -> str | None:
        if row.schedule is None or (row.stored is not None and row.stored.problem() is not None):
            return None
        try:
            return reverse(
                f"{self.admin_site.name}:django_dbqueue_scheduledrun_run", args=[row.backend, row.name]
            )
        except NoReverseMatch:  # a name or alias with '/': check E003 refuses such a name
            return None

    def run_now_view(self, request: HttpRequest, alias: str, name: str) -> HttpResponse:
        if not request.user.has_perm(RUN_NOW):
            raise PermissionDenied
        backend, schedule = find(alias, name)
        back = HttpResponseRedirect(reverse(f"{self.admin_site.name}:django_dbqueue_scheduledrun_changelist"))
        try:
            job = enqueue_run(backend, schedule, read_database_now(backend.database), manual=True)
        except (LookupError, InvalidTask, ImproperlyConfigured) as exc:
            # The web process may run without the checks that report this (E005).
            fix = (
                f"Fix it in TASKS[{alias!r}]['OPTIONS']['SCHEDULES']; manage.py check reports it too."
                if schedule in backend.config.SCHEDULES
                else "Fix it in the database's schedules."
            )
            self.message_user(request, f"Schedule {name!r} was not run: {exc} {fix}", messages.ERROR)
            return back
        if job is None:  # its task's unique key is held by an unfinished job
            self.message_user(request, f"Schedule {name!r}: its task's unique key is held.", messages.WARNING)
            return back
        run = ScheduledRun.objects.using(backend.database).get(job_id=job.pk)
        self.log_addition(request, run, f"Ran schedule {name!r} now as job {job.pk}.")
        self.message_user(request, f"Schedule {name!r} enqueued as job {job.pk}.", messages.SUCCESS)
        return back

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("django_dbqueue.view_job") or super().has_view_permission(request, obj)


def find(alias: str, name: str) -> tuple[DatabaseBackend, Schedule]:
    for backend in queue_backends():
        if backend.alias == alias:
            for schedule in backend.config.SCHEDULES:
                if schedule.name == name:
                    return backend, schedule
            stored = StoredSchedule.objects.using(backend.database).filter(backend=alias, name=name).first()
            if stored is not None:
                return backend, stored.spec()
    raise Http404(f"No schedule {name!r} in the task backend {alias!r}.")


def schedule_rows() -> list[Row]:
    database = queue_database()
    runs = ScheduledRun.objects.using(database).filter(manual=False)
    latest = runs.values_list("schedule").annotate(last=Max("scheduled_at")).order_by()
    # One read per schedule, by the unique (schedule, scheduled_at) index.
    last = {name: runs.filter(schedule=name, scheduled_at=when).first() for name, when in latest}
    now = read_utc(database)  # aware: cron times are computed in UTC
    rows = [
        Row(schedule.name, backend.alias, schedule, last.get(schedule.name), schedule.next_run(now))
        for backend in queue_backends()
        for schedule in backend.config.SCHEDULES
    ]
    for stored in StoredSchedule.objects.using(database):
        broken = not stored.enabled or stored.problem() is not None
        next_run = None if broken else stored.spec().next_run(now)
        rows.append(
            Row(stored.name, stored.backend, stored.spec(), last.get(stored.name), next_run, stored=stored)
        )
    configured = {row.name for row in rows}
    rows += [Row(name, "", None, run, None) for name, run in sorted(last.items()) if name not in configured]
    return rows
