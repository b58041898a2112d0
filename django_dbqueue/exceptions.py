from django.tasks.exceptions import InvalidTask


class InvalidTaskArguments(InvalidTask, TypeError):
    """Arguments that cannot be stored as a job: not JSON, or too large."""


class WorkerLost(Exception):
    """Recorded as a job's error when its worker died while running it."""


class JobNotRunnable(Exception):
    """A job row that cannot be run as it stands: its task path does not name
    a task, or its arguments no longer fit the function. Retrying cannot help."""


class JobTimeout(Exception):
    """Raised in a job that ran past its ``timeout``; it counts as a failed attempt."""
