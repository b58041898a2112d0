"""System checks that need the database: run by `migrate`, by `check
--database`, and by `runqueue` at start."""

import sys
from collections.abc import Iterator
from typing import Any

from django.core import checks
from django.db import DEFAULT_DB_ALIAS, connections

# Imported for its side effect too: Django registers the task backends' own
# checks (ours: E003 to E007) when the tasks API is first imported, so
# `manage.py check` runs them even in a project that imports its tasks late.
from . import tasks_api
from .server_facts import lockless_engine, read_only_reason


def _queue_databases(databases: Any) -> list[str]:
    from .routing import is_queue_backend

    used = {b.database for b in tasks_api.task_backends.all() if is_queue_backend(b)}
    # An alias missing from DATABASES is the backend's own check's (E007).
    return sorted(used & set(databases or ()) & set(connections))


def _mysql_variables(databases: Any, variables: str) -> Iterator[tuple[str, tuple]]:
    """(alias, the server's ``variables``) for each MySQL or MariaDB queue database."""
    for alias in _queue_databases(databases):
        connection = connections[alias]
        if connection.vendor != "mysql":
            continue
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {variables}")
            yield alias, cursor.fetchone()


@checks.register(checks.Tags.database)
def check_migrations(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W006: django_dbqueue's migrations are not all applied on a queue database."""
    from django.db.migrations.loader import MigrationLoader

    warnings: list[checks.CheckMessage] = []
    if _inside_migrate():
        return warnings
    for alias in _queue_databases(databases):
        loader = MigrationLoader(connections[alias], ignore_no_migrations=True)
        ours = sorted(key for key in loader.graph.nodes if key[0] == "django_dbqueue")
        missing = [name for app, name in ours if (app, name) not in loader.applied_migrations]
        if missing:
            warnings.append(unapplied_warning(alias, missing))
    return warnings


def _inside_migrate() -> bool:
    """Whether ``migrate`` runs these checks: it does before it applies the
    migrations (and so does every test database's creation), and W006 would
    tell it to do what it is about to do. The checks are given no context
    that says so, hence the look up the call stack."""
    from django.core.management.commands.migrate import Command as Migrate

    frame = sys._getframe(1)
    while frame is not None:
        if isinstance(frame.f_locals.get("self"), Migrate):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def unapplied_warning(alias: str, missing: list[str]) -> checks.Warning:
    count = f"{len(missing)} unapplied migration{'s' if len(missing) > 1 else ''}"
    names = missing[0] if len(missing) == 1 else f"{missing[0]} to {missing[-1]}"
    command = "manage.py migrate" + ("" if alias == DEFAULT_DB_ALIAS else f" --database {alias}")
    return checks.Warning(
        f"django_dbqueue has {count} ({names}) on the database {alias!r}, so its tables are "
        "missing or out of date there: enqueue() and runqueue fail until they are applied.",
        hint=f"Run {command}.",
        id="django_dbqueue.W006",
    )


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
    for alias, (log_bin, binlog_format) in _mysql_variables(databases, "@@log_bin, @@binlog_format"):
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
def check_packet_size(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W008: a payload limit the server's max_allowed_packet undercuts. A
    job's arguments or result as large as the limit allows would then be
    refused by the server at the write (error 1153), not by the queue with
    its own message when enqueued or returned."""
    from .routing import queue_backends

    warnings: list[checks.CheckMessage] = []
    for alias, (packet,) in _mysql_variables(databases, "@@max_allowed_packet"):
        for backend in queue_backends():
            if backend.database != alias:
                continue
            for option in ("MAX_ARGUMENTS_BYTES", "MAX_RETURN_BYTES"):
                warning = packet_warning(
                    alias, backend.alias, option, getattr(backend.config, option), packet
                )
                if warning is not None:
                    warnings.append(warning)
    return warnings


# What a job's row holds besides its arguments or result (its other columns,
# the statement's text), well within this; the payload must leave it room.
PACKET_MARGIN = 64 * 1024


def packet_warning(alias: str, backend: str, option: str, limit: int, packet: Any) -> checks.Warning | None:
    """W008 for one limit against the server's max_allowed_packet, or None."""
    packet = int(packet or 0)
    if not packet or limit + PACKET_MARGIN <= packet:
        return None
    return checks.Warning(
        f"The task backend {backend!r} allows {limit:,} bytes (OPTIONS {option}), but the database "
        f"{alias!r} refuses a statement over {packet:,} bytes (max_allowed_packet): a payload near "
        "the limit would fail at the write with the server's error instead of the queue's message.",
        hint=f"Lower OPTIONS {option} to at most {max(packet - PACKET_MARGIN, 0):,}, or raise the "
        "server's max_allowed_packet.",
        id="django_dbqueue.W008",
    )


@checks.register(checks.Tags.database)
def check_sql_contract(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W005: the dbqueue_enqueue() procedure carries the QUEUES, MAX_ATTEMPTS
    and MAX_ARGUMENTS_BYTES of its installation; after they change it admits
    jobs that no worker runs, or applies other limits. Only where it is
    installed (migration 0006 installs it where the user may)."""
    from . import sql_contract

    warnings: list[checks.CheckMessage] = []
    for alias in _queue_databases(databases):
        connection = connections[alias]
        if connection.vendor != "mysql":
            continue
        message = _procedure_mismatch(connection, sql_contract.config_for(alias))
        if message is not None:
            warnings.append(
                checks.Warning(
                    f"The procedure {sql_contract.PROCEDURE}() for SQL producers, installed on the "
                    f"database {alias!r}, {message}",
                    hint=f"If SQL producers call {sql_contract.PROCEDURE}(), run manage.py "
                    f"install_sql_contract --database {alias} to update it; if none does, silence "
                    "django_dbqueue.W005 in SILENCED_SYSTEM_CHECKS.",
                    id="django_dbqueue.W005",
                )
            )
    return warnings


def _procedure_mismatch(connection: Any, config: Any) -> str | None:
    """How the installed procedure and the settings differ, to end a
    sentence; None if they agree or it is not installed. A queue added to
    QUEUES is not reported: the procedure refuses it loudly, and a site
    without SQL producers would be warned at every start for nothing."""
    from . import sql_contract

    installed = sql_contract.installed_queues(connection)
    if installed is not None and config.queues:
        stray = sorted(set(installed) - set(config.queues))
        if stray:
            return (
                f"accepts the queue{'s' if len(stray) > 1 else ''} {', '.join(stray)}, which no task "
                f"backend there serves (their QUEUES are {', '.join(config.queues)}), so SQL producers "
                "can enqueue jobs that no worker runs."
            )
        if not installed:
            return (
                f"accepts any queue name, but the task backends there serve only the queues "
                f"{', '.join(config.queues)}, so SQL producers can enqueue jobs that no worker runs."
            )
    limits = sql_contract.installed_limits(connection)
    if limits is not None and limits != (config.max_attempts, config.max_argument_bytes):
        return (
            f"defaults to MAX_ATTEMPTS {limits[0]} and refuses arguments over {limits[1]} bytes, but "
            f"the task backends there have MAX_ATTEMPTS {config.max_attempts} and "
            f"MAX_ARGUMENTS_BYTES {config.max_argument_bytes}."
        )
    return None


@checks.register(checks.Tags.database)
def check_writable(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E008: a queue database that refuses writes (a replica, a standby)."""
    errors: list[checks.CheckMessage] = []
    for alias in _queue_databases(databases):
        reason = read_only_reason(connections[alias])
        if reason is not None:
            errors.append(
                checks.Error(
                    f"The database {alias!r} is read-only ({reason}), so workers cannot claim jobs "
                    "there and enqueue() fails: a queue's DATABASE must be its writable primary.",
                    hint="Point OPTIONS DATABASE at the primary (the writer endpoint); to read the "
                    "admin's lists and queuestats from this replica, name it in OPTIONS READ_DATABASE.",
                    id="django_dbqueue.E008",
                )
            )
    return errors


@checks.register(checks.Tags.database)
def check_real_row_locks(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E009: an engine that accepts SKIP LOCKED but takes no row lock."""
    errors: list[checks.CheckMessage] = []
    for alias in _queue_databases(databases):
        connection = connections[alias]
        if connection.vendor != "mysql":
            continue
        with connection.cursor() as cursor:
            cursor.execute("SELECT VERSION(), @@version_comment")
            version, comment = cursor.fetchone()
        engine = lockless_engine(version, comment)
        if engine is not None:
            errors.append(
                checks.Error(
                    f"The database {alias!r} is {engine} ({version}), which accepts SELECT ... FOR "
                    "UPDATE SKIP LOCKED without locking the rows it skips past, so two workers "
                    "could claim and run the same job.",
                    hint="Keep the queue on MariaDB, MySQL or PostgreSQL (docs/clusters.md).",
                    id="django_dbqueue.E009",
                )
            )
    return errors
