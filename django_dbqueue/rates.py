"""Rate limits: "at most N jobs of one key claimed in any window of a
period", written as ``"100/m"`` (also ``"N/s"``, ``"N/h"``, ``"N/d"``, and
a period of several units, ``"10/5m"``).

A key of limit N/P owns up to N slot rows (``RateSlot``), each with the
time it is next free, made as claims need them. A claim locks free slots with SKIP LOCKED, claims as many of
the key's due jobs, and moves each slot it used to now + P, in one
transaction (transitions/rated.py). A slot serves at most one claim per
period, so N slots serve at most N claims in any window of P, sliding: no
burst at window edges. Claimers take different slots, so no row is hot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from .shown import shown

RATE_KEY_MAX = 191  # Job.rate_key's and RateSlot.key's max_length (enqueue/keys.py: why)
RATE_LIMIT_MAX = 16  # Job.rate_limit's max_length
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# A rate far above what one database claims would only make slot rows.
MAX_COUNT = 100_000
# The longest period, a leap year: enough for "once a year". A slot moves a
# period on at each claim, and the database holds no time past 9999, so a
# period of thousands of years ("1/4000000d") could not be stored at all.
MAX_PERIOD_DAYS = 366
MAX_PERIOD = MAX_PERIOD_DAYS * UNITS["d"]
QUEUE_PREFIX = "queue:"
TASK_PREFIX = "task:"

_FORM = re.compile(r"(\d+)/(\d*)([smhd])")


class Rate(NamedTuple):
    number: int
    seconds: int


# The limit a claim uses for a row whose rate_limit is NULL or unreadable
# (only SQL can write one): "1/s".
FALLBACK = Rate(1, 1)


def parse_rate(text: Any, name: str = "rate_limit") -> Rate:
    """``"100/m"`` as ``Rate(100, 60)``; ValueError naming ``name`` and the
    accepted forms for anything else."""
    rate = _read(text)
    if rate is None:
        raise ValueError(
            f"{name} must be a count of at least 1 (at most {MAX_COUNT:,}) per period, such as '100/m', "
            f"'5/s', '1000/h', '10000/d' or '30/5m', not {shown(text)}."
        )
    if rate.seconds > MAX_PERIOD:
        raise ValueError(
            f"{name} {text!r} has a period of {rate.seconds:,} seconds; a period is at most "
            f"{MAX_PERIOD_DAYS} days ('1/{MAX_PERIOD_DAYS}d'), as a slot is next free a period after "
            "its claim and the database holds no time past the year 9999."
        )
    return rate


def _read(text: Any) -> Rate | None:
    found = _FORM.fullmatch(text) if isinstance(text, str) and len(text) <= RATE_LIMIT_MAX else None
    if found is None:
        return None
    count, every = int(found[1]), int(found[2] or 1)
    if 1 <= count <= MAX_COUNT and every >= 1:
        return Rate(count, every * UNITS[found[3]])
    return None


def rate_or_fallback(text: str | None) -> Rate:
    """The rate of a job row, which may hold anything SQL wrote: one whose
    period is longer than MAX_PERIOD counts as MAX_PERIOD (the nearest
    rate a claim can keep); one no worker can read counts as FALLBACK."""
    rate = _read(text) or FALLBACK
    return Rate(rate.number, min(rate.seconds, MAX_PERIOD))


def parse_rate_limits(value: Any) -> dict[str, str]:
    """OPTIONS RATE_LIMITS: ``{"queue:email": "100/m", "partner-api": "10/s"}``,
    a limit per rate key; ``queue:NAME`` limits a whole queue."""
    if not isinstance(value, Mapping):
        raise ValueError(
            f"OPTIONS RATE_LIMITS must be a dict of limits by rate key, such as "
            f'{{"queue:email": "100/m"}}, not {shown(value)}.'
        )
    problems = []
    for key, limit in value.items():
        if not isinstance(key, str) or not key or len(key) > RATE_KEY_MAX:
            problems.append(
                f"OPTIONS RATE_LIMITS has the key {shown(key)}; a rate key is a non-empty string of at most "
                f"{RATE_KEY_MAX} characters."
            )
            continue
        try:
            parse_rate(limit, f"OPTIONS RATE_LIMITS[{key!r}]")
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError(" ".join(problems))
    return dict(value)
