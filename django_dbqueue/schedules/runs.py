"""Enqueueing the runs of the schedules (spec.py) and keeping their record,
and whether a schedule's task can be enqueued at all (task_problems(), which
the stored schedules' own checks ask through apps.py: table.py is a model
module and imports nothing of enqueue/).

Every runqueue process ticks every schedule (worker/housekeeping/scheduler.py). What
makes a run happen once however many processes tick is the database: a run
is the INSERT of its job and of its ScheduledRun row in one transaction, and
ScheduledRun is unique on (schedule, scheduled_at). The second process to
insert a run waits for the first's transaction, then fails on the unique
index and rolls its job back. Times come from the database's clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from ..clock import as_aware, as_stored
from ..enqueue.inserting import insert_job
from ..enqueue.loading import load_task
from ..enqueue.validation import check_arguments
from ..tasks_api import InvalidTask
from .spec import Schedule

if TYPE_CHECKING:
    from ..backend import DatabaseBackend
    from ..models import Job


def enqueue_run(
    backend: DatabaseBackend, schedule: Schedule, at: datetime, manual: bool = False
) -> Job | None:
    """Enqueue the run of ``schedule`` at ``at`` (due then), or nothing if
    another process did (None). ``manual``: a person's "run now", which
    does not count as the schedule's last run."""
    from ..models import ScheduledRun

    task = load_task(schedule.task, backend.config.ALLOWED_TASK_MODULES)
    backend.check_enqueue(task)
    job = backend.build_job(task, schedule.args, schedule.kwargs, backend.now())
    check_arguments(task, job.args, job.kwargs)
    at = as_stored(at)  # USE_TZ = False: local time in TIME_ZONE
    job.run_after = at
    db = backend.database
    try:
        with transaction.atomic(using=db):
            insert_job(job, db)
            ScheduledRun.objects.using(db).create(
                schedule=schedule.name, scheduled_at=at, job_id=job.pk, manual=manual
            )
    except IntegrityError:
        return None  # this run is enqueued already; ours is rolled back
    return job


def last_runs(database: str, names: list[str]) -> dict[str, datetime]:
    """Each schedule's latest scheduled run (not "run now"s): one dive into
    the (schedule, manual, scheduled_at) index per schedule, in one round
    trip, however many runs are kept. (A grouped MAX read them all.)"""
    from django.db import connections

    from ..models import ScheduledRun

    runs = ScheduledRun.objects.using(database).filter(manual=False)
    reads = [
        runs.filter(schedule=name).order_by("-scheduled_at").values_list("schedule", "scheduled_at")[:1]
        for name in names
    ]
    if len(reads) > 1 and connections[database].features.supports_slicing_ordering_in_compound:
        rows = list(reads[0].union(*reads[1:], all=True))
    else:
        rows = [row for read in reads for row in read]
    return {name: as_aware(at) for name, at in rows}


# Scheduled runs kept per schedule (besides its latest, always kept): their
# only use after this is the admin's history and the exactly-once key, which
# no process needs for runs older than its schedule's latest.
KEEP_RUNS = timedelta(days=1)


def prune_runs(database: str, name: str, latest: datetime) -> int:
    from ..models import ScheduledRun

    cutoff = as_stored(latest - KEEP_RUNS)
    old = ScheduledRun.objects.using(database).filter(schedule=name, scheduled_at__lt=cutoff)
    return old.delete()[0]


def task_problems(backend: DatabaseBackend, schedule: Schedule, arguments: bool) -> dict[str, str]:
    """What stops ``schedule``'s task from being enqueued by ``backend``, by
    field: the task (it must import, be allowed and pass the backend's
    validation), then, if ``arguments`` (their own checks passed), the
    arguments against its signature. Empty when nothing does."""
    try:
        task = load_task(schedule.task, backend.config.ALLOWED_TASK_MODULES)
        backend.validate_task(task)
    except (LookupError, InvalidTask) as exc:
        return {"task": str(exc)}
    if arguments:
        try:
            check_arguments(task, schedule.args, schedule.kwargs)
        except InvalidTask as exc:
            return {"args": str(exc)}
    return {}
