"""The workflow part of a job's page (its batch, parents, dependants, policy
and picture), and the job list's filter by batch (``?batch_id=N``, the link
a batch's page gives to its members)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..models import Job, Status
from ..routing import stored_id
from ..workflows.models import Dependency
from . import display as show
from .workflow import batch_url, dependants_of, job_picture, parents_of, related_html

WORKFLOW_FIELDS = ("batch_link", "parents", "dependants", "policy", "workflow_picture")

# Unfinished jobs in a workflow: deleted, a batch member would leave its
# batch open and a parent its dependants WAITING, for ever (nothing else
# would tell them it has ended). Cancelling tells them.
STRANDS = Q(status__in=(Status.READY, Status.WAITING)) & (Q(batch__isnull=False) | Q(has_dependants=True))
STRANDS_WHY = (
    "a ready or waiting job in a workflow (a batch member, or a parent of other jobs) cannot be "
    "deleted; cancel it first, so that its batch and dependants learn it has ended."
)
UNDELETABLE = Q(status=Status.RUNNING) | STRANDS


def may_delete(job: Job) -> bool:
    """What UNDELETABLE says, for one job read already."""
    in_workflow = job.batch_id is not None or job.has_dependants
    return job.status != Status.RUNNING and not (job.status in (Status.READY, Status.WAITING) and in_workflow)


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


class BatchFilter(admin.SimpleListFilter):
    """Shown only while the list is filtered by a batch: the batch's page links here."""

    title = "batch"
    parameter_name = "batch_id"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        # Any value gets a choice: a filter without one is not applied at all.
        return [(value, f"#{value}")] if value else []

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet | None:
        value = self.value()
        if value is None:
            return None
        # Anything but a batch's possible id finds no job, rather than an error page.
        batch_id = stored_id(value)
        return queryset.none() if batch_id is None else queryset.filter(batch_id=batch_id)


def workflow_fields(job: Job) -> tuple[str, ...]:
    """The Workflow section's fields for this job: none for a plain job, and
    the policy only for a job that has parents (it says what they do to it)."""
    has_parents = Dependency.objects.using(job._state.db or "default").filter(child_id=job.pk).exists()
    if has_parents or job.status == Status.WAITING:
        return WORKFLOW_FIELDS
    if job.batch_id or job.has_dependants:
        return tuple(field for field in WORKFLOW_FIELDS if field != "policy")
    return ()


class JobWorkflowFields(_ModelAdmin):
    """For JobAdmin: a "Workflow" section on the page of a job that has a
    batch, parents or dependants; absent on a plain job's page."""

    def get_fieldsets(self, request: HttpRequest, obj: Job | None = None) -> Any:
        fieldsets = list(super().get_fieldsets(request, obj))
        fields = workflow_fields(obj) if obj is not None else ()
        if fields:
            fieldsets.insert(1, ("Workflow", {"fields": fields}))
        return fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> Any:
        return (*super().get_readonly_fields(request, obj), *WORKFLOW_FIELDS)

    @admin.display(description="batch")
    def batch_link(self, job: Job) -> SafeString | str:
        if not job.batch_id:
            return "-"
        return format_html(
            '<a href="{}">batch #{}</a>', batch_url(self.admin_site.name, job.batch_id), job.batch_id
        )

    @admin.display(description="parents")
    def parents(self, job: Job) -> SafeString:
        return related_html(parents_of(job, self.admin_site.name), "None.")

    @admin.display(description="dependants")
    def dependants(self, job: Job) -> SafeString:
        return related_html(dependants_of(job, self.admin_site.name), "None.")

    @admin.display(description="policy")
    def policy(self, job: Job) -> SafeString:
        failure = {
            "cancel": "a parent's failure or cancellation cancels this job",
            "run": "this job runs even if a parent failed or was cancelled",
            "hold": "a FAILED parent holds this job until it is requeued and succeeds (not a cancelled one)",
        }.get(job.on_parent_failure, f"on_parent_failure = {job.on_parent_failure!r}")
        passing = (
            "its parents' return values come before its own arguments"
            if job.pass_result
            else "its parents' return values are not passed"
        )
        return format_html(
            "<code>on_parent_failure={}</code>: {}.<br><code>pass_result={}</code>: {}.",
            show.printable(job.on_parent_failure),
            failure,
            job.pass_result,
            passing,
        )

    @admin.display(description="picture")
    def workflow_picture(self, job: Job) -> SafeString:
        return job_picture(job, self.admin_site.name)
