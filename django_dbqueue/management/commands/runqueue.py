import argparse
import logging
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.worker import Supervisor
from django_dbqueue.worker.supervisor.group import SupervisorGroup

from ...limits import MAX_SECONDS
from ...options import MAX_BATCH_SIZE
from ...shown import shown
from ...tasks_api import DEFAULT_TASK_BACKEND_ALIAS
from ._common import backend_aliases, queue_backend, require_schema

MAX_PROCESSES = 256


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
        parser.add_argument(
            "--stop-timeout",
            type=_stop_timeout,
            default=...,
            metavar="SECONDS",
            help="On SIGTERM, let the job in hand run this long, then interrupt it at its next checkpoint "
            "and give it back, its attempt unspent; 'none': wait for it (default: OPTIONS STOP_TIMEOUT).",
        )
        parser.add_argument(
            "--backend",
            action="append",
            metavar="ALIAS",
            help="TASKS alias to serve (default 'default'); repeat for several, each with its own "
            "--processes worker processes, as for queues on several database servers.",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            metavar="PORT",
            help="Serve Prometheus metrics on this port (needs the [metrics] extra).",
        )
        parser.add_argument(
            "--metrics-addr", default="0.0.0.0", help="Address the metrics port listens on (default 0.0.0.0)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        aliases = backend_aliases(options["backend"]) or [DEFAULT_TASK_BACKEND_ALIAS]
        backends = [queue_backend(alias, "runqueue") for alias in aliases]
        for backend in backends:
            # Even under --skip-checks: without its tables every worker would crash in a loop.
            require_schema(backend)
        if not options.get("skip_checks"):
            # Django's own run of the checks leaves out the database's;
            # the queue's database is the one thing a worker cannot do without.
            self.check(databases=list(dict.fromkeys(backend.database for backend in backends)))
        queues = served_queues(backends, options["queues"])
        processes = _in_range("--processes", options["processes"], 1, MAX_PROCESSES)
        if options["metrics_port"] is not None and len(backends) > 1:
            raise CommandError(
                "--metrics-port serves the metrics of one backend: run one runqueue per backend to "
                "serve each backend's metrics."
            )
        _configure_logging(options["verbosity"])
        supervisors = [
            Supervisor(
                backend.alias,
                queues[backend.alias],
                processes=processes,
                batch=self._batch(backend, options["batch"]),
                burst=options["burst"],
                stop_timeout=options["stop_timeout"],
            )
            for backend in backends
        ]
        if options["metrics_port"] is not None:
            _serve_metrics(backends[0], supervisors[0], options["metrics_port"], options["metrics_addr"])
        code = supervisors[0].run() if len(supervisors) == 1 else SupervisorGroup(supervisors).run()
        if code:
            sys.exit(code)

    def _batch(self, backend: DatabaseBackend, batch: int | None) -> int:
        # Not `or`: --batch 0 must be refused, not quietly replaced by the default.
        return _in_range(
            "--batch", batch if batch is not None else backend.config.BATCH_SIZE, 1, MAX_BATCH_SIZE
        )


def served_queues(backends: list[DatabaseBackend], wanted: list[str] | None) -> dict[str, list[str]]:
    """The queues each backend serves, by alias: every ``--queue`` that the
    backend's QUEUES lists (any of them when its QUEUES is empty), or by
    default all of its QUEUES."""
    if not wanted:
        for backend in backends:
            if not backend.queues:
                raise CommandError(
                    f"The backend {backend.alias!r} accepts any queue name (its QUEUES is empty), so "
                    "runqueue cannot tell which queues to serve: name them with --queue."
                )
        return {backend.alias: sorted(backend.queues) for backend in backends}
    wanted = list(dict.fromkeys(wanted))
    served = {
        backend.alias: [q for q in wanted if not backend.queues or q in backend.queues]
        for backend in backends
    }
    unknown = [q for q in wanted if not any(q in names for names in served.values())]
    if unknown:
        if len(backends) == 1:
            where = f"backend {backends[0].alias!r}; its QUEUES are {', '.join(sorted(backends[0].queues))}"
        else:
            where = "the backends " + ", ".join(
                f"{b.alias!r} (QUEUES {', '.join(sorted(b.queues))})" for b in backends
            )
        raise CommandError(f"Unknown queue {', '.join(map(repr, unknown))} for {where}.")
    idle = [alias for alias, names in served.items() if not names]
    if idle:
        raise CommandError(
            f"The backend {idle[0]!r} has none of the queues named by --queue in its QUEUES, so "
            "runqueue would serve nothing there: name one of its queues, or leave that --backend out."
        )
    return served


def _in_range(flag: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise CommandError(f"{flag} must be between {low} and {high}, not {value}.")
    return value


def _stop_timeout(value: str) -> float | None:
    """``--stop-timeout``: seconds (0 or more), or ``none`` for no limit."""
    if value.strip().lower() == "none":
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from 0 to {MAX_SECONDS:,} (366 days) or 'none', not {shown(value)}"
        )
    return seconds


def _configure_logging(verbosity: int) -> None:
    logger = logging.getLogger("django_dbqueue")
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbosity > 2 else logging.INFO if verbosity else logging.WARNING)


def _serve_metrics(backend: DatabaseBackend, supervisor: Supervisor, port: int, addr: str) -> None:
    """The supervisor's own thread serves the metrics: it sees every worker's
    counts (worker/supervisor/runqueue_metrics.py)."""
    from django.core.exceptions import ImproperlyConfigured

    from django_dbqueue.worker.supervisor import runqueue_metrics

    _in_range("--metrics-port", port, 1, 65535)
    try:
        runqueue_metrics.serve(port, addr, backend, supervisor.state)
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(f"Cannot serve metrics on {addr}:{port}: {exc}.") from exc
    logging.getLogger("django_dbqueue").info("Serving Prometheus metrics on %s:%d/metrics.", addr, port)
