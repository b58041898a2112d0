"""The task backend's own system checks, which Django runs through its
tasks framework (``DatabaseBackend.check()``): its ``TASKS`` entry, its
``OPTIONS``, its database alias and its schedules. Each problem is one
message, with a stable id; all of them are reported at once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import apps
from django.core import checks

from .enqueue.loading import load_task
from .enqueue.validation import check_arguments
from .options import database_problem, read_database_problem
from .tasks_api import DEFAULT_TASK_BACKEND_ALIAS, InvalidTask, task_backends

if TYPE_CHECKING:
    from .backend import DatabaseBackend
    from .schedules.spec import Schedule


def backend_messages(backend: DatabaseBackend) -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    if not apps.is_installed("django_dbqueue"):
        messages.append(
            checks.Error(
                not_installed_message(backend.alias),
                hint="Add 'django_dbqueue' to INSTALLED_APPS and run manage.py migrate.",
                id="django_dbqueue.E004",
            )
        )
    entry = f"TASKS[{backend.alias!r}]"
    messages += [
        checks.Error(problem, hint=f"Fix {entry}.", id="django_dbqueue.E006")
        for problem in backend.entry_problems
    ]
    messages += [
        checks.Error(problem, hint=f"Fix {entry}['OPTIONS'].", id="django_dbqueue.E003")
        for problem in backend.options_problems
    ]
    # Read now, not when the backend was made: DATABASES is what the checks run against.
    missing = database_problem(backend.alias, backend.raw_database())
    if missing:
        hint = f"Add it to DATABASES, or set {entry}['OPTIONS']['DATABASE'] to one that is."
        messages.append(checks.Error(missing, hint=hint, id="django_dbqueue.E007"))
    raw_read = backend.options.get("READ_DATABASE") if isinstance(backend.options, dict) else None
    missing = read_database_problem(backend.alias, raw_read)
    if missing:
        hint = (
            f"Add the replica to DATABASES, or remove {entry}['OPTIONS']['READ_DATABASE'] to read "
            "from the queue's own DATABASE."
        )
        messages.append(checks.Error(missing, hint=hint, id="django_dbqueue.E007"))
    return messages + schedule_messages(backend) + default_alias_messages(backend)


def default_alias_messages(backend: DatabaseBackend) -> list[checks.CheckMessage]:
    """TASKS without a "default" alias: a task that names no backend (most
    do) raises InvalidTaskBackend when its module is imported. Said once,
    by the first of our backends."""
    from .enqueue.decorator import no_default_message
    from .routing import queue_backends

    aliases = list(task_backends.settings)
    if DEFAULT_TASK_BACKEND_ALIAS in aliases or queue_backends()[:1] != [backend]:
        return []
    return [
        checks.Warning(
            no_default_message(aliases),
            hint=f"Rename TASKS[{backend.alias!r}] to TASKS['default'], or give every task "
            f"@task(backend={backend.alias!r}).",
            id="django_dbqueue.W007",
        )
    ]


def schedule_messages(backend: DatabaseBackend) -> list[checks.CheckMessage]:
    """E005: a schedule whose task does not load, or whose arguments do not
    fit it, or whose name another backend on the same database uses too."""
    messages: list[checks.CheckMessage] = []
    for schedule in backend.config.SCHEDULES:
        hint = f"Fix TASKS[{backend.alias!r}]['OPTIONS']['SCHEDULES'][{schedule.name!r}]."
        problem = schedule_problem(backend, schedule)
        if problem is not None:
            message = f"The schedule {schedule.name!r} cannot enqueue its task: {problem}"
            messages.append(checks.Error(message, hint=hint, id="django_dbqueue.E005"))
        other = name_clash(backend, schedule.name)
        if other is not None:
            message = (
                f"The schedule {schedule.name!r} has the name of another schedule of the backend "
                f"{other!r}, on the same database. Runs are recorded by schedule name, so the two "
                "would share them, and each time only one of them would enqueue."
            )
            hint = f"Rename one of them. {hint}"
            messages.append(checks.Error(message, hint=hint, id="django_dbqueue.E005"))
    return messages


def name_clash(backend: DatabaseBackend, name: str) -> str | None:
    """The alias of another backend on ``backend``'s database with a
    settings schedule named ``name``, or None. Names compare byte for byte,
    as the runs' key does (fields.KeyField): "Report" is another schedule."""
    from .routing import is_queue_backend
    from .tasks_api import task_backends

    for other in task_backends.all():
        if not is_queue_backend(other) or other.options_error:
            continue
        if other.config.DATABASE != backend.config.DATABASE:
            continue
        if other is not backend and any(s.name == name for s in other.config.SCHEDULES):
            return other.alias
    return None


def schedule_problem(backend: DatabaseBackend, schedule: Schedule) -> str | None:
    """Why ``schedule``'s task cannot be enqueued as configured, or None."""
    try:
        task = load_task(schedule.task, backend.config.ALLOWED_TASK_MODULES)
        backend.validate_task(task)
        check_arguments(task, schedule.args, schedule.kwargs)
    except (LookupError, InvalidTask) as exc:
        return str(exc)
    return None


def not_installed_message(alias: str) -> str:
    return (
        f"The task backend {alias!r} is a django_dbqueue DatabaseBackend, but 'django_dbqueue' "
        "is not in INSTALLED_APPS, so its job table is neither migrated nor usable."
    )
