"""The list of worker processes, as their heartbeats left them."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from ..models import Worker
from . import display as show
from .database import queue_database
from .reads import PrimaryActionsMixin, ReplicaChangeList


@admin.register(Worker)
class WorkerAdmin(PrimaryActionsMixin, admin.ModelAdmin):
    """Rows written by the workers' heartbeats; stale ones may be deleted."""

    list_display = ("name", "host", "pid", "queue_names", "started", "last_seen", "processed", "failed")
    ordering = ("-last_seen_at",)

    class Media:
        css = {"all": ("django_dbqueue/admin.css",)}

    @admin.display(description="queues")
    def queue_names(self, worker: Worker) -> SafeString:
        return show.name_list(worker.queues)

    @admin.display(description="started", ordering="started_at")
    def started(self, worker: Worker) -> SafeString | str:
        return show.time_tag(worker.started_at)

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, worker: Worker) -> SafeString | str:
        return show.time_tag(worker.last_seen_at)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # Heartbeats write these rows to the queue's database.
        return super().get_queryset(request).using(queue_database())

    def get_changelist(self, request: HttpRequest, **kwargs: object) -> type[ChangeList]:
        return ReplicaChangeList

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Worker | None = None) -> bool:
        return False
