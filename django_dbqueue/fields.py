"""Columns whose values compare byte for byte on every database.

Unique, concurrency and lock keys are identities, not words: "Report-A",
"report-a", "REPORT-A " and "répört-a" are four keys. PostgreSQL (with its
deterministic collations) and SQLite (BINARY) already compare strings byte
for byte, but a MySQL/MariaDB column takes the table's collation, usually
case- and accent-insensitive and PAD SPACE ("a" = "a "), so its unique index
and its comparisons would merge distinct keys. There the column gets a
binary NO PAD collation; elsewhere nothing changes (see docs/databases.md).
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper


def binary_collation(connection: BaseDatabaseWrapper) -> str | None:
    """The byte-for-byte, NO PAD collation for a key column on this
    database, or None where the default already compares bytes.

    Always utf8mb4: a key may hold any character a Python string can, and a
    collation fixes its column's character set. MariaDB's plain utf8mb4_bin
    is PAD SPACE (trailing spaces ignored), hence utf8mb4_nopad_bin. MySQL
    has no NO PAD binary collation before 8.0.17; those servers get
    utf8mb4_bin, which compares bytes apart from trailing spaces.
    """
    if connection.vendor != "mysql":
        return None
    if connection.mysql_is_mariadb:  # type: ignore[attr-defined]
        return "utf8mb4_nopad_bin"
    if connection.mysql_version >= (8, 0, 17):  # type: ignore[attr-defined]
        return "utf8mb4_0900_bin"
    return "utf8mb4_bin"


class KeyField(models.CharField):
    """A CharField for keys: equal only when byte for byte equal."""

    description = "String key compared byte for byte (up to %(max_length)s)"

    def db_parameters(self, connection: BaseDatabaseWrapper) -> dict[str, Any]:
        params = super().db_parameters(connection)
        if not self.db_collation:  # an explicit db_collation is the user's choice
            params["collation"] = binary_collation(connection)
        return params
