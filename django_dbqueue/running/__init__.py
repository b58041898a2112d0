"""Control over running work, from inside a task: ``current_job()`` gives the
job a worker is running, to check for a cancel, report progress and save
checkpoints that a retry, a recovery or a deploy resumes from (see
docs/cancel.md and docs/progress.md)."""

from .checkpoints import Step
from .job import RunningJob, current_job

__all__ = ["RunningJob", "Step", "current_job"]
