"""Pausing and resuming queues from the admin: two POST views, for users
with the ``pause_queue`` permission, each recorded in Django's admin log;
and the list of paused queues."""

from __future__ import annotations

from typing import cast

from django.contrib import admin, messages
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_POST

from ..models import PausedQueue
from ..operations.pausing import UnknownQueue, pause, resume
from .database import queue_backends, queue_database
from .readonly import ReadOnlyAdminMixin

PERMISSION = "django_dbqueue.pause_queue"


def may_pause(request: HttpRequest) -> bool:
    return request.user.has_perm(PERMISSION)


@admin.register(PausedQueue)
class PausedQueueAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    # No delete: resume from the dashboard, which logs it as such.
    list_display = ("queue_name", "paused_at", "paused_by")
    ordering = ("queue_name",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).using(queue_database())

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path("pause/", wrap(require_POST(self.pause_view)), name=f"{prefix}_pause"),
            path("resume/", wrap(require_POST(self.resume_view)), name=f"{prefix}_resume"),
            *super().get_urls(),
        ]

    def pause_view(self, request: HttpRequest) -> HttpResponse:
        return self._toggle(request, pausing=True)

    def resume_view(self, request: HttpRequest) -> HttpResponse:
        return self._toggle(request, pausing=False)

    def _toggle(self, request: HttpRequest, pausing: bool) -> HttpResponse:
        if not may_pause(request):
            raise PermissionDenied
        backends = queue_backends()
        if not backends:
            raise PermissionDenied
        backend, name = backends[0], request.POST.get("queue", "")
        rows = PausedQueue.objects.using(backend.database)
        try:
            if pausing:
                changed = pause(backend, name, by=request.user.get_username())
                row = rows.filter(queue_name=name).first() if changed else None
            else:
                row = rows.filter(queue_name=name).first()
                changed = resume(backend, name)
        except UnknownQueue as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return self._back()
        if changed and row is not None:
            verb = "Paused" if pausing else "Resumed"
            LogEntry.objects.log_actions(
                user_id=cast(int, request.user.pk),  # a staff user: never anonymous
                queryset=[row],
                action_flag=ADDITION if pausing else DELETION,
                change_message=f"{verb} queue {name}.",
            )
        if changed:
            text = (
                f"Paused queue {name}: workers stop claiming from it within one poll."
                if pausing
                else (f"Resumed queue {name}.")
            )
            self.message_user(request, text, messages.SUCCESS)
        else:
            state = "already paused" if pausing else "not paused"
            self.message_user(request, f"Queue {name} was {state}.", messages.WARNING)
        return self._back()

    def _back(self) -> HttpResponse:
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:django_dbqueue_job_dashboard"))
