"""Tasks that report progress and save checkpoints, for the tests of what
get_result() and the admin show of a running job."""

from django_dbqueue import current_job, task
from django_dbqueue.tasks_api import default_task_backend


@task
def reports_progress(total: int) -> dict:
    """Report half way, then say what get_result() shows of the job meanwhile."""
    job = current_job()
    job.progress(0.5, f"{total // 2} of {total}")
    seen = default_task_backend.get_result(str(job.id))
    return {"status": seen.status, "progress": seen.progress, "message": seen.progress_message}
