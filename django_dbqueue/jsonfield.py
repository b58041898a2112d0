"""JSON columns whose reading never raises.

A job row may come from anywhere (a plain SQL INSERT, another language, an
attacker with INSERT rights) and hold any text the database's JSON check
accepts. Some of that Python cannot turn into values: an integer of more
digits than Python converts (4,300 by default), a number beyond a float's
range (``1e400`` would read as infinity), nesting deeper than the queue
stores, or more than Python's recursion can decode. Django's JSONField
raises then, inside whatever query read the row: the claim, so one row
would stop the worker and every worker after it.

:class:`TolerantJSONField` reads such a column as an :class:`Undecodable`
holding the stored text and the reason, so that the row still loads: the
worker fails that job's attempt with the reason (``JobNotRunnable``), the
admin shows the text, and saving the row writes the text back unchanged.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.fields.json import KeyTransform

from .payload import MAX_NESTING

# Columns named in the plural ("args hold ..."); the others take "holds".
PLURAL = frozenset({"args", "kwargs", "errors", "worker_ids"})


class Undecodable:
    """A JSON column's stored text that Python could not decode, and why.
    ``reason`` names the column: ``"args hold an integer of 4,500 digits, ..."``."""

    __slots__ = ("raw", "reason")

    def __init__(self, raw: str, reason: str) -> None:
        self.raw = raw
        self.reason = reason

    def __repr__(self) -> str:
        return f"<Undecodable: {self.reason}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Undecodable) and (other.raw, other.reason) == (self.raw, self.reason)

    def __hash__(self) -> int:
        return hash(self.raw)


class _NotFinite(ValueError):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class _LongInteger(ValueError):
    def __init__(self, digits: int) -> None:
        super().__init__(digits)
        self.digits = digits


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


def _no_constant(text: str) -> float:
    # NaN, Infinity and -Infinity: Python's extension, not JSON.
    raise _NotFinite(text)


def _checked_int(text: str) -> int:
    limit = sys.get_int_max_str_digits()
    digits = len(text.lstrip("-"))
    if limit and digits > limit:
        raise _LongInteger(digits)
    return int(text)


# Made once: json.loads() with hooks would build a decoder per call. The
# hooks cost a Python call per float, none per int or string.
_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_no_constant)


def decode(raw: str, column: str) -> Any:
    """``raw`` (a JSON column's text) as Python values, or an
    :class:`Undecodable` saying why it cannot be."""
    # An over-long integer is told apart only after a failure, so the
    # common path stays the C decoder's.
    hold, are = ("hold", "are") if column in PLURAL else ("holds", "is")
    try:
        value = _DECODER.decode(raw)
    except _NotFinite as exc:
        if exc.text in ("NaN", "Infinity", "-Infinity"):
            return Undecodable(raw, f"{column} {hold} {exc.text}, which is not a JSON number")
        return Undecodable(raw, f"{column} {hold} the number {_cut(exc.text)}, beyond a float's range")
    except RecursionError:  # far deeper than the limit (Python 3.10 recurses at ~990)
        return Undecodable(raw, _too_deep(column, are))
    except ValueError as exc:
        return Undecodable(raw, f"{column} {_why(raw, exc, hold, are)}")
    if _deeper_than(value, raw, MAX_NESTING):
        return Undecodable(raw, _too_deep(column, are))
    return value


def _too_deep(column: str, are: str) -> str:
    return f"{column} {are} nested more than {MAX_NESTING} lists or objects deep, the queue's limit"


def _why(raw: str, exc: ValueError, hold: str, are: str) -> str:
    if not isinstance(exc, json.JSONDecodeError):
        try:  # again, counting digits: the int-string limit is the usual cause
            json.loads(raw, parse_int=_checked_int, parse_float=_finite_float, parse_constant=_no_constant)
        except _LongInteger as long:
            limit = sys.get_int_max_str_digits()
            return f"{hold} an integer of {long.digits:,} digits, more than Python's limit of {limit:,}"
        except (ValueError, RecursionError):
            pass
    return f"{are} not JSON that Python can decode ({_cut(str(exc))})"


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _deeper_than(value: Any, raw: str, limit: int) -> bool:
    # Counting brackets (in C) rules out nearly every row without a walk:
    # fewer opening brackets in all than the limit, fewer levels too.
    if raw.count("[") + raw.count("{") <= limit:
        return False
    # Level by level, without recursion, so that no depth can raise here.
    level = [value] if isinstance(value, (list, dict)) else []
    for _ in range(limit):
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, (list, dict))
        ]
        if not level:
            return False
    return True  # containers below the limit's level


class TolerantJSONField(models.JSONField):
    """A JSONField whose reading never raises: what Python cannot decode
    comes back as an :class:`Undecodable`, and is written back as it was."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return value
        if isinstance(value, bytes):  # a driver that hands over JSON as bytes
            value = value.decode("utf-8", "replace")
        if not isinstance(value, str):
            # Already a value: SQLite hands over a key's number as one.
            return value
        if value == "[]":  # most rows' errors and worker_ids, and many args: spared the decoder
            return []
        if value == "{}":
            return {}
        decoded = decode(value, self.name)
        if isinstance(decoded, Undecodable) and isinstance(expression, KeyTransform):
            # A key's value, such as SQLite's unquoted string: as Django's
            # own field does, the text as it came.
            return value
        return decoded

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if isinstance(value, Undecodable):
            return _raw_json(value.raw, connection)
        return super().get_db_prep_value(value, connection, prepared)

    def formfield(self, **kwargs: Any) -> Any:
        return super().formfield(**{"form_class": TolerantJSONFormField, "column": self.name, **kwargs})


class TolerantJSONFormField(forms.JSONField):
    """A form's JSON text read by the columns' rules (``decode()``): what
    Python cannot decode, what is nested deeper than the queue stores, NaN
    and infinities are a form error saying so. Django's own field lets
    them through to a 500 (an over-long integer raises ValueError, deep
    nesting RecursionError) or to a database that refuses the row."""

    def __init__(self, *args: Any, column: str = "value", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.column = column

    def to_python(self, value: Any) -> Any:
        if self.disabled or value in self.empty_values or not isinstance(value, str):
            return super().to_python(value)
        if isinstance(value, forms.fields.JSONString):
            return value
        decoded = decode(value, self.column)
        if isinstance(decoded, Undecodable):
            raise ValidationError(f"The {decoded.reason}.", code="invalid")
        return forms.fields.JSONString(decoded) if isinstance(decoded, str) else decoded

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self.disabled or not isinstance(data, str):
            return super().bound_data(data, initial)
        decoded = decode(data, self.column)
        return forms.fields.InvalidJSONInput(data) if isinstance(decoded, Undecodable) else decoded

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, Undecodable):  # a row written by SQL: its text, to be corrected
            return value.raw
        return super().prepare_value(value)


def _raw_json(text: str, connection: Any) -> Any:
    """``text``, already JSON, as the database driver takes a JSON value."""
    if connection.vendor == "postgresql":
        from django.db.backends.postgresql.psycopg_any import Jsonb

        return Jsonb(text, dumps=lambda stored: stored)
    return text
