"""The worker's own cost per job, in CPU time: N no-op jobs drained by one
in-process ``Worker`` in burst mode, measuring this process's CPU seconds
(``time.process_time``), which the database's work and other processes on a
shared machine do not inflate the way they inflate jobs per second.

    .venv/bin/python benchmarks/worker_cpu.py [N] [ROUNDS]

Run it against two checkouts, interleaved, to compare them (docs/performance.md,
"What the guarantees cost").
"""

import sys
import time

import common


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    common.create_database()
    from django.db import connections

    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.worker import Worker

    try:
        for _ in range(rounds):
            common.reset_jobs()
            bulk_enqueue(noop, [((), {})] * n)
            connections.close_all()
            cpu, wall = time.process_time(), time.perf_counter()
            Worker(task_backends["default"], ["default"], batch=200, burst=True).run()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            print(f"{n} jobs: {cpu / n * 1e6:.1f} µs CPU per job, {n / wall:,.0f} jobs/s wall", flush=True)
    finally:
        common.drop_database()


if __name__ == "__main__":
    common.configure()
    main()
