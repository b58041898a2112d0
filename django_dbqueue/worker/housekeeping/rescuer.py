"""Housekeeping: return dead workers' jobs to the queue.

A job whose lease ran out belongs to a worker that died (or lost the
database for longer than a lease): it goes back READY, or ends FAILED on
its last attempt, or CANCELLED if a cancel was asked (transitions/leases.py).

Recovery waits for a grace period after the database was away: every lease
may have run out meanwhile, including live workers' that simply could not
reach the database, so they get one lease to reconnect and extend first.
That holds after this process lost its connection, and after the database
server itself restarted (its uptime is read), whoever noticed. A burst
worker, which has no heartbeat of its own to wait for, asks the same
(process/claims.py).
"""

from __future__ import annotations

import logging

from django.db import connections
from django.template.defaultfilters import pluralize

from ...db import Outage

logger = logging.getLogger("django_dbqueue")


class Rescuer:
    def __init__(self, database: str, outage: Outage, lease: float) -> None:
        self.database = database
        self.outage = outage  # the heartbeat's: when it last lost the database
        self.lease = lease

    def run_once(self) -> int:
        return recover(self.database, self.outage, self.lease)


def recover(database: str, outage: Outage, lease: float) -> int:
    """Return dead workers' jobs to the queue, unless within the grace."""
    from ...models import Job

    if recovery_grace(database, outage, lease):
        return 0
    # In chunks, each retried on conflicts, and one job's refused write isolated (leases.py).
    requeued, finished = Job.objects.using(database).recover_expired()
    if requeued or finished:
        logger.warning(
            "Recovered %d job%s from dead workers (%d back to READY, %d finished: FAILED on their "
            "last attempt, or CANCELLED as asked).",
            requeued + finished,
            pluralize(requeued + finished),
            requeued,
            finished,
        )
    return requeued + finished


def recovery_grace(database: str, outage: Outage, lease: float) -> float:
    """Seconds left before recovering expired leases is safe (0: it is now)."""
    left = outage.within(lease)
    if left:
        return left
    uptime = server_uptime(database)
    return max(0.0, lease - uptime) if uptime is not None else 0.0


def server_uptime(database: str) -> float | None:
    """Seconds since the database server started, where it says."""
    connection = connections[database]
    if connection.vendor == "mysql":
        # SHOW, not information_schema.GLOBAL_STATUS: MySQL 5.7+ dropped that
        # table (MariaDB kept it); SHOW answers on both.
        sql = "SHOW GLOBAL STATUS LIKE 'Uptime'"
    elif connection.vendor == "postgresql":
        sql = "SELECT EXTRACT(EPOCH FROM (STATEMENT_TIMESTAMP() - pg_postmaster_start_time()))"
    else:
        return None
    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
    return float(row[-1]) if row else None
