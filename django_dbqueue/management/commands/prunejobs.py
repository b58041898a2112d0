import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.translation import ngettext

from django_dbqueue.operations.retention import prune
from django_dbqueue.options import MAX_RETENTION_DAYS, OUTCOMES
from django_dbqueue.transitions.pruning import BATCH, expired

from ._common import add_backend_argument, positive, queue_backend

MAX_BATCH = 10_000


class Command(BaseCommand):
    help = (
        "Delete finished jobs older than their retention (OPTIONS RETENTION, or --older-than), "
        "in small batches that never hold long locks."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=older_than,
            metavar="DAYS",
            help="Prune every outcome (or those of --status) older than DAYS, instead of RETENTION.",
        )
        parser.add_argument(
            "--status",
            action="append",
            choices=OUTCOMES,
            help="Only this outcome; repeat for several. Default: every outcome RETENTION names.",
        )
        parser.add_argument("--dry-run", action="store_true", help="Count what would go; delete nothing.")
        parser.add_argument(
            "--batch", type=int, default=BATCH, help=f"Rows per transaction (default {BATCH})."
        )
        add_backend_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        backend = queue_backend(options["backend"])
        if backend.options_error:
            raise CommandError(backend.options_error)
        if not 1 <= options["batch"] <= MAX_BATCH:
            raise CommandError(f"--batch must be between 1 and {MAX_BATCH}, not {options['batch']}.")
        retention = self._retention(backend, options["older_than"], options["status"])
        using = backend.database
        if options["dry_run"]:
            for outcome, days in retention.items():
                n = expired(using, outcome, days).count()
                self.stdout.write(f"{outcome}: {finished(n, days)} would be deleted.")
            return
        started = time.monotonic()
        shown = {"at": 0.0}

        def progress(outcome: str, deleted: int) -> None:
            now = time.monotonic()
            # -v 1: a line a second at most; -v 2: a line a batch.
            if options["verbosity"] > 1 or (options["verbosity"] and now - shown["at"] >= 1.0):
                shown["at"] = now
                self.stderr.write(f"{outcome}: {deleted} deleted so far ({now - started:.0f}s)")
                sys.stderr.flush()

        deleted = prune(
            using, retention, size=options["batch"], progress=progress, archive=backend.config.ARCHIVE
        )
        for outcome, n in deleted.items():
            self.stdout.write(f"{outcome}: deleted {finished(n, retention[outcome])}.")
        self.stdout.write(f"Done in {time.monotonic() - started:.1f}s.")

    def _retention(self, backend: Any, older_than: float | None, statuses: list[str] | None) -> dict:
        if older_than is not None:
            return dict.fromkeys(statuses or OUTCOMES, older_than)
        configured = dict(backend.config.RETENTION)
        if not configured:
            raise CommandError(
                "Nothing to prune: OPTIONS RETENTION is not set; give --older-than DAYS to prune anyway."
            )
        if statuses:
            missing = [s for s in statuses if s not in configured]
            if missing:
                raise CommandError(
                    f"OPTIONS RETENTION keeps {', '.join(missing)} for ever; give --older-than DAYS."
                )
            return {s: configured[s] for s in statuses}
        return configured


def finished(n: int, days: float) -> str:
    """For example "1 job finished more than 1 day ago": each plural right."""
    jobs = ngettext("%(n)d job", "%(n)d jobs", n) % {"n": n}
    # ngettext wants a count; a retention may be 0.5 days.
    ago = ngettext("%(days)g day ago", "%(days)g days ago", 1 if days == 1 else 2) % {"days": days}
    return f"{jobs} finished more than {ago}"


def older_than(text: str) -> float:
    """``--older-than``: days above zero, at most RETENTION's bound."""
    return positive(text, MAX_RETENTION_DAYS)
