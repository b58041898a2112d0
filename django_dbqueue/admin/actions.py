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
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from ..models import Job
from ..operations.big import limits, start
from ..operations.matching import change_all, check_filter
from ..operations.selections import runs
from ..routing import stored_id
from .changes import CHANGES, RUNNING, Change, change_locked, chunks, jobs, label_rank, status_rank
from .job_workflow import STRANDS, STRANDS_WHY, UNDELETABLE
from .operations import operation_message

# How many jobs a delete confirmation lists; the rest are counted.
DELETE_PREVIEW = 20
# Selected jobs are changed this many at a time, each chunk locked only for
# its own short transaction.
CHUNK = 500


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
        inline = limits(queryset.db).inline
        if len(queryset.order_by().values_list("pk", flat=True)[: inline + 1]) > inline:
            self.apply_as_job(request, queryset, change)
            return
        unchanged: Counter[str] = Counter()
        changed = asked = 0
        for ids in chunks(queryset, CHUNK):
            was, after = change_locked(queryset.model._default_manager.using(queryset.db), ids, change.method)
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

    def apply_as_job(self, request: HttpRequest, queryset: QuerySet, change: Change) -> None:
        """More jobs than OPERATION_INLINE_ROWS: answer at once, and change
        them in an operation job, chunk by chunk. "Select all N" on a list
        filtered only by the list's filters keeps the filter, not the ids
        (operations/matching.py): a million jobs are never read into the
        request. Any other selection is its ids (operations/selections.py)."""
        matching = all_matching(request)
        if matching is not None:
            started = change_all(change.method, using=queryset.db, user=request.user, **matching)
        else:
            ids = runs(queryset.order_by().values_list("pk", flat=True))
            params = {"method": change.method, "ids": ids, "user": request.user.pk}
            started = start("change_jobs", queryset.db, params)
        self.message_user(request, operation_message(self, started, change.method), messages.SUCCESS)

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


# The job list's filters (JobAdmin.list_filter), as the list's query string
# names them, and the Job field each stands for; and what else the query
# string may hold without changing which jobs are listed.
LIST_FILTERS = {
    "status__exact": "status",
    "queue_name__exact": "queue_name",
    "task_path__exact": "task_path",
    "batch_id": "batch_id",
}
NOT_FILTERS = frozenset({"o", "p", "_changelist_filters"})


def all_matching(request: HttpRequest) -> dict[str, Any] | None:
    """The filter of a "Select all N" action on a list filtered only by the
    list's own filters (no search, no other lookup), as change_all() takes
    it; None for any other selection, which is changed by its ids."""
    if request.POST.get("select_across") != "1":
        return None
    given = {key: request.GET[key] for key in request.GET if key not in NOT_FILTERS}
    if set(given) - set(LIST_FILTERS):
        return None
    matching: dict[str, Any] = {LIST_FILTERS[key]: value for key, value in given.items()}
    if "batch_id" in matching:
        matching["batch_id"] = stored_id(matching["batch_id"])
    try:
        return check_filter(matching)
    except ValueError:  # a value no job has (an id past 64 bits, a made-up status): the ids say so
        return None
