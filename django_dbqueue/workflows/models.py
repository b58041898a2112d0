"""The workflows' tables: a Batch groups jobs under callbacks, a Dependency
holds a job back until its parent (a job, or a whole batch) has finished.

Neither holds a count that every finishing job would update: a batch's
progress is counted from its members' rows through the (batch, status)
index, and completion is decided in the finishing outcome's transaction
(transitions/completion.py), so a big batch drained by many workers has no hot row.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now
from django.utils import timezone


class BatchStatus(models.TextChoices):
    """``OPEN`` while being built or running; then one of the three finished states."""

    OPEN = "OPEN", "Open"
    SUCCEEDED = "SUCCEEDED", "Succeeded"
    FAILED = "FAILED", "Failed"  # some member failed or was cancelled
    CANCELLED = "CANCELLED", "Cancelled"


class Batch(models.Model):
    """A group of jobs with callbacks run once when the last one finishes.

    Each callback is ``{"task": dotted path, "args": [...], "kwargs": {...}}``
    or null; the callback job gets ``batch_id=`` among its keyword arguments.
    """

    Status = BatchStatus

    description = models.TextField(blank=True, default="", db_default="")
    metadata = models.JSONField(default=dict, blank=True)
    on_success = models.JSONField(null=True, blank=True)
    on_failure = models.JSONField(null=True, blank=True)
    on_finish = models.JSONField(null=True, blank=True)
    status = models.CharField(
        max_length=10, choices=BatchStatus.choices, default=BatchStatus.OPEN, db_default=BatchStatus.OPEN
    )
    # No completion before the producer says it has added every member:
    # a batch whose first members finish while it is still being filled
    # must not complete early.
    sealed = models.BooleanField(default=False, db_default=False)
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)
    callback_job_ids = models.JSONField(default=list, blank=True)

    class Meta:
        verbose_name_plural = "batches"
        indexes = [models.Index(fields=["status", "id"], name="dbqueue_batch_status_id")]
        permissions = [
            ("cancel_batch", "Can cancel batches"),
            ("retry_batch", "Can retry a batch's failed jobs"),
        ]

    def __str__(self) -> str:
        return f"batch #{self.pk} ({self.status})"


class Dependency(models.Model):
    """``child_id`` waits (Job status WAITING) until this parent has
    finished: a job (``parent_id``) or every member of a batch
    (``parent_batch_id``). No foreign keys: pruning finished jobs must not
    touch this table, nor wait on it."""

    parent_id = models.BigIntegerField(null=True, blank=True)
    parent_batch_id = models.BigIntegerField(null=True, blank=True)
    child_id = models.BigIntegerField()
    resolved = models.BooleanField(default=False, db_default=False)

    class Meta:
        verbose_name_plural = "dependencies"
        indexes = [
            # Release: a finished parent's dependants.
            models.Index(fields=["parent_id", "resolved"], name="dbqueue_dep_parent"),
            models.Index(fields=["parent_batch_id", "resolved"], name="dbqueue_dep_batch"),
            # "Has this child an unresolved parent left?", and a job's parents.
            models.Index(fields=["child_id", "resolved"], name="dbqueue_dep_child"),
        ]

    def __str__(self) -> str:
        parent = f"batch #{self.parent_batch_id}" if self.parent_batch_id else f"#{self.parent_id}"
        return f"#{self.child_id} after {parent}"
