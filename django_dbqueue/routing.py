"""Queues on several database servers: one ``TASKS`` backend per server.

A claim is one transaction on one server, so everything that decides what
runs (claims, leases, unique keys, concurrency limits, pauses, schedules,
retention) lives where the backend's ``OPTIONS["DATABASE"]`` points. A site
with several servers configures one backend per server and routes each
enqueue with Django's own means: ``@task(backend="reports")`` for a task
that always goes there, ``task.using(backend=alias).enqueue(...)`` for a
rule decided per call (a tenant's server, say). See docs/clusters.md,
"Several servers".

Job ids are each server's own AUTO_INCREMENT, so two servers both have a
job 17. A result id therefore names its backend unless the job is on the
*home* database (the one the default task backend uses): ``"17"`` there,
as for every single-server site, and ``"reports:17"`` on the backend
``reports`` elsewhere. Any of the site's backends finds a job from such an
id alone; a bare id always means the home database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from django.db import DEFAULT_DB_ALIAS

from .tasks_api import DEFAULT_TASK_BACKEND_ALIAS, InvalidTaskBackend, task_backends

if TYPE_CHECKING:
    from .backend import DatabaseBackend

# Between a backend's alias and the job's id in a result id: "reports:17".
SEPARATOR = ":"
# The largest id a job or batch can have: a 64-bit signed BIGINT on every database.
MAX_ID = 2**63 - 1
# The class attribute DatabaseBackend (and so every subclass) sets to True.
MARK = "is_queue_backend"


def is_queue_backend(backend: object) -> TypeGuard[DatabaseBackend]:
    """Whether ``backend`` is a django_dbqueue backend, and not another
    app's. Read from a mark on its class, not by ``isinstance``: the rooms
    below the backend ask here rather than import backend.py, which sits
    above them all (docs/development.md: imports run one way)."""
    return getattr(type(backend), MARK, False) is True


def queue_backends() -> list[DatabaseBackend]:
    """The configured django_dbqueue backends, the default alias first,
    the others in the order of ``TASKS``."""
    found = []
    for alias in task_backends.settings:
        try:
            backend = task_backends[alias]
        except InvalidTaskBackend:
            continue  # another app's misconfiguration; Django's own check reports it
        if is_queue_backend(backend):
            found.append(backend)
    return sorted(found, key=lambda backend: backend.alias != DEFAULT_TASK_BACKEND_ALIAS)


def home_database() -> str:
    """The database whose jobs have bare result ids: the default task
    backend's if it is a django_dbqueue one, else the first of them in
    ``TASKS``; ``default`` when none is configured."""
    backends = queue_backends()
    return backends[0].database if backends else DEFAULT_DB_ALIAS


def home_backend() -> DatabaseBackend:
    """The backend that reads the jobs of bare result ids: the first of
    queue_backends(), whose database is the home one."""
    backends = queue_backends()
    if not backends:
        raise LookupError("settings.TASKS has no django_dbqueue.backend.DatabaseBackend backend.")
    return backends[0]


def result_prefix(alias: str, database: str) -> str:
    """What goes before a job's id in the result ids of the backend
    ``alias`` on ``database``: nothing on the home database, ``"alias:"``
    on any other."""
    return "" if database == home_database() else f"{alias}{SEPARATOR}"


def split_result_id(result_id: object) -> tuple[str | None, str]:
    """``"reports:17"`` as ``("reports", "17")``; a bare ``"17"`` as ``(None, "17")``."""
    text = str(result_id)
    alias, separator, pk = text.rpartition(SEPARATOR)
    return (alias, pk) if separator else (None, text)


def stored_id(value: object) -> int | None:
    """``value`` (an int, or a string of ASCII digits) as a job's or
    batch's id, or None if no row can have it: anything else, or past
    MAX_ID, which SQLite's driver cannot even bind (OverflowError)."""
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit() and len(value) <= len(str(MAX_ID))):
            return None
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 < value <= MAX_ID else None


def argument_limit(database: str) -> int:
    """The ``MAX_ARGUMENTS_BYTES`` that holds for jobs on ``database``
    where no enqueue() checks them (a ``pass_result`` job's arguments, made
    when it is released): the smallest of its backends' limits, since any
    of them may run the job; the default when no backend keeps jobs there."""
    from .options import QueueOptions

    limits = [
        backend.config.MAX_ARGUMENTS_BYTES for backend in queue_backends() if backend.database == database
    ]
    return min(limits, default=QueueOptions.MAX_ARGUMENTS_BYTES)
