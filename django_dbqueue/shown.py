"""A value as an error message shows it.

Messages name the bad value, and the value may be anything a setting, a
call or a row holds: ``repr()`` of an integer of 5,000 digits raises
ValueError (Python writes out at most 4,300), which would turn the refusal
of a bad value into a crash of whatever was refusing it; a megabyte string
would fill the log.
"""

from __future__ import annotations

import math
from typing import Any

# The longest repr shown whole; a longer one is cut.
LONGEST = 100
# Integers past this many bits are shown by their number of digits.
WIDE_BITS = 1024


def shown(value: Any) -> str:
    """``repr(value)``, bounded: an integer of more than about 300 digits
    reads as "an integer of N digits", and a repr longer than LONGEST
    characters is cut with "...". Never raises."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > WIDE_BITS:
        return f"an integer of {digits(value):,} digits"
    try:
        text = repr(value)
    except Exception:  # a repr of the caller's own class that raises
        return f"a {type(value).__module__}.{type(value).__qualname__}"
    return text if len(text) <= LONGEST else f"{text[: LONGEST - 3]}..."


def digits(value: int) -> int:
    """How many decimal digits ``value`` has, without writing it out."""
    size = abs(value)
    count = int(math.log10(size)) + 1  # a float: may be one off either way
    if size >= 10**count:
        count += 1
    elif size < 10 ** (count - 1):
        count -= 1
    return count
