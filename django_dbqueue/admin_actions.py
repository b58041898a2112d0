"""The Job changelist's actions. Each calls the JobQuerySet method the worker
and user code use, and tells the user what it changed, what it skipped and why."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from .query import CANCELLED, FAILED, FINISHED, READY, RUNNING, SUCCESSFUL

# How many jobs a delete confirmation lists; the rest are counted.
DELETE_PREVIEW = 20


def jobs(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"


def census(queryset: QuerySet) -> dict[str, int]:
    """How many of the selected jobs are in each status."""
    return dict(queryset.order_by().values_list("status").annotate(n=Count("pk")).values_list("status", "n"))


class JobActions:
    """Actions for JobAdmin; each needs its own permission (see ``Job.Meta``)."""

    actions = ("requeue", "cancel", "run_now", "delete_selected")

    @admin.action(description="Requeue selected jobs (due now)", permissions=["requeue"])
    def requeue(self, request: HttpRequest, queryset: QuerySet) -> None:
        before = census(queryset)
        changed = queryset.requeue()
        why = "only failed, cancelled or successful jobs can be requeued"
        self.report(request, "Requeued", changed, before, skipped_statuses(before, FINISHED), why)

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel(self, request: HttpRequest, queryset: QuerySet) -> None:
        before = census(queryset)
        changed = queryset.cancel()
        why = "only ready jobs can be cancelled; a running job is left to finish"
        self.report(request, "Cancelled", changed, before, skipped_statuses(before, [READY]), why)

    @admin.action(description="Run selected jobs now", permissions=["run_now"])
    def run_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        before = census(queryset)
        waiting = queryset.filter(status=READY, run_after__gt=timezone.now()).count()
        changed = queryset.run_now()
        reasons = skipped_statuses(before, [READY])
        if before.get(READY, 0) > waiting:
            reasons["ready and already due"] = before[READY] - waiting
        why = "only ready jobs waiting for a later time can be made due"
        self.report(request, "Made due now", changed, before, reasons, why)

    @admin.action(description="Delete selected jobs", permissions=["delete"])
    def delete_selected(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        # A running job's worker would find its row gone; it must finish or
        # be cancelled first. delete_queryset() applies the same rule in its
        # DELETE, for a job that starts while the user confirms.
        running = queryset.filter(status=RUNNING).count()
        if running:
            self.message_user(
                request,
                f"Skipped {jobs(running)}: running jobs cannot be deleted; wait for them to finish.",
                messages.WARNING,
            )
        deletable = queryset.exclude(status=RUNNING)
        if not deletable.exists():
            return None
        return django_delete_selected(self, request, deletable)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        queryset.exclude(status=RUNNING).delete()

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[list, dict, set, list]:
        # Jobs have no relations to collect, and listing a million of them on
        # the confirmation page would never finish rendering.
        if not isinstance(objs, QuerySet):
            return super().get_deleted_objects(objs, request)  # type: ignore[misc]
        total = objs.count()
        shown: list[str] = [str(job) for job in objs[:DELETE_PREVIEW]]
        if total > DELETE_PREVIEW:
            shown.append(f"… and {jobs(total - DELETE_PREVIEW)} more")
        return shown, {self.model._meta.verbose_name_plural: total}, set(), []

    def report(
        self,
        request: HttpRequest,
        verb: str,
        changed: int,
        before: dict[str, int],
        reasons: dict[str, int],
        why: str,
    ) -> None:
        skipped = sum(before.values()) - changed
        text = f"{verb} {jobs(changed)}."
        if skipped > 0:
            # A job can change state between the census and the UPDATE.
            meanwhile = skipped - sum(reasons.values())
            if meanwhile > 0:
                reasons = {**reasons, "changed by a worker meanwhile": meanwhile}
            detail = ", ".join(f"{n} {label}" for label, n in reasons.items() if n > 0)
            text += f" Skipped {jobs(skipped)} ({detail}): {why}."
        self.message_user(request, text, messages.SUCCESS if changed else messages.WARNING)

    def has_requeue_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.requeue_job")

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.cancel_job")

    def has_run_now_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.run_job_now")


def skipped_statuses(before: dict[str, int], allowed: Iterable[str]) -> dict[str, int]:
    """The selected jobs an action leaves alone, by status, labelled for people."""
    allowed = set(allowed)
    order = (READY, RUNNING, SUCCESSFUL, FAILED, CANCELLED)
    statuses = sorted(before, key=lambda s: order.index(s) if s in order else len(order))
    return {status.lower(): before[status] for status in statuses if status not in allowed}
