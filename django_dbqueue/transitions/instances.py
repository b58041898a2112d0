"""Claimed rows as :class:`~django_dbqueue.models.Job` instances, built
without ``Model.__init__``.

A worker builds one instance per job it claims. Django's own path
(``Model.from_db``, then ``__init__`` walking every field for its
default, descriptor and signals) took about an eighth of a worker's CPU
in a profile of no-op jobs. The values are read as tuples, through the
same converters Django applies (time zones, the tolerant JSON decoder),
and set on a bare instance: what ``from_db`` leaves behind for a row read
with those columns, without the work of getting there. No model signal is
lost: ``pre_init`` and ``post_init`` have no receiver for Job (a test says
so), and claiming never sent ``pre_save`` or ``post_save``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from django.db.models.base import ModelState

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from ..models import Job


def loaded(rows: QuerySet[Any, Any], *annotations: str) -> list[Job]:
    """The jobs ``rows`` selects, every column but UNREAD loaded, with
    ``annotations`` (names the queryset annotates) set as attributes too."""
    names = [*attnames(rows.model), *annotations]
    return built(rows.values_list(*names), names)


def built(values: QuerySet[Any, Any], names: list[str]) -> list[Job]:
    """The jobs of ``values``, a ``values_list(*names)`` of job rows."""
    return built_rows(values.model, values.db, values, names)


def built_rows(model: Any, db: str, rows: Iterable[Sequence[Any]], names: list[str]) -> list[Job]:
    """The jobs of ``rows``, each the values of ``names`` of a job row
    read from ``db``."""
    jobs = []
    for row in rows:
        job = model.__new__(model)
        # Not zip(strict=True): every row holds all of names, and the
        # check cost half a microsecond per job.
        job.__dict__.update(zip(names, row, strict=False))
        state = job._state = ModelState()
        state.adding, state.db = False, db
        jobs.append(job)
    return jobs


# Read by no worker: earlier runs' summaries, up to transitions.MAX_HISTORY
# of them. Left unread, it loads on first access, as a deferred field does.
UNREAD = frozenset({"history"})


def attnames(model: Any) -> list[str]:
    return [field.attname for field in model._meta.concrete_fields if field.attname not in UNREAD]
