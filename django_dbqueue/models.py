from datetime import datetime, timedelta

from django.db import models
from django.db.models.functions import Now
from django.utils import timezone

from .fields import KeyField
from .jsonfield import TolerantJSONField
from .schedules.table import Schedule
from .status import FINISHED, Status
from .transitions import JobQuerySet, WorkerQuerySet
from .workflows.models import Batch, BatchStatus, Dependency

__all__ = [
    "FINISHED",
    "Batch",
    "BatchStatus",
    "Dependency",
    "ConcurrencyLock",
    "Dashboard",
    "Job",
    "PausedQueue",
    "RateSlot",
    "Schedule",
    "ScheduledRun",
    "Status",
    "Worker",
]


class Job(models.Model):
    """One enqueued task run: its call, its place in the queue and its outcome.

    Every column but ``task_path`` has a database default, so a row written
    by a plain SQL ``INSERT`` from any language is a valid job.
    """

    Status = Status

    task_path = models.CharField(max_length=255)
    queue_name = models.CharField(max_length=64, default="default", db_default="default")
    priority = models.SmallIntegerField(default=0, db_default=0)
    args = TolerantJSONField(default=list, db_default=[])
    kwargs = TolerantJSONField(default=dict, db_default={})
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.READY, db_default=Status.READY
    )
    run_after = models.DateTimeField(default=timezone.now, db_default=Now())
    attempts = models.PositiveIntegerField(default=0, db_default=0)
    max_attempts = models.PositiveIntegerField(default=3, db_default=3)
    # Set when a dead worker's batch is recovered: we cannot tell which of
    # its jobs had started, so each is next claimed alone, its attempt
    # counted in the claim (see docs/guarantees.md).
    suspect = models.BooleanField(default=False, db_default=False)
    owner = models.CharField(max_length=128, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(default=timezone.now, db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)
    # When the latest claim took the job (the database's now), set by the
    # claim's own UPDATE at no extra cost: a batch claim records no start,
    # so this is what the job's page can say of a run in progress.
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_attempted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    return_value = TolerantJSONField(null=True, blank=True)
    # The latest attempts' errors (payload.MAX_ERRORS), each with its
    # exception class, traceback, time and worker.
    errors = TolerantJSONField(default=list, db_default=[], blank=True)
    worker_ids = TolerantJSONField(default=list, db_default=[], blank=True)
    # Earlier runs, one summary each, written when a finished job is requeued
    # (transitions.MAX_HISTORY of them), so that a requeued job starts clean.
    history = TolerantJSONField(default=list, db_default=[], blank=True)
    # Held only while the job is unfinished (READY or RUNNING): the transitions
    # that finish a job clear it, so a unique index enforces "one unfinished job
    # per key" without the partial index MySQL lacks (see unique.py).
    # Keys compare byte for byte on every database (fields.KeyField).
    unique_key = KeyField(max_length=255, null=True, blank=True, unique=True)
    # At most concurrency_limit jobs of one concurrency_key RUNNING at once
    # (transitions/claim.py, claim_limited); NULL for the ordinary job, which the usual claim takes.
    concurrency_key = KeyField(max_length=255, null=True, blank=True)
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    # Fair share (transitions/fair.py): jobs of several fairness keys (tenants, say)
    # are claimed in turns, by OPTIONS FAIRNESS_WEIGHTS; NULL for the ordinary job.
    fairness_key = KeyField(max_length=191, null=True, blank=True)
    # At most N jobs of one rate_key claimed in any window of the period
    # ("100/m": rates.py, transitions/rated.py); NULL for the ordinary job.
    # On the row, so a producer in SQL can set it like any other column.
    rate_key = KeyField(max_length=191, null=True, blank=True)
    rate_limit = models.CharField(max_length=16, null=True, blank=True)
    # Workflows (workflows/): the batch this job belongs to, and whether any
    # Dependency names it as parent. Both are on the row the worker already
    # holds, so recording a plain job's outcome looks at nothing else.
    # No database constraint: pruning must not wait on the batch table.
    batch = models.ForeignKey(
        Batch,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # the partial (batch, status) index below serves it
        related_name="jobs",
    )
    has_dependants = models.BooleanField(default=False, db_default=False)
    # What a parent's failure or cancellation does to this job: "cancel" it,
    # or "run" it anyway; pass_result prepends its parents' return values
    # to its arguments when it is released (a chain).
    on_parent_failure = models.CharField(max_length=6, default="cancel", db_default="cancel")
    pass_result = models.BooleanField(default=False, db_default=False)
    # Control over a running job (running/, transitions/running.py). Setting
    # cancel_requested_at is how the admin, code and SQL all ask for a
    # cancel, whatever the job's state; like unique_key it is held only
    # while the job is unfinished (every transition that finishes a job
    # clears it), so its index holds the pending requests and nothing else.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # The latest progress the task reported (0..1, None: none), written by
    # the heartbeat under the worker's lease; progress_at on the database's clock.
    progress = models.FloatField(null=True, blank=True)
    progress_message = models.CharField(max_length=255, blank=True, default="", db_default="")
    progress_at = models.DateTimeField(null=True, blank=True)
    # The task's saved cursor (steps done, the step in progress and its
    # position): the next attempt, after a retry, a crash or a deploy, resumes from it.
    checkpoint = TolerantJSONField(null=True, blank=True)
    # Times a stopping worker gave the job back unfinished, its attempt unspent.
    interruptions = models.PositiveIntegerField(default=0, db_default=0)
    # Times the task snoozed (raised Snooze): given back for a while, its
    # attempt unspent (migration 0021).
    snoozes = models.PositiveIntegerField(default=0, db_default=0)
    # The deadline for a run to start (the task's or the call's expires=;
    # NULL: none). A worker that claims the job after it ends it CANCELLED,
    # "expired", without running it (migration 0022). No index: it is read
    # with the claimed row, never searched.
    expires_at = models.DateTimeField(null=True, blank=True)
    # A small JSON object the enqueue gave (enqueue/metadata.py), read by
    # the task (current_job().metadata) and shown in the admin; it carries
    # the enqueuing trace context under "trace_context" (tracing.py).
    metadata = TolerantJSONField(default=dict, db_default={}, blank=True)
    # Which bulk_enqueue() chunk wrote the row, on MySQL only: it has no
    # INSERT ... RETURNING, so a chunk reads its ids back by this random
    # token (enqueue/inserting.py). No index: the read starts at the
    # chunk's first id. NULL for every other row; nothing clears it.
    bulk_token = models.BigIntegerField(null=True, blank=True, editable=False)

    objects = JobQuerySet.as_manager()

    class Meta:
        indexes = [
            # Serves the claim: equality on status and queue, then the claim's
            # ORDER BY, so a claim reads about `limit` entries however many
            # finished jobs the table holds. MySQL has no partial indexes.
            # concurrency_key, rate_key and fairness_key sit between them: the
            # usual claim asks for all three IS NULL, equalities for the index;
            # the claim of a limited key, of a rate key (ordered by fairness_key
            # first, NULL for its own jobs) or of a fairness key (rate_key IS
            # NULL) reads that key's jobs in claim order; and the fair claim's
            # distinct keys are a loose scan.
            models.Index(
                fields=[
                    "status",
                    "queue_name",
                    "concurrency_key",
                    "rate_key",
                    "fairness_key",
                    "-priority",
                    "run_after",
                ],
                name="dbqueue_job_claim_keys",
            ),
            # Counting a key's RUNNING jobs, whatever their queue. Partial in
            # the database (migration 0020): only jobs with a key are in it, so
            # no other job's claim or outcome moves an entry of it; on MySQL
            # and MariaDB, which have no partial indexes, through a virtual
            # column. Not declared partial here: Django warns (models.W037)
            # on every command where a database has no partial indexes.
            models.Index(fields=["concurrency_key", "status"], name="dbqueue_job_keyed_status"),
            # The admin lists newest first, filtered by status, queue or task:
            # each filter's equality column, then id, so a page reads one index
            # range backwards instead of sorting the table. They also make the
            # filters' DISTINCT lists a loose index scan. (status, id) also
            # serves lease recovery and the heartbeat: the RUNNING range, as
            # many rows as the workers hold, each lease checked on its row.
            # The lease has no index of its own (migration 0027), so no
            # claim, outcome or heartbeat moves a lease entry.
            models.Index(fields=["status", "id"], name="dbqueue_job_status_id"),
            models.Index(fields=["queue_name", "id"], name="dbqueue_job_queue_id"),
            models.Index(fields=["task_path", "id"], name="dbqueue_job_task_id"),
            # The dashboard's jobs-per-minute chart and prune() read by finish time.
            models.Index(fields=["finished_at"], name="dbqueue_job_finished"),
            # A batch's counts, and its completion check's "any member
            # unfinished?". Partial in the database, as the key's above.
            models.Index(fields=["batch", "status"], name="dbqueue_job_batched_status"),
            # The heartbeat's look for cancel requests of running jobs. Only
            # pending requests are in it (a finished job's is cleared), and
            # no claim or outcome touches it: status is deliberately not in it.
            models.Index(fields=["cancel_requested_at"], name="dbqueue_job_cancel"),
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


class ScheduledRun(models.Model):
    """One run of a schedule that was enqueued. The unique (schedule,
    scheduled_at) pair is what makes every runqueue process on every host
    enqueue each scheduled run exactly once (schedules/runs.py)."""

    # Compared byte for byte (fields.KeyField): "Report" and "rèport" are
    # schedules of their own, whatever the table's collation.
    schedule = KeyField(max_length=200)
    scheduled_at = models.DateTimeField()
    enqueued_at = models.DateTimeField(default=timezone.now, db_default=Now())
    # No foreign key: pruning finished jobs must not touch this table.
    job_id = models.BigIntegerField(null=True, blank=True)
    # A person's "run now": not a scheduled time, so it does not move the schedule on.
    manual = models.BooleanField(default=False, db_default=False)

    class Meta:
        # Its admin page is every schedule's, with their runs and Run now
        # (admin/schedules.py); the database's schedules are "Stored schedules".
        verbose_name_plural = "all schedules"
        constraints = [
            models.UniqueConstraint(fields=["schedule", "scheduled_at"], name="dbqueue_run_once"),
        ]
        # Each tick reads every schedule's latest scheduled (not manual) run:
        # one index dive per schedule, however many runs are kept.
        indexes = [models.Index(fields=["schedule", "manual", "scheduled_at"], name="dbqueue_run_last")]
        permissions = [("run_schedule_now", "Can run a schedule now")]

    def __str__(self) -> str:
        return f"{self.schedule} at {self.scheduled_at:%Y-%m-%d %H:%M:%S}"


class ConcurrencyLock(models.Model):
    """One row per concurrency key, locked while a claimer counts that key's
    running jobs and claims more, so claims of one key take turns while
    claims of other keys, and of unlimited jobs, never wait for them."""

    key = KeyField(max_length=255, unique=True)

    def __str__(self) -> str:
        return self.key


class UniqueWindow(models.Model):
    """The job that holds a key for one window of a task unique for a
    period (``@task(unique_key=..., unique_period=...)``, enqueue/windows.py):
    finished or not, until the job is pruned, or ends FAILED or CANCELLED
    and the next call of the window takes the key. ``window``: the
    window's start, in microseconds since the Unix epoch (UTC)."""

    key = KeyField(max_length=255)
    window = models.BigIntegerField()
    job_id = models.BigIntegerField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "window"], name="dbqueue_window_once")]

    def __str__(self) -> str:
        """``key@2026-11-28T00:00:00Z``: the key and its window's start, as pages and messages show it."""
        start = datetime(1970, 1, 1) + timedelta(microseconds=self.window)
        return f"{self.key}@{start.isoformat()}Z"


class SequenceTail(models.Model):
    """The latest job of each sequence key (``@task(sequence_key=...)``,
    enqueue/sequences.py): the next job of the key waits for it. Its row is
    locked while a producer appends a job, so producers of one key take
    turns and the jobs run in the order they were enqueued."""

    key = KeyField(max_length=255, unique=True)
    job_id = models.BigIntegerField(null=True)

    def __str__(self) -> str:
        return self.key


class ArchivedJob(models.Model):
    """A finished job that retention deleted with ``OPTIONS["ARCHIVE"]`` on:
    its id, the columns people look it up by, and its whole row as JSON,
    written in the transaction that deleted it (transitions/pruning.py).
    Nothing reads it but people: it is never claimed, and no index of the
    job table grows with it."""

    id = models.BigIntegerField(primary_key=True)  # the job's own id
    task_path = models.CharField(max_length=255)
    queue_name = models.CharField(max_length=64)
    status = models.CharField(max_length=16)
    enqueued_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)
    archived_at = models.DateTimeField(default=timezone.now)
    row = TolerantJSONField(default=dict)  # every column of the job, as JSON

    class Meta:
        # "Archive" in the admin's index, apart from "Jobs".
        verbose_name, verbose_name_plural = "archived job", "archive"
        indexes = [
            models.Index(fields=["task_path", "id"], name="dbqueue_archive_task_id"),
            models.Index(fields=["finished_at"], name="dbqueue_archive_finished"),
        ]

    def __str__(self) -> str:
        return f"{self.task_path} #{self.pk} ({self.status}, archived)"


class JobTag(models.Model):
    """One tag of a job (``@task(tags=...)``, enqueue/tags.py), written with
    the job; the admin's search ``tag:NAME`` reads the (tag, job) index, and
    retention deletes a job's tags with it."""

    tag = KeyField(max_length=64)
    job_id = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tag", "job_id"], name="dbqueue_tag_job")]
        indexes = [models.Index(fields=["job_id"], name="dbqueue_tag_of_job")]

    def __str__(self) -> str:
        return self.tag


class RateSlot(models.Model):
    """One of the N slots of a rate key of limit N per period: free once
    ``free_at`` has passed, and moved a period on by the claim that uses it
    (transitions/rated.py). A key's slots are made by the claims that need
    them, no more than each takes; slots past a lowered N are no longer used. A slot free for
    more than an hour is deleted (operations/retention.py): absent and free
    are the same to a claim, which makes it again."""

    key = KeyField(max_length=191)
    slot = models.PositiveIntegerField()
    free_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "slot"], name="dbqueue_rate_slot")]
        # The prune of idle slots reads the oldest free_at first.
        indexes = [models.Index(fields=["free_at"], name="dbqueue_rate_slot_free")]

    def __str__(self) -> str:
        return f"{self.key} #{self.slot}"


class PausedQueue(models.Model):
    """A queue no worker claims from while this row exists (pausing.py).
    Jobs already claimed finish; deleting the row resumes the queue."""

    queue_name = models.CharField(max_length=64, unique=True)
    paused_at = models.DateTimeField(default=timezone.now)
    paused_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        default_permissions = ("view",)
        permissions = [("pause_queue", "Can pause and resume queues")]

    def __str__(self) -> str:
        return self.queue_name


class Dashboard(Job):
    """No data of its own: registering it puts a "Dashboard" link in the
    admin's app list whatever the order of INSTALLED_APPS, which a template
    override of the admin index cannot promise."""

    class Meta:
        proxy = True
        verbose_name = verbose_name_plural = "dashboard"
        default_permissions = ()
