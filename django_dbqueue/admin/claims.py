"""Who holds which rows of a moderated model: the claim filter of its
changelist, and the rows other moderators hold."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from ..transitions.review import ClaimQuerySetMixin


class ClaimListFilter(admin.SimpleListFilter):
    title = "claim"
    parameter_name = "claimed"

    def __init__(self, request: HttpRequest, params: dict, model: Any, model_admin: Any) -> None:
        self.owner = model_admin.claim_owner(request)
        super().__init__(request, params, model, model_admin)

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("mine", "Claimed by me"), ("free", "Free to claim"), ("others", "Claimed by others")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        claims = cast(ClaimQuerySetMixin, queryset)  # the moderated model's
        if self.value() == "mine":
            return claims.claimed_by(self.owner)
        if self.value() == "free":
            return claims.unclaimed()
        if self.value() == "others":
            return held_by_others(queryset, self.owner)
        return queryset


def held_by_others(queryset: QuerySet, owner: str) -> QuerySet:
    """The rows of ``queryset`` that someone other than ``owner`` holds under a live claim."""
    claims = cast(ClaimQuerySetMixin, queryset)
    holder, lease = claims.claim_owner_field, claims.claim_lease_field
    held = queryset.filter(**{f"{holder}__isnull": False, f"{lease}__gt": timezone.now()})
    return held.exclude(**{holder: owner})
