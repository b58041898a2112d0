"""A MySQL/MariaDB table as a fast, crash-safe job queue for django.tasks."""

from typing import Any

from .version import __version__ as __version__

__all__ = ["batch", "bulk_enqueue", "call", "chain", "current_batch", "current_job", "get_batch", "task"]


def __getattr__(name: str) -> Any:
    # Lazy, so importing the app package (as INSTALLED_APPS does) stays cheap.
    if name == "bulk_enqueue":
        from .backend import bulk_enqueue

        return bulk_enqueue
    if name == "task":
        from .enqueue.decorator import task

        return task
    if name == "current_job":
        from .running import current_job

        return current_job
    if name in ("batch", "call", "chain", "current_batch", "get_batch"):
        from . import workflows

        return getattr(workflows, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
