"""Which database the admin reads and writes: the one the queue's backend
uses (``OPTIONS["DATABASE"]``), whatever the database routers say, so the
admin shows the jobs that enqueue() wrote and the workers claim."""

from __future__ import annotations

from django.core import checks
from django.db import DEFAULT_DB_ALIAS

from ..backend import DatabaseBackend
from ..options import QueueOptions
from ..tasks_api import DEFAULT_TASK_BACKEND_ALIAS, InvalidTaskBackend, task_backends


def queue_backends() -> list[DatabaseBackend]:
    """The configured django_dbqueue backends, the default alias first."""
    found = []
    for alias in task_backends.settings:
        try:
            backend = task_backends[alias]
        except InvalidTaskBackend:
            continue  # another app's misconfiguration; Django's own check reports it
        if isinstance(backend, DatabaseBackend):
            found.append(backend)
    return sorted(found, key=lambda backend: backend.alias != DEFAULT_TASK_BACKEND_ALIAS)


def queue_database() -> str:
    """The database of the default task backend if it is ours, else of the
    first of ours in TASKS; ``default`` when none is configured."""
    backends = queue_backends()
    return backends[0].database if backends else DEFAULT_DB_ALIAS


def queue_lease() -> float:
    """The longest lease of the backends on the admin's database: a worker
    heartbeats four times a lease, so one unseen for that long is gone."""
    shown = queue_database()
    leases = [backend.config.LEASE_SECONDS for backend in queue_backends() if backend.database == shown]
    return max(leases, default=QueueOptions.LEASE_SECONDS)


def check_one_database() -> list[checks.CheckMessage]:
    """The admin shows one database: say so when the backends use several."""
    backends = queue_backends()
    databases = sorted({backend.database for backend in backends})
    if len(databases) < 2:
        return []
    shown = queue_database()
    hidden = ", ".join(repr(name) for name in databases if name != shown)
    return [
        checks.Warning(
            f"The django_dbqueue backends use the databases {', '.join(map(repr, databases))}, "
            f"but the admin shows the jobs of one database only: {shown!r}. Jobs in {hidden} "
            "do not appear in the admin.",
            hint="Point every django_dbqueue backend at one DATABASE, or look at the other "
            "databases' jobs with Job.objects.using(alias).",
            id="django_dbqueue.W101",
        )
    ]
