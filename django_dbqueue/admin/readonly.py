"""A model admin that only shows: no add, change or delete, whatever the
user's permissions, for pages whose rows change by other means (settings,
the workers, the dashboard's own buttons)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


class ReadOnlyAdminMixin:
    """Put it before ``admin.ModelAdmin`` in the bases."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
