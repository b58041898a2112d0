"""A worker riding out a database outage.

A worker that lets an outage escape dies, and its supervisor restarts it
into the same outage (db.py). Instead its loop waits here, with backoff,
until the database answers writes again, then gives back whatever the
worker holds but has not started: a claim whose commit reached the server
but whose reply did not, or a release that never arrived.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ...db import DB_ERRORS, Outage, check_writable, drop_connection, is_outage

logger = logging.getLogger("django_dbqueue")


def ride_out(
    exc: BaseException,
    database: str,
    outage: Outage,
    *,
    wait: Callable[[float], object],
    stopping: Callable[[], bool],
    give_back: Callable[[], None],
    who: str,
) -> None:
    """Wait (``wait(seconds)``, which a stop cuts short) until the database
    takes writes again and ``give_back()`` has run, or until ``stopping()``."""
    from ...models import Job

    while True:
        drop_connection(database)
        wait(outage.lost(exc))
        if stopping():
            logger.warning(
                "Worker %s stopping while the database is away; jobs it claimed "
                "return to the queue when their lease expires.",
                who,
            )
            return
        try:
            give_back()
            # A server made read-only answers the reads above: back means back for writes.
            check_writable(database, Job._meta.db_table)
        except DB_ERRORS as again:
            if not is_outage(again, database):
                raise
            exc = again
            continue
        outage.restored()
        return
