"""The bounds of the numbers and times a setting, a task option or a call
may give, shared by the checks of each (options.py, enqueue/validation.py,
enqueue/keys.py) so that the same value is refused alike everywhere.

Past these, a value would overflow the arithmetic it feeds (a time past the
year 9999, a wait longer than a thread can wait) or a column that stores it,
and what refused it would be the database, or a worker's crash, instead of
a message naming it."""

from __future__ import annotations

from datetime import datetime

# The largest whole number a job's integer columns hold on every database
# (PostgreSQL's integer and the SQL procedure's INT are signed 32-bit):
# max_attempts, concurrency_limit.
COLUMN_MAX = 2**31 - 1


# The longest anything in seconds may be (a lease, a timeout, a wait): a
# leap year. No wait of a queue is longer, and much longer ones overflow
# the times and waits they feed (the database's now + LEASE_SECONDS, a
# thread's wait, a timer).
MAX_SECONDS = 366 * 86400
# The shortest: a millisecond (the database's clock counts microseconds).
MIN_SECONDS = 0.001
# A run_after a day inside the years Python and every database hold (1 to
# 9999), so that it still converts to the time zone of any reader.
EARLIEST = datetime(1, 1, 2)
LATEST = datetime(9999, 12, 30)


def counted(attempts: int) -> int:
    """A job's attempts once one more run is counted, never past
    COLUMN_MAX: a row written by SQL may already hold the column's largest,
    and the UPDATE that counts one more would fail, for its batch too."""
    return attempts + 1 if attempts < COLUMN_MAX else attempts
