"""Schedules in the database: added, changed, paused and removed from the
admin or from code, without a deploy. They are the settings schedules'
twins (spec.py): the same keys, the same cron expressions, and the same
exactly-once enqueue (runs.py), ticked by the same scheduler
(worker/housekeeping/scheduler.py). Its public path is ``django_dbqueue.models.Schedule``.

``save()`` validates the row as a form would (``full_clean()``), so a bad
schedule never reaches the table from Python. A row written by SQL may
still be anything: :meth:`Schedule.problem` says what is wrong with it, the
scheduler logs and skips it, and the admin shows it as broken.

Times count from the later of the schedule's last run and ``updated_at``,
which every save, pause and resume sets from the database's clock: a
changed schedule starts afresh from its change, and a resumed one does not
run the times it was paused for.

This is a model module (models.py imports it), so it imports nothing of
enqueue/, operations/ or backend.py, not even inside a function. Whether a
row's task can run is the enqueue side's to say: runs.task_problems(), which
apps.py plugs in with plug_task_check() when the app is ready.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import connections, models, router
from django.db.models.functions import Now

from ..clock import DbNow
from ..fields import KeyField
from ..jsonfield import TolerantJSONField
from ..payload import exact_integers
from . import spec as settings_schedules
from .spec import CATCH_UP, NAME_MAX

# (backend, schedule, whether to check its arguments) -> problems by field.
TaskCheck = Callable[[Any, settings_schedules.Schedule, bool], dict[str, str]]
_task_check: list[TaskCheck] = []


def plug_task_check(check: TaskCheck) -> None:
    """Let ``check`` judge a stored schedule's task (apps.py plugs in runs.task_problems)."""
    _task_check[:] = [check]


def default_timezone() -> str:
    return settings.TIME_ZONE or "UTC"


class Schedule(models.Model):
    """A recurring job kept in the database, with the keys of a settings
    schedule as fields, plus ``backend`` (the TASKS alias whose processes
    enqueue its runs) and ``enabled``. Every scheduler reads the table at
    each tick; the runs are enqueued exactly once per scheduled time."""

    # Byte for byte, as the runs' key (fields.KeyField): "Report" is not "report".
    name = KeyField(max_length=NAME_MAX, unique=True)
    task = models.CharField(max_length=255, help_text="The import path of a task, e.g. myapp.tasks.report.")
    cron = models.CharField(
        max_length=100,
        help_text="5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first.",
    )
    timezone = models.CharField(max_length=64, default=default_timezone, db_default="UTC")
    args = TolerantJSONField(default=list, db_default=[], blank=True, help_text="A JSON list.")
    kwargs = TolerantJSONField(default=dict, db_default={}, blank=True, help_text="A JSON object.")
    catch_up = models.CharField(
        max_length=6, choices=[(c, c) for c in CATCH_UP], default="latest", db_default="latest"
    )
    # The task backend whose scheduler enqueues the runs, as in TASKS.
    backend = models.CharField(max_length=100, default="default", db_default="default")
    enabled = models.BooleanField(default=True, db_default=True, help_text="Unticked: paused.")
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    # Set from the database's clock by every save, pause and resume.
    updated_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        ordering = ["name"]
        # The admin's app list: "Stored schedules" (edited here) beside "All schedules" (ScheduledRun).
        verbose_name = "stored schedule"
        # Every scheduler reads its backend's enabled schedules each tick.
        indexes = [models.Index(fields=["backend", "enabled"], name="dbqueue_schedule_tick")]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Validate (``full_clean()``, raising ``ValidationError`` by field),
        then write, with ``updated_at`` from the database's clock: the
        schedule's runs count from now."""
        self.full_clean(exclude={"created_at", "updated_at"})
        self.updated_at = DbNow()
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "updated_at"}
        super().save(*args, **kwargs)
        self.refresh_from_db(fields=["created_at", "updated_at"])

    def pause(self) -> bool:
        """Stop enqueueing runs, within one tick of every scheduler. False if already paused."""
        return self._set_enabled(False)

    def resume(self) -> bool:
        """Enqueue runs again, from the next time after now. False if not paused."""
        return self._set_enabled(True)

    def _set_enabled(self, enabled: bool) -> bool:
        # One conditional UPDATE, no validation: a broken schedule may be paused.
        rows = type(self)._default_manager.using(self._state.db).filter(pk=self.pk, enabled=not enabled)
        changed = bool(rows.update(enabled=enabled, updated_at=DbNow()))
        self.refresh_from_db(fields=["enabled", "updated_at"])
        return changed

    def full_clean(self, exclude: Any = None, *args: Any, **kwargs: Any) -> None:
        # A form excludes the fields it found errors in: clean() does not
        # judge them again from the values the form could not set.
        self._excluded = set(exclude or ())
        super().full_clean(exclude, *args, **kwargs)

    def clean(self) -> None:
        excluded: set[str] = getattr(self, "_excluded", set())
        if excluded & {"args", "kwargs"}:
            excluded = excluded | {"args", "kwargs"}  # the signature check needs both
        problems = self.field_problems().items()
        errors = {key: [text] for key, text in problems if key not in excluded}
        if errors:
            raise ValidationError(errors)

    def spec(self) -> settings_schedules.Schedule:
        """This row as the scheduler's Schedule, unchecked."""
        return settings_schedules.Schedule(
            name=self.name,
            task=self.task,
            cron=self.cron,
            timezone=self.timezone,
            args=self.args,
            kwargs=self.kwargs,
            catch_up=self.catch_up,
        )

    def problem(self) -> str | None:
        """What stops this schedule from enqueueing its runs, as it is stored; None if nothing."""
        found = self.field_problems()
        return " ".join(f"{key}: {text}" for key, text in found.items()) or None

    def field_problems(self) -> dict[str, str]:
        """What is wrong, by field: the name, the backend, the expression,
        the time zone, the arguments and the task with its signature."""
        found = name_problems(self.name)
        backend = find_backend(self.backend)
        if backend is None:
            found["backend"] = f"{self.backend!r} is not a django_dbqueue task backend in TASKS."
        # MySQL's JSON would round an integer beyond 64 bits in the stored arguments.
        integers = exact_integers(connections[router.db_for_write(type(self), instance=self)])
        schedule = self.spec()
        found.update(settings_schedules.field_problems(schedule, integers))
        if backend is None:
            return found
        if not _task_check:
            raise ImproperlyConfigured(
                "A stored schedule's task cannot be checked before django_dbqueue's app is ready "
                "(its AppConfig.ready() plugs the check in)."
            )
        found.update(_task_check[0](backend, schedule, "args" not in found))
        return found


def name_problems(name: str) -> dict[str, str]:
    if not name or name != name.strip() or "/" in name or name in (".", ".."):
        # The admin's "Run now" is a URL with the name as one path segment.
        return {
            "name": "A schedule's name may not be empty, contain '/', be '.' or '..', or start or end "
            "with a space."
        }
    # The runs are recorded by name, compared byte for byte (fields.KeyField):
    # "Report" and "rèport" are not "report", and each has runs of its own.
    if any(s.name == name for backend in backends() for s in backend.config.SCHEDULES):
        return {"name": f"The settings schedule {name!r} has this name; choose another."}
    return {}


def backends() -> list[Any]:
    from ..routing import queue_backends

    return queue_backends()


def find_backend(alias: str) -> Any:
    return next((backend for backend in backends() if backend.alias == alias), None)
