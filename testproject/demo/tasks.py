"""Tasks used by the demo and the tests."""

import asyncio
import os
import time

from django.tasks import task

from .models import Execution


@task
def noop() -> None:
    return None


@task
def add(a: int, b: int) -> int:
    return a + b


@task(queue_name="email", priority=10)
def send_welcome(user_id: int) -> str:
    return f"welcome mail for user {user_id}"


@task
def record(key: str) -> str:
    """Leave a side effect that tests can count: one Execution row per run."""
    Execution.objects.create(key=key, pid=os.getpid())
    return key


@task(max_attempts=4)
def flaky(key: str, failures: int) -> str:
    """Fail the first ``failures`` runs, then succeed."""
    Execution.objects.create(key=key, pid=os.getpid())
    runs = Execution.objects.filter(key=key).count()
    if runs <= failures:
        raise RuntimeError(f"{key}: failing run {runs} of {failures} on purpose")
    return runs


@task(max_attempts=2)
def always_fails(reason: str) -> None:
    raise ValueError(reason)


@task(queue_name="slow")
def sleep(seconds: float, key: str = "") -> float:
    if key:
        Execution.objects.create(key=key, pid=os.getpid())
    time.sleep(seconds)
    return seconds


@task(takes_context=True)
def which_attempt(context) -> int:  # noqa: ANN001
    return context.attempt


@task
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@task
def returns_object() -> object:
    return object()


@task(max_attempts=3)
def kill_worker(key: str) -> None:
    """Kill the worker process running it, as a segfault or OOM kill would."""
    Execution.objects.create(key=key, pid=os.getpid())
    os._exit(9)


def not_a_task() -> str:
    return "a plain function must never be run from a job row"


@task(max_attempts=2)
def segfault(key: str) -> None:
    """Crash the worker with SIGSEGV, as a bad C extension would."""
    import ctypes

    Execution.objects.create(key=key, pid=os.getpid())
    ctypes.string_at(0)


@task(timeout=1, max_attempts=2)
def hang(key: str) -> None:
    """Never return on its own: only the timeout's alarm ends it."""
    Execution.objects.create(key=key, pid=os.getpid())
    time.sleep(3600)


@task(timeout=1, max_attempts=1)
def stuck_in_c(key: str) -> int:
    """Spin inside one C call that holds the GIL and never checks for
    signals: no signal handler and no other thread of this process runs."""
    import itertools

    Execution.objects.create(key=key, pid=os.getpid())
    return sum(itertools.repeat(1, 10**12))
