import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_dbqueue.pausing import UnknownQueue, pause, paused_queues, resume

from ._common import add_backend_argument, queue_backend


class Command(BaseCommand):
    help = (
        "Pause queues: workers stop claiming from them within one poll and finish what they hold. "
        "--resume resumes them; with no queue, list the paused ones."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queues", nargs="*", metavar="QUEUE", help="Queues to pause (or resume).")
        parser.add_argument("--resume", action="store_true", help="Resume the queues instead.")
        add_backend_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        backend = queue_backend(options["backend"])
        names = list(dict.fromkeys(options["queues"]))
        if not names:
            if options["resume"]:
                raise CommandError("Name the queues to resume.")
            for name in sorted(paused_queues(backend.database)):
                self.stdout.write(name)
            return
        try:
            for name in names:
                self._one(backend, name, options["resume"])
        except UnknownQueue as exc:
            raise CommandError(str(exc)) from exc

    def _one(self, backend: Any, name: str, resuming: bool) -> None:
        if resuming:
            done = resume(backend, name)
            self.stdout.write(f"Resumed {name}." if done else f"{name} was not paused.")
        else:
            done = pause(backend, name, by=f"{_user()} (manage.py pausequeue)")
            self.stdout.write(f"Paused {name}." if done else f"{name} was paused already.")


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in a bare container
        return "unknown user"
