import logging
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.tasks import DEFAULT_TASK_BACKEND_ALIAS, task_backends
from django.tasks.exceptions import InvalidTaskBackend

from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.supervisor import Supervisor

MAX_PROCESSES = 256
MAX_BATCH = 1000


class Command(BaseCommand):
    help = "Run worker processes that claim and run jobs from the database queue."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            metavar="NAME",
            help="Queue to work on; repeat for several. Default: every queue in the backend's QUEUES.",
        )
        parser.add_argument("--processes", type=int, default=1, help="Worker processes to run (default 1).")
        parser.add_argument(
            "--batch", type=int, help="Jobs claimed per round trip (default: OPTIONS BATCH_SIZE)."
        )
        parser.add_argument("--burst", action="store_true", help="Exit 0 once no due job is left.")
        parser.add_argument("--backend", default=DEFAULT_TASK_BACKEND_ALIAS, help="TASKS alias to serve.")

    def handle(self, *args: Any, **options: Any) -> None:
        backend = self._backend(options["backend"])
        queues = self._queues(backend, options["queues"])
        processes = _in_range("--processes", options["processes"], 1, MAX_PROCESSES)
        # Not `or`: --batch 0 must be refused, not quietly replaced by the default.
        batch = options["batch"] if options["batch"] is not None else backend.config.BATCH_SIZE
        batch = _in_range("--batch", batch, 1, MAX_BATCH)
        self.check(databases=[backend.database])
        _configure_logging(options["verbosity"])
        code = Supervisor(
            backend.alias, queues, processes=processes, batch=batch, burst=options["burst"]
        ).run()
        if code:
            sys.exit(code)

    def _backend(self, alias: str) -> DatabaseBackend:
        try:
            backend = task_backends[alias]
        except InvalidTaskBackend as exc:
            raise CommandError(f"No task backend {alias!r} in settings.TASKS: {exc}") from exc
        if not isinstance(backend, DatabaseBackend):
            raise CommandError(
                f"The task backend {alias!r} is a {type(backend).__name__}; runqueue serves "
                "django_dbqueue.backend.DatabaseBackend backends only."
            )
        return backend

    def _queues(self, backend: DatabaseBackend, wanted: list[str] | None) -> list[str]:
        if not wanted:
            return sorted(backend.queues)
        unknown = [name for name in wanted if backend.queues and name not in backend.queues]
        if unknown:
            raise CommandError(
                f"Unknown queue {', '.join(map(repr, unknown))} for backend {backend.alias!r}; "
                f"its QUEUES are {', '.join(sorted(backend.queues))}."
            )
        return list(dict.fromkeys(wanted))


def _in_range(flag: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise CommandError(f"{flag} must be between {low} and {high}, not {value}.")
    return value


def _configure_logging(verbosity: int) -> None:
    logger = logging.getLogger("django_dbqueue")
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbosity > 2 else logging.INFO if verbosity else logging.WARNING)
