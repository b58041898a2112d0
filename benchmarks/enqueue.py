"""Enqueue throughput: one-by-one ``Task.enqueue`` and ``bulk_enqueue``."""

import time

from common import reset_jobs


def one_by_one(n: int, reset: bool = True) -> dict:
    from demo.tasks import noop

    if reset:
        reset_jobs()
    started = time.perf_counter()
    for _ in range(n):
        noop.enqueue()
    seconds = time.perf_counter() - started
    return {"jobs": n, "seconds": seconds, "jobs_per_s": n / seconds}


def bulk(n: int, batch_size: int = 1000) -> dict:
    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue

    reset_jobs()
    calls = [((), {})] * n
    started = time.perf_counter()
    results = bulk_enqueue(noop, calls, batch_size=batch_size)
    seconds = time.perf_counter() - started
    assert len({r.id for r in results}) == n
    return {"jobs": n, "batch_size": batch_size, "seconds": seconds, "jobs_per_s": n / seconds}
