"""The app's tables, found by name in Django's app registry.

``models.py`` builds the job table's manager from ``transitions/``
(``JobQuerySet``), so ``transitions/`` cannot import ``models.py`` back
without an import cycle: it asks the registry here instead, as Django's own
migrations and signal handlers do. Each lookup is cached: the registry
holds one class per model for the life of the process.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, cast

from django.apps import apps

if TYPE_CHECKING:
    from .models import ArchivedJob, ConcurrencyLock, Job, JobTag, RateSlot, UniqueWindow

APP = "django_dbqueue"


@functools.cache
def job() -> type[Job]:
    return cast("type[Job]", apps.get_model(APP, "Job"))


@functools.cache
def rate_slot() -> type[RateSlot]:
    return cast("type[RateSlot]", apps.get_model(APP, "RateSlot"))


@functools.cache
def concurrency_lock() -> type[ConcurrencyLock]:
    return cast("type[ConcurrencyLock]", apps.get_model(APP, "ConcurrencyLock"))


@functools.cache
def unique_window() -> type[UniqueWindow]:
    return cast("type[UniqueWindow]", apps.get_model(APP, "UniqueWindow"))


@functools.cache
def archived_job() -> type[ArchivedJob]:
    return cast("type[ArchivedJob]", apps.get_model(APP, "ArchivedJob"))


@functools.cache
def job_tag() -> type[JobTag]:
    return cast("type[JobTag]", apps.get_model(APP, "JobTag"))
