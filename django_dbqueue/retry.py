"""Backoff for failed jobs, and retrying transactions that lose a lock race."""

import logging
import random
import time
from collections.abc import Callable
from datetime import timedelta

from django.db import OperationalError, connections

logger = logging.getLogger("django_dbqueue")

# MySQL/MariaDB: ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT.
MYSQL_CONFLICTS = {1213, 1205}
# PostgreSQL: deadlock_detected, serialization_failure, lock_not_available.
POSTGRES_CONFLICTS = {"40P01", "40001", "55P03"}


def retry_delay(attempts: int, base: float, cap: float) -> timedelta:
    """Exponential backoff with jitter: ``base * 2**(attempts-1)``, capped,
    then a random point in its upper half so failed jobs do not retry in step."""
    ceiling = min(cap, base * 2 ** max(attempts - 1, 0))
    return timedelta(seconds=random.uniform(ceiling / 2, ceiling))


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a deadlock or lock timeout that a retry may cure."""
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    code = getattr(cause, "args", (None,))[0] if cause is not None else None
    if code in MYSQL_CONFLICTS or getattr(exc, "args", (None,))[0] in MYSQL_CONFLICTS:
        return True
    if getattr(cause, "sqlstate", None) in POSTGRES_CONFLICTS:
        return True
    # SQLite serialises writers; a busy database is worth another try.
    return "database is locked" in str(exc)


def retry_on_conflict[T](fn: Callable[[], T], using: str, tries: int = 8) -> T:
    """Run ``fn`` (one whole transaction) again when the database picks it as
    a deadlock victim. Only safe outside the caller's own transaction: InnoDB
    has already rolled back everything the caller did, so there we re-raise."""
    for attempt in range(1, tries + 1):
        try:
            return fn()
        except OperationalError as exc:
            if connections[using].in_atomic_block or not is_conflict(exc) or attempt == tries:
                raise
            logger.debug("Retrying after a lock conflict (%s), try %d.", exc, attempt)
            time.sleep(random.uniform(0, 0.01 * 2**attempt))
    raise AssertionError("unreachable")
