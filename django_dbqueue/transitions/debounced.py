"""A debounced call meets the job that holds its key (enqueue/unique.py,
debounce.py): the holder not yet claimed takes the call (a later due time,
and the call's arguments); one that has started gives its key up, so that
the call's own job can take it. Each is one conditional UPDATE, so a claim
that takes the holder between our read and our write wins, and we read again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..status import Status


def take_call(rows: Any, pk: int, key: str | None, due: datetime, arguments: dict[str, Any] | None) -> bool:
    """The READY holder ``pk`` of ``key`` becomes due at ``due`` and, with
    ``arguments`` (args, kwargs, expires_at), takes the call's; False if it
    no longer is a READY holder of the key."""
    changes: dict[str, Any] = {"run_after": due, **(arguments or {})}
    return bool(rows.filter(pk=pk, unique_key=key, status=Status.READY).update(**changes))


def pass_key(rows: Any, pk: int, key: str | None) -> bool:
    """The started holder ``pk`` gives ``key`` up: it finishes with the
    arguments it has, and the next job with the key holds it."""
    return bool(rows.filter(pk=pk, unique_key=key, status=Status.RUNNING).update(unique_key=None))
