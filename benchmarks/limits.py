"""Concurrency limits: what a limited key costs, beside the ordinary claim.

- the claim of one limited job (lock the key's row, count its RUNNING jobs,
  lock and mark one job), in ms, against an ordinary claim of one job;
- drains with ``runqueue --burst``: no-op jobs of one key with a limit of 2,
  and of 100 keys with a limit of 1 each, against the same jobs unlimited.
"""

import time

from common import median, reset_jobs
from drain import drain


def fill_limited(n: int, keys: int, limit: int) -> None:
    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue

    reset_jobs()
    for key in range(keys):
        task = noop.using(concurrency_key=f"key{key}", concurrency_limit=limit)
        bulk_enqueue(task, [((), {})] * (n // keys))


def claim_ms(samples: int, limited: bool) -> float:
    """Median ms of claiming one job (and giving it back, untimed)."""
    from django_dbqueue.models import Job
    from django_dbqueue.transitions.shapes import claim_from_queues

    jobs, times = Job.objects.all(), []
    for _ in range(samples):
        started = time.perf_counter()
        if limited:
            claimed = jobs.claim_limited("bench", ["default"], ["key0"], 60.0)
        else:
            claimed = claim_from_queues(jobs, ["default"], "bench", 1, 60.0)
        times.append((time.perf_counter() - started) * 1000)
        assert len(claimed) == 1
        jobs.release("bench", [job.pk for job in claimed])
    return median(times)


def limits(n: int, samples: int) -> dict:
    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue

    fill_limited(3000, 1, 2)
    limited_ms = claim_ms(samples, limited=True)
    reset_jobs()
    bulk_enqueue(noop, [((), {})] * 3000)
    plain_ms = claim_ms(samples, limited=False)

    plain = drain(n, 4)
    rows = []
    for keys, limit in ((1, 2), (100, 1)):
        fill_limited(n, keys, limit)
        rows.append({"keys": keys, "limit": limit, **drain(n, 4, prefilled=True)})
    return {
        "claim_one_ms": {"limited": limited_ms, "unlimited": plain_ms},
        "drain_unlimited": plain,
        "drain_limited": rows,
    }
