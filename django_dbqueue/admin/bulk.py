"""The dashboard's buttons that change every job of one status in a queue,
however many: "Retry failed" requeues its FAILED jobs, "Discard ready"
cancels its READY ones. Each is a POST, needs the permission of the action
it stands for (``requeue_job``, ``cancel_job``), and goes through
``operations.matching.change_all``: up to OPERATION_INLINE_ROWS at once,
more by an operation job, so a million jobs never hold up the request.
Each changed job is in Django's admin log under the user who asked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from ..operations.matching import change_all
from ..status import Status
from .database import queue_database
from .operations import operation_message

if TYPE_CHECKING:
    from .jobs import JobAdmin


@dataclass(frozen=True)
class Bulk:
    label: str
    method: str
    status: str
    permission: str
    done: str


BULK = {
    "retry_failed": Bulk("Retry failed", "requeue", Status.FAILED, "requeue_job", "Requeued"),
    "discard_ready": Bulk("Discard ready", "cancel", Status.READY, "cancel_job", "Cancelled"),
}


def bulk_buttons(job_admin: JobAdmin, request: HttpRequest) -> list[tuple[str, str, str]]:
    """The ``(name, label, status)`` of each button this user may press."""
    app = job_admin.opts.app_label
    return [
        (name, bulk.label, bulk.status)
        for name, bulk in BULK.items()
        if request.user.has_perm(f"{app}.{bulk.permission}")
    ]


def bulk_change_view(job_admin: JobAdmin, request: HttpRequest) -> HttpResponse:
    return require_POST(lambda request: _bulk_change(job_admin, request))(request)


def _bulk_change(job_admin: JobAdmin, request: HttpRequest) -> HttpResponse:
    name, queue = request.POST.get("what", ""), request.POST.get("queue", "")
    allowed = {button for button, _, _ in bulk_buttons(job_admin, request)}
    if not job_admin.has_view_permission(request) or name not in allowed:
        raise PermissionDenied
    bulk = BULK[name]
    started = change_all(
        bulk.method, using=queue_database(), user=request.user, status=bulk.status, queue_name=queue
    )
    what = f"{bulk.status.lower()} jobs of the queue {queue!r}"
    if not started.decided:
        job_admin.message_user(request, f"No {what}: nothing to do.", messages.WARNING)
    elif started.inline:
        job_admin.message_user(request, f"{bulk.done} {int(started):,} {what}.", messages.SUCCESS)
    else:
        job_admin.message_user(request, operation_message(job_admin, started, bulk.method), messages.SUCCESS)
    opts = job_admin.opts
    return HttpResponseRedirect(
        reverse(f"{job_admin.admin_site.name}:{opts.app_label}_{opts.model_name}_dashboard")
    )
