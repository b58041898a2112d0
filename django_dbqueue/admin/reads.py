"""Which database the admin's lists read: the replica of OPTIONS
READ_DATABASE when one is set, else the queue's own database.

Only the lists (jobs, batches, workers) and the dashboard read the
replica. ``ModelAdmin.get_queryset()`` stays on the queue's database, so
the job and batch pages, their buttons, the moderation claims and every
action act on the primary's rows; an action started from a list is given
the list's selection re-read on the primary (``PrimaryActionsMixin``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db import DEFAULT_DB_ALIAS
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from ..replica import ReplicaLag, lag_of, read_database
from .database import queue_backends

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


def admin_read_database() -> str:
    """The alias the admin's lists read (see queue_database() for the backend chosen)."""
    backends = queue_backends()
    return read_database(backends[0]) if backends else DEFAULT_DB_ALIAS


def admin_replica_lag() -> ReplicaLag | None:
    """The replica's lag when the admin's lists read one, else None."""
    backends = queue_backends()
    return lag_of(backends[0]) if backends else None


class ReplicaChangeList(ChangeList):
    """A changelist whose rows, count and estimate come from the read alias."""

    def get_queryset(
        self, request: HttpRequest, exclude_parameters: list[str | None] | None = None
    ) -> QuerySet:
        self.root_queryset = self.root_queryset.using(admin_read_database())
        return super().get_queryset(request, exclude_parameters)


class PrimaryActionsMixin(_ModelAdmin):
    """Lists read the replica; actions and the list's lag line do not."""

    def response_action(
        self, request: HttpRequest, queryset: QuerySet, *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        # The selection (and a "select all" filter) is applied again on the
        # primary: a replica behind it must not decide which rows change.
        primary = self.get_queryset(request).db
        return super().response_action(request, queryset.using(primary), *args, **kwargs)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        lag = admin_replica_lag()
        if lag is not None:
            extra_context = {**(extra_context or {}), "subtitle": read_from_text(lag)}
        return super().changelist_view(request, extra_context)


def read_from_text(lag: ReplicaLag) -> str:
    return f"Read from the replica {lag.alias!r}: {lag.text}."
