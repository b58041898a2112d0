"""The archive: finished jobs that retention deleted with ``OPTIONS["ARCHIVE"]``
on, read only (transitions/pruning.py copies them). Newest first, filtered
by status and queue, found by id or task; a page shows the job's row as it
was when it was deleted."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from ..models import ArchivedJob
from . import display as show
from .database import queue_database
from .paginator import EstimatedCountPaginator
from .readonly import ReadOnlyAdminMixin


@admin.register(ArchivedJob)
class ArchivedJobAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "task_path", "queue_name", "status", "finished_at", "archived_at")
    list_filter = ("status", "queue_name")
    search_fields = ("=id", "task_path")
    search_help_text = "A number finds the archived job with that id; other text searches task paths."
    ordering = ("-id",)
    sortable_by = ("id",)
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    fields = (
        "id",
        "task_path",
        "queue_name",
        "status",
        "enqueued_at",
        "finished_at",
        "archived_at",
        "job_row",
    )
    readonly_fields = fields

    class Media:
        css = {"all": ("django_dbqueue/admin.css",)}

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).using(queue_database())

    @admin.display(description="the job's row when it was archived")
    def job_row(self, archived: ArchivedJob) -> SafeString:
        return show.pretty_json(archived.row)
