"""Savepoints of atomic jobs, and what their absence tells: the task
committed the worker's transaction itself (a raw ``COMMIT``, or a statement
that commits implicitly), which ends every savepoint in it. A member of an
atomic group that does so and then raises must not take its worker down
(rolling back to its savepoint fails): its attempt fails with
``TransactionCommitted`` instead, and what that commit made durable is kept
(atomic.py, groups.py)."""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, connections, transaction

from ...exceptions import TransactionCommitted

# Django 6.1 renamed transaction.savepoint() (5.2 and 6.0 have only that name).
_savepoint = getattr(transaction, "savepoint_create", None) or transaction.savepoint

# MySQL/MariaDB: ER_SP_DOES_NOT_EXIST ("SAVEPOINT ... does not exist");
# PostgreSQL: invalid_savepoint_specification.
MYSQL_NO_SAVEPOINT = 1305
POSTGRES_NO_SAVEPOINT = "3B001"


def savepoint(database: str) -> Any:
    return _savepoint(using=database)


def roll_back_to(database: str, sid: Any) -> bool:
    """Undo what was written since the savepoint ``sid``; False, undoing
    nothing, when the savepoint is gone because the transaction it lived in
    was committed meanwhile. Any other error (an outage) raises."""
    # As Django's own atomic() does for a savepoint: a transaction marked for
    # rollback (the task called set_rollback(True)) refuses every query, the
    # ROLLBACK TO SAVEPOINT that cures it included.
    connections[database].needs_rollback = False
    try:
        transaction.savepoint_rollback(sid, using=database)
    except DatabaseError as exc:
        if not is_gone(exc):
            raise
        return False
    return True


def is_gone(exc: BaseException) -> bool:
    """Whether ``exc`` says that a savepoint does not exist."""
    cause = exc.__cause__
    if cause is not None and getattr(cause, "args", None) and cause.args[0] == MYSQL_NO_SAVEPOINT:
        return True
    if getattr(cause, "sqlstate", None) == POSTGRES_NO_SAVEPOINT:
        return True
    return "no such savepoint" in str(exc)  # SQLite


def committed(cause: BaseException) -> TransactionCommitted:
    """The failure recorded for a task that committed its transaction and then raised ``cause``."""
    error = TransactionCommitted(
        "The atomic task committed its transaction itself (a raw COMMIT, or a statement that commits "
        "implicitly: DDL such as CREATE TABLE or ALTER TABLE, or LOCK TABLES on MySQL/MariaDB) and "
        f"then raised {type(cause).__name__}: {cause}. What it wrote before that commit is kept and "
        "a retry writes it again, so this task no longer runs exactly once. Remove the commit from "
        "the task, or declare it atomic=False."
    )
    error.__cause__ = cause
    return error
