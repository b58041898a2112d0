"""What people may do to batches: cancel one, or retry its failed jobs, as
changelist actions and as buttons on a batch's page. Each calls the
workflows' own ``BatchHandle.cancel()`` / ``retry_failed()``, records who
did what in Django's admin log, and says what it did and what it skipped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from ..models import Job, Status
from ..workflows.batches import BatchHandle
from ..workflows.models import Batch, BatchStatus
from .operations import operation_message

# A mixin for BatchAdmin: the type checker sees it as a ModelAdmin.
if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


def retryable(batch: Batch) -> bool:
    # retry_failed() reopens the batch; one with nothing to requeue would
    # then stay OPEN, as no member is left to finish it.
    members = Job._base_manager.using(batch._state.db).filter(batch_id=batch.pk)
    return members.filter(status__in=(Status.FAILED, Status.CANCELLED)).exists()


@dataclass(frozen=True)
class BatchChange:
    button: str
    applies: Callable[[Batch], bool]
    why: str  # why the batches it skips were skipped
    did: tuple[str, str]  # the message, singular and plural, with %(count)d and %(jobs)s
    log: str  # the admin log's message, with {jobs} and {was}


BATCH_CHANGES = {
    "cancel_batches": BatchChange(
        "Cancel batch",
        lambda batch: batch.status == BatchStatus.OPEN,
        "only open batches can be cancelled",
        ("Cancelled %(count)d batch (%(jobs)s).", "Cancelled %(count)d batches (%(jobs)s)."),
        "Cancelled the batch and {jobs} (was {was}).",
    ),
    "retry_batches": BatchChange(
        "Retry failed jobs",
        retryable,
        "only batches with failed or cancelled jobs can be retried",
        ("Retried %(count)d batch (%(jobs)s requeued).", "Retried %(count)d batches (%(jobs)s requeued)."),
        "Requeued {jobs} failed or cancelled and opened the batch again (was {was}).",
    ),
}


def jobs(n: int) -> str:
    return ngettext("%(count)d job", "%(count)d jobs", n) % {"count": n}


class BatchActions(_ModelAdmin):
    actions = ("cancel_batches", "retry_batches")

    @admin.action(description="Cancel selected batches", permissions=["cancel_batch"])
    def cancel_batches(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.apply(request, queryset, "cancel_batches")

    @admin.action(description="Retry the failed jobs of selected batches", permissions=["retry_batch"])
    def retry_batches(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.apply(request, queryset, "retry_batches")

    def apply(self, request: HttpRequest, queryset: QuerySet, name: str) -> None:
        change = BATCH_CHANGES[name]
        done = changed_jobs = 0
        skipped: list[int] = []
        for batch in queryset.order_by("pk"):
            if not change.applies(batch):
                skipped.append(batch.pk)
                continue
            handle = BatchHandle(batch.pk, queryset.db)
            count = handle.cancel() if name == "cancel_batches" else handle.retry_failed()
            if not count.decided:
                skipped.append(batch.pk)  # it finished (or was retried) meanwhile
                continue
            done += 1
            changed_jobs += count
            self.log_change(request, batch, change.log.format(jobs=jobs(count), was=batch.status))
            if count.job_id is not None:
                kind = "cancel_batch" if name == "cancel_batches" else "retry_batch"
                self.message_user(request, operation_message(self, count, kind), messages.SUCCESS)
        text = ngettext(*change.did, done) % {"count": done, "jobs": jobs(changed_jobs)} if done else ""
        if skipped:
            ids = ", ".join(f"#{pk}" for pk in skipped[:10]) + (" …" if len(skipped) > 10 else "")
            text += f" Skipped {len(skipped)} ({ids}): {change.why}."
        self.message_user(request, text.strip(), messages.SUCCESS if done else messages.WARNING)

    # -- the same as buttons on a batch's page --------------------------------

    def page_action_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        """POST only (and CSRF-checked by admin_view)."""
        return require_POST(self._page_action)(request, object_id, name)

    def _page_action(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        allowed = self.get_actions(request) if self.has_view_permission(request) else {}
        if name not in BATCH_CHANGES or name not in allowed:
            raise PermissionDenied
        batch = self.get_object(request, unquote(object_id))
        if batch is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        getattr(self, name)(request, self.get_queryset(request).filter(pk=batch.pk))
        url = reverse(
            f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_change", args=[batch.pk]
        )
        return HttpResponseRedirect(url)

    def page_actions(self, request: HttpRequest, batch: Batch) -> list[tuple[str, str]]:
        """The (name, label) of each button the batch page shows this user."""
        allowed = self.get_actions(request)
        return [
            (name, change.button)
            for name, change in BATCH_CHANGES.items()
            if name in allowed and change.applies(batch)
        ]

    def has_cancel_batch_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.cancel_batch")

    def has_retry_batch_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.retry_batch")
