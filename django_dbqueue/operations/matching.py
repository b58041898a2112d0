"""Changing every job that matches a filter, however many: requeue, cancel
or run now all the FAILED jobs of a queue, say (the dashboard's "Retry
failed" and "Discard ready", ``manage.py changejobs``, :func:`change_all`).

The filter is kept, not the ids: a million FAILED jobs are never read into
a web request. The operation takes the jobs that match when it is decided,
bounded by the largest id then (a job enqueued or failing later is not
among them), and changes them ``OPERATION_CHUNK_ROWS`` at a time in id
order, each chunk through the same locked change as the admin's actions
(selections.py), reading the next chunk through the filter's index. Up to
``OPERATION_INLINE_ROWS`` are changed at once; more, by an operation job
whose page shows its progress (big.py).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Max

from ..status import Status
from .big import Started, Step, start
from .selections import METHODS, change_locked, log

# The filters a caller may give, as Job fields; each has an index ending in id.
FILTERS = ("status", "queue_name", "task_path", "batch_id")


def change_all(
    method: str,
    *,
    using: str | None = None,
    user: Any = None,
    status: str | None = None,
    queue_name: str | None = None,
    task_path: str | None = None,
    batch_id: int | None = None,
) -> Started:
    """Apply the JobQuerySet ``method`` (``"requeue"``, ``"cancel"`` or
    ``"run_now"``) to every job matching the filters given now, at once or
    by an operation job (its id is the result's ``job_id``). ``user``: the
    user the admin log names for each changed job (a user id or object).
    ``using``: the queue's database (default: the default backend's)."""
    if using is None:
        from ..routing import home_database

        using = home_database()
    given = {"status": status, "queue_name": queue_name, "task_path": task_path, "batch_id": batch_id}
    params = {
        "method": method,
        "filter": check_filter({name: value for name, value in given.items() if value is not None}),
        "user": getattr(user, "pk", user),
    }
    return start("change_matching", using, params)


def check_filter(given: dict[str, Any]) -> dict[str, Any]:
    """The filter, checked: known fields, a known status, an id a number."""
    unknown = sorted(set(given) - set(FILTERS))
    if unknown:
        raise ValueError(f"A job filter takes {', '.join(FILTERS)}, not {', '.join(unknown)}.")
    if "status" in given and given["status"] not in Status.values:
        raise ValueError(f"status must be one of {', '.join(Status.values)}, not {given['status']!r}.")
    for name in ("queue_name", "task_path"):
        if name in given and not isinstance(given[name], str):
            raise ValueError(f"{name} must be a string, not {given[name]!r}.")
    if "batch_id" in given and (
        isinstance(given["batch_id"], bool) or not isinstance(given["batch_id"], int)
    ):
        raise ValueError(f"batch_id must be a whole number, not {given['batch_id']!r}.")
    return given


class ChangeMatching:
    """``{"method": "requeue", "filter": {...}, "user": id or None}``, and
    ``"upto"``, the largest id when it was decided: the JobQuerySet method
    on the matching jobs up to it, ``size`` per transaction, in id order;
    the position is the last id looked at."""

    def decide(self, using: str, params: dict[str, Any]) -> int | None:
        from ..models import Job

        if params.get("method") not in METHODS:
            raise ValueError(
                f"ChangeMatching changes jobs by {', '.join(METHODS)}, not {params.get('method')!r}."
            )
        jobs = Job.objects.using(using)
        params["upto"] = jobs.aggregate(last=Max("pk"))["last"] or 0
        return jobs.filter(**check_filter(params["filter"]), pk__lte=params["upto"]).count() or None

    def chunk(self, using: str, params: dict[str, Any], cursor: Any, size: int) -> Step:
        from ..models import Job

        method = params["method"]
        if method not in METHODS:
            raise ValueError(f"ChangeMatching changes jobs by {', '.join(METHODS)}, not {method!r}.")
        jobs = Job.objects.using(using)
        after = int(cursor or 0)
        matching = jobs.filter(**check_filter(params["filter"]), pk__gt=after, pk__lte=int(params["upto"]))
        ids = list(matching.order_by("pk").values_list("pk", flat=True)[:size])
        if not ids:
            return Step(cursor, 0, done=True)
        was, changed_to = change_locked(jobs, ids, method)
        changed = {pk for pk, state in was.items() if changed_to.get(pk) != state}
        asked = {pk for pk in changed if changed_to[pk].status == Status.RUNNING}
        log(using, params.get("user"), method, {pk: was[pk].status for pk in changed}, asked)
        return Step(ids[-1], len(changed), done=len(ids) < size)
