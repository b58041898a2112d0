"""Batches in the admin: the list with each batch's progress, and a batch's
page with its callbacks, its members (the job list filtered by batch) and
a picture of their dependencies. Batches are made from code only; people
may cancel one, or retry its failed jobs (``batch_actions.py``)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from ..models import Job
from ..workflows.calls import CALLBACK_KEY
from ..workflows.models import Batch, BatchStatus
from . import display as show
from .batch_actions import BatchActions
from .database import queue_database
from .display import LIVE_SECONDS
from .paginator import EstimatedCountPaginator
from .progress import member_counts, progress_html
from .readonly import ReadOnlyAdminMixin
from .reads import PrimaryActionsMixin, ReplicaChangeList
from .workflow import batch_dependants, batch_picture, job_url, related_html

CALLBACKS = ("on_success", "on_failure", "on_finish")


class BatchChangeList(ReplicaChangeList):
    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        # The page's batches' counts in one read, not one per row.
        batches = list(self.result_list)
        counts = member_counts(self.queryset.db, [b.pk for b in batches])
        for batch in batches:
            batch.member_counts = counts[batch.pk]
        self.result_list = batches


@admin.register(Batch)
class BatchAdmin(PrimaryActionsMixin, BatchActions, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "summary", "status_badge", "progress", "created", "finished")
    list_display_links = ("id", "summary")
    list_filter = ("status",)
    ordering = ("-id",)
    sortable_by = ("id",)
    # As the job list: no COUNT(*) of a big table per page view.
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = EstimatedCountPaginator
    list_per_page = 50
    change_form_template = "admin/django_dbqueue/batch/change_form.html"
    fieldsets = (
        (None, {"fields": ("description", "status_badge", "progress", "members")}),
        ("Timeline", {"fields": ("created", "finished", "sealed")}),
        ("Workflow", {"fields": ("picture", "dependants")}),
        ("Callbacks", {"fields": ("callbacks", "callback_jobs")}),
        ("Metadata", {"fields": ("metadata_json",)}),
    )
    readonly_fields = (
        "description",
        "status_badge",
        "progress",
        "members",
        "created",
        "finished",
        "sealed",
        "picture",
        "dependants",
        "callbacks",
        "callback_jobs",
        "metadata_json",
    )

    class Media:
        css = {"all": ("django_dbqueue/admin.css",)}

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).using(queue_database())

    def get_changelist(self, request: HttpRequest, **kwargs: object) -> type[ChangeList]:
        return BatchChangeList

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Who may see jobs may see the batches they belong to (a job's page links its batch).
        return request.user.has_perm("django_dbqueue.view_job") or super().has_view_permission(request, obj)

    def get_urls(self) -> list[URLPattern]:
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path(
                "<path:object_id>/actions/<str:name>/",
                self.admin_site.admin_view(self.page_action_view),
                name=f"{prefix}_page_action",
            ),
            *super().get_urls(),
        ]

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Batch | None = None,
    ) -> HttpResponse:
        if obj is not None:
            context["page_actions"] = self.page_actions(request, obj)
            context["live_seconds"] = LIVE_SECONDS if obj.status == BatchStatus.OPEN else 0  # live.js
        return super().render_change_form(request, context, add, change, form_url, obj)

    # -- columns and fields -----------------------------------------------------

    def counts(self, batch: Batch) -> dict[str, int]:
        found: dict[str, int] | None = getattr(batch, "member_counts", None)
        if found is None:  # the batch's page: the changelist reads them per page
            found = member_counts(batch._state.db or queue_database(), [batch.pk])[batch.pk]
            setattr(batch, "member_counts", found)  # noqa: B010 (not a declared field)
        return found

    @admin.display(description="description")
    def summary(self, batch: Batch) -> str:
        text = batch.description.strip().splitlines()[0] if batch.description.strip() else ""
        return (text[:80] + "…" if len(text) > 80 else text) or f"batch #{batch.pk}"

    @admin.display(description="status")
    def status_badge(self, batch: Batch) -> SafeString:
        return show.status_badge(batch.status)

    @admin.display(description="progress")
    def progress(self, batch: Batch) -> SafeString:
        return progress_html(self.counts(batch))

    @admin.display(description="created")
    def created(self, batch: Batch) -> SafeString | str:
        return show.time_tag(batch.created_at)

    @admin.display(description="finished")
    def finished(self, batch: Batch) -> SafeString | str:
        return show.time_tag(batch.finished_at)

    @admin.display(description="members")
    def members(self, batch: Batch) -> SafeString:
        """Links to the job list filtered to this batch, and to each status in it."""
        jobs = reverse(f"{self.admin_site.name}:django_dbqueue_job_changelist")
        counts = self.counts(batch)
        by_status = format_html_join(
            ", ",
            '<a href="{}?{}">{} {}</a>',
            (
                (jobs, urlencode({"batch_id": str(batch.pk), "status__exact": status}), n, status.lower())
                for status, n in sorted(counts.items())
            ),
        )
        return format_html(
            '<a href="{}?{}">{}</a>{}{}',
            jobs,
            urlencode({"batch_id": str(batch.pk)}),
            f"All {sum(counts.values())} members in the job list",
            " (" if counts else "",
            format_html("{})", by_status) if counts else "",
        )

    @admin.display(description="members and their dependencies")
    def picture(self, batch: Batch) -> SafeString:
        return batch_picture(batch, self.admin_site.name, sum(self.counts(batch).values()))

    @admin.display(description="jobs waiting for the batch")
    def dependants(self, batch: Batch) -> SafeString:
        return related_html(batch_dependants(batch, self.admin_site.name), "None.")

    @admin.display(description="callbacks")
    def callbacks(self, batch: Batch) -> SafeString:
        named = [(name, getattr(batch, name)) for name in CALLBACKS]
        rows = [(name, json.dumps(spec, ensure_ascii=False, sort_keys=True)) for name, spec in named if spec]
        if not rows:
            return format_html("<p>{}</p>", "None.")
        return format_html(
            '<dl class="dbqueue-callbacks">{}</dl>',
            format_html_join("", "<dt>{}</dt><dd><code>{}</code></dd>", rows),
        )

    @admin.display(description="callback jobs")
    def callback_jobs(self, batch: Batch) -> SafeString:
        """Every callback job the batch enqueued, oldest first (a batch
        retried and completed again enqueues its callbacks again), each
        labelled with the callback it is."""
        ids = [pk for pk in batch.callback_job_ids or [] if isinstance(pk, int)]
        if not ids:
            none = "None yet: they are enqueued when the batch finishes."
            return format_html("<p>{}</p>", none if batch.status == "OPEN" else "None.")
        found = Job._base_manager.using(batch._state.db or queue_database()).filter(pk__in=ids)
        jobs = {job.pk: job for job in found.only("pk", "task_path", "status", "metadata")}
        return format_html(
            '<ul class="dbqueue-related">{}</ul>',
            format_html_join(
                "",
                '<li><span class="dbqueue-callback">{}</span> <a href="{}">#{} {}</a> {}</li>',
                (
                    (
                        callback_name(jobs.get(pk)),
                        job_url(self.admin_site.name, pk),
                        pk,
                        jobs[pk].task_path if pk in jobs else "(deleted)",
                        show.status_badge(jobs[pk].status if pk in jobs else "DELETED"),
                    )
                    for pk in ids
                ),
            ),
        )

    @admin.display(description="metadata")
    def metadata_json(self, batch: Batch) -> SafeString:
        return show.pretty_json(batch.metadata)


def callback_name(job: Job | None) -> str:
    """Which callback a callback job is, as its metadata says; "callback"
    for one enqueued before the metadata said it, or deleted."""
    metadata = job.metadata if job is not None else None
    name = metadata.get(CALLBACK_KEY) if isinstance(metadata, dict) else None
    return name if name in CALLBACKS else "callback"
