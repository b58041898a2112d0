"""Expiry: a deadline for a job's run to start (``expires=``, docs/tasks.md
"Expiry"). A task may give a duration (seconds, or a ``timedelta``) that
counts from each enqueue; a call may give a duration or an instant
(``.using(expires=...)``). The deadline is worked out at enqueue on the
database's clock and written to ``Job.expires_at``; a worker that claims the
job later ends it CANCELLED with a ``JobExpired`` entry, without running it
(worker/process/stops.py).

A deadline the job could never meet is refused where it is given: one
already past, one not after the job's ``run_after``, and one past the
years every database holds."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

from django.conf import settings
from django.utils.timezone import is_aware

from ..clock import as_stored
from ..limits import LATEST
from ..shown import shown
from ..tasks_api import InvalidTask

Expires = float | timedelta | datetime


def check_expires(value: Any, per_call: bool) -> None:
    """``expires`` as a task (``per_call`` false) or a call gives it: a
    positive duration, or for one call an instant as ``run_after`` takes it."""
    if value is None:
        return
    if isinstance(value, datetime):
        if not per_call:
            raise InvalidTask(
                "expires in @task must be a duration (seconds, or a timedelta) counted from each "
                "enqueue; an instant is a time, not a default: give it for one call with "
                "task.using(expires=...)."
            )
        if settings.USE_TZ and not is_aware(value):
            raise InvalidTask(
                f"expires must be an aware datetime with USE_TZ = True, not {value.isoformat()}."
            )
        return
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        raise InvalidTask(
            "expires must be a number of seconds, a timedelta"
            f"{' or a datetime' if per_call else ''}, or None, not {shown(value)}."
        )
    if seconds <= 0:
        raise InvalidTask(
            f"expires must be a duration after the enqueue, more than 0 seconds, not {shown(value)}."
        )


def deadline(expires: Expires, now: datetime, run_after: datetime) -> datetime:
    """The ``expires_at`` of a job enqueued at ``now`` (the database's time,
    in Django's form) and due at ``run_after``."""
    if isinstance(expires, datetime):
        at = _stored(expires)
    else:
        seconds = expires.total_seconds() if isinstance(expires, timedelta) else float(expires)
        try:
            at = now + timedelta(seconds=seconds)
        except OverflowError:
            at = None
    utc = _utc(at) if at is not None else None
    if at is None or utc is None or utc > LATEST:
        raise InvalidTask(
            f"expires {shown(expires)} puts the deadline past {LATEST.date()} (UTC), outside the years "
            "every database holds."
        )
    if at <= now:
        raise InvalidTask(
            f"expires {_told(expires)} is already past at enqueue (the database's time is "
            f"{now.isoformat()}): the job could never run."
        )
    if at <= run_after:
        raise InvalidTask(
            f"expires {_told(expires)} is not after the job's run_after ({run_after.isoformat()}): "
            "the job could never run."
        )
    return at


def _stored(moment: datetime) -> datetime | None:
    try:
        return as_stored(moment)
    except OverflowError:  # an offset that takes it past the year 9999
        return None


def _utc(moment: datetime) -> datetime | None:
    """``moment`` as naive UTC (a naive one as it is); None past the year 9999."""
    if not is_aware(moment):
        return moment
    try:
        return moment.astimezone(dt_timezone.utc).replace(tzinfo=None)
    except OverflowError:
        return None


def _told(expires: Expires) -> str:
    return expires.isoformat() if isinstance(expires, datetime) else f"({shown(expires)})"
