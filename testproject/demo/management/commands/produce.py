"""A producer process for tests: enqueue `record` jobs with unique keys."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from demo import tasks


class Command(BaseCommand):
    help = "Enqueue COUNT demo.tasks.record jobs with keys PREFIX-0 .. PREFIX-(COUNT-1)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix")
        parser.add_argument("count", type=int)

    def handle(self, *args: Any, prefix: str, count: int, **options: Any) -> None:
        for i in range(count):
            tasks.record.enqueue(f"{prefix}-{i}")
        self.stdout.write(f"enqueued {count}")
