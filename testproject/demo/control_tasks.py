"""Tasks for the process tests of control over running jobs
(tests/test_running_control_processes.py): cancelled, reporting progress,
resumed from checkpoints, interrupted by a deploy. Each leaves Execution
rows, so a test can tell what ran, how far, and in which process."""

import asyncio
import itertools
import os
import time

from asgiref.sync import sync_to_async

from django_dbqueue import current_job, task

from .models import Execution

# Long enough for any test to act on the job while it runs, short enough
# that a job the test failed to stop does not hold the suite for long.
LONG = 120.0


def record(key: str) -> None:
    Execution.objects.create(key=key, pid=os.getpid())


@task(queue_name="slow")
def checks_for_cancel(key: str) -> None:
    """Looks for a cancel (or a stop) every 50 ms, as a well-behaved loop does."""
    record(key)
    job = current_job()
    deadline = time.monotonic() + LONG
    while time.monotonic() < deadline:
        job.check()
        time.sleep(0.05)


@task(queue_name="slow")
def never_checks(key: str) -> None:
    """Never looks: only its worker can stop it (the sleep is interruptible)."""
    record(key)
    time.sleep(LONG)


@task(queue_name="slow")
def holds_the_gil(key: str) -> int:
    """Spins inside one C call that holds the GIL and never looks at signals
    (unlike a regular expression, which CPython interrupts): no thread of
    its process runs, and no signal handler; only SIGKILL stops it."""
    record(key)
    return sum(itertools.repeat(1, 10**12))


@task(queue_name="slow")
async def waits_async(key: str) -> None:
    """Awaits: each await is where its coroutine can be cancelled."""
    await sync_to_async(record)(key)
    await asyncio.sleep(LONG)


@task(queue_name="slow")
def reports_progress(key: str, steps: int, pause: float) -> int:
    record(key)
    job = current_job()
    for done in range(1, steps + 1):
        time.sleep(pause)
        job.progress(done / steps, f"step {done} of {steps}")
    return steps


@task(queue_name="slow")
def counts_with_checkpoints(key: str, total: int, pause: float) -> int:
    """Counts to ``total``, one Execution row per number and a checkpoint
    after each; an attempt resumes from the last saved checkpoint, and says
    where it started with a row ``key:start:N``."""
    job = current_job()
    start = job.cursor or 0
    record(f"{key}:start:{start}")
    for number in range(start, total):
        record(f"{key}:{number}")
        job.checkpoint(number + 1)
        time.sleep(pause)
    return total
