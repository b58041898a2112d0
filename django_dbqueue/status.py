"""The one set of job states. ``models.Status`` and ``Job.Status`` are this."""

from django.db import models


class Status(models.TextChoices):
    """A job's state. ``READY``: waiting until due, then for a worker (a
    failed attempt with attempts left comes back here after its backoff).
    ``RUNNING``: claimed by a worker under a lease. ``SUCCESSFUL``,
    ``FAILED`` (out of attempts, or not runnable) and ``CANCELLED`` are
    finished: a job leaves them only when a person requeues it.
    ``WAITING``: its parents have not all finished (workflows)."""

    # The first four are django.tasks.TaskResultStatus's values.
    READY = "READY", "Ready"
    RUNNING = "RUNNING", "Running"
    SUCCESSFUL = "SUCCESSFUL", "Successful"
    FAILED = "FAILED", "Failed"
    CANCELLED = "CANCELLED", "Cancelled"
    # Ours: a job whose parents (workflows) have not all finished. Never
    # claimed, it spends no attempt; a TaskResult shows it as READY.
    WAITING = "WAITING", "Waiting"


# States a job leaves only when a person requeues it.
FINISHED = (Status.SUCCESSFUL, Status.FAILED, Status.CANCELLED)
