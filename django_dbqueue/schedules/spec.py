"""Recurring jobs: schedules declared in the backend's OPTIONS["SCHEDULES"]
and their cron expressions (parsed by cronsim). Enqueueing one scheduled
run is runs.py's; the schedules kept in the database are table.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from difflib import get_close_matches
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from django.core.exceptions import ImproperlyConfigured

from ..exceptions import InvalidTaskArguments, OptionsError
from ..payload import Integers, encoded_size, plain
from ..shown import shown

UTC = dt_timezone.utc  # datetime.UTC is Python 3.11+

CATCH_UP = ("latest", "all", "skip")
# A run this late or less is on time: every policy enqueues it. Later than
# this it was missed (every process was down, or the database away), and
# the schedule's catch_up policy decides.
ON_TIME = timedelta(seconds=60)
# Runs one tick enqueues at most under catch_up="all"; the rest follow on the next ticks.
MAX_PER_TICK = 1000
KEYS = {"task", "cron", "timezone", "args", "kwargs", "catch_up"}
NAME_MAX = 200  # ScheduledRun.schedule's max_length


@dataclass(frozen=True)
class Schedule:
    name: str
    task: str
    cron: str
    timezone: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    catch_up: str = "latest"

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def after(self, moment: datetime, reverse: bool = False) -> CronSim:
        """This schedule's times after (or, reversed, at and before) ``moment``, in its time zone."""
        return CronSim(self.cron, moment.astimezone(self.tz), reverse=reverse)

    def next_run(self, moment: datetime) -> datetime:
        return next(self.after(moment)).astimezone(UTC)

    def runs_due(self, after: datetime, now: datetime) -> list[datetime]:
        """The runs to enqueue now (UTC, oldest first): this schedule's
        times in (``after``, ``now``], after its catch-up policy."""
        cutoff = now - ON_TIME
        missed = []
        if after < cutoff:
            if self.catch_up == "all":
                missed = _between(self.after(after), cutoff, MAX_PER_TICK)
            else:
                # The newest missed time only: a long outage of a per-second
                # schedule is not walked through second by second.
                latest = next(self.after(cutoff, reverse=True)).astimezone(UTC)
                missed = [latest] if latest > after else []
        on_time = _between(self.after(max(after, cutoff)), now, MAX_PER_TICK)
        if self.catch_up == "skip" or (self.catch_up == "latest" and on_time):
            return on_time
        return (missed + on_time)[:MAX_PER_TICK]


def _between(times: CronSim, until: datetime, most: int) -> list[datetime]:
    found: list[datetime] = []
    for moment in times:
        moment = moment.astimezone(UTC)
        if moment > until or len(found) >= most:
            break
        found.append(moment)
    return found


def parse_schedules(raw: Any) -> tuple[Schedule, ...]:
    """OPTIONS["SCHEDULES"]: ``{name: {"task": path, "cron": expression, ...}}``.
    Each bad schedule is reported (the first mistake of each), not only the first."""
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(
            f"OPTIONS SCHEDULES must be a dict of schedules by name, not {shown(raw)}."
        )
    schedules, problems = [], []
    for name, spec in raw.items():
        try:
            schedules.append(_parse_one(name, spec))
        except ImproperlyConfigured as exc:
            problems.append(str(exc))
    if problems:
        raise OptionsError(problems)
    return tuple(schedules)


def _parse_one(name: Any, spec: Any) -> Schedule:
    from django.conf import settings

    where = f"OPTIONS SCHEDULES[{shown(name)}]"
    if not isinstance(name, str) or not name or len(name) > NAME_MAX:
        raise ImproperlyConfigured(
            f"{where}: a schedule's name must be a string of 1 to {NAME_MAX} characters."
        )
    if "/" in name or name in (".", ".."):
        # The admin's "Run now" is a URL with the name as one path segment.
        raise ImproperlyConfigured(
            f"{where}: a schedule's name may not contain '/' nor be '.' or '..', because the admin "
            "addresses each schedule by its name in a URL; rename it, for example with '-' for '/'."
        )
    if not isinstance(spec, dict):
        raise ImproperlyConfigured(f"{where} must be a dict with 'task' and 'cron', not {shown(spec)}.")
    unknown = sorted(map(str, set(spec) - KEYS))
    if unknown:
        named = [
            f"{key} (did you mean {meant[0]}?)"
            if (meant := get_close_matches(key.lower(), KEYS, 1, 0.7))
            else key
            for key in unknown
        ]
        raise ImproperlyConfigured(
            f"{where} has unknown keys {', '.join(named)}; the keys are {', '.join(sorted(KEYS))}."
        )
    schedule = Schedule(
        name=name,
        task=_text(where, "task", spec.get("task")),
        cron=_text(where, "cron", spec.get("cron")),
        timezone=_text(where, "timezone", spec.get("timezone", settings.TIME_ZONE or "UTC")),
        args=spec.get("args", []),
        kwargs=spec.get("kwargs", {}),
        catch_up=spec.get("catch_up", "latest"),
    )
    _check(where, schedule)
    return schedule


def _text(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ImproperlyConfigured(f"{where}[{key!r}] must be a non-empty string, not {shown(value)}.")
    return value


def _check(where: str, schedule: Schedule) -> None:
    for key, problem in field_problems(schedule).items():  # the first only
        joint = f"[{key!r}] " if key == "catch_up" else ": "
        raise ImproperlyConfigured(f"{where}{joint}{problem}")


def field_problems(schedule: Schedule, integers: Integers = None) -> dict[str, str]:
    """What is wrong with ``schedule``, by key (``timezone``, ``cron``,
    ``catch_up``, ``args``), in whole sentences; empty when nothing is
    (``integers``: those its database stores exactly, see exact_integers()).
    The task itself is checked where a backend is known (backend_checks.py)."""
    found: dict[str, str] = {}
    try:
        tz = schedule.tz
    except (ZoneInfoNotFoundError, ValueError):
        found["timezone"] = (
            f"{schedule.timezone!r} is not a time zone this system knows (an IANA name such as "
            "'Europe/Riga' or 'UTC')."
        )
        tz = ZoneInfo("UTC")
    try:
        CronSim(schedule.cron, datetime.now(tz))
    except CronSimError as exc:
        found["cron"] = (
            f"{schedule.cron!r} is not a cron expression cronsim accepts ({exc}). Give 5 fields "
            "(minute hour day-of-month month day-of-week) or 6 with seconds first."
        )
    if schedule.catch_up not in CATCH_UP:
        found["catch_up"] = f"must be one of {', '.join(CATCH_UP)}."
    if not isinstance(schedule.args, list) or not isinstance(schedule.kwargs, dict):
        found["args"] = "'args' must be a list and 'kwargs' a dict."
    else:
        # As enqueue() checks them: JSON that reads back the same (no NaN), of
        # integers Python writes out.
        try:
            plain(schedule.args, "'args'", integers)
            plain(schedule.kwargs, "'kwargs'", integers)
            encoded_size([schedule.args, schedule.kwargs], "'args' and 'kwargs'")
        except InvalidTaskArguments as exc:
            found["args"] = str(exc)
    return found
