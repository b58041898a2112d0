"""READY rows holding a time Python cannot read, failed without reading it.

A row written by SQL may hold a time that the database keeps and Python's
datetime does not: PostgreSQL's ``-infinity`` and years before 1 or after
9999, SQLite's text of any shape. Reading such a row raises in the
driver's conversion, inside the claim, for every worker that meets it: the
claim never gets to the job to fail it. So a claim that fails that way
(worker/process/claims.py) calls ``fail_unreadable()``, which finds the doubtful
rows by comparing in SQL, reads each one's time again to be sure it does
not read, and fails the job naming the column and the time as text. The
column is set to a time every reader can read (the database's now, or
NULL where allowed), so that the admin, ``get_result()`` and retention
read the row afterwards; the stored text stays in the error. No claim
pays for this: it runs only after one failed.

A cancel request is the one time a producer may write on a RUNNING job
(docs/sql-contract.md): ``mend_cancel_times()`` makes it readable when the
heartbeat posts it to the worker.
"""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from django.conf import settings
from django.db import DataError, connections, models, transaction
from django.db.models import ExpressionWrapper, Q
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast
from django.utils.timezone import make_aware

from ..clock import DbNow, read_database_now
from ..limits import EARLIEST, LATEST
from ..payload import bounded_text
from ..status import Status
from .cascade import jobs_finished
from .rows import READY, JobRows

NOT_RUNNABLE = "django_dbqueue.exceptions.JobNotRunnable"
# Rows failed per column and call: the next failed claim takes the next ones.
BATCH = 100


class UnreadableQuerySet(JobRows):
    def fail_unreadable(self, queues: list[str], owner: str) -> int:
        """Fail the READY jobs of ``queues`` with a time Python cannot read
        in any column, each alone, in a transaction of its own; the number failed."""
        rows = self.model._base_manager.using(self.db).filter(status=READY, queue_name__in=queues)
        failed = 0
        for field in self.model._meta.concrete_fields:
            if not isinstance(field, models.DateTimeField):
                continue
            name = field.name
            suspects = rows.filter(doubtful(field, connections[self.db]))
            text = Cast(name, models.CharField())
            for pk, stored in suspects.annotate(text=text).values_list("pk", "text")[:BATCH]:
                if not _readable(rows.filter(pk=pk), field):
                    failed += self._fail_one(pk, name, stored, None if field.null else DbNow(), owner)
        return failed

    def mend_cancel_times(self, ids: list[int]) -> int:
        """Set to the database's now the cancel requests of the jobs ``ids``
        whose time Python may not read, so that whoever reads it (the
        stopped job's outcome, the supervisor, lease recovery) can. One
        UPDATE per cancel posted to a worker: no claim pays for it."""
        field: Any = self.model._meta.get_field("cancel_requested_at")
        rows = self.model._base_manager.using(self.db).filter(pk__in=ids)
        return rows.filter(doubtful(field, connections[self.db])).update(cancel_requested_at=DbNow())

    def _fail_one(self, pk: int, name: str, stored: str, readable: Any, owner: str) -> int:
        message = (
            f"The job's {name} holds {stored!r}, a time Python cannot read (before the year 1 or "
            "after 9999, or not a time at all), so it cannot run. The row was written by SQL: "
            f"write a time between {EARLIEST.date()} and {LATEST.date()} and enqueue it again."
        )
        error = {
            "exception_class_path": NOT_RUNNABLE,
            "traceback": bounded_text(f"{NOT_RUNNABLE}: {message}\n"),
            "at": read_database_now(self.db).isoformat(),
            "worker": owner,
        }
        rows = self.model._base_manager.using(self.db).filter(pk=pk, status=READY)
        with transaction.atomic(using=self.db):
            updated = rows.update(
                status=Status.FAILED, finished_at=DbNow(), errors=[error], unique_key=None, **{name: readable}
            )
            if updated:
                jobs_finished(self.db, [pk])  # a batch or dependants (not an SQL row's, by the contract)
        return updated


# What reading a time Python cannot hold raises: the driver's DataError
# (PostgreSQL), or the conversion's ValueError, OverflowError or, for text
# that does not parse at all, AttributeError (SQLite).
READ_ERRORS = (DataError, ValueError, TypeError, OverflowError, AttributeError)


def doubtful(field: Any, connection: Any) -> Q:
    """Rows whose ``field`` may not read: outside the years Python holds,
    with a day's margin (a time zone's offset), or, on SQLite, text its own
    datetime() cannot parse. ``fail_unreadable()`` reads each again
    before it fails the job; the scheduler skips such a schedule."""
    name = field.name
    found = Q(**{f"{name}__lt": _bound(EARLIEST)}) | Q(**{f"{name}__gt": _bound(LATEST)})
    if connection.vendor == "sqlite":
        column = connection.ops.quote_name(str(field.column))
        garbled = RawSQL(f"{column} IS NOT NULL AND datetime({column}) IS NULL", [])
        found |= Q(ExpressionWrapper(garbled, output_field=models.BooleanField()))
    return found


def _readable(row: models.QuerySet, field: models.DateTimeField) -> bool:
    try:
        value = list(row.values_list(field.name, flat=True))
    except READ_ERRORS:
        return False
    return field.null or None not in value


def _bound(moment: datetime) -> datetime:
    return make_aware(moment, dt_timezone.utc) if settings.USE_TZ else moment
