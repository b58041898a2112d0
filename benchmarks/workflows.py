"""Workflows: a big batch's drain against the plain drain of as many jobs
in the same run (alternately, medians), and a long chain's cost per step
against as many independent jobs run by one worker."""

import subprocess
import sys
import time

from common import MANAGE, child_env, median, reset_jobs
from drain import drain as plain_drain


def _burst(processes: int, batch: int | None = None) -> float:
    from django.db import connections

    connections.close_all()
    args = [sys.executable, str(MANAGE), "runqueue", "--burst", "--processes", str(processes)]
    args += ["--batch", str(batch)] if batch else []
    started = time.time()
    proc = subprocess.run(args, env=child_env(), capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"runqueue failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return time.time() - started


def _span(rows) -> float:
    from django.db.models import Max, Min

    times = rows.aggregate(first=Min("started_at"), last=Max("finished_at"))
    return (times["last"] - times["first"]).total_seconds()


def batch_drain(n: int, processes: int) -> dict:
    """``n`` no-op members of one batch (bulk-enqueued inside it), drained;
    the callback must be inserted once."""
    from demo.tasks import noop
    from demo.workflow_tasks import callback
    from django_dbqueue import batch, bulk_enqueue, call, get_batch
    from django_dbqueue.models import Job

    reset_jobs()
    # A callback gets batch_id= among its arguments: this one takes it.
    with batch("bench", on_success=call(callback, "bench")) as made:
        bulk_enqueue(noop, [((), {})] * n)
    wall = _burst(processes)
    done = get_batch(made.id)
    members = Job.objects.filter(batch_id=made.id)
    span = _span(members)
    ran = Job.objects.filter(pk__in=done.callback_job_ids, status="SUCCESSFUL").count()
    ok = done.status == "SUCCEEDED" and done.succeeded == n and len(done.callback_job_ids) == 1 and ran == 1
    return {
        "jobs": n,
        "processes": processes,
        "seconds": span,
        "jobs_per_s": n / span,
        "wall_seconds": wall,
        "each_ran_once": ok,
    }


def chain_steps(steps: int) -> dict:
    """A ``steps``-long chain of no-ops by one worker, against as many
    independent no-ops by one worker claiming one at a time (``--batch 1``,
    as a chain's worker can only ever claim its one released step): the
    chain's overhead per step."""
    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue, call, chain
    from django_dbqueue.models import Job

    reset_jobs()
    started = time.perf_counter()
    chain(*[call(noop)] * steps)
    enqueue_seconds = time.perf_counter() - started
    _burst(1)
    chained = _span(Job.objects.all())
    ok = Job.objects.filter(status="SUCCESSFUL").count() == steps
    reset_jobs()
    bulk_enqueue(noop, [((), {})] * steps)
    _burst(1, batch=1)
    plain = _span(Job.objects.all())
    return {
        "steps": steps,
        "chain_seconds": chained,
        "plain_seconds": plain,
        "per_step_ms": chained / steps * 1000,
        "plain_per_job_ms": plain / steps * 1000,
        "overhead_per_step_ms": (chained - plain) / steps * 1000,
        "enqueue_ms_per_step": enqueue_seconds / steps * 1000,
        "each_ran_once": ok,
    }


def run(n: int, processes: int, rounds: int, steps: int) -> dict:
    batched, plain = [], []
    for _ in range(rounds):
        plain.append(plain_drain(n, processes))
        batched.append(batch_drain(n, processes))
    ours, roof = median([r["jobs_per_s"] for r in batched]), median([r["jobs_per_s"] for r in plain])
    return {
        "batch_drain": {
            "jobs": n,
            "processes": processes,
            "batch_jobs_per_s": ours,
            "plain_jobs_per_s": roof,
            "ratio": ours / roof,
            "rounds": {
                "batch": [r["jobs_per_s"] for r in batched],
                "plain": [r["jobs_per_s"] for r in plain],
            },
        },
        "chain": chain_steps(steps),
        "each_ran_once": all(r["each_ran_once"] for r in batched + plain),
    }
