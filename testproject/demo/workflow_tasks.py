"""Tasks for the workflow tests (batches, dependencies, chains): each run
leaves an Execution row, so a test counts runs, not just statuses."""

import os
import time

from django_dbqueue import current_batch, task

from .models import Execution


def _ran(key: str) -> None:
    Execution.objects.create(key=key, pid=os.getpid())


@task
def member(key: str, seconds: float = 0.0) -> str:
    _ran(key)
    if seconds:
        time.sleep(seconds)
    return key


@task(max_attempts=1)
def fails(key: str) -> None:
    _ran(key)
    raise RuntimeError(f"{key} fails on purpose")


@task(max_attempts=1)
def fails_once(key: str) -> str:
    """Fails its first run, succeeds when requeued."""
    first = not Execution.objects.filter(key=key).exists()
    _ran(key)
    if first:
        raise RuntimeError(f"{key} fails its first run on purpose")
    return key


@task
def callback(label: str, batch_id: int) -> None:
    """A batch's callback: one Execution per run, named after its batch."""
    _ran(f"{label}:{batch_id}")


@task
def extend(key: str, more: int) -> int:
    """A member that adds ``more`` members to its own batch while it runs."""
    _ran(key)
    batch = current_batch()
    assert batch is not None, "a member knows its batch"
    with batch:
        for index in range(more):
            member.enqueue(f"{key}-{index}")
    return more


@task
def add_one(value: int) -> int:
    _ran(f"add_one:{value}")
    return value + 1


@task
def concat(*parts: str) -> str:
    """A fan-in child: its parents' results, in order, then its own arguments."""
    _ran("concat:" + ",".join(map(str, parts)))
    return ",".join(map(str, parts))


@task
def sized(key: str, size: int) -> str:
    """A parent whose result takes ``size`` bytes (and 2 for its quotes)."""
    _ran(key)
    return "x" * size


@task
def measure(*parts: str | None) -> int:
    """A fan-in child: how many characters its parents' results came to."""
    _ran(f"measure:{len(parts)}")
    return sum(len(part or "") for part in parts)
