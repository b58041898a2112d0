"""Rows for a test, with their primary keys on every database."""

from collections.abc import Iterable
from typing import TypeVar

from django.db import connections, models, router

M = TypeVar("M", bound=models.Model)


def inserted(objs: Iterable[M]) -> list[M]:
    """``objs`` inserted, each with its primary key set, as ``bulk_create()``
    sets them where the database has INSERT ... RETURNING (MariaDB,
    PostgreSQL, SQLite). MySQL has none, and there ``bulk_create()`` leaves
    every primary key None: the rows go in one by one instead (a test makes
    tens of them; inside the test's transaction each costs one round trip).
    Like ``bulk_create()``, no model here overrides ``save()``."""
    objs = list(objs)
    if not objs:
        return objs
    model = type(objs[0])
    database = router.db_for_write(model)
    if connections[database].features.can_return_rows_from_bulk_insert:
        return model._default_manager.using(database).bulk_create(objs)
    for obj in objs:
        obj.save(force_insert=True, using=database)
    return objs
