"""Checking what goes into a job row: JSON only, and not too much of it."""

import json
import math
from typing import Any

from .exceptions import InvalidTaskArguments


def encode_arguments(args: Any, kwargs: dict[str, Any], limit: int) -> tuple[list, dict]:
    """Return ``args`` and ``kwargs`` as plain JSON values, or raise
    :class:`InvalidTaskArguments` naming the first value that is not JSON or
    saying how far over ``limit`` (bytes) the encoded arguments are."""
    args = _plain(list(args), "args")
    kwargs = _plain(dict(kwargs), "kwargs")
    size = len(json.dumps([args, kwargs], separators=(",", ":")).encode())
    if size > limit:
        raise InvalidTaskArguments(
            f"The task's arguments take {size} bytes as JSON, more than the limit of "
            f"{limit} (OPTIONS MAX_ARGUMENTS_BYTES). Store large data elsewhere and "
            "pass a key to it."
        )
    return args, kwargs


def _plain(value: Any, where: str) -> Any:
    # Only types that come back from JSON unchanged: a tuple would come back
    # as a list, an int key as a string, a datetime not at all.
    match value:
        case bool() | int() | str() | None:
            return value
        case float() if math.isfinite(value):
            return value
        case list() | tuple():
            return [_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
        case dict():
            for key in value:
                if not isinstance(key, str):
                    raise InvalidTaskArguments(
                        f"{where} has the key {key!r} of type {type(key).__name__}; "
                        "JSON object keys must be strings."
                    )
            return {key: _plain(item, f"{where}[{key!r}]") for key, item in value.items()}
    raise InvalidTaskArguments(
        f"{where} is {_describe(value)}, which cannot be stored as JSON: use only "
        "str, int, float, bool, None, list and dict (pass an id or an ISO date string "
        "rather than an object)."
    )


def _describe(value: Any) -> str:
    if isinstance(value, float):
        return f"the float {value!r}"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


def check_return_value(value: Any) -> Any:
    """The return value as stored, or :class:`InvalidTaskArguments` if it is not JSON."""
    return _plain(value, "The return value")


def as_list(value: Any) -> list:
    """A JSON column that should hold a list, as one: a row written by hand
    may hold anything there, and appending to it must not crash a worker."""
    return value if isinstance(value, list) else []
