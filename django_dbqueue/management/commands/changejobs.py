import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_dbqueue.operations.big import Started
from django_dbqueue.operations.matching import change_all
from django_dbqueue.operations.selections import METHODS
from django_dbqueue.status import FINISHED, Status

from ._common import add_backend_argument, queue_backend

DONE = {"requeue": "Requeued", "cancel": "Cancelled (or asked to stop)", "run_now": "Made due now"}


class Command(BaseCommand):
    help = (
        "Requeue, cancel or run now every job that matches the filters, however many: up to "
        "OPERATION_INLINE_ROWS at once, more by an operation job of the queue, a chunk at a time."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("method", choices=METHODS, help="What to do to each matching job.")
        parser.add_argument("--status", choices=Status.values, help="Only jobs in this status.")
        parser.add_argument("--queue", help="Only jobs of this queue.")
        parser.add_argument("--task", help="Only jobs of this task (its dotted path).")
        parser.add_argument("--batch", type=int, help="Only members of this batch.")
        parser.add_argument(
            "--all", action="store_true", help="Every job of the table: needed when no filter is given."
        )
        parser.add_argument(
            "--wait", action="store_true", help="Follow an operation job's progress until it has finished."
        )
        add_backend_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        backend = queue_backend(options["backend"])
        filters = {
            "status": options["status"],
            "queue_name": options["queue"],
            "task_path": options["task"],
            "batch_id": options["batch"],
        }
        if not any(value is not None for value in filters.values()) and not options["all"]:
            raise CommandError(
                "No filter given: name --status, --queue, --task or --batch, or --all to change every job."
            )
        try:
            started = change_all(options["method"], using=backend.database, **filters)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if not started.decided:
            self.stdout.write("No job matches.")
            return
        if started.inline:
            self.stdout.write(f"{DONE[options['method']]} {int(started):,} of the matching jobs.")
            return
        self.stdout.write(
            f"{int(started):,} jobs match: the operation job #{started.job_id} changes them a chunk at a "
            "time (its page in the admin shows its progress)."
        )
        if options["wait"]:
            self._follow(backend.database, started)

    def _follow(self, using: str, started: Started) -> None:
        """A line each time the operation job's progress moves, until it ends."""
        from django_dbqueue.models import Job

        said = None
        while True:
            row = (
                Job.objects.using(using)
                .filter(pk=started.job_id)
                .values("status", "progress_message")
                .first()
            )
            if row is None:
                raise CommandError(f"The operation job #{started.job_id} is gone (deleted or pruned).")
            message = row["progress_message"] or "waiting for a worker"
            if message != said:
                self.stdout.write(f"#{started.job_id} {row['status']}: {message}")
                said = message
            if row["status"] in FINISHED:
                if row["status"] != Status.SUCCESSFUL:
                    raise CommandError(f"The operation job #{started.job_id} ended {row['status']}.")
                return
            time.sleep(1.0)
