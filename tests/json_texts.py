"""JSON text another program may write that a database stores and Python
cannot decode, for the tests of hostile rows.

MySQL's own JSON type parses what it stores, and refuses a number beyond a
double (error 3140, "Number too big to be stored in double"): an integer
of 5,000 digits or ``1e400``, which MariaDB (text with a json_valid CHECK),
SQLite and PostgreSQL store. There that refusal is the guarantee, and the
row that still cannot be decoded is nested deeper than the queue reads
(MySQL keeps 100 levels)."""

from collections.abc import Callable

import pytest
from django.db import OperationalError, connection

from django_dbqueue.payload import exact_integers

# 60 lists inside each other: stored by MySQL, past the queue's 31.
NESTED = "[" * 60 + "]" * 60


def parses_json() -> bool:
    """Whether this database's JSON columns are a type of their own (MySQL's)."""
    return exact_integers(connection) is not None


def stored_instead(number: str, write: Callable[[str], object]) -> str:
    """``number``, a JSON number Python cannot read, where the database
    stores it; on MySQL, which refuses ``write(number)`` (asserted here),
    NESTED instead."""
    if not parses_json():
        return number
    with pytest.raises(OperationalError) as refused:
        write(number)
    assert refused.value.args[0] == 3140, refused.value
    assert "Number too big to be stored in double" in refused.value.args[1]
    return NESTED
