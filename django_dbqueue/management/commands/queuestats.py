import json
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_dbqueue.operations.stats import ServerFigures, Snapshot, server_snapshots
from django_dbqueue.replica import ReplicaLag
from django_dbqueue.status import Status

from ._common import add_snapshot_arguments, positive, snapshot_backends
from ._task_table import tasks_output


class Command(BaseCommand):
    help = (
        "Print each queue's counts, lag (age of the oldest due job, by the database's clock), "
        "throughput and failures over recent minutes, and the live workers, for every database "
        "the django_dbqueue backends use (or those of --backend); from OPTIONS READ_DATABASE "
        "when set, with that replica's lag."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--json", action="store_true", help="One JSON object (one per line with --watch)."
        )
        parser.add_argument(
            "--watch", type=positive, metavar="SECONDS", help="Print again every SECONDS until interrupted."
        )
        parser.add_argument(
            "--scaler-query",
            action="store_true",
            help="Print the SQL an autoscaler runs for the number of workers wanted (due and running jobs "
            "of --queue, or of the backend's QUEUES), and nothing else.",
        )
        parser.add_argument(
            "--tasks",
            action="store_true",
            help="Each task's jobs finished in the window, and its run and wait times, not the queues.",
        )
        add_snapshot_arguments(parser, "The window of throughput and failures (default 5).", several=True)

    def handle(self, *args: Any, **options: Any) -> None:
        backends = snapshot_backends(options)
        if options["scaler_query"]:
            self.stdout.write(scaler_queries(backends, options["queues"]))
            return
        while True:
            if options["tasks"]:
                found = tasks_output(backends, options["minutes"], options["queues"], options["json"])
                self.stdout.write(json.dumps(found) if options["json"] else found)
            else:
                servers = server_snapshots(backends, minutes=options["minutes"], queues=options["queues"])
                self.stdout.write(
                    json.dumps(servers_json(servers)) if options["json"] else render_all(servers)
                )
            self.stdout.flush()
            if not options["watch"]:
                return
            try:
                time.sleep(options["watch"])
            except KeyboardInterrupt:  # the way out of --watch: no traceback
                return


def scaler_queries(backends: list[Any], queues: list[str] | None) -> str:
    """The scaler query of each database (docs/runqueue.md, "Autoscaling"):
    alone for one database, each under a comment naming it for several."""
    from django.db import connections

    from django_dbqueue.models import Job
    from django_dbqueue.operations.autoscale import scaler_query

    by_database: dict[str, list[Any]] = {}
    for backend in backends:
        by_database.setdefault(backend.database, []).append(backend)
    found = []
    for database, theirs in by_database.items():
        names = queues or sorted({name for backend in theirs for name in backend.queues})
        vendor = connections[database].vendor
        try:
            sql = scaler_query(vendor, Job._meta.db_table, names, settings.USE_TZ)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        found.append((database, [b.alias for b in theirs], sql))
    if len(found) == 1:
        return found[0][2]
    return "\n".join(
        f"-- database {db!r} (task backends {', '.join(aliases)})\n{sql};" for db, aliases, sql in found
    )


def servers_json(servers: list[ServerFigures]) -> dict[str, Any]:
    """One database: its snapshot's object, as on a single server; several:
    ``{"servers": [...]}``, each with its ``database`` and ``backends``."""
    if len(servers) == 1:
        return as_json(servers[0].snapshot, servers[0].replica)
    return {
        "servers": [
            {"database": s.database, "backends": s.backends, **as_json(s.snapshot, s.replica)}
            for s in servers
        ]
    }


def render_all(servers: list[ServerFigures]) -> str:
    """One database: its table, as on a single server; several: each under its title."""
    if len(servers) == 1:
        return render(servers[0].snapshot, servers[0].replica)
    return "\n\n".join(f"{s.title}\n{render(s.snapshot, s.replica)}" for s in servers)


def as_json(snap: Snapshot, lag: ReplicaLag | None) -> dict[str, Any]:
    data = snap.as_json()
    if lag is not None:
        data["replica"] = lag.as_json()
    return data


def render(snap: Snapshot, replica: ReplicaLag | None = None) -> str:
    statuses = Status.values
    header = [
        "queue",
        *(s.lower() for s in statuses),
        "due",
        "lag",
        f"done/min ({snap.minutes:g} min)",
        "failed",
        "expired",
    ]
    rows = [header]
    for q in snap.queues:
        lag = "-" if q.lag_seconds is None else f"{q.lag_seconds:.1f}s"
        name = f"{q.name} (paused)" if q.paused else q.name
        rows.append(
            [
                name,
                *(str(q.counts.get(s, 0)) for s in statuses),
                str(q.due),
                lag,
                f"{q.per_minute(snap.minutes):.1f}",
                str(q.failed_recently),
                str(q.expired_recently),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    zone = "UTC" if settings.USE_TZ else settings.TIME_ZONE  # USE_TZ = False: local time
    lines = [f"Queues at {snap.at:%Y-%m-%d %H:%M:%S} {zone} (database clock)"]
    if replica is not None:
        lines.append(f"Read from the replica {replica.alias!r}: {replica.text}.")
    for row in rows:
        lines.append(
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    lines.append(f"Live workers: {len(snap.workers)}")
    for w in snap.workers:
        lines.append(
            f"  {w.name}  queues={','.join(w.queues)}  seen {w.seen_seconds_ago:.0f}s ago  "
            f"processed={w.processed} failed={w.failed}"
        )
    return "\n".join(lines)
