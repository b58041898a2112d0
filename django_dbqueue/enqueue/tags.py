"""Tags: short labels a task or a call gives its jobs (``@task(tags=...)``,
``.using(tags=...)``), or a function of the call's arguments returns
(``tags=lambda order: [f"customer:{order.customer_id}"]``), kept in
``JobTag`` rows written in the job's own transaction, so that the admin
finds a tag's jobs through an index (``tag:billing``, or ``customer:42``,
in its search) instead of reading every job's arguments. Jobs without tags
write nothing more."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..shown import shown
from ..tasks_api import InvalidTask

TAG_MAX = 64  # JobTag.tag's max_length
MOST_TAGS = 16


def as_tags(value: Any) -> tuple[str, ...]:
    """``tags`` as a task or a call gives them (a string, or a list of them),
    checked: at most 16, each 1 to 64 characters without spaces; each once."""
    given = [value] if isinstance(value, str) else value
    if not isinstance(given, (list, tuple, set, frozenset)):
        raise InvalidTask(f"tags must be a string or a list of strings, not {shown(value)}.")
    tags = tuple(dict.fromkeys(given))
    for tag in tags:
        if not isinstance(tag, str) or not 1 <= len(tag) <= TAG_MAX or any(c.isspace() for c in tag):
            raise InvalidTask(
                f"A tag must be a string of 1 to {TAG_MAX} characters without spaces, not {shown(tag)}."
            )
    if len(tags) > MOST_TAGS:
        raise InvalidTask(f"A job may have at most {MOST_TAGS} tags, not {len(tags)}.")
    return tags


def call_tags(declared: Any, args: Any, kwargs: Any) -> tuple[str, ...]:
    """One call's tags: the task's own, or what its tags function returns for
    the call's arguments (a string, a list, or None for none), checked."""
    if not callable(declared):
        return tuple(declared)
    given = declared(*args, **kwargs)
    return () if given is None else as_tags(given)


def insert_tags(using: str, job_id: int, tags: Iterable[str]) -> None:
    """The tags of the new job ``job_id``, in the caller's transaction."""
    from ..models import JobTag

    JobTag.objects.using(using).bulk_create(JobTag(tag=tag, job_id=job_id) for tag in tags)


def tags_of(using: str, job_id: int) -> list[str]:
    from ..models import JobTag

    return list(
        JobTag.objects.using(using).filter(job_id=job_id).order_by("tag").values_list("tag", flat=True)
    )
