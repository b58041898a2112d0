"""What a database server says about itself that decides whether a queue
may live there: whether it takes writes, and whether its SKIP LOCKED takes
row locks. Read by the system checks E008 and E009 (checks.py)."""

from typing import Any

from django.db import DatabaseError


def read_only_reason(connection: Any) -> str | None:
    """Which server setting makes ``connection``'s database read-only, or None."""
    if connection.vendor == "mysql":
        found = _mysql_flags(connection, ["read_only", "innodb_read_only"])
        # tx_read_only was renamed transaction_read_only (MySQL 8.0 has only the new name).
        found += _mysql_flags(connection, ["transaction_read_only"]) or _mysql_flags(
            connection, ["tx_read_only"]
        )
        on = [f"{name}=ON" for name, value in found if value is not None and int(value)]
        return ", ".join(on) or None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only'), "
                "current_setting('transaction_read_only')"
            )
            recovery, default_read_only, read_only = cursor.fetchone()
        if recovery:
            return "a standby in recovery: pg_is_in_recovery() is true"
        on = [
            f"{name}=on"
            for name, value in [
                ("default_transaction_read_only", default_read_only),
                ("transaction_read_only", read_only),
            ]
            if value == "on"
        ]
        return ", ".join(on) or None
    return None


def _mysql_flags(connection: Any, names: list[str]) -> list[tuple[str, Any]]:
    """The values of the server variables ``names``; [] if one is unknown there."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(f"@@{name}" for name in names))
            return list(zip(names, cursor.fetchone(), strict=True))
    except DatabaseError:
        return []


def lockless_engine(version: Any, comment: Any) -> str | None:
    """The engine's name if ``SELECT VERSION(), @@version_comment`` shows one
    that fakes SKIP LOCKED: TiDB puts its name in the version
    ("8.0.11-TiDB-v7.5.0"); Dolt reports a MySQL version ("8.0.33") and
    says who it is in the version comment ("Dolt")."""
    if "-tidb-" in f"-{version or ''}-".lower():
        return "TiDB"
    if str(comment or "").strip().lower() == "dolt" or "dolt" in str(version or "").lower():
        return "Dolt"
    return None
