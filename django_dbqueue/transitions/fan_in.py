"""The arguments a ``pass_result`` job is released with: its parents'
results before its own arguments, checked as ``enqueue()`` checks
arguments, since nothing else checks them.

Each parent's result was checked against ``MAX_RETURN_BYTES`` alone;
together they can be many times that. A fan-in over the limit (or over a
result that cannot be read: a row rewritten by SQL) is not released: the
dependant alone ends FAILED, saying why, in the transaction that would have
released it. Its parents keep their outcomes, and the write stays as small
as the rest of the cascade, so it cannot be refused for its size (a
database refuses a packet over ``max_allowed_packet``, and MariaDB then
drops the connection with the whole transaction in it).

Used where a dependant is inserted (workflows/dependencies.py) and where it
is released (dependants.py); here, below both.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import tables
from ..exceptions import InvalidTaskArguments
from ..jsonfield import Undecodable
from ..payload import as_list, bounded_errors, encoded_size, for_attempt
from ..status import Status

INVALID_ARGUMENTS = f"{InvalidTaskArguments.__module__}.{InvalidTaskArguments.__qualname__}"


def passed_arguments(
    using: str, results: list[tuple[int, Any]], args: Any, kwargs: Any
) -> tuple[list[Any], None] | tuple[None, str]:
    """``(arguments, None)``: the parents' ``results`` (``(parent id,
    value)`` in order) followed by the dependant's own ``args``; or ``(None,
    why)`` when they cannot be passed on."""
    from ..routing import argument_limit

    for pk, value in results:
        if isinstance(value, Undecodable):
            why = f"The result of its parent job #{pk} cannot be read ({value.reason})"
            return None, f"{why}, so it cannot be passed on."
    for value in (args, kwargs):
        if isinstance(value, Undecodable):
            return None, f"Its own {value.reason}, so its parents' results cannot be put before them."
    combined = [*(value for _, value in results), *(args if isinstance(args, list) else [])]
    limit = argument_limit(using)
    try:
        size = encoded_size(combined, "Its parents' results") + encoded_size(
            kwargs if isinstance(kwargs, dict) else {}, "Its keyword arguments"
        )
    except InvalidTaskArguments as exc:
        return None, str(exc)
    if size > limit:
        return None, (
            f"The results of its {len(results)} parent jobs and its own arguments take {size} bytes as "
            f"compact JSON, more than the limit of {limit} (OPTIONS MAX_ARGUMENTS_BYTES), so it was not "
            "run. Have the parents store large results elsewhere and return a key to them."
        )
    return combined, None


def not_passed(errors: Any, why: str, when: datetime) -> dict[str, Any]:
    """The changes that end a dependant FAILED, unrun, because its parents'
    results could not be passed on (``why``)."""
    entry = {
        "exception_class_path": INVALID_ARGUMENTS,
        "traceback": f"{INVALID_ARGUMENTS}: {why}\n",
        "at": when.isoformat(),
        "worker": "",
    }
    return {
        "status": Status.FAILED,
        "finished_at": when,
        "unique_key": None,
        # Never started: the attempt it would have been, not counted.
        "errors": bounded_errors(as_list(errors), for_attempt(entry, 1, spent=False)),
    }


def parent_results(using: str, child: int) -> list[tuple[int, Any]]:
    """``(parent id, return value)`` of ``child``'s parent jobs, in the
    order they were given (a batch parent gives none); a parent that did
    not succeed gives None, whatever its row holds."""
    Job = tables.job()
    from ..workflows.models import Dependency

    parents = Dependency.objects.using(using).filter(child_id=child, parent_id__isnull=False)
    order = [pk for pk in parents.order_by("pk").values_list("parent_id", flat=True) if pk is not None]
    rows = Job._base_manager.using(using).filter(pk__in=order).values_list("pk", "status", "return_value")
    values = {pk: value if status == Status.SUCCESSFUL else None for pk, status, value in rows}
    return [(pk, values.get(pk)) for pk in order]
