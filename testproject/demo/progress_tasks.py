"""Tasks that report progress and save checkpoints, for the tests of what
get_result() and the admin show of a running job."""

import time

from django_dbqueue import current_job, task
from django_dbqueue.tasks_api import default_task_backend


@task
def reports_progress(total: int) -> dict:
    """Report half way, then say what get_result() shows of the job meanwhile."""
    job = current_job()
    job.progress(0.5, f"{total // 2} of {total}")
    seen = default_task_backend.get_result(str(job.id))
    return {"status": seen.status, "progress": seen.progress, "message": seen.progress_message}


@task
def counts_until_stopped(seconds: float) -> int:
    """Report progress every 10 ms for ``seconds``: stopped by a cancel at its next report."""
    job = current_job()
    steps = int(seconds * 100)
    for step in range(1, steps + 1):
        time.sleep(0.01)
        job.progress(step / steps, f"step {step} of {steps}")
    return steps
