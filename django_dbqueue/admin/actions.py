"""What people may do to jobs: requeue, cancel, run now and delete, as
changelist actions and as buttons on a job's page. Each calls the JobQuerySet
method the worker and user code use, records who changed which job in
Django's admin log, and tells the user what it changed, what it skipped and why."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from ..models import Job, Status
from .job_workflow import STRANDS, STRANDS_WHY, UNDELETABLE

READY, RUNNING = Status.READY, Status.RUNNING
FINISHED = (Status.SUCCESSFUL, Status.FAILED, Status.CANCELLED)
STATUS_ORDER = (READY, RUNNING, *FINISHED)

# How many jobs a delete confirmation lists; the rest are counted.
DELETE_PREVIEW = 20
# Selected jobs are changed this many at a time, each chunk locked only for
# its own short transaction.
CHUNK = 500


@dataclass(frozen=True)
class Change:
    method: str  # the JobQuerySet method that makes it
    verb: str
    why: str  # why the jobs it skips were skipped
    # How the page button is labelled, and which jobs show it. The queryset
    # method decides for itself; this only spares people buttons that would
    # do nothing.
    button: str
    applies: Callable[[Job, datetime], bool]
    # What the message says it did, singular and plural, with %(count)d.
    did: tuple[str, str]
    unchanged_ready: str = "ready"  # how to name a READY job it left alone


CHANGES = {
    "requeue": Change(
        "requeue",
        "Requeued",
        "only failed, cancelled or successful jobs can be requeued",
        "Requeue",
        lambda job, now: job.status in FINISHED,
        ("Requeued %(count)d job.", "Requeued %(count)d jobs."),
    ),
    "cancel": Change(
        "cancel",
        "Cancelled",
        "only ready or waiting jobs can be cancelled; a running job is left to finish",
        "Cancel",
        # WAITING: a job whose parents have not all finished (workflows).
        lambda job, now: job.status in (READY, Status.WAITING),
        ("Cancelled %(count)d job.", "Cancelled %(count)d jobs."),
    ),
    "run_now": Change(
        "run_now",
        "Made due now",
        "only ready jobs waiting for a later time can be made due",
        "Run now",
        lambda job, now: job.status == READY and job.run_after > now,
        ("Made %(count)d job due now.", "Made %(count)d jobs due now."),
        unchanged_ready="ready and already due",
    ),
}


def jobs(n: int) -> str:
    return ngettext("%(count)d job", "%(count)d jobs", n) % {"count": n}


# A mixin for JobAdmin: the type checker sees it as a ModelAdmin.
if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


class JobActions(_ModelAdmin):
    """Actions for JobAdmin; each needs its own permission (see ``Job.Meta``)."""

    actions = ("requeue", "cancel", "run_now", "delete_selected")

    @admin.action(description="Requeue selected jobs (due now)", permissions=["requeue"])
    def requeue(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.apply(request, queryset, CHANGES["requeue"])

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.apply(request, queryset, CHANGES["cancel"])

    @admin.action(description="Run selected jobs now", permissions=["run_now"])
    def run_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.apply(request, queryset, CHANGES["run_now"])

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
        stranding = queryset.filter(STRANDS).count()
        if stranding:
            self.message_user(request, f"Skipped {jobs(stranding)}: {STRANDS_WHY}", messages.WARNING)
        deletable = queryset.exclude(UNDELETABLE)
        if not deletable.exists():
            return None
        return django_delete_selected(self, request, deletable)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        queryset.exclude(UNDELETABLE).delete()

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[list, dict, set, list]:
        # Jobs have no relations to collect, and listing a million of them on
        # the confirmation page would never finish rendering. (Django's
        # collector would also look in the router's database, not the queue's.)
        total = objs.count() if isinstance(objs, QuerySet) else len(objs)
        shown: list[str] = [str(job) for job in objs[:DELETE_PREVIEW]]
        if total > DELETE_PREVIEW:
            shown.append(f"… and {jobs(total - DELETE_PREVIEW)} more")
        return shown, {self.model._meta.verbose_name_plural: total}, set(), []

    # -- applying a change, logging it, and saying what happened ---------------

    def apply(self, request: HttpRequest, queryset: QuerySet, change: Change) -> None:
        before: Counter[str] = Counter()
        unchanged: Counter[str] = Counter()
        changed = 0
        for ids in chunks(queryset):
            was, now_changed = change_locked(queryset.model._default_manager.using(queryset.db), ids, change)
            before.update(status for status, _ in was.values())
            unchanged.update(status for pk, (status, _) in was.items() if pk not in now_changed)
            changed += len(now_changed)
            self.log_job_changes(request, queryset, change, {pk: was[pk][0] for pk in now_changed})
        self.report(request, change, changed, before, unchanged)

    def log_job_changes(
        self, request: HttpRequest, queryset: QuerySet, change: Change, was: dict[int, str]
    ) -> None:
        """One admin log entry per changed job: who, which job, what, when."""
        if not was:
            return
        changed = queryset.model._default_manager.using(queryset.db).filter(pk__in=list(was))
        rows = list(changed.only("pk", "task_path", "status"))
        for status in sorted(set(was.values()), key=status_rank):
            LogEntry.objects.log_actions(
                user_id=cast(int, request.user.pk),  # a staff user: never anonymous
                queryset=[job for job in rows if was[job.pk] == status],
                action_flag=CHANGE,
                change_message=f"{change.verb} (was {status}).",
            )

    def report(
        self, request: HttpRequest, change: Change, changed: int, before: Counter, unchanged: Counter
    ) -> None:
        text = ngettext(*change.did, changed) % {"count": changed}
        skipped = sum(unchanged.values())
        if skipped:
            detail = ", ".join(
                f"{unchanged[status]} {change.unchanged_ready if status == READY else status.lower()}"
                for status in sorted(unchanged, key=status_rank)
            )
            text += f" Skipped {jobs(skipped)} ({detail}): {change.why}."
        self.message_user(request, text, messages.SUCCESS if changed else messages.WARNING)

    # -- the same changes as buttons on a job's page ----------------------------

    def page_action_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        """POST only (and CSRF-checked by admin_view): run one action on one job."""
        return require_POST(self._page_action)(request, object_id, name)

    def _page_action(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        # As on the job list: the user must see jobs, and hold the action's permission.
        allowed = self.get_actions(request) if self.has_view_permission(request) else {}
        if name not in CHANGES or name not in allowed:
            raise PermissionDenied
        job = self.get_object(request, unquote(object_id))
        if job is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        getattr(self, name)(request, self.get_queryset(request).filter(pk=job.pk))
        url = reverse(
            f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_change", args=[job.pk]
        )
        return HttpResponseRedirect(url)

    def page_actions(self, request: HttpRequest, job: Job) -> list[tuple[str, str]]:
        """The (name, label) of each button the job page shows this user."""
        allowed = self.get_actions(request)
        now = timezone.now()
        return [
            (name, change.button)
            for name, change in CHANGES.items()
            if name in allowed and change.applies(job, now)
        ]

    def has_requeue_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.requeue_job")

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.cancel_job")

    def has_run_now_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.run_job_now")


def status_rank(status: str) -> int:
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)


def chunks(queryset: QuerySet, size: int = CHUNK) -> Iterator[list[int]]:
    """The selected ids in ascending runs of ``size``, without reading them all at once."""
    ids = queryset.order_by("pk").values_list("pk", flat=True)
    last = None
    while True:
        page = list((ids if last is None else ids.filter(pk__gt=last))[:size])
        if not page:
            return
        yield page
        last = page[-1]


def change_locked(
    rows: QuerySet, ids: list[int], change: Change
) -> tuple[dict[int, tuple[str, datetime]], set[int]]:
    """Apply ``change`` to the jobs ``ids`` with their rows locked, so what
    changed is known exactly: the rows whose state differs afterwards.
    Returns each job's state before, and the ids that changed."""
    state = ("pk", "status", "run_after")
    with transaction.atomic(using=rows.db):
        selected = rows.filter(pk__in=ids)
        was = {pk: (status, due) for pk, status, due in selected.select_for_update().values_list(*state)}
        getattr(selected, change.method)()
        after = {pk: (status, due) for pk, status, due in selected.values_list(*state)}
    return was, {pk for pk, before in was.items() if after.get(pk) != before}
