"""Does pruning a million finished jobs stall the claim?

    DBQUEUE_BENCH_DB=dbqueue_bench_ops python benchmarks/prune.py [--rows-log2 20] [--jobs 40000]

The job table first gets 2**rows_log2 SUCCESSFUL jobs that finished ten
days ago. Then, twice, ``--jobs`` no-op jobs are enqueued and two real
worker processes (``Worker``, in burst mode, batches of 20) drain them,
each timing every claim it makes:

1. without a prune (the baseline), the million old rows in the table;
2. while ``manage.py prunejobs --older-than 5`` deletes those rows, in its
   batches of 500 (one short transaction each).

It reports claim latency (median, p99, max) for the baseline and for the
claims made while the prune ran, the drain rates, and the prune's rate.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue
import subprocess
import sys
import time

from common import JOB_TABLE, MANAGE, child_env, configure, create_database, drop_database, median, percentile


def old_rows(log2: int) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {JOB_TABLE} (task_path, status, finished_at) "
            "VALUES ('demo.tasks.noop', 'SUCCESSFUL', UTC_TIMESTAMP(6) - INTERVAL 10 DAY)"
        )
        for _ in range(log2):  # doubling: one INSERT ... SELECT each
            cursor.execute(
                f"INSERT INTO {JOB_TABLE} (task_path, status, finished_at) "
                f"SELECT task_path, status, finished_at FROM {JOB_TABLE}"
            )
        cursor.execute(f"SELECT COUNT(*) FROM {JOB_TABLE}")
        return cursor.fetchone()[0]


def enqueue(n: int) -> None:
    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue

    bulk_enqueue(noop, [((), {})] * n)


def worker_main(out: multiprocessing.Queue) -> None:
    """One real worker; every claim it makes is timed: (start, seconds)."""
    configure()
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.worker.process import claims, loop

    timed: list[tuple[float, float]] = []
    claim = claims.claim_from_queues

    def timed_claim(*args, **kwargs):
        started = time.time()
        try:
            return claim(*args, **kwargs)
        finally:
            timed.append((started, time.time() - started))

    claims.claim_from_queues = timed_claim
    loop.Worker(task_backends["default"], ["default"], batch=20, burst=True).run()
    out.put(timed)


def run_prune(into: dict) -> None:
    """``manage.py prunejobs``; records when it ended and what it deleted."""
    out = subprocess.run(
        [sys.executable, str(MANAGE), "prunejobs", "--older-than", "5", "-v", "0"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=3600,
        check=True,
    ).stdout
    into["end"] = time.time()
    into["output"] = out.strip().splitlines()
    into["rows"] = sum(
        int(line.split("deleted ")[1].split()[0]) for line in into["output"] if "deleted " in line
    )


def drain(jobs: int, prune: bool) -> dict:
    from django.db import connections

    enqueue(jobs)
    connections.close_all()
    ctx = multiprocessing.get_context("fork")
    results: multiprocessing.Queue = ctx.Queue()
    workers = [ctx.Process(target=worker_main, args=(results,)) for _ in range(2)]
    started = time.time()
    pruner = None
    if prune:
        pruner = subprocess.Popen(
            [sys.executable, str(MANAGE), "prunejobs", "--older-than", "5", "-v", "0"],
            env=child_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
    for w in workers:
        w.start()
    claims = []
    for _ in workers:
        # A worker that died puts nothing: fail then, not after half an hour.
        while True:
            try:
                claims += results.get(timeout=1)
                break
            except queue.Empty:
                if not any(w.is_alive() for w in workers) and results.empty():
                    raise RuntimeError("a benchmark worker exited without its figures (see above)") from None
    for w in workers:
        w.join()
    drained = time.time() - started
    prune_end = None
    report: dict = {"jobs": jobs, "drain_seconds": round(drained, 1), "jobs_per_s": round(jobs / drained)}
    if pruner is not None:
        out, _ = pruner.communicate(timeout=3600)
        prune_end = time.time()
        report["prune_output"] = out.strip().splitlines()
        report["prune_seconds"] = round(prune_end - started, 1)
    window = [s for t, s in claims if prune_end is None or t < prune_end]
    report.update(
        claims=len(window),
        claim_ms_median=round(median(window) * 1000, 2),
        claim_ms_p99=round(percentile(window, 0.99) * 1000, 2),
        claim_ms_max=round(max(window) * 1000, 2),
    )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rows-log2", type=int, default=20, help="2**N old finished rows (default 20: 1,048,576)"
    )
    parser.add_argument("--jobs", type=int, default=40000, help="jobs drained in each phase")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()
    configure()
    create_database()
    try:
        began = time.time()
        rows = old_rows(args.rows_log2)
        print(f"{rows} finished rows in {time.time() - began:.0f}s", file=sys.stderr)
        baseline = drain(args.jobs, prune=False)
        print(json.dumps({"baseline": baseline}), file=sys.stderr)
        during = drain(args.jobs, prune=True)
        print(json.dumps({"old_rows": rows, "baseline": baseline, "during_prune": during}, indent=2))
    finally:
        if not args.keep:
            drop_database()


if __name__ == "__main__":
    main()
