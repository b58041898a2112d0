"""Whether the queue's tables are there: django_dbqueue's migrations applied
to the queue's database. A new user's most common first mistake is to skip
``migrate``; ``runqueue`` and ``enqueue()`` then say so in one sentence
instead of a raw "table doesn't exist" (or, for ``runqueue``, a crash loop).
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from .exceptions import QueueNotMigrated

APP_LABEL = "django_dbqueue"
# MySQL/MariaDB: no such table (1146), no such column (1054, a migration
# added it). PostgreSQL: undefined_table, undefined_column.
MYSQL_MISSING = {1146, 1054}
POSTGRES_MISSING = {"42P01", "42703"}
SQLITE_MISSING = ("no such table: ", "no such column", "has no column named")


def unapplied_migrations(database: str) -> list[str]:
    """The names of django_dbqueue's migrations not applied to ``database``,
    in the order ``migrate`` applies them (none if the project disabled them
    through MIGRATION_MODULES)."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(connections[database], ignore_no_migrations=True)
    plan = [node for leaf in loader.graph.leaf_nodes(APP_LABEL) for node in loader.graph.forwards_plan(leaf)]
    applied = loader.applied_migrations
    return list(dict.fromkeys(name for app, name in plan if app == APP_LABEL and (app, name) not in applied))


def migrate_command(database: str) -> str:
    """The command that applies the queue's migrations to ``database``."""
    if database == DEFAULT_DB_ALIAS:
        return "python manage.py migrate"
    return f"python manage.py migrate --database {database}"


def not_migrated_message(alias: str, database: str, unapplied: list[str] | None = None) -> str:
    """One line: what is missing and the command that adds it. ``unapplied``:
    the migrations' names, if known."""
    where = f"the database {database!r}"
    if database != DEFAULT_DB_ALIAS:
        where += f' (OPTIONS["DATABASE"] of the task backend {alias!r})'
    if unapplied:
        shown = ", ".join(unapplied[:3]) + (", ..." if len(unapplied) > 3 else "")
        verb = "is" if len(unapplied) == 1 else "are"
        missing = f"{len(unapplied)} of django_dbqueue's migrations ({shown}) {verb} not applied to {where}"
    else:
        missing = f"tables that migrate creates are missing or out of date on {where}"
    return f"The queue is not set up: {missing}. Run '{migrate_command(database)}' first."


def is_missing_schema(exc: BaseException) -> bool:
    """Whether a database error says a table or column is not there, as
    before ``migrate`` (or after an upgrade without it). Only asked about the
    queue's own statements (and the admin log's, for pausequeue)."""
    if not isinstance(exc, DatabaseError):
        return False
    cause = exc.__cause__
    code = cause.args[0] if cause is not None and getattr(cause, "args", None) else None
    if code in MYSQL_MISSING:
        return True
    if getattr(cause, "sqlstate", None) in POSTGRES_MISSING:
        return True
    return any(text in str(exc) for text in SQLITE_MISSING)


class schema_required:  # noqa: N801 (used as a function: with schema_required(...): ...)
    """Turn a missing table or column of the queue, met inside, into
    :class:`~django_dbqueue.exceptions.QueueNotMigrated` that says to migrate.
    A class, not a @contextmanager: every enqueue enters it, and the
    generator's machinery cost more than the check."""

    __slots__ = ("alias", "database")

    def __init__(self, alias: str, database: str) -> None:
        self.alias, self.database = alias, database

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, DatabaseError) and is_missing_schema(exc):
            raise QueueNotMigrated(not_migrated_message(self.alias, self.database)) from exc
