"""Which jobs are in which state: the filters every transition starts from,
and what the transition modules share.

Rows read with ``.annotate(db_now=DbNow())`` carry the database's now as
``job.db_now``, which the type checker cannot see on a Job: hence the
``type: ignore[attr-defined]`` where the transitions read it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import models
from django.db.models.expressions import RawSQL

from ..clock import DbNow
from ..status import FINISHED, Status

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..models import Job  # noqa: F401 (JobRows names it, as a string)

READY, RUNNING = Status.READY, Status.RUNNING
DEFAULT_LEASE = 60.0


class JobRows(models.QuerySet["Job", "Job"]):
    def ready(self) -> Self:
        return self.filter(status=READY)

    def due(self, now: datetime | None = None) -> Self:
        """READY jobs due at ``now`` (default: the database's now)."""
        return self.ready().filter(run_after__lte=now or DbNow())

    def keys_round(self, column: str, limit: int, after: str = "") -> list[str]:
        """Up to ``limit`` distinct values of the key ``column`` among these
        rows, in the database's order: those after ``after``, then from the
        first. A worker passes the last key of its previous look, so that
        its looks go round every key and none waits for ever, however many
        there are (one per customer, say)."""

        def first(rows: JobRows, n: int) -> list[str]:
            return list(rows.order_by(column).values_list(column, flat=True).distinct()[:n])

        keys = first(self.filter(**{f"{column}__gt": after}), limit) if after else first(self, limit)
        if after and len(keys) < limit:
            keys += first(self.filter(**{f"{column}__lte": after}), limit - len(keys))
        return keys

    def unlimited(self) -> Self:
        """Jobs without a concurrency limit, a rate limit or a fairness key:
        the ordinary claim's. For the claim index ``concurrency_key IS NULL
        AND rate_key IS NULL AND fairness_key IS NULL`` are equalities, so
        the claim reads these in claim order as before; limited jobs are
        claimed by ``claim_limited()`` and ``claim_rated()``, fair ones by
        fair.py."""
        return self.filter(concurrency_key__isnull=True, rate_key__isnull=True, fairness_key__isnull=True)

    def running(self) -> Self:
        return self.filter(status=RUNNING)

    def held_by(self, owner: str) -> list[int]:
        """The ids of these jobs RUNNING under ``owner``'s name."""
        return list(self.running().filter(owner=owner).values_list("pk", flat=True))

    def finished(self) -> Self:
        return self.filter(status__in=FINISHED)


def listed(ids: Iterable[int]) -> RawSQL:
    """``ids`` for a ``pk__in=`` lookup, written into the SQL as digits
    (``int()`` admits nothing else). Django prepares each value of a plain
    list as a lookup value and the driver escapes it as a parameter: for a
    claim of 200 ids, that showed in the worker's profile."""
    return RawSQL(", ".join([str(int(pk)) for pk in ids]) or "NULL", [])
