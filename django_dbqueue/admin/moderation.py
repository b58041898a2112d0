"""Claim-for-review in any model's admin, so two moderators never review
the same row. The model's QuerySet must mix in ``ClaimQuerySetMixin``::

    @admin.register(Post)
    class PostAdmin(ModerationAdminMixin, admin.ModelAdmin):
        claim_done_changes = {"status": "APPROVED"}

        def claimable_queryset(self, request):
            return super().claimable_queryset(request).filter(status="PENDING")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.contrib.admin.utils import display_for_value, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from ..transitions.review import DEFAULT_REVIEW_LEASE, ClaimQuerySetMixin
from .claims import ClaimListFilter, held_by_others

MAX_CLAIM = 100


# A mixin for a model's ModelAdmin: the type checker sees it as one.
if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


class ModerationAdminMixin(_ModelAdmin):
    change_list_template = "admin/django_dbqueue/moderation/change_list.html"
    # Added to the model admin's own ``actions`` (see __init__), not in their place.
    moderation_actions = ("done", "release")
    claim_batch = 10
    claim_lease = DEFAULT_REVIEW_LEASE
    # What "done" writes to each row besides letting go of it.
    claim_done_changes: dict[str, Any] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        own = self.actions  # the model admin's (or its bases'); None turns actions off
        if own is not None:
            # Our "delete selected" stands in for Django's, where the site offers it.
            spare = [name for name, _ in self.admin_site.actions if name == "delete_selected"]
            self.actions = list(dict.fromkeys([*spare, *self.moderation_actions, *own]))

    def claim_owner(self, request: HttpRequest) -> str:
        return request.user.get_username()

    def claimable_queryset(self, request: HttpRequest) -> ClaimQuerySetMixin:
        """The pool "claim next" draws from; narrow it to what needs review."""
        return cast(ClaimQuerySetMixin, self.get_queryset(request))

    def get_list_filter(self, request: HttpRequest) -> list:
        return [ClaimListFilter, *super().get_list_filter(request)]

    def get_list_display(self, request: HttpRequest) -> list:
        # One column for the claim: where the model admin lists the claim
        # columns themselves, "claim_state" takes their place.
        claim = {*self._claim_fields(), "claim_state"}
        columns = list(super().get_list_display(request))
        at = next((i for i, name in enumerate(columns) if name in claim), len(columns))
        rest = [name for name in columns if name not in claim]
        return [*rest[:at], "claim_state", *rest[at:]]

    @admin.display(description="claimed by")
    def claim_state(self, obj: Any) -> SafeString | str:
        owner, expires = self._claim_of(obj)
        if not owner or expires is None or expires <= timezone.now():
            return "-"
        left = max(int((expires - timezone.now()).total_seconds() // 60), 0)
        return format_html('{} <span class="quiet">({} min left)</span>', owner, left)

    # -- the change form: the claim columns are the claim's business, and a
    # row another moderator holds is theirs to change ----------------------

    def _claim_fields(self) -> tuple[str, str]:
        queryset = self.model._default_manager.all()
        return queryset.claim_owner_field, queryset.claim_lease_field

    def _claim_of(self, obj: Any) -> tuple[str | None, Any]:
        owner_field, lease_field = self._claim_fields()
        return getattr(obj, owner_field), getattr(obj, lease_field)

    def held_by_other(self, request: HttpRequest, obj: Any) -> str | None:
        """Who else holds ``obj`` under a lease that has not run out, if anyone."""
        owner, expires = self._claim_of(obj)
        if owner and owner != self.claim_owner(request) and expires and expires > timezone.now():
            return owner
        return None

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list:
        return [*super().get_readonly_fields(request, obj), *self._claim_fields()]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and self.held_by_other(request, obj):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Django asks this per row too, for the delete view and the
        # confirmation of the "delete selected" action.
        if obj is not None and self.held_by_other(request, obj):
            return False
        return super().has_delete_permission(request, obj)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict | None = None,
    ) -> HttpResponse:
        obj = self.get_object(request, unquote(object_id)) if object_id else None
        # Only for whoever may see the row at all; the rest get Django's 403.
        holder = (
            obj is not None and self.has_view_permission(request, obj) and self.held_by_other(request, obj)
        )
        if holder:
            _, expires = self._claim_of(obj)
            # Exactly as the admin shows the lease column on this very page.
            until = display_for_value(expires, "-")
            text = (
                f"{capfirst(self.opts.verbose_name)} “{obj}” is being reviewed by {holder} until "
                f"{until}; you can look at it, but not change it until they finish or their claim runs out."
            )
            if request.method == "POST":
                self.message_user(request, f"Not saved. {text}", messages.ERROR)
                return HttpResponseRedirect(request.get_full_path())
            self.message_user(request, text, messages.WARNING)
        return super().changeform_view(request, object_id, form_url, extra_context)

    # -- claiming -------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_claim"
        claim = path("claim/", self.admin_site.admin_view(require_POST(self.claim_view)), name=name)
        return [claim, *super().get_urls()]

    def claim_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_change_permission(request):
            raise PermissionDenied
        try:
            limit = min(max(int(request.POST.get("n", self.claim_batch)), 1), MAX_CLAIM)
        except ValueError:
            limit = self.claim_batch
        owner = self.claim_owner(request)
        claimed = self.claimable_queryset(request).claim(owner, limit=limit, lease=self.claim_lease)
        if claimed:
            minutes = int(self.claim_lease // 60)
            text = ngettext(
                "Claimed %(n)d %(name)s for you; it is yours for %(lease)s.",
                "Claimed %(n)d %(name)s for you; they are yours for %(lease)s.",
                len(claimed),
            ) % {
                "n": len(claimed),
                "name": self._names(len(claimed)),
                "lease": ngettext("%(m)d minute", "%(m)d minutes", minutes) % {"m": minutes},
            }
            self.message_user(request, text, messages.SUCCESS)
        else:
            text = f"There are no {self.opts.verbose_name_plural} left to claim."
            self.message_user(request, text, messages.WARNING)
        return HttpResponseRedirect(f"{self._url('changelist')}?claimed=mine")

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        owner = self.claim_owner(request)
        context = {
            "claim_url": self._url("claim"),
            "claim_batch": self.claim_batch,
            "claim_max": MAX_CLAIM,
            "my_claims": cast(ClaimQuerySetMixin, self.get_queryset(request)).claimed_by(owner).count(),
            "can_claim": self.has_change_permission(request),
            **(extra_context or {}),
        }
        return super().changelist_view(request, context)

    def _url(self, view: str) -> str:
        return reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_{view}")

    # -- actions ----------------------------------------------------------------

    # Django's own wording (and msgid, so its translations apply).
    @admin.action(description=gettext_lazy("Delete selected %(verbose_name_plural)s"), permissions=["delete"])
    def delete_selected(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        """Django's "delete selected", less the rows other moderators hold:
        Django would refuse the whole selection for them, as if a permission lacked."""
        # Few ids (other moderators' claims), and MySQL cannot delete from a
        # table by a subquery on that same table.
        held = list(held_by_others(queryset, self.claim_owner(request)).values_list("pk", flat=True))
        if n := len(held):
            text = ngettext(
                "Skipped %(n)d %(name)s: another moderator is reviewing it; "
                "it can be deleted once they finish or their claim runs out.",
                "Skipped %(n)d %(name)s: other moderators are reviewing them; "
                "they can be deleted once those finish or their claims run out.",
                n,
            ) % {"n": n, "name": self._names(n)}
            self.message_user(request, text, messages.WARNING)
        rest = queryset.exclude(pk__in=held)
        return django_delete_selected(self, request, rest) if rest.exists() else None

    @admin.action(description="Release: give the selected items back to the pool", permissions=["change"])
    def release(self, request: HttpRequest, queryset: ClaimQuerySetMixin) -> None:
        total = queryset.count()
        self._report(request, "Released", queryset.release(self.claim_owner(request)), total)

    # Subclasses may re-declare it with their own wording and call super().
    @admin.action(description="Done: finish my review of the selected items", permissions=["change"])
    def done(self, request: HttpRequest, queryset: ClaimQuerySetMixin) -> None:
        total = queryset.count()
        changed = queryset.done(self.claim_owner(request), **self.claim_done_changes)
        self._report(request, "Finished", changed, total)

    def _names(self, n: int) -> str:
        return str(self.opts.verbose_name if n == 1 else self.opts.verbose_name_plural)

    def _report(self, request: HttpRequest, verb: str, changed: int, total: int) -> None:
        text = f"{verb} {changed} {self._names(changed)}."
        skipped = total - changed
        if skipped:
            text += " " + ngettext(
                "Skipped %(n)d: it is not claimed by you (claim it first).",
                "Skipped %(n)d: they are not claimed by you (claim them first).",
                skipped,
            ) % {"n": skipped}
        self.message_user(request, text, messages.SUCCESS if changed else messages.WARNING)
