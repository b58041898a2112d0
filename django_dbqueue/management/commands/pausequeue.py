from __future__ import annotations

import getpass
import time
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.clock import read_database_now
from django_dbqueue.exceptions import QueueNotMigrated
from django_dbqueue.operations.pausing import (
    UnknownQueue,
    check_queue,
    pause,
    paused_queues,
    resume,
    settle_seconds,
)
from django_dbqueue.schema import schema_required

from ._common import add_backend_argument, queue_backend


class Command(BaseCommand):
    help = (
        "Pause queues: returns once no worker claims from them (POLL_INTERVAL_MAX, 2 s by default); "
        "jobs already claimed finish. --resume resumes them; with no queue, list the paused ones."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queues", nargs="*", metavar="QUEUE", help="Queues to pause (or resume).")
        parser.add_argument("--resume", action="store_true", help="Resume the queues instead.")
        parser.add_argument(
            "--user",
            metavar="USERNAME",
            help="The Django user to record each pause and resume under in the admin log, as the "
            "admin's buttons do (default: the user named as the system user, if there is one).",
        )
        add_backend_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        backend = queue_backend(options["backend"])
        try:
            with schema_required(backend.alias, backend.database):
                self._handle(backend, options)
        except QueueNotMigrated as exc:
            raise CommandError(str(exc)) from exc

    def _handle(self, backend: DatabaseBackend, options: dict[str, Any]) -> None:
        names = list(dict.fromkeys(options["queues"]))
        if not names:
            if options["resume"]:
                raise CommandError("Name the queues to resume.")
            for name in sorted(paused_queues(backend.database)):
                self.stdout.write(name)
            return
        _check_names(backend, names)
        log = AdminLog(options["user"])
        if options["resume"]:
            self._resume(backend, names, log)
        else:
            self._pause(backend, names, log)
        if log.missed:
            self.stderr.write(
                f"Not written to the admin log: there is no Django user {log.username!r}; "
                "name one with --user."
            )

    def _pause(self, backend: DatabaseBackend, names: list[str], log: AdminLog) -> None:
        lines = []
        for name in names:
            done = pause(backend, name, by=f"{_user()} (manage.py pausequeue)")
            if done:
                log.record(_row(backend, name), f"Paused queue {name} (manage.py pausequeue).", pausing=True)
            lines.append(f"Paused {name}." if done else f"{name} was paused already.")
        self._wait_until_held(backend, names)
        for line in lines:
            self.stdout.write(line)

    def _resume(self, backend: DatabaseBackend, names: list[str], log: AdminLog) -> None:
        for name in names:
            row = _row(backend, name)
            done = resume(backend, name)
            if done:
                log.record(row, f"Resumed queue {name} (manage.py pausequeue).", pausing=False)
            self.stdout.write(f"Resumed {name}." if done else f"{name} was not paused.")

    def _wait_until_held(self, backend: DatabaseBackend, names: list[str]) -> None:
        """Return once every worker has read the pauses: from then on, a job
        enqueued to these queues waits (operations/pausing.py)."""
        from django_dbqueue.models import PausedQueue

        rows = PausedQueue.objects.using(backend.database).filter(queue_name__in=names)
        newest = max(rows.values_list("paused_at", flat=True), default=None)
        if newest is None:
            return  # resumed meanwhile by someone else
        left = settle_seconds(backend) - (read_database_now(backend.database) - newest).total_seconds()
        if left > 0:
            time.sleep(left)


class AdminLog:
    """Writes each pause and resume to Django's admin log, as the admin's
    buttons do, under ``--user`` or the Django user named as the system user.
    A ``--user`` that names no user is refused before anything is done."""

    def __init__(self, username: str | None) -> None:
        self.username = username or _user()
        self.user_id: Any = None
        self.missed = False  # something was left out of the log: no such user
        if not apps.is_installed("django.contrib.admin"):
            if username:
                raise CommandError(
                    "--user needs django.contrib.admin in INSTALLED_APPS: the user is for its log."
                )
            return
        from django.contrib.auth import get_user_model

        users = get_user_model()._default_manager
        try:
            self.user_id = users.get_by_natural_key(self.username).pk
        except users.model.DoesNotExist:
            if username:
                raise CommandError(
                    f"There is no Django user {username!r}; nothing was paused or resumed."
                ) from None

    def record(self, row: Any, message: str, pausing: bool) -> None:
        if row is None or not apps.is_installed("django.contrib.admin"):
            return
        if self.user_id is None:
            self.missed = True
            return
        from django.contrib.admin.models import ADDITION, DELETION, LogEntry

        LogEntry.objects.log_actions(
            user_id=self.user_id,
            queryset=[row],
            action_flag=ADDITION if pausing else DELETION,
            change_message=message,
        )


def _check_names(backend: DatabaseBackend, names: list[str]) -> None:
    """Every name before any is acted on: a typo in the last one must not
    leave the first paused."""
    problems = []
    for name in names:
        try:
            check_queue(backend, name)
        except UnknownQueue as exc:
            problems.append(str(exc))
    if problems:
        raise CommandError(" ".join(problems) + " Nothing was paused or resumed.")


def _row(backend: DatabaseBackend, name: str) -> Any:
    from django_dbqueue.models import PausedQueue

    return PausedQueue.objects.using(backend.database).filter(queue_name=name).first()


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in a bare container
        return "unknown user"
