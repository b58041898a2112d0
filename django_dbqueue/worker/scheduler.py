"""The scheduler: enqueues the runs of the backend's schedules, from
settings and from the database (stored_schedules.py), as they come due. It
runs as a thread of the heartbeat process of every ``runqueue`` (and of a
Worker's heartbeat thread), so there is nothing more to deploy and no single
scheduler whose death stops every schedule: each process ticks every
schedule, and the database's unique (schedule, scheduled_at) key lets
exactly one of them enqueue each run (schedules.py).

The database's schedules are read at every tick, so an addition, change,
pause or removal takes effect at the next tick of every process, without a
restart. A row that cannot run (written by SQL: an unknown task, a bad
expression) is logged once per version and skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import OuterRef, Subquery

from ..clock import as_aware, read_utc
from ..db import DB_ERRORS, Outage, drop_connection, is_outage, retry_on_conflict
from ..operations.schedule_runs import enqueue_run, last_runs, prune_runs
from ..operations.schedules import Schedule
from .signals import main_thread_signals

if TYPE_CHECKING:
    from ..backend import DatabaseBackend

logger = logging.getLogger("django_dbqueue")

# The longest sleep between ticks: the next run's time is computed from the
# database's clock, and a host's clock may drift from it meanwhile.
MAX_WAIT = 5.0
PRUNE_EVERY = 60.0


class Scheduler:
    def __init__(self, backend: DatabaseBackend) -> None:
        self.backend = backend
        self.database = backend.database
        self.schedules: tuple[Schedule, ...] = backend.config.SCHEDULES
        # A schedule that never ran starts from the first time any process
        # ticked it: its earlier times are not "missed".
        self.since: datetime | None = None
        self.pruned_at = 0.0
        # The database's schedules by their stored values: parsed and
        # checked once per version, None for one that cannot run.
        self.stored: dict[tuple[Any, ...], tuple[Schedule, datetime] | None] = {}

    def tick(self) -> float:
        """Enqueue every run due now; return seconds until the next one."""
        now = read_utc(self.database)  # aware: cron times are computed in UTC
        if self.since is None:
            self.since = now
        last = last_runs(self.database, [s.name for s in self.schedules])
        due = [(s, last.get(s.name, self.since)) for s in self.schedules] + self.read_stored()
        soonest = MAX_WAIT
        for schedule, after in due:
            for at in schedule.runs_due(after, now):
                self.enqueue(schedule, at)
            soonest = min(soonest, (schedule.next_run(now) - now).total_seconds())
        return max(soonest, 0.01)

    def read_stored(self) -> list[tuple[Schedule, datetime]]:
        """The backend's enabled database schedules that can run, each with
        the time after which its runs count: the later of its last run and
        its last change (or resume). One read, with one dive into the
        (schedule, manual, scheduled_at) index per row for its last run."""
        from ..models import Schedule as StoredSchedule
        from ..models import ScheduledRun

        runs = ScheduledRun.objects.filter(schedule=OuterRef("name"), manual=False).order_by("-scheduled_at")
        rows = StoredSchedule.objects.using(self.database).filter(backend=self.backend.alias, enabled=True)
        rows = rows.annotate(last_run_at=Subquery(runs.values("scheduled_at")[:1]))
        fields = [f.attname for f in StoredSchedule._meta.concrete_fields]
        seen: dict[tuple[Any, ...], tuple[Schedule, datetime] | None] = {}
        found = []
        for *values, last_run in rows.values_list(*fields, "last_run_at"):
            key = tuple(repr(value) for value in values)  # JSON values are unhashable
            parsed = (
                self.stored[key] if key in self.stored else self.parse(dict(zip(fields, values, strict=True)))
            )
            seen[key] = parsed
            if parsed is not None:
                schedule, changed = parsed
                found.append((schedule, max(changed, as_aware(last_run)) if last_run else changed))
        self.stored = seen
        return found

    def parse(self, values: dict[str, Any]) -> tuple[Schedule, datetime] | None:
        from ..models import Schedule as StoredSchedule

        row = StoredSchedule(**values)
        problem = row.problem()
        if problem is not None:
            logger.error("The schedule %r in the database cannot run, and is skipped: %s", row.name, problem)
            return None
        return row.spec(), as_aware(row.updated_at)

    def enqueue(self, schedule: Schedule, at: datetime) -> None:
        try:
            job = retry_on_conflict(lambda: enqueue_run(self.backend, schedule, at), self.database)
        except (LookupError, ValueError, TypeError) as exc:
            # A task that no longer imports or no longer fits its arguments:
            # `manage.py check` says so too. The run is not recorded.
            logger.error("Schedule %r could not enqueue its run at %s: %s", schedule.name, at, exc)
            return
        if job is None:
            return
        logger.info("Schedule %r: enqueued its run at %s as job %s.", schedule.name, at, job.pk)
        if time.monotonic() - self.pruned_at > PRUNE_EVERY:
            self.pruned_at = time.monotonic()
            prune_runs(self.database, schedule.name, at)


class SchedulerThread(threading.Thread):
    def __init__(self, backend: DatabaseBackend) -> None:
        super().__init__(name="dbqueue-scheduler", daemon=True)
        self.scheduler = Scheduler(backend)
        self.outage = Outage("The scheduler", backend.config.RECONNECT_BACKOFF_MAX)
        self.done = threading.Event()

    def run(self) -> None:
        main_thread_signals()  # it may run in a worker process (signals.py)
        database = self.scheduler.database
        while not self.done.is_set():
            try:
                delay = self.scheduler.tick()
                self.outage.restored()
            except DB_ERRORS as exc:
                delay = self.outage.lost(exc) if is_outage(exc, database) else 1.0
                if not is_outage(exc, database):
                    logger.exception("The scheduler failed; it will try again.")
                drop_connection(database)
            except Exception:
                logger.exception("The scheduler failed; it will try again.")
                delay = 1.0
            self.done.wait(delay)
        connections[database].close()

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)


def start_scheduler(backend: DatabaseBackend) -> SchedulerThread | None:
    # Always: a schedule may be added to the database at any time.
    thread = SchedulerThread(backend)
    thread.start()
    return thread
