"""System checks that need the database: run by `migrate`, by `check
--database`, and by `runqueue` at start."""

from typing import Any

from django.core import checks
from django.db import connections


def _queue_databases(databases: Any) -> list[str]:
    from django.tasks import task_backends

    from .backend import DatabaseBackend

    used = {b.database for b in task_backends.all() if isinstance(b, DatabaseBackend)}
    return sorted(used & set(databases or ()))


@checks.register(checks.Tags.database)
def check_skip_locked(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    for alias in _queue_databases(databases):
        connection = connections[alias]
        # SQLite has no row locks: its claims serialise on its one write lock.
        if connection.vendor == "sqlite" or connection.features.has_select_for_update_skip_locked:
            continue
        errors.append(
            checks.Error(
                f"The database {alias!r} ({connection.vendor} {connection.display_name}) cannot "
                "SELECT ... FOR UPDATE SKIP LOCKED, which django_dbqueue's claim needs.",
                hint="Use MySQL 8.0.1+, MariaDB 10.6+ or PostgreSQL 9.5+.",
                id="django_dbqueue.E001",
            )
        )
    return errors


@checks.register(checks.Tags.database)
def check_binlog_format(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    warnings: list[checks.CheckMessage] = []
    for alias in _queue_databases(databases):
        connection = connections[alias]
        if connection.vendor != "mysql":
            continue
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@binlog_format")
            (binlog_format,) = cursor.fetchone()
        if str(binlog_format).upper() != "ROW":
            warnings.append(
                checks.Warning(
                    f"The database {alias!r} has binlog_format={binlog_format}; statements "
                    "that use SKIP LOCKED are unsafe for statement-based replication.",
                    hint="Set binlog_format=ROW in the server's configuration (the default "
                    "of MySQL 8). If this server is never replicated, silence "
                    "django_dbqueue.W002 in SILENCED_SYSTEM_CHECKS.",
                    id="django_dbqueue.W002",
                )
            )
    return warnings
