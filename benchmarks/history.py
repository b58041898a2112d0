"""History: the cost of one batch claim as finished jobs pile up (0, 100k,
1M), and the claim queries' EXPLAIN. The claim must read about ``batch``
index entries however many finished rows the table holds."""

import time

from common import JOB_TABLE, median, percentile, reset_jobs

COLUMNS = (
    "task_path, queue_name, priority, args, kwargs, status, run_after, attempts, max_attempts, suspect, "
    "enqueued_at, started_at, last_attempted_at, finished_at, return_value, errors, worker_ids"
)
FINISHED_ROW = (
    "('demo.tasks.noop', '{queue}', 0, '[]', '{{}}', 'SUCCESSFUL', NOW(6), 1, 3, 0, "
    "NOW(6), NOW(6), NOW(6), NOW(6), NULL, '[]', '[\"w\"]')"
)
QUEUES = ["default", "email", "slow"]


def _finished_count(cursor) -> int:
    cursor.execute(f"SELECT COUNT(*) FROM {JOB_TABLE} WHERE status = 'SUCCESSFUL'")
    return cursor.fetchone()[0]


def grow_finished(target: int) -> None:
    """Double the finished rows with INSERT ... SELECT until there are ``target``."""
    from django.db import connection

    with connection.cursor() as cursor:
        have = _finished_count(cursor)
        if have == 0 and target:
            rows = ", ".join(FINISHED_ROW.format(queue=QUEUES[i % 3]) for i in range(min(target, 1000)))
            cursor.execute(f"INSERT INTO {JOB_TABLE} ({COLUMNS}) VALUES {rows}")
            have = _finished_count(cursor)
        while have < target:
            cursor.execute(
                f"INSERT INTO {JOB_TABLE} ({COLUMNS}) SELECT {COLUMNS} FROM {JOB_TABLE} "
                f"WHERE status = 'SUCCESSFUL' LIMIT {min(have, target - have)}"
            )
            have = _finished_count(cursor)
        cursor.execute(f"ANALYZE TABLE {JOB_TABLE}")
        cursor.fetchall()


def claim_costs(queues: list[str], batch: int, samples: int) -> dict:
    from django_dbqueue.models import Job
    from django_dbqueue.transitions.shapes import claim_from_queues

    jobs, times, reads = Job.objects.all(), [], []
    for _ in range(samples):
        before = _index_reads()
        started = time.perf_counter()
        claimed = claim_from_queues(jobs, queues, "history", batch, 60.0)
        times.append((time.perf_counter() - started) * 1000)
        reads.append(_index_reads() - before)
        jobs.release("history", [job.pk for job in claimed])  # the same jobs wait again
        assert len(claimed) == batch
    return {
        "median_ms": median(times),
        "p99_ms": percentile(times, 0.99),
        # Rows the handler touched per claim: unlike time, untouched by a busy machine.
        "index_reads": median(reads),
    }


def _index_reads() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read_%%'")
        return sum(int(value) for _, value in cursor.fetchall())


def explain(queues: list[str], batch: int) -> list[str]:
    from django.utils import timezone

    from django_dbqueue.models import Job
    from django_dbqueue.transitions import CLAIM_ORDER

    due = Job.objects.filter(status="READY", run_after__lte=timezone.now())
    plans = []
    for queue in queues:
        read = due.filter(queue_name=queue, concurrency_key=None).order_by(*CLAIM_ORDER)[:batch]
        plans.append(f"{queue}: {read.explain()}")
    return plans


def history(finished: list[int], ready: int = 3000, batch: int = 100, samples: int = 200) -> list[dict]:
    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue

    reset_jobs()
    for queue in QUEUES:
        bulk_enqueue(noop.using(queue_name=queue), [((), {})] * ready)
    rows = []
    for target in sorted(finished):
        started = time.perf_counter()
        grow_finished(target)
        setup = time.perf_counter() - started
        rows.append(
            {
                "finished_rows": target,
                "setup_seconds": setup,
                "one_queue": claim_costs(["default"], batch, samples),
                "three_queues": claim_costs(QUEUES, batch, samples),
                "explain": explain(["default"], batch),
            }
        )
    return rows
