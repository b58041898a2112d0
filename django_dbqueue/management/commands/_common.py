"""What the operations commands share: finding the backend, the
``--backend`` option, and the window and queues of queuestats' and
queuehealth's snapshot. (A leading underscore: Django does not take this
module for a command.)"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from django.core.management.base import CommandError, CommandParser

from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.db import DB_ERRORS, is_outage
from django_dbqueue.limits import MAX_SECONDS
from django_dbqueue.operations.pausing import UnknownQueue, check_queue
from django_dbqueue.operations.stats import Snapshot, snapshot
from django_dbqueue.routing import queue_backends
from django_dbqueue.schema import not_migrated_message, unapplied_migrations
from django_dbqueue.shown import shown
from django_dbqueue.tasks_api import DEFAULT_TASK_BACKEND_ALIAS, InvalidTaskBackend, task_backends


def add_backend_argument(parser: CommandParser) -> None:
    parser.add_argument(
        "--backend", default=DEFAULT_TASK_BACKEND_ALIAS, help="TASKS alias (default 'default')."
    )


def backend_aliases(value: str | list[str] | None) -> list[str]:
    """A repeatable ``--backend``'s aliases, each once; a plain string too,
    as ``call_command(..., backend="x")`` passes it."""
    return list(dict.fromkeys([value] if isinstance(value, str) else value or []))


def queue_backend(alias: str, command: str = "this command") -> DatabaseBackend:
    """The DatabaseBackend of TASKS[alias], or a CommandError saying why not."""
    try:
        backend = task_backends[alias]
    except InvalidTaskBackend as exc:
        raise CommandError(f"No task backend {alias!r} in settings.TASKS: {exc}") from exc
    if not isinstance(backend, DatabaseBackend):
        raise CommandError(
            f"The task backend {alias!r} is {type(backend).__name__}; {command} serves "
            "django_dbqueue.backend.DatabaseBackend backends only."
        )
    if backend.options_error:
        # Even under --skip-checks: the defaults in its place are not what was asked for.
        raise CommandError(f"The task backend {alias!r} is misconfigured: {backend.options_error}")
    return backend


def require_schema(backend: DatabaseBackend) -> None:
    """A CommandError, in one line that names ``migrate``, unless every
    migration of django_dbqueue is applied to the backend's database."""
    try:
        unapplied = unapplied_migrations(backend.database)
    except DB_ERRORS as exc:
        if is_outage(exc, backend.database):
            return  # cannot tell now; the workers wait for the database to come back
        raise
    if unapplied:
        raise CommandError(not_migrated_message(backend.alias, backend.database, unapplied))


def positive(text: str, most: float = MAX_SECONDS) -> float:
    """An argparse type: a number above zero and at most ``most`` (a
    duration that still fits the date and wait arithmetic it feeds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a number.") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{shown(text)} must be a number above zero.")
    if value > most:
        raise argparse.ArgumentTypeError(f"{shown(text)} must be at most {most:,.0f}.")
    return value


def positive_minutes(text: str) -> float:
    return positive(text, MAX_SECONDS / 60)


def add_snapshot_arguments(parser: CommandParser, minutes_help: str, several: bool = False) -> None:
    """``--minutes`` (the window), ``--queue`` (repeatable) and ``--backend``
    (with ``several``: repeatable, and every backend when left out)."""
    parser.add_argument("--minutes", type=positive_minutes, default=5.0, help=minutes_help)
    parser.add_argument("--queue", action="append", dest="queues", metavar="NAME", help="Only this queue.")
    if not several:
        add_backend_argument(parser)
        return
    parser.add_argument(
        "--backend",
        action="append",
        metavar="ALIAS",
        help="TASKS alias; repeat for several (default: every django_dbqueue backend).",
    )


def snapshot_backend(options: dict[str, Any]) -> DatabaseBackend:
    """The backend of ``--backend``, once every ``--queue`` is one of its queues."""
    backend = queue_backend(options["backend"])
    for name in options["queues"] or ():
        try:
            check_queue(backend, name)
        except UnknownQueue as exc:
            raise CommandError(str(exc)) from exc
    return backend


def snapshot_backends(options: dict[str, Any]) -> list[DatabaseBackend]:
    """The backends of ``--backend`` (default: every django_dbqueue backend),
    once every ``--queue`` is a queue of one of them."""
    if aliases := backend_aliases(options["backend"]):
        backends = [queue_backend(alias) for alias in aliases]
    else:
        backends = [queue_backend(backend.alias) for backend in queue_backends()]
        if not backends:
            raise CommandError(
                "settings.TASKS has no django_dbqueue.backend.DatabaseBackend backend, so there "
                "is no queue to show."
            )
    for name in options["queues"] or ():
        problems = []
        for backend in backends:
            try:
                check_queue(backend, name)
                break
            except UnknownQueue as exc:
                problems.append(str(exc))
        else:
            raise CommandError(" ".join(problems))
    return backends


def read_snapshot(
    backend: DatabaseBackend, options: dict[str, Any], configured: Sequence[str] = ()
) -> Snapshot:
    """The snapshot of ``--queue`` over ``--minutes``."""
    return snapshot(
        backend.database,
        minutes=options["minutes"],
        queues=options["queues"],
        alive_within=backend.config.LEASE_SECONDS,
        configured=configured,
    )
