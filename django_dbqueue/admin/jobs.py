"""The Job changelist and job page. Jobs are read-only here; they change
only through the actions in ``actions.py``, which call the same JobQuerySet
methods as the worker."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from ..enqueue.tags import tags_of
from ..models import Job, JobTag, UniqueWindow
from ..status import FINISHED
from . import display as show
from . import timeline as story
from .actions import JobActions
from .bulk import bulk_change_view
from .dashboard import dashboard_view
from .database import check_one_database, queue_database
from .display import LIVE_SECONDS
from .job_workflow import BatchFilter, JobWorkflowFields, may_delete
from .paginator import EstimatedCountPaginator
from .reads import PrimaryActionsMixin, ReplicaChangeList
from .running import LIST_PROGRESS_COLUMNS, JobRunningFields

# The columns the job list draws. The JSON columns (arguments, return value,
# errors) can hold megabytes per row and only the job page shows them.
LIST_COLUMNS = (
    "id",
    "task_path",
    "queue_name",
    "status",
    "priority",
    "attempts",
    "max_attempts",
    "suspect",  # which attempt a running job is in (timeline.running_attempt)
    "run_after",
    "owner",
    "enqueued_at",
    *LIST_PROGRESS_COLUMNS,
)


class JobChangeList(ReplicaChangeList):
    def get_queryset(
        self, request: HttpRequest, exclude_parameters: list[str | None] | None = None
    ) -> QuerySet:
        return super().get_queryset(request, exclude_parameters).only(*LIST_COLUMNS)


# The admin search's word for a tag (get_search_results).
TAG_PREFIX = "tag:"


def is_tag_word(word: str) -> bool:
    """A search word that names a tag: ``tag:NAME``, or any ``key:value``."""
    head, colon, tail = word.partition(":")
    return bool(colon and head and tail)


@admin.register(Job)
class JobAdmin(PrimaryActionsMixin, JobRunningFields, JobWorkflowFields, JobActions, admin.ModelAdmin):
    list_display = (
        "id",
        "task",
        "queue",
        "status_and_attempts",
        "progress_column",
        "priority",
        "due",
        "held_by",
        "age",
    )
    list_display_links = ("id", "task")
    list_filter = ("status", "queue_name", "task_path", BatchFilter)
    # Searching is get_search_results(); these only make the admin draw the box.
    search_fields = ("=id", "task_path", "args", "kwargs", "metadata")
    search_help_text = (
        "A number finds the job with that id; tag:NAME, or a word with a colon (customer:42), the jobs "
        "with that tag (through an index); other text searches task paths, arguments and metadata."
    )
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
        ("Timeline", {"fields": ("timeline", "due", "expires", "held_by", "lease_expires", "workers")}),
        ("Call", {"fields": ("arguments", "keyword_arguments", "job_metadata", "job_keys", "retry_policy")}),
        ("Outcome", {"fields": ("result", "error_list")}),
        ("Earlier runs", {"fields": ("earlier_runs",), "classes": ("collapse",)}),
    )
    readonly_fields = (
        "task_path",
        "queue_name",
        "status_badge",
        "priority",
        "attempts_of_max",
        "timeline",
        "due",
        "expires",
        "held_by",
        "lease_expires",
        "workers",
        "arguments",
        "keyword_arguments",
        "job_metadata",
        "job_keys",
        "retry_policy",
        "result",
        "error_list",
        "earlier_runs",
    )

    class Media:
        css = {"all": ("django_dbqueue/admin.css",)}

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The primary: the job page, its buttons and the actions read and
        # act here; only the list reads OPTIONS READ_DATABASE (reads.py).
        return super().get_queryset(request).using(queue_database())

    def check(self, **kwargs: object) -> list:
        return [*super().check(**kwargs), *check_one_database()]

    def get_changelist(self, request: HttpRequest, **kwargs: object) -> type[ChangeList]:
        return JobChangeList

    # -- columns and detail fields ------------------------------------------

    @admin.display(description="task path")
    def task(self, job: Job) -> SafeString:
        return show.breakable(job.task_path)

    @admin.display(description="queue")
    def queue(self, job: Job) -> SafeString:
        return show.breakable(job.queue_name)

    @admin.display(description="status")
    def status_badge(self, job: Job) -> SafeString:
        return show.status_badge(job.status)

    @admin.display(description="status, attempts")
    def status_and_attempts(self, job: Job) -> SafeString:
        # One column for both keeps the job list within a 1,366 px screen.
        return format_html(
            '{} <span class="dbqueue-attempts" title="attempts">{}</span>',
            show.status_badge(job.status),
            story.attempts_text(job, short=True),
        )

    @admin.display(description="attempts")
    def attempts_of_max(self, job: Job) -> str:
        return story.attempts_text(job)

    @admin.display(description="run after")
    def due(self, job: Job) -> SafeString | str:
        return show.time_tag(job.run_after)

    @admin.display(description="expires at")
    def expires(self, job: Job) -> SafeString | str:
        """The deadline for a run to start (expires=): past it, a worker ends the job unrun."""
        return show.time_tag(job.expires_at) if job.expires_at else "never"

    @admin.display(description="owner")
    def held_by(self, job: Job) -> SafeString | str:
        return show.breakable(job.owner) if job.owner else "-"

    @admin.display(description="lease expires at")
    def lease_expires(self, job: Job) -> SafeString | str:
        return show.time_tag(job.lease_expires_at)

    @admin.display(description="workers")
    def workers(self, job: Job) -> SafeString:
        return show.worker_counts(job.worker_ids)

    @admin.display(description="age", ordering="id")
    def age(self, job: Job) -> str:
        return show.age(job.enqueued_at)

    @admin.display(description="timeline")
    def timeline(self, job: Job) -> SafeString:
        return story.timeline_html(job)

    @admin.display(description="args")
    def arguments(self, job: Job) -> SafeString:
        return show.pretty_json(job.args)

    @admin.display(description="kwargs")
    def keyword_arguments(self, job: Job) -> SafeString:
        return show.pretty_json(job.kwargs)

    @admin.display(description="metadata")
    def job_metadata(self, job: Job) -> SafeString:
        return show.pretty_json(job.metadata)

    @admin.display(description="keys")
    def job_keys(self, job: Job) -> SafeString | str:
        """The job's unique, concurrency, rate and fairness keys, those it has."""
        keys = []
        if job.unique_key is not None:
            keys.append(("unique key", job.unique_key, ""))
        tags = tags_of(job._state.db or queue_database(), job.pk)
        if tags:
            keys.append(("tags", " ".join(tags), "search them as tag:NAME"))
        window = UniqueWindow.objects.using(job._state.db).filter(job_id=job.pk).first()
        if window is not None:  # a task unique for a period (enqueue/windows.py)
            keys.append(("unique key for its window", str(window), "held until its row is pruned"))
        if job.concurrency_key is not None:
            keys.append(("concurrency key", job.concurrency_key, f"at most {job.concurrency_limit} at once"))
        if job.rate_key is not None:
            keys.append(("rate key", job.rate_key, f"at most {job.rate_limit}"))
        if job.fairness_key is not None:
            keys.append(("fairness key", job.fairness_key, ""))
        if not keys:
            return "none"
        return format_html_join(
            mark_safe("<br>"), "{}: <code>{}</code> {}", ((name, key, note) for name, key, note in keys)
        )

    @admin.display(description="retry policy")
    def retry_policy(self, job: Job) -> str:
        """The task's, as the code this web process runs defines it (a
        policy is code: a worker on another deploy may differ)."""
        from ..enqueue.loading import load_task
        from ..retries import described

        try:
            task = load_task(job.task_path)
        except Exception:  # a path that does not load here: the page still shows
            return "unknown: the task does not load in this process"
        return described(task)

    @admin.display(description="return value")
    def result(self, job: Job) -> SafeString:
        return show.pretty_json(job.return_value)

    @admin.display(description="errors")
    def error_list(self, job: Job) -> SafeString:
        return story.errors_html(job)

    @admin.display(description="runs before the last requeue")
    def earlier_runs(self, job: Job) -> SafeString:
        return show.history_html(job.history)

    # -- searching ----------------------------------------------------------

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        words = search_term.split()
        # A word with a colon is a tag, found through the (tag, job) index
        # (enqueue/tags.py): tag:NAME is the tag NAME, customer:42 itself.
        for word in filter(is_tag_word, words):
            tag = word.removeprefix(TAG_PREFIX)
            tagged = JobTag.objects.using(queryset.db).filter(tag=tag)
            queryset = queryset.filter(pk__in=tagged.values("job_id"))
        term = " ".join(word for word in words if not is_tag_word(word))
        if not term:
            return queryset, False
        # An id is a primary key lookup; text has no index to use and reads
        # the whole table, about a second per million jobs on MariaDB.
        # isdigit() also takes "²" and other digits int() refuses.
        if term.isascii() and term.isdigit():
            return queryset.filter(pk=int(term)), False
        match = Q(task_path__icontains=term)
        # SQLite and MariaDB store JSON as text with non-ASCII characters and
        # quotes escaped ("²" as \u00b2): look for that spelling too.
        for text in dict.fromkeys([term, json.dumps(term)[1:-1]]):
            match |= Q(args__icontains=text) | Q(kwargs__icontains=text) | Q(metadata__icontains=text)
        return queryset.filter(match), False

    # -- permissions: jobs come from enqueue() and change only by actions ---

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        if obj is not None and not may_delete(obj):  # running, or a workflow would wait on it
            return False
        return super().has_delete_permission(request, obj)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Job | None = None,
    ) -> HttpResponse:
        if obj is not None:
            context["page_actions"] = self.page_actions(request, obj)
            # The page follows a job that has not finished (live.js).
            context["live_seconds"] = LIVE_SECONDS if obj.status not in FINISHED else 0
        return super().render_change_form(request, context, add, change, form_url, obj)

    # -- the dashboard --------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        wrap = self.admin_site.admin_view
        return [
            path("dashboard/", wrap(self.dashboard_view), name=f"{prefix}_dashboard"),
            path("dashboard/change/", wrap(self.bulk_change_view), name=f"{prefix}_bulk_change"),
            path(
                "<path:object_id>/actions/<str:name>/",
                wrap(self.page_action_view),
                name=f"{prefix}_page_action",
            ),
            *super().get_urls(),
        ]

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        return dashboard_view(self, request)

    def bulk_change_view(self, request: HttpRequest) -> HttpResponse:
        return bulk_change_view(self, request)
