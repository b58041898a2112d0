"""Which jobs are in which state: the filters every transition starts from,
and what the transition modules share.

Rows read with ``.annotate(db_now=DbNow())`` carry the database's now as
``job.db_now``, which the type checker cannot see on a Job: hence the
``type: ignore[attr-defined]`` where the transitions read it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import models
from django.db.models import OuterRef

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


class IndexedStatus(models.Func):
    """A job's ``status`` as a partial index of the job table holds it.
    PostgreSQL and SQLite index the status itself, for the rows the index
    serves (``WHERE concurrency_key IS NOT NULL``). MySQL and MariaDB have
    no partial indexes and their optimizers do not see that a virtual
    column's expression is the status: the index is on that virtual column
    (``column``, the status where the key is set, NULL elsewhere), and a
    query must name it to use both parts of the index."""

    template = "%(expressions)s"
    output_field = models.CharField()

    def __init__(self, column: str) -> None:
        super().__init__(models.F("status"))
        self.column = column

    def as_mysql(self, compiler, connection, **extra_context):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        status, params = compiler.compile(self.get_source_expressions()[0])
        if not has_virtual_status(connection):
            return status, params
        return f"{status.rsplit('.', 1)[0]}.{connection.ops.quote_name(self.column)}", params


_VIRTUAL_STATUS: dict[tuple[str, str], bool] = {}


def has_virtual_status(connection: Any) -> bool:
    """Whether this MySQL/MariaDB database's job table has migration 0020's
    virtual columns: a table made from the models without migrations (a
    test database with ``"MIGRATE": False``) has plain indexes instead, and
    the queries then name ``status``. Asked once per database a process uses."""
    key = (connection.alias, str(connection.settings_dict["NAME"]))
    if key not in _VIRTUAL_STATUS:
        from ..tables import job

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.columns "
                "WHERE table_schema = DATABASE() AND table_name = %s AND column_name = 'keyed_status'",
                [job()._meta.db_table],
            )
            _VIRTUAL_STATUS[key] = bool(cursor.fetchone()[0])
    return _VIRTUAL_STATUS[key]


def forget_virtual_status(**kwargs: Any) -> None:
    """post_migrate's receiver: ask again, the table may have changed."""
    _VIRTUAL_STATUS.clear()


def keyed(
    rows: models.QuerySet, keys: list[str] | models.Expression | OuterRef, statuses: Iterable[str]
) -> Any:
    """``rows`` of the concurrency ``keys`` (a list, or one key as an
    expression: an OuterRef) in ``statuses``, read through the partial key
    index (migration 0020). Any queryset of jobs: transitions read through
    ``_base_manager``, which is no JobRows."""
    by_key = {"concurrency_key__in": keys} if isinstance(keys, list) else {"concurrency_key": keys}
    return rows.filter(**by_key).alias(keyed=IndexedStatus("keyed_status")).filter(keyed__in=list(statuses))


def of_batch(
    rows: models.QuerySet, batch_id: int | models.Expression | OuterRef, statuses: Iterable[str]
) -> Any:
    """The members of ``batch_id`` among ``rows`` in ``statuses``, read
    through the partial batch index (migration 0020)."""
    indexed = IndexedStatus("batched_status")
    return rows.filter(batch_id=batch_id).alias(batched=indexed).filter(batched__in=list(statuses))
