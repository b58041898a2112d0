"""Unique for a period: a task's key holds for a window of due times, even
after its job finished (``@task(unique_key=..., unique_period=...)``;
docs/scheduling.md, "Unique for a period").

Windows are the period's multiples counted from the Unix epoch in UTC (a
day's window runs from 00:00 to 24:00 UTC), and a job belongs to the window
of its ``run_after``. The holder is a row of ``UniqueWindow`` (the call's
key and the window's start), written in one transaction with its job, so
the table's unique index settles races between producers as
``Job.unique_key``'s does (enqueue/unique.py). The job itself holds no
``unique_key``: a job of the next window may be enqueued while this one
runs. A holder gives the window up when its job is pruned (retention
deletes the key with it, transitions/pruning.py) or deleted, or ends FAILED
or CANCELLED: the next call of the window then takes it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction

from ..clock import as_aware
from ..exceptions import JobAlreadyQueued
from ..limits import MAX_SECONDS
from ..retries import as_delay
from ..shown import shown
from ..status import Status
from ..tasks_api import InvalidTask
from ..transitions.inserts import insert_job
from .unique import ROUNDS  # a window taken and given up in a tight loop, as a key

if TYPE_CHECKING:
    from ..models import Job

EPOCH = datetime(1970, 1, 1, tzinfo=dt_timezone.utc)
# Holders that give their window up to the next call.
GIVEN_UP = (Status.FAILED, Status.CANCELLED)


def check_period(options: dict[str, Any]) -> None:
    """``unique_period``: 1 s to 366 days, with a ``unique_key``, not with ``debounce``."""
    period = options.get("unique_period")
    if period is None:
        return
    seconds = as_delay(period)
    if seconds is None or not 1 <= seconds <= MAX_SECONDS:
        raise InvalidTask(
            "unique_period must be a number of seconds (or a timedelta) from 1 to 31,622,400 (366 days), "
            f"not {shown(period)}."
        )
    if options.get("unique_key") is None:
        raise InvalidTask("unique_period needs a unique_key: the key is what holds for the period.")
    if options.get("debounce") is not None:
        raise InvalidTask(
            "unique_period and debounce cannot go together: a debounced job is replaced by later "
            "calls, a job unique for a period keeps its window."
        )


def window_of(due: datetime, period: float | timedelta) -> int:
    """The start of the window of ``period`` that holds ``due`` (Django's
    form), in microseconds since the Unix epoch."""
    seconds = as_delay(period) or 1.0
    step = round(seconds * 1_000_000)
    since = (as_aware(due).astimezone(dt_timezone.utc) - EPOCH) // timedelta(microseconds=1)
    return int(since // step * step)


def shown_window(key: str, window: int) -> str:
    """``key@2026-11-28T00:00:00Z``: a window as the page and messages show it."""
    from ..models import UniqueWindow

    return str(UniqueWindow(key=key, window=window))


def insert_in_window(
    job: Job,
    key: str,
    period: float | timedelta,
    using: str,
    on_duplicate: str,
    result_id: Callable[[object], str] = str,
) -> Job:
    """Insert ``job`` as the holder of ``key``'s window, and return it; or
    return the window's holder (``on_duplicate="return"``), or raise
    :class:`JobAlreadyQueued` (``"raise"``)."""
    from ..models import UniqueWindow

    window = window_of(job.run_after, period)
    held = shown_window(key, window)
    windows = UniqueWindow.objects.using(using).filter(key=key, window=window)
    jobs = type(job)._base_manager.using(using)
    for _ in range(ROUNDS):
        holder_id = windows.values_list("job_id", flat=True).first()
        if holder_id is None:
            if _inserted(job, key, window, using):
                return job
            continue  # another producer's job took it first: read it
        holder = jobs.filter(pk=holder_id).first()
        if holder is None or holder.status in GIVEN_UP:
            windows.filter(job_id=holder_id).delete()  # pruned, deleted, or given up
            continue
        if on_duplicate == "raise":
            shown_id = result_id(holder.pk)
            raise JobAlreadyQueued(
                f"The job {shown_id} ({holder.status}) holds the unique key {key!r} for the window {held!r}.",
                job_id=shown_id,
            )
        return holder
    raise IntegrityError(f"The window {held!r} was taken and given up {ROUNDS} times while enqueueing.")


def _inserted(job: Job, key: str, window: int, using: str) -> bool:
    """INSERT ``job`` and its window's row in one transaction (a savepoint in
    the caller's); False, and nothing written, if the window was taken."""
    from ..models import UniqueWindow

    try:
        with transaction.atomic(using=using):
            insert_job(job, using)
            try:
                with transaction.atomic(using=using):
                    UniqueWindow.objects.using(using).create(key=key, window=window, job_id=job.pk)
            except IntegrityError as exc:
                raise WindowTaken from exc  # and the job's INSERT rolls back with it
    except WindowTaken:
        job.pk = None
        job._state.adding = True
        return False
    return True


class WindowTaken(Exception):
    """Another producer's job holds the window: roll this one's INSERT back."""
