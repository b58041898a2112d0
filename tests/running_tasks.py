"""Tasks for tests/test_running_control.py: each leaves Execution rows, so
that a test sees how far a run got and which attempt did what. Runnable
when OPTIONS ALLOWED_TASK_MODULES names this module (CONTROL_TASKS below)."""

import asyncio
import os
import time

from asgiref.sync import sync_to_async
from django.db import transaction
from django.test import override_settings

from demo.models import Execution
from django_dbqueue import current_job
from django_dbqueue.exceptions import JobCancelled, JobInterrupted
from django_dbqueue.tasks_api import task

# Short intervals, so a test sees a cancel, a progress report and a soft
# stop within a second or two.
CONTROL_TASKS = {
    "default": {
        "BACKEND": "django_dbqueue.backend.DatabaseBackend",
        "QUEUES": ["default"],
        "OPTIONS": {
            "ALLOWED_TASK_MODULES": ["tests.running_tasks"],
            "POLL_INTERVAL_MIN": 0.01,
            "POLL_INTERVAL_MAX": 0.2,
            "RETRY_BACKOFF_BASE": 0.01,
            "RETRY_BACKOFF_MAX": 0.02,
            "CONTROL_INTERVAL": 0.1,
            "CANCEL_GRACE_SECONDS": 0.5,
        },
    }
}


def ran(key: str) -> None:
    Execution.objects.create(key=key, pid=os.getpid())


def released(key: str) -> bool:
    return Execution.objects.filter(key=f"{key}-release").exists()


# Defining a task validates it against the backend, whose allow-list must
# already name this module.
with override_settings(TASKS=CONTROL_TASKS):

    @task
    def checks(key: str, seconds: float = 10.0) -> str:
        """Checks for a cancel in its loop; says when it saw the request."""
        job = current_job()
        assert job is not None
        ran(key)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if job.cancel_requested():
                ran(f"{key}-saw-request")
            job.check()
            time.sleep(0.01)
        return "ran to the end"

    @task
    def never_checks(key: str, seconds: float = 10.0) -> str:
        """Sleeps in one call and never looks: only the soft stop ends it early."""
        ran(key)
        try:
            time.sleep(seconds)
        except BaseException as exc:
            ran(f"{key}-stopped-by-{type(exc).__name__}")
            raise
        return "slept to the end"

    @task
    async def waits(key: str, seconds: float = 10.0) -> str:
        await sync_to_async(ran)(key)
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            await sync_to_async(ran)(f"{key}-cancelled")
            raise
        return "waited to the end"

    @task
    def reports(key: str) -> str:
        """Reports progress, waits for the test to see it in the row, then a second report."""
        job = current_job()
        assert job is not None
        ran(key)
        job.progress(0.25, "a quarter done")
        deadline = time.monotonic() + 10
        while not released(key) and time.monotonic() < deadline:
            job.progress(0.25)  # a tight loop of reports costs nothing
            time.sleep(0.01)
        job.progress(1.5)  # clamped to 1.0 when written
        while not Execution.objects.filter(key=f"{key}-release2").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return "reported"

    @task(max_attempts=3)
    def resumable(key: str, fail_at: int, items: int = 5) -> str:
        """Two steps; the second fails at item ``fail_at`` on the first attempt only."""
        job = current_job()
        assert job is not None
        job.step("one", _one, key)
        return job.step("two", _two, key, fail_at, items)

    def _one(step, key: str) -> None:  # noqa: ANN001
        ran(f"{key}-one")

    def _two(step, key: str, fail_at: int, items: int) -> str:  # noqa: ANN001
        job = current_job()
        assert job is not None
        start = 0 if step.cursor is None else step.cursor + 1
        for index in range(start, items):
            ran(f"{key}-{index}-attempt-{job.attempt}")
            step.advance(index)
            if index == fail_at and job.attempt == 1:
                raise RuntimeError(f"{key} fails at item {index} on purpose")
        return "done"

    @task(max_attempts=2)
    def loops_with_checkpoints(key: str, items: int = 1000, pause: float = 0.02) -> int:
        """Advances a cursor item by item, with a pause each: a long job a
        deploy interrupts; its next run resumes after the last saved item."""
        job = current_job()
        assert job is not None
        start = 0 if job.cursor is None else job.cursor + 1
        ran(f"{key}-from-{start}")
        for index in range(start, items):
            time.sleep(pause)
            job.checkpoint(index)
        return items

    @task(max_attempts=2)
    def in_own_transaction(key: str) -> str:
        """A checkpoint inside the task's own transaction, which then rolls back."""
        job = current_job()
        assert job is not None
        if job.attempt == 2:
            ran(f"{key}-resumed-from-{job.cursor}")
            return "resumed"
        job.checkpoint("outside", save=True)
        with transaction.atomic():
            ran(f"{key}-rolled-back")
            job.checkpoint("inside", save=True)
            raise RuntimeError("the transaction and its work roll back")

    @task
    def saves(key: str) -> str:
        """Saves a checkpoint at once, then waits to be released."""
        job = current_job()
        assert job is not None
        ran(key)
        job.checkpoint("first", save=True)
        deadline = time.monotonic() + 10
        while not released(key) and time.monotonic() < deadline:
            time.sleep(0.01)
        job.checkpoint("second", save=True)
        return "saved"

    @task(atomic=True, max_attempts=2)
    def atomic_steps(key: str) -> str:
        """An atomic task: its checkpoints are never written (they would
        commit or roll back with its work), so a retry starts over."""
        job = current_job()
        assert job is not None
        ran(f"{key}-attempt-{job.attempt}-cursor-{job.cursor}")
        job.progress(0.5, "half, from inside the transaction")
        job.checkpoint("inside", save=True)
        if job.attempt == 1:
            raise RuntimeError("the first attempt rolls back")
        return "atomic"

    @task(max_attempts=2)
    async def async_steps(key: str) -> str:
        """Steps and checkpoints from a coroutine; the first attempt fails
        after step one and half of step two."""
        job = current_job()
        assert job is not None
        try:
            job.checkpoint("sync, in an event loop")
        except RuntimeError as exc:
            said = "an async task may not do from its event loop: use `await job.acheckpoint(...)`"
            await sync_to_async(ran)(f"{key}-refused" if said in str(exc) else f"{key}-refused-unsaid")
        await job.astep("one", _async_one, key)
        return await job.astep("two", _async_two, key)

    async def _async_one(step, key: str) -> None:  # noqa: ANN001
        await sync_to_async(ran)(f"{key}-one")

    async def _async_two(step, key: str) -> str:  # noqa: ANN001
        job = current_job()
        assert job is not None
        await sync_to_async(ran)(f"{key}-two-from-{step.cursor}")
        await step.aadvance("half way", save=True)
        if job.attempt == 1:
            raise RuntimeError("fails half way through step two")
        return "async done"

    @task(max_attempts=2)
    def cancels_itself(key: str) -> None:
        ran(key)
        raise JobCancelled("nothing left to do: the task ends its own job CANCELLED")

    @task(max_attempts=2)
    def raises_interrupted(key: str) -> None:
        """JobInterrupted while its worker is not stopping: an ordinary failure."""
        ran(key)
        raise JobInterrupted("raised by the task, not by a stopping worker")
