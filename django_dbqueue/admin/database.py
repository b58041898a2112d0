"""Which database the admin reads and writes: the one the queue's backend
uses (``OPTIONS["DATABASE"]``), whatever the database routers say, so the
admin shows the jobs that enqueue() wrote and the workers claim."""

from __future__ import annotations

from django.core import checks

from ..options import QueueOptions
from ..routing import home_database, queue_backends

__all__ = ["check_one_database", "queue_backends", "queue_database", "queue_lease"]


def queue_database() -> str:
    """The database of the default task backend if it is ours, else of the
    first of ours in TASKS; ``default`` when none is configured."""
    return home_database()


def queue_lease() -> float:
    """The longest lease of the backends on the admin's database: a worker
    heartbeats four times a lease, so one unseen for that long is gone."""
    shown = queue_database()
    leases = [backend.config.LEASE_SECONDS for backend in queue_backends() if backend.database == shown]
    return max(leases, default=QueueOptions.LEASE_SECONDS)


def check_one_database() -> list[checks.CheckMessage]:
    """The job and worker lists show one database: say so when the backends use several."""
    backends = queue_backends()
    databases = sorted({backend.database for backend in backends})
    if len(databases) < 2:
        return []
    shown = queue_database()
    hidden = ", ".join(repr(name) for name in databases if name != shown)
    return [
        checks.Warning(
            f"The django_dbqueue backends use the databases {', '.join(map(repr, databases))}, "
            f"but the admin shows the jobs of one database only: {shown!r}, in its job, batch and "
            f"worker lists. Jobs in {hidden} appear in its dashboard and in queuestats, not in "
            "those lists.",
            hint="Point every django_dbqueue backend at one DATABASE, or look at the other "
            "databases' jobs with Job.objects.using(alias) or the task backend's get_result().",
            id="django_dbqueue.W101",
        )
    ]
