"""The claim shapes side by side: W processes claim (and do nothing else)
until the queue is empty; jobs claimed per second, for each shape."""

import multiprocessing
import time

from common import reset_jobs


def _fill(n: int, queues: list[str]) -> None:
    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue

    reset_jobs()
    for queue in queues:
        bulk_enqueue(noop.using(queue_name=queue), [((), {})] * (n // len(queues)))


def _claimer(shape: str, queues: list[str], batch: int, go, results) -> None:
    from django.db import connections

    from django_dbqueue.models import Job
    from django_dbqueue.transitions.shapes import claim_from_queues

    connections.close_all()  # never the parent's connection
    jobs, claimed, empty = Job.objects.all(), 0, 0
    go.wait()
    started = time.time()
    while True:
        got = claim_from_queues(jobs, queues, f"bench-{shape}", batch, 60.0, shape=shape)
        claimed += len(got)
        if not got:
            # Empty can mean the other claimers held every candidate at that instant.
            empty += 1
            if not jobs.filter(queue_name__in=queues).due().exists():
                break
    results.put((started, time.time(), claimed, empty))


def measure(shape: str, n: int, processes: int, queues: list[str], batch: int = 100) -> dict:
    from django.db import connections

    _fill(n, queues)
    connections.close_all()
    ctx = multiprocessing.get_context("fork")
    go, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_claimer, args=(shape, queues, batch, go, results)) for _ in range(processes)]
    for proc in procs:
        proc.start()
    time.sleep(0.5)
    go.set()
    outs = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    seconds = max(o[1] for o in outs) - min(o[0] for o in outs)
    claimed = sum(o[2] for o in outs)
    assert claimed == n // len(queues) * len(queues), f"{shape}: claimed {claimed}"
    return {
        "shape": shape,
        "queues": len(queues),
        "processes": processes,
        "batch": batch,
        "jobs_per_s": claimed / seconds,
        "empty_claims": sum(o[3] for o in outs),
    }
