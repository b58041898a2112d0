"""A job's metadata: a small JSON object given at enqueue (``@task(metadata=...)``
or ``.using(metadata=...)``), stored in its own column, read by the task
(``current_job().metadata``), by ``get_result()`` and in the admin.

Checked when the task is made, not per call: a task's metadata is one of
its options, so a ``.using()`` copy is checked once and each enqueue of it
only copies the plan's (enqueue/plan.py). A row may hold anything there
(``Job.metadata``): :func:`as_metadata` is how the queue reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..exceptions import InvalidTaskArguments
from ..payload import Integers, encoded_size, plain
from ..tasks_api import InvalidTask

# UTF-8 bytes of compact JSON, as MAX_ARGUMENTS_BYTES counts: metadata
# describes a job (a tenant, a request id, a trace), it does not carry data.
MAX_METADATA_BYTES = 8192
# Where an enqueue records its trace context (tracing.py); a producer in
# any language may write it too.
TRACE_KEY = "trace_context"


def check_metadata(value: Any, integers: Integers = None) -> dict[str, Any] | None:
    """``value`` as stored (a plain copy), or :class:`InvalidTask` saying why
    it cannot be: not a dict, not JSON (or an integer the database would
    round: ``integers``, see exact_integers()), or over MAX_METADATA_BYTES."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidTask(f"metadata must be a dict (a JSON object), not {type(value).__name__}.")
    try:
        stored = plain(dict(value), "metadata", integers)
        size = encoded_size(stored, "metadata")
    except InvalidTaskArguments as exc:
        raise InvalidTask(str(exc)) from None
    if size > MAX_METADATA_BYTES:
        raise InvalidTask(
            f"metadata takes {size} bytes as compact JSON, more than the limit of "
            f"{MAX_METADATA_BYTES}. Store large data elsewhere and put a key to it in the metadata."
        )
    return stored


def as_metadata(stored: Any) -> dict[str, Any]:
    """A row's metadata as the queue reads it: a dict, ``{}`` for anything
    else a row may hold (a JSON array, text Python cannot decode)."""
    return stored if isinstance(stored, dict) else {}
