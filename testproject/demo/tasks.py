"""Tasks used by the demo and the tests."""

import asyncio
import os
import time

from django.db import close_old_connections, connection, transaction

from django_dbqueue import current_job, task

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


@task(takes_context=True)
def describe_own_task(context) -> dict:  # noqa: ANN001
    """What the running job's context says about its own task."""
    own = context.task_result.task
    run_after = own.run_after.isoformat() if own.run_after else None
    return {"priority": own.priority, "queue_name": own.queue_name, "run_after": run_after}


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


# -- worst cases for the guarantees (tests/test_guarantees.py) ---------------------


@task(max_attempts=2)
def returns_big(key: str, size: int) -> str:
    """Return ``size`` bytes: more than MAX_RETURN_BYTES, or many of these in a batch."""
    Execution.objects.create(key=key, pid=os.getpid())
    return "x" * size


@task(max_attempts=2)
def raises_big(key: str, size: int) -> None:
    Execution.objects.create(key=key, pid=os.getpid())
    raise ValueError("y" * size)


@task(max_attempts=2)
def returns_nested(key: str, depth: int) -> list:
    Execution.objects.create(key=key, pid=os.getpid())
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@task(max_attempts=2)
def returns_long_int(key: str, digits: int) -> int:
    Execution.objects.create(key=key, pid=os.getpid())
    return 10 ** (digits - 1)


@task(max_attempts=1)
def keeps_position(digits: int) -> str:
    """Saves the integer of ``digits`` digits as its position, at once."""
    current_job().checkpoint({"n": 10 ** (digits - 1)}, save=True)
    return "saved"


@task(max_attempts=2)
def exits(key: str) -> None:
    """sys.exit() inside a task: the task's own SystemExit, not the worker's."""
    import sys

    Execution.objects.create(key=key, pid=os.getpid())
    sys.exit(3)


@task(max_attempts=2)
def interrupts(key: str) -> None:
    """A KeyboardInterrupt the task raises itself (no signal was sent)."""
    Execution.objects.create(key=key, pid=os.getpid())
    raise KeyboardInterrupt


@task(max_attempts=2)
async def cancelled(key: str) -> None:
    await asyncio.to_thread(Execution.objects.create, key=key, pid=os.getpid())
    raise asyncio.CancelledError


@task(timeout=1, max_attempts=1)
async def slow_async(key: str) -> None:
    """Sleeps past its timeout; leaves "<key>-cancelled" if it was cancelled,
    "<key>-finished" if it ran on regardless."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        await asyncio.to_thread(Execution.objects.create, key=f"{key}-cancelled", pid=os.getpid())
        raise
    await asyncio.to_thread(Execution.objects.create, key=f"{key}-finished", pid=os.getpid())


@task(queue_name="slow")
def holds_gil(key: str, loops: int) -> int:
    """One C call that holds the GIL throughout: no thread of this process runs."""
    import itertools

    Execution.objects.create(key=key, pid=os.getpid())
    return sum(itertools.repeat(1, loops))


@task(queue_name="slow")
def sleeps_in_database(key: str, seconds: float) -> None:
    """The job in hand sits in one database call (C code) for ``seconds``."""
    Execution.objects.create(key=key, pid=os.getpid())
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT SLEEP(%s)" if connection.vendor == "mysql" else "SELECT pg_sleep(%s)", [seconds]
        )


@task(unique_key=lambda key: f"record:{key}")
def record_once(key: str) -> str:
    """record(), but one unfinished job per key."""
    Execution.objects.create(key=key, pid=os.getpid())
    return key


@task(unique_key="the-singleton", on_duplicate="raise")
def singleton() -> None:
    return None


@task(concurrency_key=lambda customer, index, seconds: f"customer:{customer}", concurrency_limit=2)
def per_customer(customer: str, index: int, seconds: float) -> int:
    """Counts the RUNNING jobs of its key as it starts (the limit's slots),
    and leaves a start and an end mark, so tests can check the limit."""
    from django_dbqueue.models import Job

    Execution.objects.create(key=f"start:{index}", pid=os.getpid())
    holding = Job.objects.filter(concurrency_key=f"customer:{customer}", status="RUNNING").count()
    time.sleep(seconds)
    Execution.objects.create(key=f"end:{index}", pid=os.getpid())
    return holding


# -- atomic tasks (tests/test_atomic.py, benchmarks/chaos.py --task atomic) --------


@task(atomic=True)
def record_atomic(key: str) -> str:
    """record(), with its insert and the job's success in one transaction."""
    Execution.objects.create(key=key, pid=os.getpid())
    return key


@task(atomic=True, max_attempts=2)
def record_then_fail(key: str) -> None:
    Execution.objects.create(key=key, pid=os.getpid())
    raise RuntimeError(f"{key}: failing after the insert, on purpose")


@task(atomic=True, queue_name="slow")
def record_then_sleep(key: str, seconds: float) -> str:
    """Inserts, then waits: long enough to be paused past its lease."""
    Execution.objects.create(key=key, pid=os.getpid())
    time.sleep(seconds)
    return key


@task(queue_name="slow")
def record_then_sleep_plain(key: str, seconds: float) -> str:
    Execution.objects.create(key=key, pid=os.getpid())
    time.sleep(seconds)
    return key


@task(atomic=True, max_attempts=2)
def record_then_set_rollback(key: str) -> str:
    """Marks its transaction for rollback and returns, as DRF's exception handler does."""
    Execution.objects.create(key=key, pid=os.getpid())
    transaction.set_rollback(True)
    return key


@task(atomic=True, max_attempts=2)
def record_then_close_connections(key: str) -> str:
    """Calls close_old_connections() in its transaction, which closes the connection."""
    Execution.objects.create(key=key, pid=os.getpid())
    close_old_connections()
    return key


@task(atomic=True, max_attempts=2)
def record_atomic_unless(key: str, then: str = "") -> str:
    """record_atomic(), or after its insert: ``then="fail"`` raises, ``then="close"``
    closes the connection, ``then="commit"`` runs a raw COMMIT, inserts again
    and raises (tests/test_atomic.py, the atomic group's members)."""
    Execution.objects.create(key=key, pid=os.getpid())
    if then == "fail":
        raise RuntimeError(f"{key}: failing after the insert, on purpose")
    if then == "close":
        close_old_connections()
    if then == "commit":  # behind Django's back, then fails: its worker must live on
        with connection.cursor() as cursor:
            cursor.execute("COMMIT")
        Execution.objects.create(key=f"{key}-after-commit", pid=os.getpid())
        raise RuntimeError(f"{key}: failing after a raw COMMIT, on purpose")
    return key


@task(fairness_key=lambda tenant, index: f"tenant:{tenant}")
def per_tenant(tenant: str, index: int) -> int:
    """A tenant's job: claims share the batch among tenants (transitions/fair.py)."""
    return index


# -- rate limits (tests/test_rate_limits*.py, benchmarks/rate_limits.py) ------------


@task(rate_limit="60/m", rate_key=lambda customer, index: f"customer:{customer}")
def rated(customer: str, index: int) -> int:
    """Leaves a start mark ("rated:<customer>:<index>"), so tests can count
    the starts of each key in any window."""
    Execution.objects.create(key=f"rated:{customer}:{index}", pid=os.getpid())
    return index
