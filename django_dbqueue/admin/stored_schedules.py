"""Schedules in the database: add, change, delete, pause and resume, with
Django's own permissions (view, add, change, delete; pausing is a change)
and every change in the admin log. The list shows each schedule's last and
next run by the database's clock, and a broken row (one written by SQL that
cannot run) as broken, with why. The settings schedules are shown beneath,
read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..clock import DbNow, as_aware
from ..models import Schedule, ScheduledRun
from . import display as show
from .database import queue_database
from .schedule_form import Suggesting, task_paths, time_zones


@admin.register(Schedule)
class StoredScheduleAdmin(admin.ModelAdmin):
    list_display = ("name", "task", "cron_expression", "timezone", "state", "last_run", "next_run")
    list_filter = ("enabled", "backend")
    search_fields = ("name", "task")
    fields = (
        *("name", "task", "cron", "timezone", "args", "kwargs", "catch_up", "backend", "enabled"),
        *("created_at", "updated_at"),
    )
    readonly_fields = ("created_at", "updated_at")
    actions = ["pause", "resume"]

    class Media:
        css = {"all": ("django_dbqueue/admin.css",)}

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        # The task and the time zone are text (a task may live in any allowed
        # module), with the known ones offered to pick from.
        suggestions: dict[str, Callable[[], list[str]]] = {"task": task_paths, "timezone": time_zones}
        suggested = suggestions.get(db_field.name)
        if suggested is not None:
            kwargs["widget"] = Suggesting(suggested)
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The last run: one dive into ScheduledRun's (schedule, manual, scheduled_at) index per row.
        last = ScheduledRun.objects.filter(schedule=OuterRef("name"), manual=False).order_by("-scheduled_at")
        rows = super().get_queryset(request).using(queue_database())
        return rows.annotate(last_run_at=Subquery(last.values("scheduled_at")[:1]), database_now=DbNow())

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        obj.save(using=queue_database())

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        obj.delete(using=queue_database())

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        queryset.using(queue_database()).delete()

    @admin.display(description="cron", ordering="cron")
    def cron_expression(self, schedule: Schedule) -> SafeString:
        return format_html("<code>{}</code>", schedule.cron)

    @admin.display(description="state", ordering="enabled")
    def state(self, schedule: Schedule) -> SafeString | str:
        problem = schedule.problem()
        if problem is not None:
            return format_html('<span class="dbqueue-broken">broken: {}</span>', problem)
        return "active" if schedule.enabled else "paused"

    @admin.display(description="last run", ordering="last_run_at")
    def last_run(self, schedule: Schedule) -> SafeString | str:
        return show.time_tag(getattr(schedule, "last_run_at", None))

    @admin.display(description="next run")
    def next_run(self, schedule: Schedule) -> SafeString | str:
        return show.time_tag(next_run(schedule))

    @admin.action(description="Pause the selected schedules", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, pausing=True)

    @admin.action(description="Resume the selected schedules", permissions=["change"])
    def resume(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, pausing=False)

    def _switch(self, request: HttpRequest, queryset: QuerySet, pausing: bool) -> None:
        switched = []
        for schedule in queryset.using(queue_database()):
            if schedule.pause() if pausing else schedule.resume():
                self.log_change(request, schedule, "Paused." if pausing else "Resumed.")
                switched.append(schedule.name)
        verb = "Paused" if pausing else "Resumed"
        if switched:
            self.message_user(request, f"{verb} {', '.join(switched)}.", messages.SUCCESS)
        else:
            state = "paused" if pausing else "active"
            self.message_user(request, f"The selected schedules were {state} already.", messages.WARNING)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        from .schedules import schedule_rows

        from_settings = [row for row in schedule_rows() if row.schedule is not None and row.stored is None]
        return super().changelist_view(request, {**(extra_context or {}), "from_settings": from_settings})


def next_run(schedule: Schedule) -> datetime | None:
    """The first time after the database's now (read with the row), or None if paused or broken."""
    now = getattr(schedule, "database_now", None)
    if not schedule.enabled or now is None or schedule.problem() is not None:
        return None
    return schedule.spec().next_run(as_aware(now))
