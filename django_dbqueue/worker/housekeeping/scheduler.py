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
expression, a time Python cannot read) is logged once per version and
skipped, and so is a schedule whose next time is past the year 9999: the
others run.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import Case, DateTimeField, F, OuterRef, Subquery, When

from ...clock import as_aware, read_utc
from ...db import DB_ERRORS, Outage, drop_connection, is_outage, retry_on_conflict
from ...schedules.runs import enqueue_run, last_runs, prune_runs
from ...schedules.spec import Schedule
from ...transitions.unreadable import doubtful
from ..threads import main_thread_signals

if TYPE_CHECKING:
    from ...backend import DatabaseBackend

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
        self.skipped: set[str] = set()  # the schedules whose times overflowed, logged once

    def tick(self) -> float:
        """Enqueue every run due now; return seconds until the next one."""
        now = read_utc(self.database)  # aware: cron times are computed in UTC
        if self.since is None:
            self.since = now
        last = last_runs(self.database, [s.name for s in self.schedules])
        due = [(s, last.get(s.name, self.since)) for s in self.schedules] + self.read_stored()
        soonest = MAX_WAIT
        for schedule, after in due:
            try:
                runs = schedule.runs_due(after, now)
                enqueued = sum(self.enqueue(schedule, at) for at in runs)
                if enqueued > 1:  # after downtime (catch_up "all", or "latest" of a frequent one)
                    logger.info(
                        "Schedule %r: enqueued %d runs at once, from %s to %s.",
                        schedule.name,
                        enqueued,
                        runs[0],
                        runs[-1],
                    )
                soonest = min(soonest, (schedule.next_run(now) - now).total_seconds())
            except OverflowError:
                # A time near the year 9999 (a change or a run written by
                # SQL): its next one is past what a datetime holds. That
                # schedule is skipped alone; the others go on.
                self.log_once(schedule.name, f"its last run or change is at {after}, too near the year 9999")
        return max(soonest, 0.01)

    def log_once(self, name: str, why: str) -> None:
        if name not in self.skipped:
            self.skipped.add(name)
            logger.error("The schedule %r cannot run, and is skipped: %s.", name, why)

    def read_stored(self) -> list[tuple[Schedule, datetime]]:
        """The backend's enabled database schedules that can run, each with
        the time after which its runs count: the later of its last run and
        its last change (or resume). One read, with one dive into the
        (schedule, manual, scheduled_at) index per row for its last run."""
        from ...models import Schedule as StoredSchedule
        from ...models import ScheduledRun

        runs = ScheduledRun.objects.filter(schedule=OuterRef("name"), manual=False).order_by("-scheduled_at")
        rows = StoredSchedule.objects.using(self.database).filter(backend=self.backend.alias, enabled=True)
        rows = rows.annotate(
            last_run_at=Subquery(runs.values("scheduled_at")[:1]), **readable_times(self.database)
        )
        fields = [f.attname for f in StoredSchedule._meta.concrete_fields]
        read = [f"readable_{name}" if name in TIMES else name for name in fields]
        seen: dict[tuple[Any, ...], tuple[Schedule, datetime] | None] = {}
        found = []
        for *values, last_run in rows.values_list(*read, "last_run_at"):
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
        from ...models import Schedule as StoredSchedule

        row = StoredSchedule(**values)
        problem = row.problem()
        if row.created_at is None or row.updated_at is None:  # read as None by readable_times()
            problem = (
                "its created_at or updated_at (written by SQL) is not a time the scheduler can follow: "
                "Python cannot read it, or it is past the year 9999 or before the year 1."
            )
        if problem is not None:
            logger.error("The schedule %r in the database cannot run, and is skipped: %s", row.name, problem)
            return None
        return row.spec(), as_aware(row.updated_at)

    def enqueue(self, schedule: Schedule, at: datetime) -> bool:
        """Enqueue the run of ``schedule`` at ``at``; False if it was not."""
        try:
            job = retry_on_conflict(lambda: enqueue_run(self.backend, schedule, at), self.database)
        except (LookupError, ValueError, TypeError) as exc:
            # A task that no longer imports or no longer fits its arguments:
            # `manage.py check` says so too. The run is not recorded.
            logger.error("Schedule %r could not enqueue its run at %s: %s", schedule.name, at, exc)
            return False
        if job is None:
            return False
        # DEBUG: a schedule every 15 seconds would write this line four times a minute.
        logger.debug("Schedule %r: enqueued its run at %s as job %s.", schedule.name, at, job.pk)
        if time.monotonic() - self.pruned_at > PRUNE_EVERY:
            self.pruned_at = time.monotonic()
            prune_runs(self.database, schedule.name, at)
        return True


class SchedulerThread(threading.Thread):
    def __init__(self, backend: DatabaseBackend) -> None:
        super().__init__(name="dbqueue-scheduler", daemon=True)
        self.scheduler = Scheduler(backend)
        self.outage = Outage("The scheduler", backend.config.RECONNECT_BACKOFF_MAX)
        self.done = threading.Event()

    def run(self) -> None:
        main_thread_signals()  # it may run in a worker process (worker/threads.py)
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


# A stored schedule's times, which SQL may have written as anything.
TIMES = ("created_at", "updated_at")


def readable_times(database: str) -> dict[str, Case]:
    """Each of TIMES, or NULL where Python could not read it (PostgreSQL's
    infinities, SQLite's text, a year past 9999): read so, a schedule
    written with one is logged and skipped alone, where its row failed the
    read of every schedule, at every tick."""
    from ...models import Schedule as StoredSchedule

    found = {}
    for name in TIMES:
        field = StoredSchedule._meta.get_field(name)
        bad = doubtful(field, connections[database])
        found[f"readable_{name}"] = Case(When(bad, then=None), default=F(name), output_field=DateTimeField())
    return found


def start_scheduler(backend: DatabaseBackend) -> SchedulerThread | None:
    # Always: a schedule may be added to the database at any time.
    thread = SchedulerThread(backend)
    thread.start()
    return thread
