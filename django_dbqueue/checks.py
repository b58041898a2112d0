"""System checks that need the database: run by `migrate`, by `check
--database`, and by `runqueue` at start."""

from typing import Any

from django.core import checks
from django.db import connections


def _queue_databases(databases: Any) -> list[str]:
    from .backend import DatabaseBackend
    from .tasks_api import task_backends

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
            cursor.execute("SELECT @@log_bin, @@binlog_format")
            log_bin, binlog_format = cursor.fetchone()
        warning = binlog_warning(alias, log_bin, binlog_format)
        if warning is not None:
            warnings.append(warning)
    return warnings


def binlog_warning(alias: str, log_bin: Any, binlog_format: Any) -> checks.Warning | None:
    """W002 for the server variables read, or None. binlog_format only
    matters while the binary log is written (``@@log_bin`` 1): MariaDB's
    default is MIXED with the log off, and nothing is replicated then."""
    if not int(log_bin or 0) or str(binlog_format).upper() == "ROW":
        return None
    return checks.Warning(
        f"The database {alias!r} writes a binary log with binlog_format={binlog_format}; "
        "statements that use SKIP LOCKED are unsafe for statement-based replication.",
        hint="Set binlog_format=ROW in the server's configuration (the default of MySQL 8). "
        "If this server is never replicated, silence django_dbqueue.W002 in "
        "SILENCED_SYSTEM_CHECKS.",
        id="django_dbqueue.W002",
    )


@checks.register(checks.Tags.database)
def check_sql_contract(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W005: the dbqueue_enqueue() procedure carries the QUEUES, MAX_ATTEMPTS
    and MAX_ARGUMENTS_BYTES of its installation; after they change it
    refuses or admits the wrong calls."""
    from . import sql_contract

    warnings: list[checks.CheckMessage] = []
    for alias in _queue_databases(databases):
        connection = connections[alias]
        if connection.vendor != "mysql":
            continue
        installed = sql_contract.installed_queues(connection)
        config = sql_contract.config_for(alias)
        if installed is not None and set(installed) != set(config.queues):
            message = (
                f"The procedure {sql_contract.PROCEDURE}() on the database {alias!r} accepts the "
                f"queues {', '.join(sorted(installed)) or 'of any name'}, but the task backends' QUEUES "
                f"there are {', '.join(config.queues)}: SQL producers are refused a queue the workers "
                "serve, or admitted to one they do not."
            )
        elif (limits := sql_contract.installed_limits(connection)) is not None and limits != (
            config.max_attempts,
            config.max_argument_bytes,
        ):
            message = (
                f"The procedure {sql_contract.PROCEDURE}() on the database {alias!r} defaults to "
                f"MAX_ATTEMPTS {limits[0]} and refuses arguments over {limits[1]} bytes, but the "
                f"task backends there have MAX_ATTEMPTS {config.max_attempts} and "
                f"MAX_ARGUMENTS_BYTES {config.max_argument_bytes}."
            )
        else:
            continue
        warnings.append(
            checks.Warning(
                message,
                hint=f"Run manage.py install_sql_contract --database {alias}.",
                id="django_dbqueue.W005",
            )
        )
    return warnings
