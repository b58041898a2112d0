"""The autoscaling signal: one SQL query that an autoscaler (KEDA's ``mysql``
or ``postgresql`` scaler, or a Prometheus exporter's) runs to size a worker
pool, printed by ``manage.py queuestats --scaler-query`` (docs/runqueue.md,
"Autoscaling").

It counts the jobs that want a worker now: READY jobs that are due, plus the
RUNNING ones. Counting only what waits would scale a busy pool to zero in
the middle of its jobs, whose workers the scale-down then stops (a deploy's
stop, with ``--stop-timeout``, but still a stop). Both counts read only the
claim index (status, queue_name, ..., run_after): a range of it per queue,
with ``run_after`` compared inside the index, never a row of the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..status import Status


def scaler_query(vendor: str, table: str, queues: Sequence[str] = (), use_tz: bool = True) -> str:
    """The query for a database of ``vendor`` (Django's: ``mysql`` for MySQL
    and MariaDB, ``postgresql``), over ``queues`` (none: every queue). The
    database's own clock decides what is due: UTC on MySQL and MariaDB with
    ``USE_TZ = True``; the session's local time (``NOW(6)``) with ``USE_TZ =
    False``, whose rows hold local time."""
    names = ", ".join(_literal(name) for name in queues)
    where = f" AND queue_name IN ({names})" if queues else ""
    if vendor == "postgresql":
        now = "STATEMENT_TIMESTAMP()"
    elif vendor == "mysql":
        now = "UTC_TIMESTAMP(6)" if use_tz else "NOW(6)"
    else:
        raise ValueError(f"The scaler query is written for MySQL, MariaDB and PostgreSQL, not {vendor!r}.")
    return (
        f"SELECT (SELECT COUNT(*) FROM {table} WHERE status = '{Status.READY}'{where} AND run_after <= {now})"
        f" + (SELECT COUNT(*) FROM {table} WHERE status = '{Status.RUNNING}'{where}) AS wanted"
    )


def _literal(name: str) -> str:
    """A queue name as an SQL string literal, quotes doubled; backslashes too,
    which MySQL reads as escapes (unless NO_BACKSLASH_ESCAPES)."""
    if "\\" in name:
        raise ValueError(f"A queue name with a backslash cannot go into the scaler query: {name!r}.")
    return "'" + name.replace("'", "''") + "'"
