import getpass
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.clock import read_database_now
from django_dbqueue.pausing import UnknownQueue, check_queue, pause, paused_queues, resume, settle_seconds

from ._common import add_backend_argument, queue_backend


class Command(BaseCommand):
    help = (
        "Pause queues: returns once no worker claims from them (POLL_INTERVAL_MAX, 2 s by default); "
        "jobs already claimed finish. --resume resumes them; with no queue, list the paused ones."
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
        # Every name first: a typo in the last one must not leave the first paused.
        problems = []
        for name in names:
            try:
                check_queue(backend, name)
            except UnknownQueue as exc:
                problems.append(str(exc))
        if problems:
            raise CommandError(" ".join(problems) + " Nothing was paused or resumed.")
        if options["resume"]:
            for name in names:
                done = resume(backend, name)
                self.stdout.write(f"Resumed {name}." if done else f"{name} was not paused.")
            return
        lines = []
        for name in names:
            done = pause(backend, name, by=f"{_user()} (manage.py pausequeue)")
            lines.append(f"Paused {name}." if done else f"{name} was paused already.")
        self._wait_until_held(backend, names)
        for line in lines:
            self.stdout.write(line)

    def _wait_until_held(self, backend: DatabaseBackend, names: list[str]) -> None:
        """Return once every worker has read the pauses: from then on, a job
        enqueued to these queues waits (pausing.py)."""
        from django_dbqueue.models import PausedQueue

        rows = PausedQueue.objects.using(backend.database).filter(queue_name__in=names)
        newest = max(rows.values_list("paused_at", flat=True), default=None)
        if newest is None:
            return  # resumed meanwhile by someone else
        left = settle_seconds(backend) - (read_database_now(backend.database) - newest).total_seconds()
        if left > 0:
            time.sleep(left)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in a bare container
        return "unknown user"
