"""Tasks for the tests of what a job's outcome and page keep of its story
(tests/test_unstorable_checkpoints.py, tests/test_job_timeline.py): a last
position that cannot be stored, a progress message with a lone surrogate,
a job interrupted, killed or retried. Each leaves Execution rows."""

import os
import time

from django_dbqueue import current_job, task

from .models import Execution

# What a test's trigger makes the database refuse in a checkpoint (tests/refusals.py).
REFUSED_MARK = "refuse-me"
LONG = 120.0


def record(key: str) -> None:
    Execution.objects.create(key=key, pid=os.getpid())


def bad_position(kind: str) -> object:
    """A position the queue cannot store ("nan"), or one the database refuses ("refused")."""
    return float("nan") if kind == "nan" else {"note": REFUSED_MARK}


@task(queue_name="slow")
def holds_a_bad_position(key: str, kind: str) -> str:
    """Saves a good position, then takes one that cannot be stored, which
    waits in memory for the interval; then waits to be interrupted. Its next
    attempt says where it resumed from."""
    job = current_job()
    record(f"{key}:attempt-{job.attempt}:from-{job.cursor}")
    if job.cursor is not None:
        return "resumed"
    job.checkpoint("good", save=True)
    job.checkpoint(bad_position(kind))  # within the interval: not written yet
    deadline = time.monotonic() + LONG
    while time.monotonic() < deadline:
        job.check()  # raises JobInterrupted once the stop timeout ran out
        time.sleep(0.05)
    return "never interrupted"


@task(queue_name="slow", max_attempts=3)
def fails_after_a_bad_position(key: str, kind: str) -> str:
    """Its first attempt saves a good position, takes one that cannot be
    stored, then fails with its own error; the retry resumes."""
    job = current_job()
    record(f"{key}:attempt-{job.attempt}:from-{job.cursor}")
    if job.attempt > 1:
        return "resumed"
    job.checkpoint("good", save=True)
    job.checkpoint(bad_position(kind))
    raise OSError(f"{key}: the disk is full")


@task(queue_name="slow", max_attempts=1)
def saves_a_bad_position(key: str, kind: str) -> str:
    """Saves a position that cannot be stored at once (the first is written at once)."""
    job = current_job()
    record(key)
    job.checkpoint(bad_position(kind))
    return "saved"


@task(queue_name="slow")
def reports_a_lone_surrogate(key: str) -> str:
    """Reports progress whose message holds a lone surrogate, and waits for
    the heartbeat to write it."""
    job = current_job()
    record(key)
    job.progress(0.5, "half \ud800 way")
    from django_dbqueue.models import Job

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not Job.objects.filter(pk=job.id, progress=0.5).exists():
        time.sleep(0.05)
    return "reported"


@task(queue_name="slow", max_attempts=3)
def fails_first(key: str) -> str:
    """Fails its first attempt, succeeds on the next."""
    job = current_job()
    record(f"{key}:attempt-{job.attempt}")
    if job.attempt == 1:
        raise ConnectionError(f"{key}: the service is down")
    return "done"
