"""Tank: P producer processes enqueue one by one for T seconds while
``runqueue --processes W`` works; then how fast the backlog empties, and the
latency from enqueue to start of every job."""

import multiprocessing
import random
import signal
import subprocess
import sys
import time

from common import MANAGE, child_env, job_summary, percentile, reset_jobs


def _producer(deadline: float, slow_fraction: float, slow_seconds: float, results) -> None:
    from django.db import connections

    from demo.tasks import noop, sleep

    connections.close_all()  # never the parent's connection
    slow = sleep.using(queue_name="default")
    made = 0
    while time.time() < deadline:
        if slow_fraction and random.random() < slow_fraction:
            slow.enqueue(slow_seconds)
        else:
            noop.enqueue()
        made += 1
    results.put(made)


def _active() -> int:
    from django_dbqueue.models import Job

    return Job.objects.filter(status__in=("READY", "RUNNING")).count()


def _wait_for_workers(count: int, proc: subprocess.Popen) -> None:
    from django_dbqueue.models import Worker

    deadline = time.time() + 60
    while Worker.objects.count() < count:
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"runqueue did not start {count} workers")
        time.sleep(0.05)


def tank(
    producers: int,
    workers: int,
    seconds: float,
    *,
    batch: int | None = None,
    hold: float | None = None,
    slow_fraction: float = 0.0,
    slow_seconds: float = 0.1,
) -> dict:
    from django.db import connections

    reset_jobs()
    env = child_env(**({"DBQUEUE_BENCH_HOLD": str(hold)} if hold else {}))
    args = [sys.executable, str(MANAGE), "runqueue", "--processes", str(workers), "--queue", "default"]
    if batch:
        args += ["--batch", str(batch)]
    runner = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_workers(workers, runner)
        connections.close_all()
        ctx = multiprocessing.get_context("fork")
        results = ctx.Queue()
        deadline = time.time() + seconds
        procs = [
            ctx.Process(target=_producer, args=(deadline, slow_fraction, slow_seconds, results))
            for _ in range(producers)
        ]
        for proc in procs:
            proc.start()
        produced = sum(results.get(timeout=seconds + 60) for _ in procs)
        for proc in procs:
            proc.join()
        stopped = time.time()
        backlog = _active()
        while (left := _active()) and time.time() - stopped < 30:
            time.sleep(0.01)
        drained_after = time.time() - stopped
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(60)
    return _report(produced, backlog, left, drained_after, seconds, locals())


def _report(produced: int, backlog: int, left: int, drained_after: float, seconds: float, ctx: dict) -> dict:
    from django_dbqueue.models import Job

    waits = [
        (started - enqueued).total_seconds() * 1000
        for started, enqueued in Job.objects.filter(started_at__isnull=False).values_list(
            "started_at", "enqueued_at"
        )
    ]
    summary = job_summary()
    return {
        "producers": ctx["producers"],
        "workers": ctx["workers"],
        "seconds": seconds,
        "batch": ctx["batch"],
        "hold": ctx["hold"],
        "slow_fraction": ctx["slow_fraction"],
        "slow_seconds": ctx["slow_seconds"],
        "produced": produced,
        "produced_per_s": produced / seconds,
        "processed": summary["by_status"].get("SUCCESSFUL", 0),
        "backlog_at_stop": backlog,
        "backlog_zero_after_s": drained_after if not left else None,
        "latency_ms": {
            "p50": percentile(waits, 0.50),
            "p95": percentile(waits, 0.95),
            "p99": percentile(waits, 0.99),
        },
        "each_ran_once": summary["by_status"] == {"SUCCESSFUL": produced}
        and summary["attempts_total"] == produced,
    }


def behind_slow(batch: int, hold: float, fast: int = 199, slow_seconds: float = 1.0) -> dict:
    """One slow job at the head of the queue, ``fast`` no-ops behind it, two
    workers: how long the no-ops wait when one batch can hold them all."""
    from django.db import transaction

    from demo.tasks import noop, sleep
    from django_dbqueue import bulk_enqueue

    reset_jobs()
    env = child_env(DBQUEUE_BENCH_HOLD=str(hold))
    args = [sys.executable, str(MANAGE), "runqueue", "--processes", "2", "--queue", "default"]
    runner = subprocess.Popen(
        [*args, "--batch", str(batch)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_for_workers(2, runner)
        # Both at once, so one claim can take the slow job and all behind it.
        with transaction.atomic():
            sleep.using(queue_name="default", priority=1).enqueue(slow_seconds)
            bulk_enqueue(noop, [((), {})] * fast)
        deadline = time.time() + 60
        while _active() and time.time() < deadline:
            time.sleep(0.05)
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(60)
    from django_dbqueue.models import Job

    waits = [
        (started - enqueued).total_seconds() * 1000
        for started, enqueued in Job.objects.filter(task_path="demo.tasks.noop").values_list(
            "started_at", "enqueued_at"
        )
    ]
    summary = job_summary()
    return {
        "batch": batch,
        "hold": hold,
        "slow_seconds": slow_seconds,
        "fast_wait_ms": {"p50": percentile(waits, 0.5), "max": max(waits)},
        "each_ran_once": summary["by_status"] == {"SUCCESSFUL": fast + 1}
        and summary["attempts_total"] == fast + 1,
    }
