"""A rate slot given back with a job that never started.

A rate-limited claim moves one of its key's slots a period on for each job
it takes (rated.py), all from one now: the claim's, which the jobs keep as
``claimed_at``. The limit holds claims, and a job given back unstarted
(``release()``: the unstarted rest of a batch behind a slow job, a stopping
worker's, a lost atomic group's) was never run, so its claim should not
count: left spent, a key's slots go to jobs that sit READY again, and a
backlog falls behind its rate for good (60 a minute across processes timed
out so).

The slot to give back is the one the job's claim moved: free a period
after the job's ``claimed_at``. Giving back a slot another claim moved
later instead would let N + 1 claims into one window. A job whose slot
cannot be told (the limit changed since its claim, or another release gave
it back already) leaves the slots as they are: the window only gets
stricter, as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.db import models

from .. import tables
from ..rates import rate_or_fallback

# A released job's rate key, the limit its row carries, and its claim's now.
RatedClaim = tuple[str, str | None, datetime]


def rated_claims(mine: models.QuerySet) -> list[RatedClaim]:
    """Of ``mine`` (jobs about to be released), the rate-limited ones,
    locked so that they are still the claimer's when released: a row with
    a concurrency key too is claimed under that limit, which takes no slot."""
    rated = mine.filter(rate_key__isnull=False, concurrency_key=None, claimed_at__isnull=False)
    return list(rated.select_for_update().values_list("rate_key", "rate_limit", "claimed_at"))


def give_back_slots(using: str, claims: Iterable[RatedClaim], limits: Mapping[str, str]) -> int:
    """Free again, at its claim's time, the slot each of ``claims`` took;
    ``limits`` are OPTIONS RATE_LIMITS, which the claim applied over the
    rows' own. Returns how many slots were given back."""
    RateSlot = tables.rate_slot()

    slots = RateSlot.objects.using(using)
    taken: Counter[tuple[str, datetime, datetime]] = Counter()
    for key, limit, claimed_at in claims:
        period = rate_or_fallback(limits.get(key) or limit).seconds
        taken[key, claimed_at, claimed_at + timedelta(seconds=period)] += 1
    given = 0
    for (key, claimed_at, free_at), count in taken.items():
        ours = slots.filter(key=key, free_at=free_at)
        pks = list(ours.order_by("slot").values_list("pk", flat=True)[:count])
        if pks:
            # Free since the claim: the slot was free then.
            given += ours.filter(pk__in=pks).update(free_at=claimed_at)
    return given
