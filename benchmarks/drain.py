"""Drain: N no-op jobs waiting, then ``runqueue --processes W --burst``."""

import subprocess
import sys
import time

from common import MANAGE, child_env, job_summary, reset_jobs


def fill(n: int) -> None:
    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue

    reset_jobs()
    bulk_enqueue(noop, [((), {})] * n)


def drain(
    n: int,
    processes: int,
    batch: int | None = None,
    queues: tuple[str, ...] = ("default",),
    task_log: str | None = None,
    prefilled: bool = False,
) -> dict:
    """Jobs per second from the first job's start to the last job's finish,
    as recorded in the rows (worker start-up is reported apart as wall time)."""
    from django.db import connections

    if not prefilled:
        fill(n)
    connections.close_all()
    args = [sys.executable, str(MANAGE), "runqueue", "--burst", "--processes", str(processes)]
    for queue in queues:
        args += ["--queue", queue]
    if batch:
        args += ["--batch", str(batch)]
    started = time.time()
    env = child_env(**({"DBQUEUE_BENCH_TASK_LOG": task_log} if task_log else {}))
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    wall = time.time() - started
    if proc.returncode:
        raise RuntimeError(f"runqueue failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    summary = job_summary()
    span = (summary["last_finish"] - summary["first_start"]).total_seconds()
    ok = summary["by_status"] == {"SUCCESSFUL": n} and summary["attempts_total"] == n
    return {
        "jobs": n,
        "processes": processes,
        "batch": batch,
        "queues": list(queues),
        "task_log": task_log or "INFO",
        "seconds": span,
        "jobs_per_s": n / span,
        "wall_seconds": wall,
        "each_ran_once": ok,
        "by_status": summary["by_status"],
    }
