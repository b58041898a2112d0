import socket
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.translation import ngettext

from django_dbqueue.db import DB_ERRORS, brief

from ._common import add_snapshot_arguments, positive, read_snapshot, snapshot_backend


class Command(BaseCommand):
    help = (
        "Exit 0 if this host's workers are alive and the queues are within the thresholds given, "
        "else print why and exit 1: for a Kubernetes probe or a systemd watchdog."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--min-workers",
            type=int,
            default=1,
            help="Live worker processes this host must have (default 1; 0: do not check workers).",
        )
        parser.add_argument(
            "--host", default=socket.gethostname()[:80], help="Whose workers to check (default: this host)."
        )
        parser.add_argument(
            "--max-lag", type=positive, metavar="SECONDS", help="Unhealthy if a queue's lag exceeds this."
        )
        parser.add_argument(
            "--max-failures",
            type=int,
            metavar="N",
            help="Unhealthy if more than N jobs ended FAILED within --minutes.",
        )
        add_snapshot_arguments(parser, "The window of --max-failures (default 5).")

    def handle(self, *args: Any, **options: Any) -> None:
        # Bad input exits 2, as argparse does; 1 means unhealthy.
        try:
            backend = snapshot_backend(options)
        except CommandError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        for flag in ("min_workers", "max_failures"):
            if options[flag] is not None and options[flag] < 0:
                raise CommandError(
                    f"--{flag.replace('_', '-')} must be 0 or more, not {options[flag]}.", returncode=2
                )
        try:
            snap = read_snapshot(backend, options)
        except DB_ERRORS as exc:
            self._verdict([f"the database does not answer: {brief(exc)}"])
            return
        problems = []
        wanted = set(options["queues"] or ())
        mine = [
            w for w in snap.workers if w.host == options["host"] and (not wanted or wanted & set(w.queues))
        ]
        if len(mine) < options["min_workers"]:
            problems.append(f"{live(len(mine), options['host'])}, fewer than {options['min_workers']}")
        for q in snap.queues:
            if (
                options["max_lag"] is not None
                and q.lag_seconds is not None
                and q.lag_seconds > options["max_lag"]
            ):
                paused = " (paused)" if q.paused else ""
                problems.append(
                    f"queue {q.name}{paused} lags {q.lag_seconds:.0f}s, over {options['max_lag']:g}s"
                )
        failed = sum(q.failed_recently for q in snap.queues)
        if options["max_failures"] is not None and failed > options["max_failures"]:
            jobs = ngettext("%(n)d job failed", "%(n)d jobs failed", failed) % {"n": failed}
            problems.append(
                f"{jobs} in the last {minutes(options['minutes'])}, over {options['max_failures']}"
            )
        self._verdict(problems, live(len(mine), options["host"]))

    def _verdict(self, problems: list[str], summary: str = "") -> None:
        if problems:
            self.stderr.write("UNHEALTHY: " + "; ".join(problems) + ".")
            sys.exit(1)
        self.stdout.write(f"OK: {summary}.")


def live(n: int, host: str) -> str:
    return ngettext("%(n)d live worker on %(host)s", "%(n)d live workers on %(host)s", n) % {
        "n": n,
        "host": host,
    }


def minutes(n: float) -> str:
    # ngettext wants a count; --minutes may be 0.5.
    return ngettext("%(n)g minute", "%(n)g minutes", 1 if n == 1 else 2) % {"n": n}
