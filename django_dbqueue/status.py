"""The one set of job states. ``models.Status`` and ``Job.Status`` are this."""

from django.db import models


class Status(models.TextChoices):
    # The first four are django.tasks.TaskResultStatus's values.
    READY = "READY", "Ready"
    RUNNING = "RUNNING", "Running"
    SUCCESSFUL = "SUCCESSFUL", "Successful"
    FAILED = "FAILED", "Failed"
    CANCELLED = "CANCELLED", "Cancelled"


# States a job leaves only when a person requeues it.
FINISHED = (Status.SUCCESSFUL, Status.FAILED, Status.CANCELLED)
