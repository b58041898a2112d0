"""Reads from a replica: which alias the admin's lists, its dashboard and
``queuestats`` read (OPTIONS READ_DATABASE), and how far behind that
replica is.

Only reads that decide nothing go there. Claims, outcomes, leases, the
admin's actions and the job page's buttons all use the queue's own
DATABASE: a replica a few seconds behind would offer jobs that already
ran, and a write there would fork it from its primary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections

if TYPE_CHECKING:
    from .backend import DatabaseBackend


def read_database(backend: DatabaseBackend) -> str:
    """The alias ``backend``'s lists and statistics are read from."""
    return backend.config.READ_DATABASE or backend.database


@dataclass(frozen=True)
class ReplicaLag:
    """What a replica says of its replication: ``seconds`` behind its
    primary, or ``None`` with ``problem`` saying why there is no figure."""

    alias: str
    seconds: float | None
    problem: str | None = None
    # False when the replica's status could not be read at all (a missing
    # privilege, an engine without replicas): then it may still replicate.
    known: bool = True

    @property
    def text(self) -> str:
        if self.seconds is not None:
            return f"replica lag: {self.seconds:g} s"
        if not self.known:
            return f"replica lag unknown ({self.problem})"
        return f"replica not replicating ({self.problem})"

    def as_json(self) -> dict[str, Any]:
        return {
            "database": self.alias,
            "lag_seconds": self.seconds,
            "problem": self.problem,
            "text": self.text,
        }


def replica_lag(alias: str) -> ReplicaLag:
    """The lag of the replica behind ``alias``, read from the replica itself."""
    connection = connections[alias]
    try:
        if connection.vendor == "mysql":
            return _mysql_lag(alias, connection)
        if connection.vendor == "postgresql":
            return _postgresql_lag(alias, connection)
    except DatabaseError as exc:
        return ReplicaLag(alias, None, f"its replication status cannot be read: {exc}", known=False)
    return ReplicaLag(alias, None, f"{connection.display_name} has no replicas", known=False)


def _mysql_lag(alias: str, connection: Any) -> ReplicaLag:
    with connection.cursor() as cursor:
        try:
            cursor.execute("SHOW REPLICA STATUS")  # MariaDB 10.5.1+, MySQL 8.0.22+
        except DatabaseError:
            cursor.execute("SHOW SLAVE STATUS")
        names = [column[0] for column in cursor.description or ()]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    if not rows:
        return ReplicaLag(alias, None, "the server is not a replica: SHOW REPLICA STATUS is empty")
    lags = []
    for row in rows:  # a MariaDB multi-source replica has one row per primary
        io_running = _first(row, "Slave_IO_Running", "Replica_IO_Running")
        sql_running = _first(row, "Slave_SQL_Running", "Replica_SQL_Running")
        behind = _first(row, "Seconds_Behind_Master", "Seconds_Behind_Source")
        if io_running != "Yes" or sql_running != "Yes" or behind is None:
            error = _first(row, "Last_IO_Error", "Last_SQL_Error") or ""
            threads = f"IO thread: {io_running}, SQL thread: {sql_running}"
            return ReplicaLag(alias, None, f"{threads}{'; ' + error if error else ''}")
        lags.append(float(behind))
    return ReplicaLag(alias, max(lags))


def _postgresql_lag(alias: str, connection: Any) -> ReplicaLag:
    with connection.cursor() as cursor:
        # Replay lag: how old the last replayed transaction is; on an idle
        # primary this grows although nothing is missing, hence the second
        # figure: nothing received is left to replay.
        cursor.execute(
            "SELECT pg_is_in_recovery(), "
            "EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()), "
            "pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()"
        )
        in_recovery, behind, caught_up = cursor.fetchone()
    if not in_recovery:
        return ReplicaLag(alias, None, "the server is not a standby: pg_is_in_recovery() is false")
    if caught_up:
        return ReplicaLag(alias, 0.0)
    if behind is None:
        return ReplicaLag(alias, None, "the standby has replayed no transaction yet")
    return ReplicaLag(alias, round(max(float(behind), 0.0), 1))


def _first(row: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in row:
            return row[name]
    return None


def lag_of(backend: DatabaseBackend) -> ReplicaLag | None:
    """The read alias's lag, or None when the backend reads its own DATABASE."""
    alias = read_database(backend)
    return None if alias == backend.database else replica_lag(alias)
