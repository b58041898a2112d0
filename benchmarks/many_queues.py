"""What one claim costs as the number of queues a worker serves grows.

For each number of queues, a backlog of READY, due jobs spread evenly over
the queues; then one worker's claim of ``--limit`` jobs from all of them,
timed over ``--claims`` claims (each claim's jobs are given back after it,
outside the timing, so the backlog stays the same), and the SQL it sent.

    .venv/bin/python benchmarks/many_queues.py                   # 1, 10, 100, 1000 queues
    .venv/bin/python benchmarks/many_queues.py --queues 20,30,50 --shapes per-queue,queue-list
    .venv/bin/python benchmarks/many_queues.py --backlog 100000

It uses its own MariaDB database (DBQUEUE_BENCH_DB, default dbqueue_bench),
created and dropped like the main benchmark's.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402


def seed(queues: list[str], backlog: int) -> None:
    from django.db import connection
    from django.utils import timezone

    common.reset_jobs()
    due = timezone.now().replace(microsecond=0) - timezone.timedelta(minutes=10)
    rows = [
        ("demo.tasks.noop", queues[i % len(queues)], i % 5, due + timezone.timedelta(milliseconds=i))
        for i in range(backlog)
    ]
    columns = "task_path, queue_name, priority, run_after"
    sql = f"INSERT INTO {common.JOB_TABLE} ({columns}) VALUES (%s, %s, %s, %s)"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 5000):
            cursor.executemany(sql, rows[start : start + 5000])
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE TABLE {common.JOB_TABLE}")


def measure(queues: list[str], shape: str | None, limit: int, claims: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_dbqueue.models import Job
    from django_dbqueue.transitions.shapes import claim_from_queues

    jobs = Job.objects.all()
    times, sql_bytes, statements = [], [], []
    for _ in range(claims + 1):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            got = claim_from_queues(jobs, queues, "bench", limit, 60.0, shape=shape)
            times.append(time.perf_counter() - started)
        assert len(got) == limit, f"claimed {len(got)} of {limit}"
        sql_bytes.append(sum(len(q["sql"]) for q in captured.captured_queries))
        statements.append(len(captured.captured_queries))
        Job.objects.release("bench", [job.pk for job in got])
    times = times[1:]  # the first warms caches
    return {
        "queues": len(queues),
        "shape": shape or "default",
        "median_ms": statistics.median(times) * 1000,
        "max_ms": max(times) * 1000,
        "sql_kb": statistics.median(sql_bytes) / 1024,
        "statements": statistics.median(statements),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queues", default="1,10,100,1000", help="comma-separated numbers of queues")
    parser.add_argument(
        "--shapes", default="", help="comma-separated shapes to force (default: the worker's choice)"
    )
    parser.add_argument("--backlog", type=int, default=10_000, help="READY jobs, spread over the queues")
    parser.add_argument("--limit", type=int, default=200, help="jobs per claim (the default BATCH_SIZE)")
    parser.add_argument("--claims", type=int, default=15)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()
    common.configure()
    common.create_database()
    shapes = [s for s in args.shapes.split(",") if s] or [None]
    print(f"backlog {args.backlog:,} READY jobs, claims of {args.limit}, median of {args.claims}")
    print("| queues | shape | median ms | max ms | SQL kB per claim | statements |")
    print("|---|---|---|---|---|---|")
    try:
        for count in (int(n) for n in args.queues.split(",")):
            queues = [f"q{i:04d}" for i in range(count)]
            seed(queues, args.backlog)
            for shape in shapes:
                if shape == "locking-select" and count != 1:
                    continue
                r = measure(queues, shape, args.limit, args.claims)
                print(
                    f"| {r['queues']} | {r['shape']} | {r['median_ms']:.1f} | {r['max_ms']:.1f} "
                    f"| {r['sql_kb']:.1f} | {r['statements']:.0f} |",
                    flush=True,
                )
    finally:
        if not args.keep_db:
            common.drop_database()


if __name__ == "__main__":
    main()
