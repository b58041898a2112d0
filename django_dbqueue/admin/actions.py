"""What people may do to jobs: requeue, cancel, run now and delete, as
changelist actions and as buttons on a job's page. Each calls the JobQuerySet
method the worker and user code use, records who changed which job in
Django's admin log, and tells the user what it changed, what it skipped and why.

Cancel changes a running job too, in its own way: ``JobQuerySet.cancel()``
only asks its worker to stop it (``cancel_requested_at``), and the job ends
CANCELLED when the worker does. The message and the log say which jobs were
cancelled and which were asked to stop."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterator
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
    # What it did to a RUNNING job, for an action that changes them (cancel
    # asks their workers to stop them): the log's verb, and the message.
    asked_verb: str = ""
    asked: tuple[str, str] = ("", "")


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
        "finished jobs cannot be cancelled, and a running job is asked to stop once",
        "Cancel",
        # WAITING: a job whose parents have not all finished (workflows).
        lambda job, now: job.status in (READY, Status.WAITING) or asked_nothing_yet(job),
        ("Cancelled %(count)d job.", "Cancelled %(count)d jobs."),
        asked_verb="Asked to stop",
        asked=(
            "Asked %(count)d running job to stop: it ends CANCELLED when its worker stops it.",
            "Asked %(count)d running jobs to stop: they end CANCELLED when their workers stop them.",
        ),
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


def asked_nothing_yet(job: Job) -> bool:
    """A running job nobody has asked to stop yet."""
    return job.status == RUNNING and job.cancel_requested_at is None


@dataclass(frozen=True)
class State:
    """What an action may change in a job's row."""

    status: str
    due: datetime
    cancel_requested_at: datetime | None

    @property
    def label(self) -> str:
        """How a skipped job is named in the message: its status, or more."""
        if self.status == RUNNING and self.cancel_requested_at is not None:
            return "running and already asked to stop"
        return self.status.lower()


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
        unchanged: Counter[str] = Counter()
        changed = asked = 0
        for ids in chunks(queryset):
            was, after = change_locked(queryset.model._default_manager.using(queryset.db), ids, change)
            now_changed = {pk for pk, state in was.items() if after.get(pk) != state}
            unchanged.update(state.label for pk, state in was.items() if pk not in now_changed)
            # A job still RUNNING after the change was asked to stop, not changed.
            running = {pk for pk in now_changed if after[pk].status == RUNNING}
            changed += len(now_changed - running)
            asked += len(running)
            self.log_job_changes(
                request, queryset, change, {pk: was[pk].status for pk in now_changed}, running
            )
        self.report(request, change, changed, asked, unchanged)

    def log_job_changes(
        self,
        request: HttpRequest,
        queryset: QuerySet,
        change: Change,
        was: dict[int, str],
        asked: Collection[int] = (),
    ) -> None:
        """One admin log entry per changed job: who, which job, what, when."""
        if not was:
            return
        changed = queryset.model._default_manager.using(queryset.db).filter(pk__in=list(was))
        rows = list(changed.only("pk", "task_path", "status"))
        groups = {(status, pk in asked) for pk, status in was.items()}
        for status, stopping in sorted(groups, key=lambda group: status_rank(group[0])):
            LogEntry.objects.log_actions(
                user_id=cast(int, request.user.pk),  # a staff user: never anonymous
                queryset=[job for job in rows if was[job.pk] == status and (job.pk in asked) == stopping],
                action_flag=CHANGE,
                change_message=f"{change.asked_verb if stopping else change.verb} (was {status}).",
            )

    def report(
        self, request: HttpRequest, change: Change, changed: int, asked: int, unchanged: Counter
    ) -> None:
        said = []
        if changed or not asked:
            said.append(ngettext(*change.did, changed) % {"count": changed})
        if asked:
            said.append(ngettext(*change.asked, asked) % {"count": asked})
        skipped = sum(unchanged.values())
        if skipped:
            detail = ", ".join(
                f"{unchanged[label]} {change.unchanged_ready if label == 'ready' else label}"
                for label in sorted(unchanged, key=label_rank)
            )
            said.append(f"Skipped {jobs(skipped)} ({detail}): {change.why}.")
        self.message_user(request, " ".join(said), messages.SUCCESS if changed or asked else messages.WARNING)

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


def label_rank(label: str) -> tuple[int, str]:
    """Skipped jobs' labels in the order of their statuses ("running and ..." with running)."""
    return status_rank(label.split()[0].upper()), label


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
) -> tuple[dict[int, State], dict[int, State]]:
    """Apply ``change`` to the jobs ``ids`` with their rows locked, so what
    changed is known exactly: the rows whose state differs afterwards.
    Returns each job's state before and after."""
    columns = ("pk", "status", "run_after", "cancel_requested_at")
    with transaction.atomic(using=rows.db):
        selected = rows.filter(pk__in=ids)
        was = {pk: State(*state) for pk, *state in selected.select_for_update().values_list(*columns)}
        getattr(selected, change.method)()
        after = {pk: State(*state) for pk, *state in selected.values_list(*columns)}
    return was, after
