"""The queue's numbers, as one snapshot for ``queuestats``, ``queuehealth``
and the metrics: counts per queue and status, lag, recent throughput and
failures, paused queues and live workers.

Every time is the database's: lag is the database's now minus the oldest
due job's ``run_after``, and "recent" counts jobs whose ``finished_at`` lies
within the last minutes of the database's clock. Each figure is one grouped
query served by an index (the claim index for counts and lag, the
``finished_at`` index for throughput), as on the admin dashboard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import TYPE_CHECKING, Any

from django.db.models import Count, F, Min, QuerySet
from django.db.models.functions import TruncMinute

from ..clock import read_database_now
from ..replica import ReplicaLag, lag_of, read_database
from ..status import Status
from .pausing import paused_queues

if TYPE_CHECKING:
    from ..backend import DatabaseBackend


@dataclass
class QueueFigures:
    name: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(Status.values, 0))
    due: int = 0  # READY and due now
    lag_seconds: float | None = None  # how long the oldest due job has waited; None: nothing due
    succeeded_recently: int = 0
    failed_recently: int = 0  # jobs that ended FAILED within the window
    expired_recently: int = 0  # jobs that ended CANCELLED within the window, claimed past their deadline
    paused: bool = False
    cancel_pending: int = 0  # jobs asked to stop (cancel_requested_at) that no worker has ended yet
    # Jobs finished in each of the last whole minutes, oldest first (snapshot's ``chart_minutes``).
    finished_per_minute: list[int] = field(default_factory=list)

    def per_minute(self, minutes: float) -> float:
        return (self.succeeded_recently + self.failed_recently) / minutes


def common_keys(counts: dict[str, int], due: int, lag: float | None) -> dict[str, Any]:
    """The keys other django.tasks backends' stats share (docs/operations.md,
    "queuestats"), so one collector reads them all: a count per status in
    lower case, pending (READY, due or not), delayed (READY, not due yet)
    and the oldest pending job's age in seconds (the lag: None when none is due)."""
    keyed: dict[str, Any] = {f"{status.lower()}_count": n for status, n in counts.items()}
    ready = counts.get(Status.READY, 0)
    keyed.update(pending_count=ready, delayed_count=max(ready - due, 0), oldest_pending_age_seconds=lag)
    return keyed


@dataclass
class WorkerFigures:
    name: str
    host: str
    pid: int
    queues: list[str]
    seen_seconds_ago: float
    processed: int
    failed: int
    started_at: datetime | None = None
    last_seen_at: datetime | None = None


@dataclass
class Snapshot:
    at: datetime  # the database's now
    minutes: float  # the window of the "recently" figures
    queues: list[QueueFigures]
    workers: list[WorkerFigures]

    def queue(self, name: str) -> QueueFigures:
        return next((q for q in self.queues if q.name == name), QueueFigures(name))

    @property
    def max_lag(self) -> float | None:
        lags = [q.lag_seconds for q in self.queues if q.lag_seconds is not None]
        return max(lags) if lags else None

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["at"] = self.at.isoformat()
        for worker in data["workers"]:
            for name in ("started_at", "last_seen_at"):
                worker[name] = worker[name] and worker[name].isoformat()
        for queue in data["queues"]:
            if not queue["finished_per_minute"]:
                del queue["finished_per_minute"]
            queue["per_minute"] = round(
                (queue["succeeded_recently"] + queue["failed_recently"]) / self.minutes, 3
            )
            queue.update(common_keys(queue["counts"], queue["due"], queue["lag_seconds"]))
        counts = {status: sum(q.counts.get(status, 0) for q in self.queues) for status in Status.values}
        data["totals"] = common_keys(counts, sum(q.due for q in self.queues), self.max_lag)
        return data


def snapshot(
    using: str,
    *,
    minutes: float = 5.0,
    queues: list[str] | None = None,
    alive_within: float = 60.0,
    configured: Sequence[str] = (),
    chart_minutes: int = 0,
) -> Snapshot:
    """The figures of ``queues`` (default: every queue that has jobs, is
    paused or is ``configured``); workers seen within ``alive_within`` seconds;
    with ``chart_minutes``, each queue's finished jobs per minute over that many
    whole minutes (the admin dashboard's chart)."""
    from ..models import Job, Worker

    now = read_database_now(using)
    jobs = Job.objects.using(using)
    if queues is not None:
        jobs = jobs.filter(queue_name__in=queues)
    paused = paused_queues(using)
    figures: dict[str, QueueFigures] = {}

    def of(name: str) -> QueueFigures:
        return figures.setdefault(name, QueueFigures(name))

    for name in queues if queues is not None else [*configured, *paused]:
        of(name)
    for name, status, n in jobs.order_by().values_list("queue_name", "status").annotate(Count("pk")):
        of(name).counts[status] = n
    due = jobs.due(now).order_by().values_list("queue_name").annotate(Count("pk"), Min("run_after"))
    for name, n, oldest in due:
        of(name).due = n
        of(name).lag_seconds = max((now - oldest).total_seconds(), 0.0)
    recent = jobs.filter(finished_at__gte=now - timedelta(minutes=minutes))
    for name, status, n in recent.order_by().values_list("queue_name", "status").annotate(Count("pk")):
        if status == Status.SUCCESSFUL:
            of(name).succeeded_recently = n
        elif status == Status.FAILED:
            of(name).failed_recently = n
    expired = recent.filter(status=Status.CANCELLED, expires_at__lte=F("finished_at"))
    for name, n in expired.order_by().values_list("queue_name").annotate(Count("pk")):
        of(name).expired_recently = n
    # The cancel_requested_at index holds only pending requests: finishing a job clears its own.
    requested = jobs.filter(cancel_requested_at__isnull=False)
    for name, n in requested.order_by().values_list("queue_name").annotate(Count("pk")):
        of(name).cancel_pending = n
    if chart_minutes:
        for figure in figures.values():
            figure.finished_per_minute = [0] * chart_minutes
        for name, index, n in _finished_by_minute(jobs, now, chart_minutes):
            of(name).finished_per_minute = of(name).finished_per_minute or [0] * chart_minutes
            of(name).finished_per_minute[index] += n
    for figure in figures.values():
        figure.paused = figure.name in paused
    alive = Worker.objects.using(using).filter(last_seen_at__gte=now - timedelta(seconds=alive_within))
    workers = [
        WorkerFigures(
            w.name,
            w.host,
            w.pid,
            list(w.queues or []),
            round((now - w.last_seen_at).total_seconds(), 1),
            w.processed,
            w.failed,
            w.started_at,
            w.last_seen_at,
        )
        for w in alive.order_by("host", "pid")
    ]
    return Snapshot(now, minutes, sorted(figures.values(), key=lambda q: q.name), workers)


@dataclass
class ServerFigures:
    """One database's snapshot, for the pages that show every server's
    queues: the queue's ``database``, the ``backends`` (TASKS aliases) that
    keep jobs there, and the lag of the replica it was read from (None:
    read from ``database`` itself)."""

    database: str
    backends: list[str]
    snapshot: Snapshot
    replica: ReplicaLag | None = None

    @property
    def title(self) -> str:
        return server_title(self.database, self.backends)


def server_title(database: str, backends: Sequence[str]) -> str:
    """``Database 'eu' (task backend 'eu')``: how the pages that show several name one."""
    names = ", ".join(repr(alias) for alias in backends)
    return f"Database {database!r} (task backend{'s' if len(backends) > 1 else ''} {names})"


def server_snapshots(
    backends: Sequence[DatabaseBackend],
    *,
    minutes: float = 5.0,
    queues: list[str] | None = None,
    chart_minutes: int = 0,
) -> list[ServerFigures]:
    """A snapshot per database that ``backends`` keep jobs in, in their
    order, each read from its READ_DATABASE when set. With ``queues``, each
    database shows those of them its backends serve, and a database that
    serves none is left out."""
    groups: dict[str, list[DatabaseBackend]] = {}
    for backend in backends:
        groups.setdefault(backend.database, []).append(backend)
    found = []
    for database, group in groups.items():
        wanted = queues
        if queues is not None:
            wanted = [q for q in queues if any(not b.queues or q in b.queues for b in group)]
            if not wanted:
                continue
        snap = snapshot(
            read_database(group[0]),
            minutes=minutes,
            queues=wanted,
            alive_within=max(b.config.LEASE_SECONDS for b in group),
            configured=sorted({q for b in group for q in b.queues}),
            chart_minutes=chart_minutes,
        )
        found.append(ServerFigures(database, [b.alias for b in group], snap, lag_of(group[0])))
    return found


def _finished_by_minute(jobs: QuerySet, now: datetime, minutes: int) -> list[tuple[str, int, int]]:
    """(queue, minute's index, jobs finished) for the last ``minutes`` whole
    minutes up to ``now``, the current one last. Minutes are bucketed in UTC,
    which needs no time zone tables in MySQL."""
    start = (now - timedelta(minutes=minutes - 1)).replace(second=0, microsecond=0)
    finished = (
        jobs.filter(finished_at__gte=start)
        .annotate(minute=TruncMinute("finished_at", tzinfo=dt_timezone.utc))
        .order_by()
        .values_list("queue_name", "minute")
        .annotate(Count("pk"))
    )
    found = []
    for name, minute, n in finished:
        index = int((minute - start).total_seconds() // 60)
        if 0 <= index < minutes:
            found.append((name, index, n))
    return found
