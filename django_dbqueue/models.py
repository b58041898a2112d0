from django.db import models
from django.db.models.functions import Now
from django.utils import timezone

from .query import JobQuerySet, WorkerQuerySet


class Status(models.TextChoices):
    # The first four are django.tasks.TaskResultStatus's values.
    READY = "READY", "Ready"
    RUNNING = "RUNNING", "Running"
    SUCCESSFUL = "SUCCESSFUL", "Successful"
    FAILED = "FAILED", "Failed"
    CANCELLED = "CANCELLED", "Cancelled"


class Job(models.Model):
    """One enqueued task run: its call, its place in the queue and its outcome.

    Every column but ``task_path`` has a database default, so a row written
    by a plain SQL ``INSERT`` from any language is a valid job.
    """

    Status = Status

    task_path = models.CharField(max_length=255)
    queue_name = models.CharField(max_length=64, default="default", db_default="default")
    priority = models.SmallIntegerField(default=0, db_default=0)
    args = models.JSONField(default=list, db_default=[])
    kwargs = models.JSONField(default=dict, db_default={})
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.READY, db_default=Status.READY
    )
    run_after = models.DateTimeField(default=timezone.now, db_default=Now())
    attempts = models.PositiveIntegerField(default=0, db_default=0)
    max_attempts = models.PositiveIntegerField(default=3, db_default=3)
    # Set when a dead worker's batch is recovered: we cannot tell which of
    # its jobs had started, so each is next claimed alone, its attempt
    # counted in the claim (see README, "Delivery guarantee").
    suspect = models.BooleanField(default=False, db_default=False)
    owner = models.CharField(max_length=128, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(default=timezone.now, db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)
    last_attempted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    return_value = models.JSONField(null=True, blank=True)
    errors = models.JSONField(default=list, db_default=[], blank=True)
    worker_ids = models.JSONField(default=list, db_default=[], blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        indexes = [
            # Serves the claim: equality on status and queue, then the claim's
            # ORDER BY, so a claim reads about `limit` entries however many
            # finished jobs the table holds. MySQL has no partial indexes.
            models.Index(
                fields=["status", "queue_name", "-priority", "run_after"],
                name="dbqueue_job_claim",
            ),
            # Lease recovery looks for RUNNING jobs whose lease ran out.
            models.Index(fields=["status", "lease_expires_at"], name="dbqueue_job_lease"),
            # The admin lists newest first, filtered by status, queue or task:
            # each filter's equality column, then id, so a page reads one index
            # range backwards instead of sorting the table. They also make the
            # filters' DISTINCT lists a loose index scan.
            models.Index(fields=["status", "id"], name="dbqueue_job_status_id"),
            models.Index(fields=["queue_name", "id"], name="dbqueue_job_queue_id"),
            models.Index(fields=["task_path", "id"], name="dbqueue_job_task_id"),
            # The dashboard's jobs-per-minute chart and prune() read by finish time.
            models.Index(fields=["finished_at"], name="dbqueue_job_finished"),
        ]
        permissions = [
            ("requeue_job", "Can requeue jobs"),
            ("cancel_job", "Can cancel jobs"),
            ("run_job_now", "Can make jobs due now"),
        ]

    def __str__(self) -> str:
        return f"{self.task_path} #{self.pk} ({self.status})"


class Worker(models.Model):
    """A live (or recently live) worker process, kept fresh by its heartbeat."""

    name = models.CharField(max_length=128, unique=True)
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list)
    started_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now, db_index=True)
    processed = models.PositiveBigIntegerField(default=0)
    failed = models.PositiveBigIntegerField(default=0)

    objects = WorkerQuerySet.as_manager()

    def __str__(self) -> str:
        return self.name


class Dashboard(Job):
    """No data of its own: registering it puts a "Dashboard" link in the
    admin's app list whatever the order of INSTALLED_APPS, which a template
    override of the admin index cannot promise."""

    class Meta:
        proxy = True
        verbose_name = verbose_name_plural = "dashboard"
        default_permissions = ()
