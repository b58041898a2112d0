"""The claim for review: rows of any model claimed by people, the way workers
claim jobs (its public path is ``django_dbqueue.moderation``).

Mix ``ClaimQuerySetMixin`` into a model's QuerySet; the model needs an owner
column and a lease column (names set on the queryset)::

    class PostQuerySet(ClaimQuerySetMixin, models.QuerySet):
        claim_owner_field = "claimed_by"
        claim_lease_field = "claim_expires_at"

    Post.objects.filter(status="PENDING").claim("alice", limit=10, lease=900)

A row is free when nobody holds it or its holder's lease ran out; so a claim
that was never finished goes back to the pool by itself, with no sweeper.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from ..db import lock_if_serialised as _lock_if_serialised
from ..db import retry_on_conflict
from .candidates import first_free, past

DEFAULT_REVIEW_LEASE = 15 * 60.0

# A mixin for QuerySet classes: the type checker sees it as one.
if TYPE_CHECKING:
    _QuerySet = models.QuerySet
else:
    _QuerySet = object


class ClaimQuerySetMixin(_QuerySet):
    claim_owner_field = "claimed_by"
    claim_lease_field = "claim_expires_at"
    # Oldest first by default, so the pool drains in arrival order.
    claim_order: tuple[str, ...] = ("pk",)

    def unclaimed(self, now: datetime | None = None) -> models.QuerySet:
        now = now or timezone.now()
        owner, lease = self.claim_owner_field, self.claim_lease_field
        return self.filter(Q(**{f"{owner}__isnull": True}) | Q(**{f"{lease}__lte": now}))

    def claimed_by(self, owner: str, now: datetime | None = None) -> models.QuerySet:
        """Rows ``owner`` holds under a lease that has not run out."""
        now = now or timezone.now()
        return self.filter(**{self.claim_owner_field: owner, f"{self.claim_lease_field}__gt": now})

    def claim(self, owner: str, limit: int = 10, lease: float = DEFAULT_REVIEW_LEASE) -> list[Any]:
        """Claim up to ``limit`` free rows matching this queryset for ``owner``
        for ``lease`` seconds. Concurrent claimers get disjoint rows. One pass
        skips the rows other claimers hold locked at that instant, so it may
        bring fewer while free ones remain: claim again for the rest, until a
        pass brings none."""
        if limit < 1:
            raise ValueError("claim() needs a limit of at least 1.")
        if not owner:
            raise ValueError("claim() needs an owner to record who holds the rows.")
        claimed: list[Any] = []
        while len(claimed) < limit:
            more = retry_on_conflict(
                partial(self._claim_once, owner, limit - len(claimed), lease), using=self.db
            )
            if not more:
                break
            claimed += more
        return claimed

    def _claim_once(self, owner: str, limit: int, lease: float) -> list[Any]:
        # As JobQuerySet.claim (candidates.py): candidates by a plain read, then
        # lock only those by primary key, skipping rows another claimer has locked.
        now = timezone.now()
        free = self.unclaimed(now).order_by(*self.claim_order)
        return first_free(
            lambda taken: list(past(free, taken).values_list("pk", flat=True)[:limit]),
            lambda ids: self._lock_and_mark(ids, owner, lease, now),
        )

    def _lock_and_mark(self, ids: list[Any], owner: str, lease: float, now: datetime) -> list[Any]:
        expires = now + timedelta(seconds=lease)
        with transaction.atomic(using=self.db):
            _lock_if_serialised(self.db, self.model._meta.db_table)
            # Re-check freedom under the lock: between the read and the lock
            # another claimer may have taken and committed some of these rows.
            locked = (
                self.unclaimed(now)
                .filter(pk__in=ids)
                .select_for_update(skip_locked=True)
                .order_by(*self.claim_order)
            )
            rows = list(locked)
            if not rows:
                return []
            changes = {self.claim_owner_field: owner, self.claim_lease_field: expires}
            self.model._base_manager.using(self.db).filter(pk__in=[row.pk for row in rows]).update(**changes)
        for row in rows:
            for name, value in changes.items():
                setattr(row, name, value)
        return rows

    def release(self, owner: str) -> int:
        """Give rows that ``owner`` holds back to the pool, unchanged."""
        return self.filter(**{self.claim_owner_field: owner}).update(**self._cleared())

    def done(self, owner: str, **changes: Any) -> int:
        """Apply ``changes`` (say, a new status) to rows ``owner`` holds and
        let go of them. A row whose lease ran out still counts as held until
        someone else claims it; then it is theirs and this skips it."""
        return self.filter(**{self.claim_owner_field: owner}).update(**changes, **self._cleared())

    def _cleared(self) -> dict[str, None]:
        return {self.claim_owner_field: None, self.claim_lease_field: None}
