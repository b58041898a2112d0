"""A changelist paginator that never counts a big table row by row.

InnoDB keeps no row count: ``COUNT(*)`` reads a whole index, about a second
per million jobs on every page view. Past a cap this paginator uses the
database's own estimate instead and says so (``estimated``), which is all a
pager needs to draw its page links.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any, cast

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet

# Up to this many rows an exact count is cheap: it reads at most CAP index entries.
CAP = 10_000


class EstimatedCountPaginator(Paginator):
    estimated = False

    @cached_property
    def count(self) -> int:
        queryset = cast(QuerySet, self.object_list)
        if not queryset.query.where:
            table_estimate = estimate_table_rows(queryset)
            if table_estimate is not None and table_estimate > CAP:
                self.estimated = True
                return table_estimate
        # Counting a slice reads at most CAP + 1 entries, however many match.
        capped = queryset.order_by().values("pk")[: CAP + 1].count()
        if capped <= CAP:
            return capped
        self.estimated = True
        return max(CAP + 1, estimate_query_rows(queryset) or 0)


def estimate_table_rows(queryset: QuerySet) -> int | None:
    """The table's row count as the database's statistics have it, or None."""
    connection = connections[queryset.db]
    table = queryset.model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute(
                "SELECT table_rows FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = %s",
                [table],
            )
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = %s", [table])
        else:
            return None
        row = cursor.fetchone()
    # PostgreSQL says -1 for a table never analysed.
    return int(row[0]) if row and row[0] is not None and row[0] >= 0 else None


def estimate_query_rows(queryset: QuerySet) -> int | None:
    """How many rows the planner expects ``queryset`` to return, or None."""
    connection = connections[queryset.db]
    sql, params = queryset.order_by().query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            # A table of rows, whatever the session's explain_format (TREE
            # by default on MySQL 9); MariaDB accepts the clause too.
            cursor.execute("EXPLAIN FORMAT=TRADITIONAL " + sql, params)
            names = [column[0].lower() for column in cursor.description]
            return explained_rows(dict(zip(names, cursor.fetchone(), strict=True)))
        if connection.vendor == "postgresql":
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            plan = cursor.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            return int(plan[0]["Plan"]["Plan Rows"])
    return None


def explained_rows(first: dict[str, Any]) -> int:
    """The rows the first line of a MySQL or MariaDB EXPLAIN expects: MySQL
    gives ``rows`` and ``filtered`` as numbers, MariaDB as text (and
    ``filtered`` may be missing or NULL)."""
    return int(float(first.get("rows") or 0) * float(first.get("filtered") or 100) / 100)
