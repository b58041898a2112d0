"""Workflows: batches with callbacks, dependencies and chains (issue 19).

- models.py: Batch and Dependency (registered through django_dbqueue.models).
- batches.py: ``batch()``, ``get_batch()``, ``current_batch()``; seal, add, cancel, retry_failed.
- dependencies.py: ``depends_on`` (on ``task.using(...)``) and ``chain()``.
- calls.py: ``call(task, *args, **kwargs)``, and how a callback is stored.
- big.py: the operations that cancel or retry a batch, or carry on a long cascade.
- context.py: the batch being filled, and the job being run.

Every status these change is written by transitions/: what a finished job
sets off (its batch's completion and callbacks, its dependants' release)
is transitions/cascade.py, completion.py and dependants.py, run in the
outcome's own transaction; a batch's cancel and retry are
transitions/batches.py's. Nothing in transitions/ imports this package
but its tables (models.py).
"""

from typing import Any

__all__ = ["batch", "call", "chain", "current_batch", "get_batch"]


def __getattr__(name: str) -> Any:
    # Lazy: django_dbqueue.models imports workflows.models while apps load.
    if name in ("batch", "get_batch", "current_batch", "BatchHandle"):
        from . import batches

        return getattr(batches, name)
    if name == "chain":
        from .dependencies import chain

        return chain
    if name in ("call", "Call"):
        from . import calls

        return getattr(calls, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
