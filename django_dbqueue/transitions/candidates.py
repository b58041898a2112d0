"""The candidate loop that both claims share, the workers' (``JobQuerySet``'s
claim, claim.py) and claim-for-review's (review.py).

Read candidate ids by a plain read that locks nothing, then lock just those
rows by primary key with SKIP LOCKED; when others took every one of them
meanwhile, read again past them. A single locking ``SELECT ... ORDER BY ...
LIMIT`` that no index serves (several queues, or any filter) would lock
every row it sorts, and starve every other claimer until it commits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.db import models

Rows = TypeVar("Rows", bound=models.QuerySet[Any])
Claimed = TypeVar("Claimed")

# How many times a claimer looks past candidates that others took meanwhile.
CANDIDATE_ROUNDS = 8


def first_free(
    read_ids: Callable[[list[Any]], list[Any]],
    lock: Callable[[list[Any]], list[Claimed]],
) -> list[Claimed]:
    """``read_ids(taken)`` picks candidate ids by a plain read, past the ids
    ``taken`` (``past()``); ``lock(ids)`` locks those nobody holds and
    marks them, in one short transaction, and returns what it claimed.
    Empty when there is nothing left to read, or after CANDIDATE_ROUNDS
    reads whose rows all went to others."""
    taken: list[Any] = []
    for _ in range(CANDIDATE_ROUNDS):
        ids = read_ids(taken)
        if not ids:
            return []
        claimed = lock(ids)
        if claimed:
            return claimed
        taken.extend(ids)  # all claimed by others meanwhile: look further on
    return []


def past(rows: Rows, taken: list[Any]) -> Rows:
    """``rows`` but those of ``taken``: the candidates left after a round."""
    return rows.exclude(pk__in=taken) if taken else rows
