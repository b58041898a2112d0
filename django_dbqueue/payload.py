"""What goes into a job row, and its limits: JSON only, not too deep, not
too big, and nothing the database would refuse.

Everything a database would refuse is refused here, before the write, with
a message naming the value: a refused write would otherwise cost a job its
outcome, or (in a batched write) its batch-mates theirs.
"""

import json
import math
from collections.abc import Mapping
from typing import Any

from .exceptions import InvalidTaskArguments, ResultNotStorable
from .shown import shown

# MariaDB's JSON validity check (the CHECK on every JSON column) refuses
# more than 31 nested arrays or objects; the limit holds on every database
# so that a job that can be stored on one can be stored on all.
MAX_NESTING = 31
# Tracebacks and error messages are kept to this many characters: the head
# and the tail, with a marker saying how much was cut between them.
MAX_ERROR_CHARS = 16_000
# A job keeps the errors of its latest this-many attempts (see Job.errors).
MAX_ERRORS = 10
# The integers MySQL's JSON type keeps (as INT64 or UINT64); it would store a
# wider one as a double, silently rounded. MariaDB's JSON is text, SQLite's
# too, and PostgreSQL's jsonb keeps numbers as exact decimals.
MYSQL_INTEGERS = (-(2**63), 2**64 - 1)

# (lowest, highest) integer a database's JSON columns keep exactly, or None: any.
Integers = tuple[int, int] | None


def exact_integers(connection: Any) -> Integers:
    """The integers the JSON columns of ``connection`` keep exactly (None: any)."""
    if connection.vendor == "mysql" and not connection.mysql_is_mariadb:
        return MYSQL_INTEGERS
    return None


def encode_arguments(
    args: Any, kwargs: Mapping[str, Any], limit: int, integers: Integers = None
) -> tuple[list, dict]:
    """Return ``args`` and ``kwargs`` as plain JSON values, or raise
    :class:`InvalidTaskArguments` naming the first value that cannot be
    stored (``integers``: see exact_integers()), or saying how far over
    ``limit`` (bytes) the encoded arguments are."""
    plain_args = _plain(list(args), "args", 0, integers)
    plain_kwargs = _plain(dict(kwargs), "kwargs", 0, integers)
    what = "The task's arguments"
    # "[]" and "{}" are two bytes each: no need to encode them.
    size = (encoded_size(plain_args, what) if plain_args else 2) + (
        encoded_size(plain_kwargs, what) if plain_kwargs else 2
    )
    if size > limit:
        raise InvalidTaskArguments(
            f"The task's arguments take {size} bytes as compact JSON, more than the limit of "
            f"{limit} (OPTIONS MAX_ARGUMENTS_BYTES). Store large data elsewhere and "
            "pass a key to it."
        )
    return plain_args, plain_kwargs


def check_return_value(value: Any, limit: int, integers: Integers = None) -> tuple[Any, int]:
    """The return value as stored and its size in bytes, or
    :class:`ResultNotStorable` saying why it cannot be stored (not JSON,
    nested too deep, an integer the database would round, over ``limit`` bytes)."""
    if value is None:
        return None, 4  # the common case, spared the walk and the encoding
    try:
        value = _plain(value, "The return value", 0, integers)
        size = encoded_size(value, "The return value")
    except InvalidTaskArguments as exc:
        raise ResultNotStorable(str(exc)) from None
    if size > limit:
        raise ResultNotStorable(
            f"The return value takes {size} bytes as compact JSON, more than the limit of {limit} "
            "(OPTIONS MAX_RETURN_BYTES). Store large results elsewhere and return a key to them."
        )
    return value, size


def encoded_size(value: Any, what: str) -> int:
    """The size limits' measure: UTF-8 bytes of ``value`` as compact JSON,
    each character as itself rather than as a ``\\u`` escape, which is what
    the SQL contract's ``dbqueue_enqueue()`` measures too (docs/settings.md).
    Stored, Django's JSONField escapes non-ASCII: up to 3 times as many bytes."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return len(text) if text.isascii() else len(text.encode("utf-8"))
    except ValueError as exc:  # an int too long to print, say
        raise InvalidTaskArguments(f"{what} cannot be stored as JSON: {exc}.") from None


def plain(value: Any, where: str, integers: Integers = None) -> Any:
    """``value`` as plain JSON values, or :class:`InvalidTaskArguments`
    naming the first part of it (``where[...]``) that cannot be stored."""
    return _plain(value, where, 0, integers)


def _plain(value: Any, where: str, depth: int, integers: Integers) -> Any:
    # Only types that come back from JSON unchanged: a tuple would come back
    # as a list, an int key as a string, a datetime not at all. Recursion is
    # bounded by MAX_NESTING, so no value can raise RecursionError here.
    match value:
        case bool() | None:
            return value
        case int():
            if integers is not None and not integers[0] <= value <= integers[1]:
                raise InvalidTaskArguments(_wide(value, where))
            return value
        case str():
            return _text(value, where)
        case float() if math.isfinite(value):
            return value
        case list() | tuple() | dict() if depth >= MAX_NESTING:
            raise InvalidTaskArguments(
                f"{where} is nested more than {MAX_NESTING} lists or dicts deep, "
                "which the database cannot store as JSON."
            )
        case list() | tuple():
            return [_plain(item, f"{where}[{i}]", depth + 1, integers) for i, item in enumerate(value)]
        case dict():
            for key in value:
                if not isinstance(key, str):
                    raise InvalidTaskArguments(
                        f"{where} has the key {shown(key)} of type {type(key).__name__}; "
                        "JSON object keys must be strings."
                    )
                _text(key, f"a key of {where}")
            return {
                key: _plain(item, f"{where}[{key!r}]", depth + 1, integers) for key, item in value.items()
            }
    raise InvalidTaskArguments(
        f"{where} is {_describe(value)}, which cannot be stored as JSON: use only "
        "str, int, float, bool, None, list and dict (pass an id or an ISO date string "
        "rather than an object)."
    )


def _wide(value: int, where: str) -> str:
    number = shown(value)
    try:
        rounded = f" (it would read back as {float(value)!r})"
    except OverflowError:
        rounded = " (it would refuse it)"
    number = number if number.startswith("an ") else f"the integer {number}"
    return (
        f"{where} is {number}, beyond 64 bits, which MySQL's JSON cannot store exactly"
        f"{rounded}; pass it as a string."
    )


def _text(value: str, where: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidTaskArguments(
            f"{where} holds {value[exc.start : exc.end]!r} at position {exc.start}, a lone "
            "surrogate that is not valid Unicode, so the database cannot store it."
        ) from None
    return value


def _describe(value: Any) -> str:
    if isinstance(value, float):
        return f"the float {value!r}"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


def bounded_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and its
    tail (where a traceback names the error), with a marker between them;
    lone surrogates are replaced so that the database can store it."""
    if len(text) > limit:
        keep = (limit - 100) // 2
        text = f"{text[:keep]}\n[… {len(text) - 2 * keep} characters cut …]\n{text[-keep:]}"
    return text.encode("utf-8", "replace").decode("utf-8")


def bounded_errors(errors: list, new: dict[str, Any]) -> list:
    """``errors`` with ``new`` appended, keeping the latest MAX_ERRORS."""
    return [*errors, new][-MAX_ERRORS:]


def for_attempt(entry: dict[str, Any], attempt: int, spent: bool = True) -> dict[str, Any]:
    """``entry`` (one of a job's ``errors``) saying which attempt it is
    about, and whether that attempt counts: an interruption, a cancel
    before the start, or a dead worker's job whose start no claim recorded
    (a batch's) do not. The job's page orders and words its story by them."""
    return {**entry, "attempt": attempt, "spent": spent}


def as_list(value: Any) -> list:
    """A JSON column that should hold a list, as one: a row written by hand
    may hold anything there, and appending to it must not crash a worker."""
    return value if isinstance(value, list) else []
