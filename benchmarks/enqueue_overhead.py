"""The Python an enqueue spends besides its INSERT: the backend's checks, the
argument checks, building the Job row, its INSERT's values, its TaskResult and
``task_enqueued``, without the database round trip
(which dominates ``benchmarks/enqueue.py`` and varies with the server's load).

    .venv/bin/python benchmarks/enqueue_overhead.py [--calls 50000]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
    sys.path[:0] = [str(ROOT), str(ROOT / "testproject")]
    import django

    django.setup()
    from django.utils import timezone

    from demo.tasks import add

    try:  # absent before enqueue checked arity
        from django_dbqueue.enqueue.validation import check_arguments
    except ImportError:
        check_arguments = None

    from django_dbqueue.tasks_api import task_enqueued

    backend = add.get_backend()
    planned = hasattr(backend, "plan")  # absent before enqueue/plan.py
    rounds = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        for i in range(args.calls):
            if planned:
                # DatabaseBackend.enqueue() and insert(), all but the INSERT.
                plan = backend.plan(add)
                job = plan.job((i, 2), {}, backend.now())
                check_arguments(add, job.args, job.kwargs)
                plan.statement(job) if hasattr(plan, "statement") else plan.values(job)
                job.pk = i
                result = plan.result(backend, job)
            else:
                backend.check_enqueue(add)
                if check_arguments is not None:
                    check_arguments(add, (i, 2), {})
                job = backend.build_job(add, (i, 2), {}, timezone.now())
                job.pk = i
                result = backend.to_result(job, add)
            task_enqueued.send(type(backend), task_result=result)
        rounds.append((time.perf_counter() - started) / args.calls * 1e6)
    print(
        f"µs per enqueue besides the INSERT: median {statistics.median(rounds):.1f} "
        f"(rounds: {', '.join(f'{r:.1f}' for r in rounds)}; arity checked: {check_arguments is not None})"
    )


if __name__ == "__main__":
    main()
