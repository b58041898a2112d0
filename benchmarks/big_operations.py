"""Big operations as jobs (django_dbqueue/operations/big.py) at 100,000 rows:
for each operation, the time until its caller has its answer (the admin's
request, or the Python call), the longest transaction of the whole
operation (the answer's and every chunk's), and the rows it changed per
second, chunk by chunk.

- cancel a batch of N members, from the batch's page in the admin;
- retry that batch's N cancelled members (``retry_failed()``);
- cancel N selected jobs from the job list (the "select all" action);
- cancel the head of a chain of S steps: the cascade past its budget.

Each operation's job is run by this process, as a worker runs it
(``run_due_jobs``), so every transaction is timed here: from the outermost
``atomic`` block's entry to its exit (commit included).

    python benchmarks/big_operations.py                 # MariaDB, 100,000 rows
    DBQUEUE_DATABASE=mysql python benchmarks/big_operations.py
"""

import argparse
import json
import sys
import time

from common import configure, create_database, drop_database, reset_jobs


class Transactions:
    """The duration of every outermost transaction.atomic block, in ms."""

    def __init__(self) -> None:
        from django.db import transaction

        self.times: list[float] = []
        self.depth = 0
        atomic = transaction.Atomic
        enter, leave = atomic.__enter__, atomic.__exit__
        watch = self

        def timed_enter(self):  # type: ignore[no-untyped-def]
            if watch.depth == 0:
                watch.began = time.perf_counter()
            watch.depth += 1
            return enter(self)

        def timed_exit(self, *exc):  # type: ignore[no-untyped-def]
            try:
                return leave(self, *exc)
            finally:
                watch.depth -= 1
                if watch.depth == 0:
                    watch.times.append((time.perf_counter() - watch.began) * 1000)

        atomic.__enter__, atomic.__exit__ = timed_enter, timed_exit

    def reset(self) -> None:
        self.times = []

    def longest(self) -> float:
        return max(self.times, default=0.0)


def run_operation_job() -> tuple[float, int]:
    """Run the operation job as a worker would; its seconds and rows."""
    from django_dbqueue.models import Job
    from django_dbqueue.operations.big import TASK_PATH
    from django_dbqueue.testing import run_due_jobs

    began = time.perf_counter()
    [ran] = run_due_jobs(max_runs=1)
    seconds = time.perf_counter() - began
    assert ran.task_path == TASK_PATH and ran.status == "SUCCESSFUL", ran
    job = Job.objects.get(pk=int(ran.id))
    return seconds, int(job.return_value["rows"])


def measured(name: str, answer, watch: Transactions) -> dict:
    """``answer()`` (returns the rows the operation decided on), then its job."""
    watch.reset()
    began = time.perf_counter()
    decided = answer()
    answer_ms = (time.perf_counter() - began) * 1000
    answer_tx = watch.longest()
    seconds, rows = run_operation_job()
    row = {
        "operation": name,
        "rows": rows,
        "decided": decided,
        "answer_ms": round(answer_ms, 1),
        "answer_transaction_ms": round(answer_tx, 1),
        "largest_transaction_ms": round(watch.longest(), 1),
        "chunks": len(watch.times) - 1,
        "job_seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds),
    }
    print(json.dumps(row), file=sys.stderr)
    return row


def admin_client():
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.filter(username="bench").first() or User.objects.create_superuser("bench", "", "pw")
    client = Client()
    client.force_login(user)
    return client


def members(n: int):
    from demo.tasks import noop
    from django_dbqueue import batch, bulk_enqueue

    with batch("bench") as made:
        bulk_enqueue(noop, [((), {})] * n)
    return made


def run(n: int, steps: int) -> list[dict]:
    from demo.tasks import noop
    from django_dbqueue import call, chain, get_batch
    from django_dbqueue.models import Job

    watch = Transactions()
    client = admin_client()
    rows = []
    reset_jobs()
    made = members(n)

    def cancel_batch() -> int:
        response = client.post(f"/admin/django_dbqueue/batch/{made.id}/actions/cancel_batches/")
        assert response.status_code == 302, response
        return get_batch(made.id).cancelled

    rows.append(measured("cancel a batch (admin)", cancel_batch, watch))
    rows.append(
        measured("retry the batch (retry_failed)", lambda: int(get_batch(made.id).retry_failed()), watch)
    )

    def cancel_selection() -> int:
        data = {"action": "cancel", "select_across": "1", "index": "0", "_selected_action": ["0"]}
        response = client.post("/admin/django_dbqueue/job/", data)
        assert response.status_code == 302, response
        return Job.objects.filter(status="READY").count()

    rows.append(measured("cancel selected jobs (admin)", cancel_selection, watch))
    reset_jobs()
    results = chain(*[call(noop)] * steps)
    head = int(results[0].id)
    rows.append(
        measured("cancel a chain's head (cascade)", lambda: Job.objects.filter(pk=head).cancel(), watch)
    )
    assert Job.objects.filter(status="CANCELLED").count() == steps
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000, help="batch members and selected jobs")
    parser.add_argument("--steps", type=int, default=5_000, help="steps of the chain")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()
    configure()
    create_database()
    try:
        print(
            json.dumps(
                {"rows": args.rows, "steps": args.steps, "operations": run(args.rows, args.steps)}, indent=2
            )
        )
    finally:
        if not args.keep:
            drop_database()


if __name__ == "__main__":
    main()
